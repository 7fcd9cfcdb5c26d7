"""The words of a claim, as grounding compares them (bot/memory/grounding.py).

Light normalisation, the same on both sides of a comparison: case, possessives, plurals,
-ing/-ed, number words ("three" is "3"); the words that carry no content (stopwords), the
words a model adds around what was said (framing: "years old", "lives in"), the groups of
words a model swaps for each other, and the kinds of fact (a home, a job ...).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

TOKEN = re.compile(r"[\w'@.-]+")
NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "  # noqa: SIM905
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'").casefold()


def stem(word: str) -> str:
    """One form for a word's inflections, the same on both sides of a comparison."""
    word = word.strip(".'-")
    word = word.removesuffix("'s").removesuffix("'")
    if word in NUMBER_WORDS:
        return NUMBER_WORDS[word]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    return word


# Words that carry no content of their own: what a claim must have been told is the rest.
STOPWORDS = frozenset(
    """
    a an the and or but if so of to in on at for with by from into onto about as than then
    is are was were be been being am has have had having do does did done get gets got
    i me my mine we us our ours you your yours he him his she her hers they them their theirs
    it its this that these those there here who whom whose which what when where why how
    not no nor also too very really just still now currently recently already again ever
    some any all each both more most other such own same only s
    will would can could should shall may might must 'm 're 've 'll 'd
    new now today lately
    """.split()  # noqa: SIM905
)
STOPWORDS |= {stem(word) for word in STOPWORDS}
# Words a model adds around what was said ("is 34 years old", "lives in the city of Tallinn",
# "said that"), and the relation verbs it paraphrases ("lives in" for "moved to", "works as"
# for "I'm a"): never content on their own; what was lived in or worked as must be said.
FRAMING = frozenset(
    """
    year old age aged city town country place named called name person people pet animal
    said say says mention mentioned told tell state stated note noted share shared
    currently recently living
    live lives lived moved move moving relocated resides based
    work works worked working employed
    think thinks believe believes feel feels find finds consider considers
    """.split()  # noqa: SIM905
)
FRAMING |= {stem(word) for word in FRAMING}
# Words a model swaps for each other: one of the group said supports any of the group.
GROUPS: tuple[frozenset[str], ...] = tuple(
    frozenset(stem(word) for word in group.split())
    for group in (
        "home house flat apartment",
        "job employer career profession occupation",
        "like likes love loves enjoy enjoys adore fan favorite favourite prefer prefers into fond",
        "dislike dislikes hate hates detest not don't can't never",
        "married wife husband spouse partner wed",
        "kid kids child children son sons daughter daughters",
        "sold sell sells selling",
        "quit left leave leaving resigned stopped retired",
        "allergic allergy intolerant intolerance",
        "study studies studying student school university college",
        "born birthday birth",
        "drive drives driving car",
    )
)
# A claim in the speaker's own words ("We have a rescue greyhound", "I grew up in Pune") is
# their line copied, not a claim about a named person ("US" is a country, so not "us").
FIRST_PERSON_WORDS = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|[Mm]e|[Ww]e|[Ww]e're|[Ww]e've|[Oo]ur|[Mm]ine)\b"
)


# A fact's kind: what it says that holds one value at a time (a city, a job ...). An update
# replaces a known fact only when the two share a kind.
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.I))
    for kind, pattern in (
        (
            "home",
            r"\b(?:lives?|living|lived|moved|moving|relocated|resides|based|home|address|flat"
            r"|apartment|house)\b",
        ),
        ("origin", r"\b(?:is|are|was|comes?)\s+from\b|\bgrew\s+up\b|\bborn\s+in\b"),
        (
            "work",
            r"\b(?:works?|working|worked|job|employ\w*|career|profession|occupation|retired"
            r"|unemployed|quit)\b"
            r"|\bis\s+an?\s+(?:[\w-]+\s+){0,2}(?:\w+(?:er|or|ist|ian|ant|ent)|nurse|chef|cook"
            r"|vet|coach|pilot|barista)\b",
        ),
        ("age", r"\b\d{1,3}\s+years?\s+old\b|\bturned\s+\d{1,3}\b|\bage\b|\bis\s+\d{1,3}\b"),
        ("kids", r"\b(?:kids?|child(?:ren)?|sons?|daughters?)\b"),
        (
            "partner",
            r"\b(?:married|wife|husband|spouse|partner|boyfriend|girlfriend|fianc\w*|divorced)\b",
        ),
        ("pet", r"\b(?:dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|pet)s?\b"),
        ("vehicle", r"\b(?:car|drives?|vehicle|motorbike|motorcycle|truck|van)s?\b"),
        ("health", r"\b(?:allergic|allergy|intoleran\w*|vegetarian|vegan|diet|diabet\w*)\b"),
        ("name", r"\bname\b|\bgoes\s+by\b|\bcalled\b"),
        ("study", r"\b(?:stud(?:y|ies|ying|ent)|school|university|college|degree)\b"),
        ("birthday", r"\bbirthday\b|\bborn\s+on\b"),
        ("taste", r"\b(?:likes?|loves?|enjoys?|hates?|dislikes?|prefers?|favou?rite)\b"),
    )
)


def words_of(text: str) -> list[str]:
    """The text's words, folded and stemmed, in order (stopwords kept)."""
    return [w for w in (stem(t) for t in TOKEN.findall(fold(text))) if w]


def content_words(words: Iterable[str], names: Iterable[str]) -> set[str]:
    named = {w for name in names for w in words_of(name)}
    return {w for w in words if w not in STOPWORDS and w not in FRAMING and w not in named}


def is_common_word(word: str) -> bool:
    """Whether a word is a stopword or a relation verb ("Has two cats": "Has" is no name)."""
    folded = stem(fold(word))
    return folded in STOPWORDS or folded in FRAMING or folded in VERBS


# Verbs a claim without a subject starts with.
VERBS = frozenset(
    stem(w)
    for w in "has is was likes loves enjoys hates owns wants plans drives plays speaks".split()  # noqa: SIM905
)


def is_supported_word(word: str, heard: set[str]) -> bool:
    if word in heard:
        return True
    return any(word in group and group & heard for group in GROUPS)


def kinds_of(text: str) -> frozenset[str]:
    """What kinds of thing a fact says ("home", "work", ...): see `KINDS`."""
    return frozenset(kind for kind, pattern in KINDS if pattern.search(text))

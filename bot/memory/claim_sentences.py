"""The sentence a claim comes from, read for what speaks against the claim.

Content words said are not enough: "I used to work at Google" is no "works at Google", "we
moved from Leeds to York" no "lives in Leeds", and "My partner Tom is a paramedic" no "Priya
is a paramedic". These checks find the sentences (and clauses) that hold the claim's words
and refuse the claim when they say it is not so, or say it of someone else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.memory.claim_words import (
    GROUPS,
    STOPWORDS,
    fold,
    kinds_of,
    stem,
    words_of,
)

NOT_SAID = "not said by its speaker"
NEGATED = "said not to be so"
OF_SOMEONE_ELSE = "said of someone else"

# Sentences, and their clauses about the speaker ("My sister is Ines and I live in Toronto").
_SENTENCE = re.compile(r"[.!?;\n]+|,?\s+(?:and|but|while|whereas)\s+(?=(?:I|I'm|we|my|our)\b)")
# Clauses: a negation holds within its own ("I have 2 kids, they never sleep").
_CLAUSE = re.compile(r"[,:()]+|\s+-+\s+")
_NEGATION = re.compile(
    r"\b(?:not|no\s+longer|never|any\s*more|used\s+to|former(?:ly)?|ex|no)\b|n't\b", re.I
)
# Someone else the sentence is about: "my sister (Anjali)", "Tom's", "our dog (Comet)".
_RELATIVES = (
    "sister|brother|mother|mom|mum|father|dad|son|daughter|wife|husband|partner|friend|boss"
    "|colleague|cousin|aunt|uncle|neighbou?r|grandma|grandpa|grandmother|grandfather"
    "|girlfriend|boyfriend|fianc\\w*|kids?|children|child|parents?|roommate|flatmate|dog|cat"
    "|greyhound|puppy|kitten|pet"
)
_THIRD_PARTY = re.compile(
    rf"\b(?i:my|our|his|her|their)\s+(?:\w+\s+)?(?P<relative>(?i:{_RELATIVES}))s?\b"
    rf"(?:,?\s+(?P<named>[A-Z][\w'-]+))?|\b(?P<owner>[A-Z][\w-]+)'s\b"
)
# A relative named only to say it is not them: "not my brother".
_DENIED = re.compile(r"\b(?:not|n't)\s+$", re.I)
# A message that says the place it names is home now.
_HOME_NOW = re.compile(r"\b(?:this|it|that)(?:\s+is|'s)\s+(?:my\s+|our\s+)?home\s+now\b", re.I)
# Where a place was left, not where one lives: "moved from Leeds to York".
_LEFT_PLACE = re.compile(r"\b(?:from|left|leaving|outside)\s+(?:the\s+)?(?P<place>[A-Z][\w-]+)")


def _sentences(lines: Sequence[str]) -> list[str]:
    return [part for line in lines for part in _SENTENCE.split(line) if part.strip()]


_CLAIM_CLAUSE = re.compile(r"[,;]\s*|\s+(?:and|but|while|who|which)\s+")


def _claim_clauses(text: str, content: set[str]) -> list[tuple[str, set[str]]]:
    """Each part of a claim ("lives in Tallinn and works as ...") with its content words."""
    parts = [clause for clause in _CLAIM_CLAUSE.split(text) if clause.strip()]
    return [(clause, content & set(words_of(clause))) for clause in parts]


def _heard(sentence: str) -> set[str]:
    """A sentence's words, with every word of a group one of them is in ("wife": "married")."""
    words = set(words_of(sentence))
    return words.union(*(group for group in GROUPS if group & words))


def sentence_problem(
    text: str,
    content: set[str],
    said: Sequence[str],
    names: Sequence[str],
    others: Sequence[str] = (),
    subject_is_speaker: bool = True,
) -> str | None:
    """What the sentences that support a claim say against it: that it is not so ("I don't
    live in Leeds any more"), that its place was left ("moved from Leeds to York" is no
    "lives in Leeds"), or that they are about someone else ("My sister Anjali lives in
    Toronto" is no "Priya lives in Toronto", "Tom's birthday" no "Priya's birthday")."""
    sentences = _sentences(said)
    for clause, words in _claim_clauses(text, content):
        covering = [sentence for sentence in sentences if words <= _heard(sentence)]
        # Each part of a claim is said in one sentence: "Priya's partner Tom teaches
        # chemistry" is not made of "My partner Tom is a paramedic" and "I teach chemistry".
        if not covering:
            return NOT_SAID
        # Where someone lives or comes from is said as such: "I teach in Leeds" is neither.
        for kind in kinds_of(clause) & {"home", "origin"}:
            if any(kind in kinds_of(sentence) for sentence in covering):
                continue
            # "We just landed in Toronto. This is home now!": the message says it is home.
            if kind == "home" and any(
                _HOME_NOW.search(line) for line in said if any(s in line for s in covering)
            ):
                continue
            return NOT_SAID
    overlap = [(len(content & set(words_of(sentence))), sentence) for sentence in sentences]
    most = max((count for count, _ in overlap), default=0)
    if not most:
        return None
    best = [sentence for count, sentence in overlap if count == most]
    claim_words = set(words_of(text))
    if not _NEGATION.search(text) and all(_negated(sentence, content) for sentence in best):
        return NEGATED
    if kinds_of(text) & {"home"} and not kinds_of(text) & {"origin"}:
        left = {stem(fold(m["place"])) for sentence in said for m in _LEFT_PLACE.finditer(sentence)}
        places = {w for w in content if w in left}
        for place in places:
            if not any(
                place in words_of(sentence)
                and place not in {stem(fold(m["place"])) for m in _LEFT_PLACE.finditer(sentence)}
                for sentence in sentences
            ):
                return NEGATED
    known = {w for name in names for w in words_of(name)}
    if not subject_is_speaker and all(_of_the_speaker(b, known) for b in best):
        return OF_SOMEONE_ELSE  # "Sarah, my dog Rex loves it": the speaker's dog
    # Another person of the world named where it was said, and not in the claim: it was
    # said of them ("Sarah is a nurse" is no "Sam is a nurse").
    for name in others:
        words = set(words_of(name))
        if not name[:1].isupper() or words & (known | claim_words | STOPWORDS):
            continue  # (a lower-case handle, or a name the claim says too)
        if any(re.search(rf"(?<![\w@]){re.escape(name)}\b", sentence) for sentence in best):
            return OF_SOMEONE_ELSE
    for sentence in best:
        for found in _THIRD_PARTY.finditer(sentence):
            if _DENIED.search(sentence[: found.start()]):
                continue  # "Amir is my cousin, not my brother": no brother spoken of
            marks = {stem(fold(found[key])) for key in ("relative", "named", "owner") if found[key]}
            if found["owner"] and stem(fold(found["owner"])) in known:
                continue  # "Priya's" of Priya herself
            if not marks & claim_words and not _related(marks, claim_words):
                return OF_SOMEONE_ELSE
    return None


# "I ...", "we ...": a sentence about its speaker (what follows "I think" is not, but
# precision first: a claim about someone else needs a sentence about them).
_SPEAKER_ITSELF = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Ww]e|[Ww]e're|[Ww]e've|me|us)\b")


def _of_the_speaker(sentence: str, names: set[str]) -> bool:
    """Whether a sentence says something of its speaker ("I'm a nurse", "my dog Rex"), not
    of the person named in it ("My partner Tom is a paramedic" is of Tom)."""
    if _SPEAKER_ITSELF.search(sentence):
        return True
    for found in _THIRD_PARTY.finditer(sentence):
        if found["owner"] or not re.match(r"(?i:my|our)\b", found.group(0)):
            continue
        if not (found["named"] and stem(fold(found["named"])) in names):
            return True
    return False


def says_not(text: str) -> bool:
    """Whether a text says something is not, or no longer, so ("does not eat meat")."""
    return bool(_NEGATION.search(text))


def _negated(sentence: str, content: set[str]) -> bool:
    """Whether the clauses of `sentence` that hold the claim's words are negated."""
    clauses = [c for c in _CLAUSE.split(sentence) if content & set(words_of(c))]
    return bool(clauses) and all(_NEGATION.search(clause) for clause in clauses)


def _related(marks: set[str], claim_words: set[str]) -> bool:
    """Whether the claim names the relative by another word of its group ("married" for
    "wife", "children" for "kids")."""
    return any(mark in group and group & claim_words for mark in marks for group in GROUPS)

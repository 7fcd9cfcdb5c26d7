"""The facts plugin's offline answers: claims and replies read from what people plainly say.

Registered with the offline model (used when no language model is configured): the
extraction task answers with the same JSON a model would, from the structured state; the
reply answer handles "what do you remember about me?", "what's my name?" and acknowledges
what someone just said about themselves. Only common, plainly stated things are recognised
("my name is ...", "I live in ...", "I work at ...").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot import Fact, Memory, OfflineRequest, State
from bot.offline import cap, greets, normalise, reply_json, small_talk

from .claims import FACT_REFS, name_fact_text
from .offline_changes import (
    NOT_OCCUPATIONS,
    OCCUPATIONS,
    RELATIONS,
    SAID_IN,
    TRANSPORT,
    more_claims,
    reconcile,
    retracts,
    slot_of,
)

MAX_LISTED_FACTS = 8
MAX_PHRASE_WORDS = 6
# The provider files the facts it found here (state.provided), and so does the extraction.
PROVIDED = "facts"


def _words(text: str) -> frozenset[str]:
    """A word list written as prose: easier to read and extend than a list of literals."""
    return frozenset(text.split())


# -- patterns (compiled once; constants, not state) ----------------------------------------
# `(?i:...)` makes the wording case-insensitive while names stay case-sensitive ([A-Z]...).

_PHRASE = r"(?P<x>[^.,!?;:\n]+)"
_NAME = r"(?P<name>[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)"
_I_AM = r"(?i:\bi'm|\bi\s+am|\bim)\s+"

# Capitalised words that follow "I'm" without being a name.
_NOT_NAMES = _words("""
    a an the i so just really very not also still here there back fine good great ok okay
    sorry sure happy glad done going from in at on allergic tired busy new currently actually
    always never only well quite too pretty feeling getting trying looking thinking working
    living married single english american french german
    """)

_NAME_PATTERNS = (
    re.compile(r"(?i:\bmy\s+name\s+is|\bmy\s+name's|\bcall\s+me|\bi\s+go\s+by)\s+" + _NAME),
    # Lower-case names after an explicit "my name is" are accepted and capitalised.
    re.compile(r"(?i:\bmy\s+name\s+is|\bmy\s+name's|\bcall\s+me)\s+(?P<name>[a-z][\w'-]*)"),
    re.compile(_I_AM + _NAME + r"\b"),
)
# "We moved to Helsinki": a "we" the speaker is part of moved too.
_HOME = re.compile(
    r"(?i:\bi\s+(?:currently\s+|now\s+|still\s+)?live\s+in|\bi'm\s+based\s+in"
    r"|\bi\s+am\s+based\s+in|\bi'm\s+(?:now\s+|currently\s+)?living\s+in"
    r"|\bi(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to)"
    r"\s+" + _PHRASE
)
# "We moved to Helsinki": a "we" the speaker is part of moved too; only to a named place
# ("we moved to a bigger flat" is no new city).
_WE_HOME = re.compile(
    r"(?i:\bwe\s+(?:currently\s+|now\s+|still\s+|all\s+)?live\s+in|\bwe're\s+based\s+in"
    r"|\bwe\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to)"
    r"\s+(?=[A-Z])" + _PHRASE
)
# "My brother Amir lives with me in Haifa": where the speaker lives, said with whom (the
# sentence is about the brother too, so the claim names him).
_LIVES_WITH = re.compile(
    r"(?i:\bmy\s+(?P<rel>" + RELATIONS + r"))\s+(?:(?P<name>[A-Z][\w'-]+)\s+)?"
    r"(?i:lives\s+with\s+(?:me|us)\s+in)\s+" + _PHRASE
)
# "We just landed in Toronto. This is home now!": arriving says where someone lives only
# with the same message saying it is home now.
_ARRIVED = re.compile(
    r"(?i:\b(?:i|we)\s+(?:just\s+|finally\s+)?(?:landed|arrived|settled)\s+in)\s+" + _PHRASE
)
_HOME_NOW = re.compile(
    r"\b(?:this|it|that)(?:\s+is|'s)\s+(?:my\s+|our\s+)?home\s+now\b"
    r"|\b(?:i|we)\s+live\s+(?:here|there)\s+now\b",
    re.I,
)
_ORIGIN = re.compile(_I_AM + r"(?i:originally\s+)?(?i:from)\s+" + _PHRASE)
_GREW_UP = re.compile(r"(?i:\bi\s+grew\s+up\s+in)\s+" + _PHRASE)
# A new job is said many ways: "I'm working at", "I started working at", "I got a job at".
_NEW_JOB = (
    r"\bi'm\s+(?:now\s+|currently\s+)?working|\bi\s+(?:just\s+|recently\s+)?(?:started|began)"
    r"\s+working|\bi(?:'ve|\s+have)?\s+(?:just\s+)?got\s+a\s+(?:new\s+)?job"
)
_WORK_AT = re.compile(r"(?i:\bi\s+(?:currently\s+|now\s+)?work\s+(?P<prep>at|for))\s+" + _PHRASE)
# Only a named workplace: "I'm working at home today" is no job.
_NEW_WORK_AT = re.compile(r"(?i:(?:" + _NEW_JOB + r")\s+(?P<prep>at|for))\s+(?=[A-Z])" + _PHRASE)
# "I work as a nurse", and "I work at Boeing as an engineer".
_WORK_AS = re.compile(
    r"(?i:(?:\bi\s+(?:currently\s+|now\s+)?work\s+(?:[^.,!?;:\n]*?\s+)?|(?:" + _NEW_JOB + r")\s+)"
    r"as\s+(?P<art>an?))\s+" + _PHRASE
)
_I_AM_A = re.compile(_I_AM + r"(?P<art>(?i:an?))\s+" + _PHRASE)
# Splits "software engineer at Google" into the job and the workplace.
_JOB_PLACE = re.compile(r"\s+(?:at|for|in|with|from)\s+", re.I)
_WORKPLACE_PREPS = ("at", "for")
_RELATIONS = RELATIONS
_FAMILY = re.compile(
    r"(?i:\bmy\s+(?P<rel>" + _RELATIONS + r")(?:'s\s+name)?\s+is\s+(?:called\s+|named\s+)?)"
    r"(?P<name>[A-Z][\w'-]+)"
)
# "My wife Lena is a violinist", "I have a sister called Vera", "Amir is my cousin".
_FAMILY_NAMED = (
    re.compile(r"(?i:\bmy\s+(?P<rel>" + _RELATIONS + r"),?)\s+(?P<name>[A-Z][\w-]+)\b(?!['-])"),
    re.compile(
        r"(?i:\b(?:i|we)\s+(?:also\s+)?have\s+an?\s+(?P<rel>" + _RELATIONS + r")"
        r"\s+(?:called|named))\s+(?P<name>[A-Z][\w'-]+)"
    ),
    re.compile(
        r"(?:^|[.!?:]\s+|,\s+)(?i:(?:actually|oh|well|so|and|but|wait|sorry|no|yes|ok|okay)"
        r",?\s+)?(?P<name>[A-Z][\w'-]+)\s+(?i:is\s+my\s+(?P<rel>"
        + _RELATIONS
        # "is my wife's sister", "is my brother-in-law": not the relation named.
        + r"))\b(?!['-])"
    ),
)
# "My brother is a firefighter": a relative's occupation, kept as the speaker's fact.
_RELATIVE_JOB = re.compile(
    r"(?i:\bmy\s+(?P<rel>" + _RELATIONS + r")\s+is\s+(?P<art>an?))\s+(?P<x>[a-z][\w -]*)"
)
# Words that look like a name after "my brother" or before "is my" without being one.
_NOT_RELATIVE_NAMES = _words("""
    this that he she it who there here which what and but or is was has lives works
    """)
_MARRIED = re.compile(_I_AM + r"(?i:married\s+to)\s+(?P<name>[A-Z][\w'-]+)")
_NUMBER_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten|\\d+"
_KIDS = re.compile(
    r"(?i:\b(?:i|we)\s+have\s+(?P<n>" + _NUMBER_WORDS + r")\s+(?P<kids>kids?|child(?:ren)?|sons?"
    r"|daughters?|grandchild(?:ren)?|grandkids?))\b"
)
_ANIMALS = "dog|cat|puppy|kitten|parrot|rabbit|bunny|hamster|horse|turtle|snake|fish|bird|lizard"
_PET_NAMED = re.compile(
    r"(?i:\bi\s+have\s+(?P<art>an?)\s+(?P<animal>" + _ANIMALS + r")(?:\s+(?:named|called)\s+"
    r"|,\s+))(?P<name>[A-Z][\w'-]+)"
)
_PET = re.compile(r"(?i:\bi\s+have\s+(?P<art>an?)\s+(?P<animal>" + _ANIMALS + r"))\b")
_MY_PET = re.compile(
    r"(?i:\bmy\s+(?P<animal>" + _ANIMALS + r")(?:'s\s+name\s+is|\s+is\s+called|\s+is\s+named"
    r"|\s+named|\s+called|,)?)\s+(?P<name>[A-Z][\w'-]+)"
)
_LIKES = re.compile(
    r"(?i:\bi\s+(?:(?:really|absolutely|just|also|now|still|actually|truly|totally|do)\s+){0,2}"
    r"(?P<verb>love|like|enjoy|adore))\s+" + _PHRASE
)
# "I can't stand cilantro": what people dislike is kept like what they like.
_DISLIKES = re.compile(
    r"(?i:\bi\s+(?:(?:really|honestly|just|absolutely|now|still|actually|truly|totally)\s+){0,2}"
    r"(?P<verb>hate|dislike|detest|can't\s+stand|cannot\s+stand|don't\s+like))\s+" + _PHRASE
)
_DISLIKE_CLAIMS = {
    "hate": "hates",
    "dislike": "dislikes",
    "detest": "detests",
    "can't stand": "can't stand",
    "cannot stand": "can't stand",
    "don't like": "doesn't like",
}
# Diets and intolerances: "I'm vegan", "I'm lactose intolerant".
_DIET = re.compile(
    _I_AM + r"(?i:(?P<x>vegan|vegetarian|pescatarian|coeliac|celiac|diabetic|gluten[- ]free"
    r"|teetotal|[a-z]+\s+intolerant))\b"
)
_PLAYS = re.compile(r"(?i:\bi\s+(?:also\s+)?play)\s+" + _PHRASE)
# How someone gets around: "I take the bus now", "we take the tram everywhere".
_TRANSPORT_USE = re.compile(
    r"(?i:\b(?:i|we)\s+(?:now\s+|usually\s+|always\s+)?(?:take|ride|catch)\s+the\s+"
    r"(?P<mode>" + TRANSPORT + r"))\b"
)
# "I drive a blue Volvo": the make is capitalised, so a phrase is not taken for a car.
_DRIVES = re.compile(
    r"(?i:\bi\s+(?:now\s+)?drive\s+(?P<art>an?))\s+(?P<car>(?:[a-z]+\s+){0,2}[A-Z][\w-]+)"
)
_TEACHES = re.compile(r"(?i:\bi\s+(?:now\s+)?teach)\s+(?P<x>[a-z][^.,!?;:\n]*)")
# "I teach my kids to swim" says whom, not a subject someone teaches for a living.
_NOT_SUBJECTS = _words("my our his her their them him me people kids children myself us it")
# A question says nothing about its speaker: "Do I hate running?"
_QUESTION = re.compile(
    r"(?:^|(?<=[.!?]))\s*(?i:do|does|did|am|is|are|can|could|would|should|will|what|where|who"
    r"|why|how|when|have|has)\b[^.!?]*\?"
)
_ALLERGY = re.compile(
    _I_AM + r"(?i:(?:very\s+|severely\s+|really\s+|deathly\s+)?allergic\s+to)\s+" + _PHRASE
)
_BIRTHDAY = re.compile(r"(?i:\bmy\s+birthday\s+is\s+(?:on\s+)?)" + _PHRASE)

# Things people "like" that say nothing about them.
_NOT_LIKES = _words("it that this you them him her when how what the idea to think being your")
_JOBS = OCCUPATIONS
# Occupations a claim names with "works as" ("works as a team lead"): "is a team lead" does
# not read as a job the way "is a pilot" does.
_SAYS_A_JOB = ("er", "or", "ist", "ian", "ant", "ent", "nurse", "chef", "cook", "vet", "coach")
# "-er"/"-ist" words that end a phrase after "I'm a" without being an occupation.
_NOT_JOBS = NOT_OCCUPATIONS
# Words a phrase cut short must not end on: what follows them was cut.
_UNFINISHED = _words(
    "a an the in at on of to for from with by about into near and or my our your his her "
    "their its this that some"
)
# Phrases end at these words: what follows is another clause.
_PHRASE_STOP = re.compile(
    r"\s+(?:and\s+i|and\s+my|but|because|since|so|which|where|who|though|although|now"
    r"|right\s+now|these\s+days|at\s+the\s+moment|currently|too|as\s+well|as\s+an?|actually"
    r"|originally|anyway|though|lol|haha"
    # When it happened is not part of the place or the thing: "moved to Berlin last month".
    r"|last\s+(?:week|month|year|spring|summer|fall|autumn|winter)|yesterday|recently"
    r"|this\s+(?:week|month|year)|(?:a|a\s+few|\w+)\s+(?:days|weeks|months|years)\s+ago"
    r"|a\s+(?:day|week|month|year)\s+ago|in\s+(?:19|20)\d\d"
    r"|in\s+(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december|spring|summer|autumn|fall|winter)"
    # Where from and what for are not part of where someone lives: "moved to Madrid from Paris".
    r"|from|for\s+(?:a|an|the|my|our|work)|to\s+work|every\s+\w+|everywhere|especially)\b.*$",
    re.I | re.S,
)

_NAME_FACT = re.compile(
    r"^(?:(?P<who>[\w .-]+)'s|Their)\s+name\s+is\s+(?P<name>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)\.?$"
)
_CALLED_FACT = re.compile(r"^[\w .-]+\s+(?:is\s+called|goes\s+by)\s+(?P<name>[A-Z][\w'-]+)\.?$")

_MEMORY_QUESTION = re.compile(
    r"\bwhat\s+(?:do|did|else\s+do)\s+you\s+(?:remember|know|recall)\s+(?:about|of)\s+me\b"
    r"|\bwhat\s+have\s+you\s+learn(?:ed|t)\s+about\s+me\b"
    r"|\bdo\s+you\s+(?:remember|know)\s+(?:anything\s+about\s+)?me\b"
    r"|\btell\s+me\s+what\s+you\s+(?:know|remember)\b"
    r"|\bwho\s+am\s+i\b",
    re.I,
)
_NAME_QUESTION = re.compile(
    r"\bwhat(?:'s|\s+is)\s+my\s+name\b|\bdo\s+you\s+know\s+my\s+name\b", re.I
)


# -- small helpers -------------------------------------------------------------------------


def _phrase(raw: str) -> str:
    """A captured phrase trimmed to its first clause and a few words, ending on a word that
    finishes it (cut after "in", "chemistry at a high school in" says nothing true)."""
    phrase = _PHRASE_STOP.sub("", raw.strip())
    words = phrase.split()
    if len(words) > MAX_PHRASE_WORDS:
        words = words[:MAX_PHRASE_WORDS]
        while words and words[-1].lower() in _UNFINISHED:
            words.pop()
    return " ".join(words).strip(" \"'")


def _norm_claim(text: str) -> str:
    return " ".join(text.lower().rstrip(".!").split())


# -- statements ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One thing a message says about its speaker.

    `template` becomes the claim once the speaker's name is known ("{who} lives in {value}");
    `ack` is the reply's acknowledgement, already in the second person.
    """

    kind: str
    value: str
    template: str
    ack: str


def _name_in(text: str) -> str | None:
    for pattern in _NAME_PATTERNS:
        for match in pattern.finditer(text):
            name = match.group("name").strip()
            first = name.split()[0]
            if first.lower() in _NOT_NAMES:
                continue
            return " ".join(part[:1].upper() + part[1:] for part in name.split())
    return None


def _is_job(phrase: str) -> bool:
    words = phrase.lower().split()
    if not words or len(words) > 3:
        return False
    last = words[-1]
    if last in _NOT_JOBS:
        return False
    return last in _JOBS or last.endswith(("er", "or", "ist", "ian"))


def _perspective(phrase: str, *, second_person: bool) -> str:
    """Re-voice a phrase the speaker said about themselves ("my dog" -> "their dog")."""
    mine, me = ("your", "you") if second_person else ("their", "them")
    phrase = re.sub(r"\bmy\b", mine, phrase, flags=re.I)
    phrase = re.sub(
        r"\bmyself\b", "yourself" if second_person else "themselves", phrase, flags=re.I
    )
    return re.sub(r"\bme\b", me, phrase, flags=re.I)


def statements(text: str) -> list[Statement]:
    """What a message plainly says about its speaker, in a fixed order.

    Each statement carries a claim template ("{who} lives in {value}") and an acknowledgement
    for the reply; values are re-voiced so claims say "their", acknowledgements "your".
    """
    text = _QUESTION.sub(" ", normalise(text))
    found: list[Statement] = []

    def add(kind: str, value: str, template: str, ack: str) -> None:
        if not value:
            return
        third = _perspective(value, second_person=False)
        second = _perspective(value, second_person=True)
        ack = ack.format(value=second)
        found.append(Statement(kind, third, template, ack[:1].upper() + ack[1:]))

    name = _name_in(text)
    if name:
        add("name", name, "{who}'s name is {value}", "Nice to meet you, {value}.")
    for pattern in (_HOME, _WE_HOME):
        for match in pattern.finditer(text):
            add("home", _phrase(match["x"]), "{who} lives in {value}", "{value} — noted.")
    for match in _LIVES_WITH.finditer(text):
        company = match["name"] or f"my {match['rel'].lower()}"
        place = _phrase(match["x"])
        if place[:1].isupper():
            add(
                "home",
                f"{place} with {_perspective(company, second_person=False)}",
                "{who} lives in {value}",
                "{value} — noted.",
            )
    if _HOME_NOW.search(text):
        for match in _ARRIVED.finditer(text):
            place = _phrase(match["x"])
            if place[:1].isupper():
                add("home", place, "{who} lives in {value}", "{value} — noted.")
    for match in _ORIGIN.finditer(text):
        add("origin", _phrase(match["x"]), "{who} is from {value}", "{value} — noted.")
    for match in _GREW_UP.finditer(text):
        add(
            "origin", _phrase(match["x"]), "{who} grew up in {value}", "Grew up in {value} — noted."
        )
    for match in (*_WORK_AT.finditer(text), *_NEW_WORK_AT.finditer(text)):
        prep = match["prep"].lower()
        add(
            "work",
            _phrase(match["x"]),
            f"{{who}} works {prep} {{value}}",
            f"Working {prep} {{value}} — got it.",
        )
    for match in _WORK_AS.finditer(text):
        article = match["art"].lower()
        job = _JOB_PLACE.split(_phrase(match["x"]), maxsplit=1)[0]
        add(
            "job",
            job,
            f"{{who}} works as {article} {{value}}",
            f"{article.capitalize()} {{value}} — good to know.",
        )
    for match in _I_AM_A.finditer(text):
        article = match["art"].lower()
        # Split before trimming, so the workplace keeps its own words ("a chef at a small
        # bistro in Porto": the job, then "a small bistro in Porto").
        raw = _PHRASE_STOP.sub("", match["x"].strip())
        parts = _JOB_PLACE.split(raw, maxsplit=1)
        job = _phrase(parts[0])
        if not _is_job(job):
            continue
        verb = "is" if job.lower().endswith(_SAYS_A_JOB) else "works as"
        add(
            "job",
            job,
            f"{{who}} {verb} {article} {{value}}",
            f"{article.capitalize()} {{value}} — good to know.",
        )
        preposition = raw[len(parts[0]) :].split()
        if len(parts) == 2 and preposition:
            prep = preposition[0].lower()
            place = _phrase(parts[1])
            if prep in _WORKPLACE_PREPS:
                add(
                    "work",
                    place,
                    f"{{who}} works {prep} {{value}}",
                    f"Working {prep} {{value}} — got it.",
                )
            elif prep == "in" and place[:1].isupper():
                # "I'm a pharmacist in Madrid": the job and where, one fact that a new job
                # replaces whole.
                found[-1] = Statement(
                    "job",
                    f"{job} in {place}",
                    f"{{who}} {verb} {article} {{value}}",
                    found[-1].ack,
                )
    for match in _FAMILY.finditer(text):
        relation = match["rel"].lower()
        if match["name"].lower() in _NOT_NAMES:
            continue
        add(
            "family",
            match["name"],
            f"{{who}}'s {relation} is called {{value}}",
            f"Your {relation} {{value}} — noted.",
        )
    named_relatives: set[str] = {m["name"] for m in _FAMILY.finditer(text)}
    for pattern in _FAMILY_NAMED:
        for match in pattern.finditer(text):
            relation, relative = match["rel"].lower(), match["name"]
            if relative.lower() in _NOT_NAMES | _NOT_RELATIVE_NAMES:
                continue
            if relative in named_relatives:
                continue
            named_relatives.add(relative)
            add(
                "family",
                relative,
                f"{{who}}'s {relation} is called {{value}}",
                f"Your {relation} {{value}} — noted.",
            )
    for match in _RELATIVE_JOB.finditer(text):
        relation, article = match["rel"].lower(), match["art"].lower()
        job = _phrase(_JOB_PLACE.split(match["x"], maxsplit=1)[0])
        if _is_job(job):
            add(
                "family",
                f"{article} {job}",
                f"{{who}}'s {relation} is {{value}}",
                f"Your {relation} is {{value}} — noted.",
            )
    for match in _MARRIED.finditer(text):
        add("family", match["name"], "{who} is married to {value}", "Married to {value} — noted.")
    for match in _KIDS.finditer(text):
        count, kids = match["n"].lower(), match["kids"].lower()
        add("family", f"{count} {kids}", "{who} has {value}", "{value} — lovely.")
    named_pets: set[str] = set()
    for pattern in (_PET_NAMED, _MY_PET):
        for match in pattern.finditer(text):
            animal, pet = match["animal"].lower(), match["name"]
            if pet.lower() in _NOT_NAMES or pet in named_pets:
                continue
            named_pets.add(pet)
            article = "an" if animal[0] in "aeiou" else "a"
            add(
                "pet",
                f"{article} {animal} named {pet}",
                "{who} has {value}",
                f"{pet} the {animal} — lovely.",
            )
    if not named_pets:
        for match in _PET.finditer(text):
            animal, article = match["animal"].lower(), match["art"].lower()
            add("pet", f"{article} {animal}", "{who} has {value}", "{value} — lovely.")
    for match in _LIKES.finditer(text):
        thing = _phrase(match["x"])
        if not thing or thing.split()[0].lower() in _NOT_LIKES:
            continue
        if any(pet in thing for pet in named_pets):
            continue  # "I love my cat Luna" is already the pet statement
        verb = match["verb"].lower()
        add("like", thing, f"{{who}} {verb}s {{value}}", f"Good to know you {verb} {{value}}.")
    for match in _DISLIKES.finditer(text):
        thing = _phrase(match["x"])
        if not thing or thing.split()[0].lower() in _NOT_LIKES:
            continue
        verb = _DISLIKE_CLAIMS[" ".join(match["verb"].lower().split())]
        add("dislike", thing, f"{{who}} {verb} {{value}}", "Not a fan of {value} — noted.")
    for match in _DIET.finditer(text):
        add("diet", " ".join(match["x"].lower().split()), "{who} is {value}", "{value} — noted.")
    for match in _PLAYS.finditer(text):
        thing = _phrase(match["x"])
        if not thing or thing.split()[0].lower() in _NOT_LIKES - {"the"}:
            continue
        add("plays", thing, "{who} plays {value}", "{value} — nice.")
    for match in _TRANSPORT_USE.finditer(text):
        mode = match["mode"].lower()
        add("commute", mode, "{who} takes the {value}", "The {value} — noted.")
    for match in _DRIVES.finditer(text):
        article = match["art"].lower()
        add("car", match["car"], f"{{who}} drives {article} {{value}}", "A {value} — noted.")
    for match in _TEACHES.finditer(text):
        subject = _phrase(match["x"])
        if subject and subject.split()[0].lower() not in _NOT_LIKES | _NOT_SUBJECTS:
            add("job", subject, "{who} teaches {value}", "Teaching {value} — good to know.")
    for match in _ALLERGY.finditer(text):
        add(
            "allergy",
            _phrase(match["x"]),
            "{who} is allergic to {value}",
            "Allergic to {value} — I'll remember that.",
        )
    for match in _BIRTHDAY.finditer(text):
        add(
            "birthday",
            _phrase(match["x"]),
            "{who}'s birthday is {value}",
            "Your birthday is {value} — noted.",
        )
    return found


def name_from_fact(text: str) -> str | None:
    """The name a stored name fact gives ("Sarah's name is Sarah", "sam_1 is called Sam")."""
    text = text.strip()
    match = _NAME_FACT.match(text) or _CALLED_FACT.match(text)
    return match.group("name") if match else None


# -- answers -------------------------------------------------------------------------------


def known_facts(state: State) -> list[Fact]:
    found = state.provided.get(PROVIDED)
    return list(found) if isinstance(found, Sequence) else []


def extract(request: OfflineRequest) -> str | None:
    """GET_FACTS offline: every plain statement of the person read, in the reading's answer
    shape (a key per message: "m1", "m2", ...). Each fact says what it is about (the slot the
    rules read it as filling: "home", "work", ...), so a new value replaces the old; a known
    fact the person said stopped being true ("I sold the Volvo") is ended."""
    state = request.state
    if state is None:
        return "{}"
    messages = state.people_messages()
    known = known_facts(state)
    refs = {f"f{index}": fact.id for index, fact in enumerate(known, start=1)}
    by_ref = {ref: fact for ref, fact in zip(refs, known, strict=True)}
    state.data[FACT_REFS] = refs
    answer: dict[str, list[dict[str, Any]]] = {f"m{i}": [] for i in range(1, len(messages) + 1)}
    number = {message.id: index for index, message in enumerate(messages, start=1)}
    for claim in rule_claims(state):
        change = claim.get("change", "new")
        if change == "repeat" or claim.get("already_known") or claim.get("in_bio"):
            continue
        text = str(claim["claim"])
        target = by_ref.get(str(claim.get("fact")))
        about = _about(target) if target is not None else _slot_name(text)
        said_in = number.get(str(claim.get(SAID_IN, "")))
        if change == "retract":
            # Said in the message that took it back: the last one of the reading that names it.
            said_in = _taking_back(messages, claim) or said_in
        if said_in is None:
            said_in = len(messages)
        answer[f"m{said_in}"].append(
            {
                "fact": text,
                "quote": messages[said_in - 1].content.text,
                "about": about,
                "ends": change == "retract",
            }
        )
    return json.dumps(answer, ensure_ascii=False)


def _about(fact: Fact) -> str | None:
    return fact.attribute or _slot_name(fact.text)


def _slot_name(text: str) -> str | None:
    filled = slot_of(text)
    return filled[0] if filled else None


def _taking_back(messages: Sequence[Memory], claim: dict[str, Any]) -> int | None:
    """The message (1-based) of the person's that takes a known fact back: the last one the
    rules read a retraction in."""
    for index in range(len(messages), 0, -1):
        if retracts(messages[index - 1].content.text):
            return index
    return None


def reply(request: OfflineRequest) -> str | None:
    """The offline reply when it is about what people said of themselves; None passes."""
    state = request.state
    if state is None:
        return None
    text = normalise(state.message.content.text)
    sender_id = state.message.user_id
    said = statements(text)
    stated = next((s.value for s in said if s.kind == "name"), None)
    from_facts = _name_from_facts(state, sender_id)
    name = stated or from_facts or _account_name(state, sender_id)
    if _MEMORY_QUESTION.search(text):
        return reply_json(_memory_answer(state, sender_id))
    if _NAME_QUESTION.search(text):
        return reply_json(f"You're {name}." if name else "I don't know your name yet.")
    acks = [s.ack for s in said][:3]
    if acks:
        # "Nice to meet you, X." already greets; no "Hi X!" before it.
        introduced = stated is not None
        opener = f"Hi {name}! " if name and greets(text) and not introduced else ""
        if not name and greets(text) and not introduced:
            opener = "Hi there! "
        return reply_json(opener + " ".join(acks))
    if from_facts:
        # Small talk, but greeting people by the name they told us rather than their handle.
        answer = small_talk(text, from_facts)
        return None if answer is None else reply_json(answer)
    return None


def _name_from_facts(state: State, user_id: str) -> str | None:
    for fact in known_facts(state):
        if fact.subject_id == user_id:
            name = name_from_fact(fact.text)
            if name:
                return name
    return None


def _memory_answer(state: State, user_id: str) -> str:
    facts = [f.text.strip().rstrip(".") for f in known_facts(state) if f.subject_id == user_id]
    if not facts:
        return "I don't know anything about you yet. Tell me about yourself!"
    listed = "; ".join(facts[:MAX_LISTED_FACTS])
    more = len(facts) - MAX_LISTED_FACTS
    suffix = f" (and {more} more)" if more > 0 else ""
    return cap(f"Here's what I remember about you: {listed}{suffix}.")


def rule_claims(state: State) -> list[dict[str, Any]]:
    """What the rules read in the state's messages, each claim with its subject, the message
    it was said in and its change to the known facts (`reconcile`)."""
    messages = state.people_messages()
    known = known_facts(state)
    # Names first, over the whole batch, so "I live in Seattle. ... I'm Sarah" still says
    # "Sarah lives in Seattle". Stored name facts are the fallback; a stated name wins.
    names: dict[str, str] = {}
    for fact in known:
        found = name_from_fact(fact.text)
        if found:
            names.setdefault(fact.subject_id, found)
    said = [(message, statements(message.content.text)) for message in messages]
    for message, found_statements in said:
        for statement in found_statements:
            if statement.kind == "name":
                names[message.user_id] = statement.value
    known_claims = {_norm_claim(f.text) for f in known}
    claims: list[dict[str, Any]] = []
    seen: set[str] = set()
    for message, found_statements in said:
        account = _account_name(state, message.user_id)
        speaker = names.get(message.user_id) or account or "Someone"
        for statement in found_statements:
            in_bio = False
            if statement.kind == "name":
                claim = name_fact_text(account, statement.value)
                # The account already shows this name: nothing new to learn.
                in_bio = bool(account and account.lower() == statement.value.lower())
            else:
                claim = statement.template.format(who=speaker, value=statement.value)
            key = _norm_claim(claim)
            if key in seen:
                continue
            seen.add(key)
            claims.append(
                {
                    "claim": claim,
                    "type": "fact",
                    "subject": speaker,
                    # Not in the seed's shape: the offline model knows exactly who spoke.
                    "subject_id": message.user_id,
                    "in_bio": in_bio,
                    "already_known": key in known_claims,
                    SAID_IN: message.id,
                }
            )
        for extra in more_claims(message, speaker):
            if _norm_claim(extra["claim"]) not in seen:
                seen.add(_norm_claim(extra["claim"]))
                claims.append({**extra, SAID_IN: message.id})
    # Like a model shown the known facts with short ids: new, update, retract or repeat.
    return reconcile(claims, messages, known, state.data.get(FACT_REFS, {}))


def _account_name(state: State, user_id: str) -> str | None:
    if state.sender is not None and state.sender.id == user_id:
        return state.sender.name
    account = state.actors.get(user_id)
    return account.name if account else None

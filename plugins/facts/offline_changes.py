"""How the offline model reconciles: what it reads as a change to a known fact.

The offline answer (no language model) extracts claims by pattern; this module gives each the
change a model would: a claim that fills the same slot as a known fact of the same person
(where they live, where they work, their job, age, number of kids, partner, how they get
around, the relation of a person they name, their opinion of a thing) updates it when the
value differs and repeats it when it does not; "I no longer ...", "I don't ... anymore",
"I'm no longer ...", "I quit ...", "I sold my ...", "I moved out of ..." retract the known
fact they name; "I'm 35 now", "I just turned
35" and "we have 3 kids now" are claims of their own. Pure functions over the state: the
known facts shown to the model and their short ids are what a real model sees too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot import Fact, Memory

Claim = dict[str, Any]
# The offline claims carry the id of the message that said them (a model's claims do not;
# parsing ignores the key), so a retraction later in the same window can take them back.
SAID_IN = "said_in"

# Occupations, shared with the statement patterns: "is a pilot" says a job, "is a fan" does not.
OCCUPATIONS = frozenset(
    """
    nurse chef cook teacher student engineer developer programmer designer doctor lawyer
    accountant architect artist writer journalist scientist researcher pilot firefighter
    farmer mechanic electrician plumber carpenter pharmacist dentist therapist photographer
    musician manager consultant analyst librarian professor lecturer barista waiter waitress
    paramedic surgeon veterinarian vet officer cashier driver tutor coach translator editor
    midwife baker butcher lead physiotherapist
    """.split()  # noqa: SIM905
)
# Relations that hold one name at a time (a partner); the others are keyed by the name.
PARTNERS = "wife|husband|partner|boyfriend|girlfriend|fiancée|fiancee|fiance"
RELATIONS = (
    PARTNERS + "|son|daughter|brother|sister|mother|mom|mum|father|dad|cousin|aunt|uncle"
    "|niece|nephew|grandmother|grandfather|grandma|grandpa|best friend|friend|flatmate|roommate"
)
TRANSPORT = "bus|tram|train|subway|metro|underground|tube|ferry"
_OPINION_VERBS = r"loves|likes|enjoys|adores|hates|dislikes|detests|can't stand|doesn't like"

# A fact's slot: what it says about its subject that holds one value at a time. A slot name
# with "{k}" is keyed by the named group k (one relation per person named, one opinion per
# thing): "Lior's brother is called Amir" and "Lior's cousin is called Amir" share a slot.
_SLOTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("home", re.compile(r"\b(?:lives|is living|is based|resides) in (?P<v>.+)$", re.I)),
    ("work", re.compile(r"\bworks (?:at|for) (?P<v>.+)$", re.I)),
    ("workcity", re.compile(r"\bworks in (?P<v>.+)$", re.I)),
    # "is a bus driver in Cardiff": the job is what comes before where.
    ("job", re.compile(r"\b(?:works as|is) an? (?P<job>[\w -]+?)(?: in [A-Z][\w -]*)?$")),
    ("age", re.compile(r"\bis (?P<v>\d{1,3})(?: years old)?$", re.I)),
    ("kids", re.compile(r"\bhas (?P<v>\w+) (?:kids?|child(?:ren)?)$", re.I)),
    (
        "partner",
        re.compile(r"(?:'s (?:" + PARTNERS + r") is called| is married to) (?P<v>.+)$", re.I),
    ),
    ("relation of {k}", re.compile(r"'s (?P<v>[\w ]+?) is called (?P<k>.+)$", re.I)),
    ("commute", re.compile(r"\btakes the (?P<v>" + TRANSPORT + r")$", re.I)),
    ("opinion of {k}", re.compile(r"\b(?P<v>" + _OPINION_VERBS + r") (?P<k>.+)$", re.I)),
)
_OF_SOMEONE_ELSE = re.compile(r"^[^']+'s\s+(?!name\b)\w")
_RELATION_SLOTS = ("partner", "relation of {k}")
# "is a" says a job only for occupations ("is a vegetarian" is not one).
_JOB_ENDINGS = ("er", "or", "ist", "ian", "ant", "ent", "nurse", "chef", "cook", "vet", "coach")
# Words that end like an occupation and say what someone does for fun or is like: "I'm a
# runner" must not close "is a nurse".
NOT_OCCUPATIONS = frozenset(
    """
    member beginner lover user fan newcomer winner loser number bit vegetarian
    runner reader gamer swimmer hiker climber skier surfer dancer singer walker jogger
    traveller traveler learner sleeper thinker dreamer talker listener worrier believer
    optimist pessimist perfectionist realist idealist cyclist tourist introvert extrovert
    smoker drinker eater foodie owner follower supporter player fighter survivor
    """.split()  # noqa: SIM905
)
_NOT_JOBS = NOT_OCCUPATIONS

_NUMBER = r"(?P<n>\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten)"
_I_AM = r"\b(?:i'm|i am|im)\s+"
_AGE = (
    re.compile(_I_AM + r"(?P<n>\d{1,3})(?:\s+years?\s+old)?(?:\s+now)?\b(?![.,:/-]?\d)", re.I),
    re.compile(r"\bi\s+(?:just\s+)?turned\s+(?P<n>\d{1,3})\b", re.I),
)
_KIDS_NOW = re.compile(
    r"\b(?:we|i)\s+(?:now\s+)?have\s+" + _NUMBER + r"\s+(?P<kids>kids?|child(?:ren)?)\b", re.I
)
# What stopped being true, and the words that name it.
_WHAT = r"(?P<x>[^.,!?;\n]+)"
_RETRACTIONS: tuple[tuple[str | None, re.Pattern[str]], ...] = (
    ("work", re.compile(r"\bi\s+(?:no\s+longer|don'?t)\s+work\s+(?:at|for)\s+" + _WHAT, re.I)),
    ("home", re.compile(r"\bi\s+(?:no\s+longer|don'?t)\s+live\s+in\s+" + _WHAT, re.I)),
    ("work", re.compile(r"\bi\s+(?:just\s+)?(?:quit|left)\s+(?:my\s+job\s+at\s+)?" + _WHAT, re.I)),
    (None, re.compile(r"\bi\s+(?:just\s+)?sold\s+" + _WHAT, re.I)),
    (None, re.compile(r"\bi\s+no\s+longer\s+(?:have\s+)?" + _WHAT, re.I)),
    # "I don't have a car anymore", "I don't drive anymore", "I don't eat meat anymore".
    (
        None,
        re.compile(
            r"\bi\s+(?:don'?t|do\s+not)\s+(?:have\s+)?(?P<x>[^.,!?;\n]+?)\s+any\s*more\b", re.I
        ),
    ),
    # "I'm no longer a teacher", "I'm not a student anymore".
    (None, re.compile(r"\b(?:i'm|i\s+am)\s+no\s+longer\s+" + _WHAT, re.I)),
    (None, re.compile(r"\b(?:i'm|i\s+am)\s+not\s+(?P<x>[^.,!?;\n]+?)\s+any\s*more\b", re.I)),
    # "I moved out of London": no longer lives there, wherever they went.
    ("home", re.compile(r"\bi\s+(?:just\s+)?moved\s+(?:out\s+of|away\s+from)\s+" + _WHAT, re.I)),
)
_ANYMORE = re.compile(r"\s+(?:any\s*more|now|either)\s*$", re.I)
_SMALL = frozenset(
    "a an the my our at for in to with of on and job anymore any more longer work live have "  # noqa: SIM905
    "no not now".split()
)


def slot_of(text: str) -> tuple[str, str] | None:
    """(slot, value) a fact's text fills, e.g. ("home", "berlin"); None for other facts."""
    text = text.strip().rstrip(".!")
    # "Marta's brother is a firefighter" fills no slot of Marta's but who her brother is.
    of_someone_else = _OF_SOMEONE_ELSE.match(text) is not None
    for slot, pattern in _SLOTS:
        if of_someone_else and slot not in _RELATION_SLOTS:
            continue
        found = pattern.search(text)
        if found is None:
            continue
        groups = found.groupdict()
        if groups.get("job") is not None:
            value = " ".join(groups["job"].casefold().split())
            if not _is_job(value):
                continue
        else:
            value = " ".join(found["v"].casefold().split())
        if groups.get("k") is not None:
            slot = slot.format(k=" ".join(groups["k"].casefold().split()))
        return slot, value
    return None


def _is_job(value: str) -> bool:
    words = value.split()
    if not words or len(words) > 3 or words[-1] in _NOT_JOBS:
        return False
    return words[-1] in OCCUPATIONS or words[-1].endswith(_JOB_ENDINGS)


def _stem(word: str) -> str:
    """A light stem, so "I quit teaching" names "teaches maths"."""
    for ending in ("ing", "es", "ed", "s"):
        if len(word) > len(ending) + 3 and word.endswith(ending):
            word = word[: -len(ending)]
            break
    # "drive", "drives", "driving": one stem.
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def _content(text: str) -> set[str]:
    words = {w.strip("'") for w in re.findall(r"[\w']+", text.casefold())}
    return {_stem(w) for w in words if w and w not in _SMALL}


def more_claims(message: Memory, who: str) -> list[Claim]:
    """Claims about a change the statement patterns do not read: an age, a number of kids."""
    text = message.content.text
    found: list[Claim] = []
    for pattern in _AGE:
        for match in pattern.finditer(text):
            found.append(_claim(f"{who} is {match['n']} years old", who, message.user_id))
    for match in _KIDS_NOW.finditer(text):
        count, kids = match["n"].lower(), match["kids"].lower()
        found.append(_claim(f"{who} has {count} {kids}", who, message.user_id))
    return found


def _claim(text: str, who: str, user_id: str) -> Claim:
    return {
        "claim": text,
        "type": "fact",
        "subject": who,
        "subject_id": user_id,
        "change": "new",
        "in_bio": False,
    }


def reconcile(
    claims: Sequence[Claim],
    messages: Iterable[Memory],
    known: Sequence[Fact],
    refs: Mapping[str, str],
) -> list[Claim]:
    """The claims with their changes, plus a retraction for each known fact a message says
    stopped being true. `known` are the facts the prompt showed, `refs` their short ids."""
    short = {fact_id: ref for ref, fact_id in refs.items()}
    shown = [f for f in known if f.id in short]
    messages = list(messages)
    order = {message.id: index for index, message in enumerate(messages)}
    retracted = _retracted_in_window(messages)
    # A later claim for the same person's slot replaces an earlier one of the same window.
    last_in_slot: dict[tuple[str, str], int] = {}
    for index, claim in enumerate(claims):
        filled = slot_of(str(claim.get("claim", "")))
        if filled is not None:
            last_in_slot[(str(claim.get("subject_id")), filled[0])] = index
    result: list[Claim] = []
    for index, claim in enumerate(claims):
        claim = dict(claim)
        # Kept on the claim: the answer files it under the message it was said in.
        said_in = order.get(str(claim.get(SAID_IN, "")), -1)
        if any(_names(claim, said_in, retraction, slot_of) for retraction in retracted):
            continue  # said, then taken back later in the same window
        filled = slot_of(str(claim.get("claim", "")))
        if filled is not None:
            key = (str(claim.get("subject_id")), filled[0])
            if last_in_slot[key] != index:
                continue
            same_slot = [
                f
                for f in shown
                if f.subject_id == claim.get("subject_id") and _slot(f) == filled[0]
            ]
            for fact in same_slot:
                value = slot_of(fact.text)
                repeated = value is not None and value[1] == filled[1]
                claim["change"] = "repeat" if repeated else "update"
                claim["fact"] = short[fact.id]
                if repeated:
                    break
        result.append(claim)
    result += _retractions(messages, shown, short, result)
    return result


@dataclass(frozen=True)
class _Retraction:
    said_in: int
    user_id: str
    slot: str | None
    named: frozenset[str]


def _retracted_in_window(messages: Sequence[Memory]) -> list[_Retraction]:
    found = []
    for index, message in enumerate(messages):
        for slot, pattern in _RETRACTIONS:
            for match in pattern.finditer(message.content.text):
                named = frozenset(_content(_ANYMORE.sub("", match["x"])))
                if named:
                    found.append(_Retraction(index, message.user_id, slot, named))
    return found


def _names(
    claim: Claim,
    said_in: int,
    retraction: _Retraction,
    slot_fn: Callable[[str], tuple[str, str] | None],
) -> bool:
    """Whether a later retraction by the same person takes this claim back."""
    if said_in < 0 or said_in >= retraction.said_in:
        return False
    if claim.get("subject_id") != retraction.user_id:
        return False
    text = str(claim.get("claim", ""))
    filled = slot_fn(text)
    if retraction.slot is not None and filled is not None and filled[0] != retraction.slot:
        return False
    return bool(retraction.named & _content(text))


def retracts(text: str) -> bool:
    """Whether a message says something of its speaker's stopped being true."""
    return any(pattern.search(text) for _, pattern in _RETRACTIONS)


def _slot(fact: Fact) -> str | None:
    filled = slot_of(fact.text)
    return filled[0] if filled else None


def _retractions(
    messages: Iterable[Memory],
    shown: Sequence[Fact],
    short: Mapping[str, str],
    claims: Sequence[Claim],
) -> list[Claim]:
    updated = {c.get("fact") for c in claims if c.get("change") == "update"}
    found: list[Claim] = []
    for message in messages:
        for slot, pattern in _RETRACTIONS:
            for match in pattern.finditer(message.content.text):
                named = _content(_ANYMORE.sub("", match["x"]))
                for target in _named_facts(shown, message.user_id, slot, named, _slot):
                    if short[target.id] in updated:
                        continue
                    if any(c.get("fact") == short[target.id] for c in found):
                        continue
                    claim = _claim(target.text, "", message.user_id)
                    claim.update(change="retract", fact=short[target.id])
                    found.append(claim)
    return found


def _named_facts(
    shown: Sequence[Fact],
    user_id: str,
    slot: str | None,
    named: set[str],
    slot_fn: Callable[[Fact], str | None],
) -> list[Fact]:
    """The speaker's known facts that share the most words with what they named (in the
    slot the verb says, when it says one); none when nothing matches. Every one of them:
    "I sold the Volvo" takes back "drives a blue Volvo" and "drives a blue Volvo to work
    every day" alike (a live run kept the one that lost a tie)."""
    overlaps: list[tuple[int, Fact]] = []
    for fact in shown:
        if fact.subject_id != user_id:
            continue
        if slot is not None and slot_fn(fact) not in (slot, None):
            continue
        overlaps.append((len(named & _content(fact.text)), fact))
    most = max((overlap for overlap, _ in overlaps), default=0)
    return [fact for overlap, fact in overlaps if overlap == most and most > 0]

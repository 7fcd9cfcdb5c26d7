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

from bot import Fact, OfflineRequest, State
from bot.offline import cap, greets, normalise, reply_json, small_talk

from .claims import FACT_REFS
from .offline_changes import SAID_IN, more_claims, reconcile

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
_HOME = re.compile(
    r"(?i:\bi\s+(?:currently\s+|now\s+|still\s+)?live\s+in|\bi'm\s+based\s+in|\bi\s+am\s+based\s+in"
    r"|\bi\s+(?:just\s+|recently\s+)?moved\s+to)\s+" + _PHRASE
)
_ORIGIN = re.compile(_I_AM + r"(?i:originally\s+)?(?i:from)\s+" + _PHRASE)
_GREW_UP = re.compile(r"(?i:\bi\s+grew\s+up\s+in)\s+" + _PHRASE)
_WORK_AT = re.compile(r"(?i:\bi\s+(?:currently\s+|now\s+)?work\s+(?P<prep>at|for))\s+" + _PHRASE)
# "I work as a nurse", and "I work at Boeing as an engineer".
_WORK_AS = re.compile(
    r"(?i:\bi\s+(?:currently\s+|now\s+)?work\s+(?:[^.,!?;:\n]*?\s+)?as\s+(?P<art>an?))\s+" + _PHRASE
)
_I_AM_A = re.compile(_I_AM + r"(?P<art>(?i:an?))\s+" + _PHRASE)
# Splits "software engineer at Google" into the job and the workplace.
_JOB_PLACE = re.compile(r"\s+(?:at|for|in|with|from)\s+", re.I)
_WORKPLACE_PREPS = ("at", "for")
_RELATIONS = (
    "wife|husband|partner|boyfriend|girlfriend|fiancée|fiancee|fiance|son|daughter|brother"
    "|sister|mother|mom|mum|father|dad|best friend"
)
_FAMILY = re.compile(
    r"(?i:\bmy\s+(?P<rel>" + _RELATIONS + r")(?:'s\s+name)?\s+is\s+(?:called\s+|named\s+)?)"
    r"(?P<name>[A-Z][\w'-]+)"
)
_MARRIED = re.compile(_I_AM + r"(?i:married\s+to)\s+(?P<name>[A-Z][\w'-]+)")
_NUMBER_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten|\\d+"
_KIDS = re.compile(
    r"(?i:\bi\s+have\s+(?P<n>" + _NUMBER_WORDS + r")\s+(?P<kids>kids?|child(?:ren)?|sons?"
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
    r"(?i:\bi\s+(?:really\s+|absolutely\s+|just\s+|also\s+)?(?P<verb>love|like|enjoy|adore))\s+"
    + _PHRASE
)
_ALLERGY = re.compile(
    _I_AM + r"(?i:(?:very\s+|severely\s+|really\s+|deathly\s+)?allergic\s+to)\s+" + _PHRASE
)
_BIRTHDAY = re.compile(r"(?i:\bmy\s+birthday\s+is\s+(?:on\s+)?)" + _PHRASE)

# Things people "like" that say nothing about them.
_NOT_LIKES = _words("it that this you them him her when how what the idea to think being your")
_JOBS = _words("""
    nurse chef cook teacher student engineer developer programmer designer doctor lawyer
    accountant architect artist writer journalist scientist researcher pilot firefighter
    farmer mechanic electrician plumber carpenter pharmacist dentist therapist photographer
    musician manager consultant analyst librarian professor lecturer barista waiter waitress
    paramedic surgeon veterinarian vet officer cashier driver tutor coach translator editor
    """)
# "-er"/"-ist" words that end a phrase after "I'm a" without being an occupation.
_NOT_JOBS = _words("member beginner lover user fan newcomer winner loser number bit")
# Phrases end at these words: what follows is another clause.
_PHRASE_STOP = re.compile(
    r"\s+(?:and\s+i|and\s+my|but|because|since|so|which|where|who|though|although|now"
    r"|right\s+now|these\s+days|at\s+the\s+moment|currently|too|as\s+well|as\s+an?|actually"
    r"|originally|anyway|though|lol|haha"
    # When it happened is not part of the place or the thing: "moved to Berlin last month".
    r"|last\s+(?:week|month|year|spring|summer|fall|autumn|winter)|yesterday|recently"
    r"|this\s+(?:week|month|year)|(?:a|a\s+few|\w+)\s+(?:days|weeks|months|years)\s+ago"
    r"|a\s+(?:day|week|month|year)\s+ago|in\s+(?:19|20)\d\d)\b.*$",
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
    """A captured phrase trimmed to its first clause and a few words."""
    phrase = _PHRASE_STOP.sub("", raw.strip())
    words = phrase.split()[:MAX_PHRASE_WORDS]
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
    text = normalise(text)
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
    for match in _HOME.finditer(text):
        add("home", _phrase(match["x"]), "{who} lives in {value}", "{value} — noted.")
    for match in _ORIGIN.finditer(text):
        add("origin", _phrase(match["x"]), "{who} is from {value}", "{value} — noted.")
    for match in _GREW_UP.finditer(text):
        add(
            "origin", _phrase(match["x"]), "{who} grew up in {value}", "Grew up in {value} — noted."
        )
    for match in _WORK_AT.finditer(text):
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
        phrase = _phrase(match["x"])
        parts = _JOB_PLACE.split(phrase, maxsplit=1)
        if not _is_job(parts[0]):
            continue
        add(
            "job",
            parts[0],
            f"{{who}} is {article} {{value}}",
            f"{article.capitalize()} {{value}} — good to know.",
        )
        preposition = phrase[len(parts[0]) :].split()
        if len(parts) == 2 and preposition and preposition[0].lower() in _WORKPLACE_PREPS:
            prep = preposition[0].lower()
            add(
                "work",
                parts[1],
                f"{{who}} works {prep} {{value}}",
                f"Working {prep} {{value}} — got it.",
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
    """GET_FACTS offline: every plain statement in the window, attributed to its speaker."""
    if request.state is None:
        return "[]"
    return json.dumps(_claims(request.state), ensure_ascii=False)


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


def _claims(state: State) -> list[dict[str, Any]]:
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
                claim = (
                    f"{account}'s name is {statement.value}"
                    if account
                    else f"Their name is {statement.value}"
                )
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

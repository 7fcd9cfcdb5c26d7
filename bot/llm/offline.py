"""The offline model: deterministic patterns instead of a language model.

Chosen when neither an API key nor a base URL is set, so the whole pipeline (reply, evaluator
selection, fact extraction, goal tracking) runs with no network. It is an honest fallback, not
an imitation of a model: it reads the structured `State` the prompt was composed from, answers
with the same JSON shapes a model would, and recognises only common, plainly stated things
("my name is ...", "I live in ...", "I finished ..."). Token counts are recorded as 0: nothing
is sent anywhere, and word counts would pass for tokens in cost reports.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.llm.base import JsonAnswer, ModelClass, Task, evaluator_task

if TYPE_CHECKING:
    from bot.llm.usage import UsageLedger
    from bot.models import Goal, Memory
    from bot.state import State

log = logging.getLogger(__name__)

MAX_REPLY_CHARS = 400
MAX_LISTED_FACTS = 8
MAX_PHRASE_WORDS = 6


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
    r"(?i:\bi\s+have\s+(?P<n>" + _NUMBER_WORDS + r")\s+(?P<kids>kids|children|sons|daughters|"
    r"grandchildren|grandkids))\b"
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
    r"|originally|anyway|though|lol|haha)\b.*$",
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
_GOAL = re.compile(
    r"(?i:\bmy\s+goal\s+is\s+(?:to\s+)?|\bi\s+want\s+to\s+|\bi'd\s+like\s+to\s+"
    r"|\bi\s+would\s+like\s+to\s+|\bi'm\s+going\s+to\s+|\bi\s+am\s+going\s+to\s+"
    r"|\bi\s+plan\s+to\s+|\bi'm\s+planning\s+to\s+|\bhelp\s+me\s+(?:to\s+)?)" + _PHRASE
)
# "I want to know ...", "help me understand ...": requests, not goals.
_NOT_GOALS = _words("know ask say tell talk chat see hear understand remember be check find")
_GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|heya|hiya|yo|howdy|greetings|hola|good\s+(?:morning|afternoon|evening))\b",
    re.I,
)
_HOW_ARE_YOU = re.compile(r"\bhow\s+(?:are|r)\s+(?:you|u)\b|\bhow's\s+it\s+going\b", re.I)
_THANKS = re.compile(r"\b(?:thanks|thank\s+you|thx|ty|cheers)\b", re.I)
_FAREWELL = re.compile(r"\b(?:bye|goodbye|good\s+night|see\s+you|see\s+ya|later)\b\W*$", re.I)
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:what|who|where|when|why|how|which|can|could|would|will|is|are|do|does"
    r"|did|should|explain|tell\s+me)\b",
    re.I,
)
_NEUTRAL_REPLIES = (
    "Got it.",
    "I hear you.",
    "Noted.",
    "Tell me more!",
    "Okay, I'm listening.",
)

_COMPLETION = re.compile(
    r"\b(?:i|we)(?:'ve|'m|\s+have|\s+am|\s+just|\s+finally|\s+already|\s+also)*\s+"
    r"(?:finished|completed|did|done|submitted|ran|read|wrote|written|made|prepared|sent|took"
    r"|taken|passed|reached|hit|achieved|managed\s+to)\b",
    re.I,
)
_FAILURE = re.compile(
    r"\b(?:give\s+up\s+on|giving\s+up\s+on|gave\s+up\s+on|given\s+up\s+on|cancel|cancelling"
    r"|canceling|abandon|abandoning|quit|quitting)\b",
    re.I,
)
_FAILURE_GENERIC = re.compile(
    r"\b(?:cancel|give\s+up\s+on|gave\s+up\s+on|abandon|quit)\s+"
    r"(?:it|that|this|the\s+(?:task|goal|plan|project)|my\s+goal)\b",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b", re.I)
_IRREGULAR = {
    "ran": "run",
    "did": "do",
    "done": "do",
    "wrote": "write",
    "written": "write",
    "made": "make",
    "took": "take",
    "taken": "take",
    "went": "go",
    "got": "get",
    "sent": "send",
    "read": "read",
    "reading": "read",
}
_STOPWORDS = _words("""
    the a an of to my your our their his her for and or in on at with by up this that these those
    just finally already also some all it its is are was were be been i we you me have has had
    ve m s d ll re end about from into out over than then there what which who will would can
    could should did do does very really yes
    """)

_POSITIVE = _words("""
    good great love loved lovely awesome amazing happy glad excited fantastic wonderful nice
    thanks thank excellent proud fun enjoy enjoyed cool perfect yay beautiful best brilliant
    delighted grateful thrilled like liked win won relieved
    """)
_NEGATIVE = _words("""
    bad terrible awful hate hated sad angry upset annoyed frustrated horrible worst sick tired
    stressed worried anxious disappointed depressed lonely hurt pain sucks boring miserable ugh
    scared afraid lost fail failed broke broken exhausted
    """)
_NEGATORS = _words("not no never")


# -- small helpers -------------------------------------------------------------------------


def _stem(word: str) -> str:
    """A crude stemmer: enough to match "submitted" with "Submit", "chapters" with "chapter"."""
    word = word.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word


# Verbs that say "progress" without saying on what: they never count as a shared key word.
_GENERIC_STEMS = frozenset(
    _stem(w)
    for w in _words("finish complete completed do make take get start achieve manage reach hit")
)


def _key_words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower().replace("'", ""))
    keys = {_stem(w) for w in words if w not in _STOPWORDS and (len(w) >= 3 or w.isdigit())}
    return keys - _GENERIC_STEMS


def _normalise(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").split())


def _phrase(raw: str) -> str:
    """A captured phrase trimmed to its first clause and a few words."""
    phrase = _PHRASE_STOP.sub("", raw.strip())
    words = phrase.split()[:MAX_PHRASE_WORDS]
    return " ".join(words).strip(" \"'")


def _norm_claim(text: str) -> str:
    return " ".join(text.lower().rstrip(".!").split())


def _cap(text: str, limit: int = MAX_REPLY_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def _stable_choice(options: tuple[str, ...], key: str) -> str:
    # crc32, not hash(): str hashes are salted per process and replies must be reproducible.
    return options[zlib.crc32(key.encode("utf-8")) % len(options)]


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
    text = _normalise(text)
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


# -- the model -----------------------------------------------------------------------------


class OfflineModel:
    """A deterministic, pattern-based stand-in for the language model (see the module doc)."""

    name = "offline"

    def __init__(self, ledger: UsageLedger) -> None:
        self._ledger = ledger

    async def generate_text(
        self,
        prompt: str,
        *,
        model_class: ModelClass,
        task: str,
        state: State | None = None,
        max_tokens: int | None = None,
        system: str | None = None,
        json_answer: JsonAnswer | None = None,
    ) -> str:
        answer = self.answer(task, state)
        self._ledger.record(task, 0, 0)
        log.debug("offline model task=%s answer_chars=%d", task, len(answer))
        return answer

    async def close(self) -> None:
        return None

    def answer(self, task: str, state: State | None) -> str:
        """The answer for a task, from the state alone (synchronous: it is pure computation)."""
        if task == Task.REPLY:
            return self._reply(state)
        if state is None:
            return "[]"
        if task == Task.EVALUATOR_SELECTION:
            names = state.data.get("evaluator_names") or []
            return json.dumps([n for n in names if isinstance(n, str)])
        if task == evaluator_task("GET_FACTS"):
            return json.dumps(self._facts(state), ensure_ascii=False)
        if task == evaluator_task("UPDATE_GOAL"):
            return json.dumps(self._goal_updates(state), ensure_ascii=False)
        if task == evaluator_task("SENTIMENT"):
            return json.dumps(sentiment(state.message.content.text))
        return "[]"

    # -- reply -----------------------------------------------------------------------------

    def _reply(self, state: State | None) -> str:
        if state is None:
            text, action = "I'm running offline, so I can only keep simple notes for now.", None
        else:
            text, action = self._compose_reply(state)
        return json.dumps({"text": _cap(text), "action": action or "NONE"}, ensure_ascii=False)

    def _compose_reply(self, state: State) -> tuple[str, str | None]:
        text = _normalise(state.message.content.text)
        sender_id = state.message.user_id
        said = statements(text)
        name = next((s.value for s in said if s.kind == "name"), None) or self._known_name(
            state, sender_id
        )
        greeting = f"Hi {name}!" if name else "Hi there!"

        if _MEMORY_QUESTION.search(text):
            return self._memory_answer(state, sender_id), None
        if _NAME_QUESTION.search(text):
            return (f"You're {name}." if name else "I don't know your name yet."), None

        goal = _GOAL.search(text)
        if goal:
            wanted = _phrase(goal.group("x")).rstrip(".!")
            if wanted and wanted.split()[0].lower() not in _NOT_GOALS:
                actions = {str(a).upper() for a in state.data.get("actions") or []}
                if "CREATE_GOAL" in actions:
                    text = f"Let's make that a goal: {wanted}. I'll help you keep track."
                    return text, "CREATE_GOAL"
                return f"That sounds like a good plan: {wanted}. Good luck!", None

        acks = [s.ack for s in said][:3]
        if acks:
            # "Nice to meet you, X." already greets; no "Hi X!" before it.
            introduced = any(s.kind == "name" for s in said)
            opener = f"{greeting} " if _GREETING.search(text) and not introduced else ""
            return opener + " ".join(acks), None
        if _GREETING.search(text):
            if _HOW_ARE_YOU.search(text):
                return f"{greeting} I'm doing well, thanks for asking.", None
            return f"{greeting} Good to see you.", None
        if _HOW_ARE_YOU.search(text):
            return "I'm doing well, thanks for asking. How about you?", None
        if _THANKS.search(text):
            return "You're welcome!", None
        if _FAREWELL.search(text):
            return (f"Bye {name}, talk soon!" if name else "Bye, talk soon!"), None
        if _QUESTION.search(text):
            return (
                "I'm running offline right now, so I can't really answer that, "
                "but I'm keeping track of what you tell me."
            ), None
        return _stable_choice(_NEUTRAL_REPLIES, text), None

    @staticmethod
    def _known_name(state: State, user_id: str) -> str | None:
        for fact in state.facts:
            if fact.subject_id == user_id:
                name = name_from_fact(fact.text)
                if name:
                    return name
        if state.sender is not None and state.sender.id == user_id:
            return state.sender.name
        account = state.actors.get(user_id)
        return account.name if account else None

    @staticmethod
    def _memory_answer(state: State, user_id: str) -> str:
        facts = [f.text.strip().rstrip(".") for f in state.facts if f.subject_id == user_id]
        if not facts:
            return "I don't know anything about you yet. Tell me about yourself!"
        listed = "; ".join(facts[:MAX_LISTED_FACTS])
        more = len(facts) - MAX_LISTED_FACTS
        suffix = f" (and {more} more)" if more > 0 else ""
        return f"Here's what I remember about you: {listed}{suffix}."

    # -- facts -----------------------------------------------------------------------------

    def _facts(self, state: State) -> list[dict[str, Any]]:
        messages = list(_user_messages(state))
        # Names first, over the whole batch, so "I live in Seattle. ... I'm Sarah" still says
        # "Sarah lives in Seattle". Stored name facts are the fallback; a stated name wins.
        names: dict[str, str] = {}
        for fact in state.facts:
            known = name_from_fact(fact.text)
            if known:
                names.setdefault(fact.subject_id, known)
        said = [(message, statements(message.content.text)) for message in messages]
        for message, found in said:
            for statement in found:
                if statement.kind == "name":
                    names[message.user_id] = statement.value
        known_claims = {_norm_claim(f.text) for f in state.facts}
        claims: list[dict[str, Any]] = []
        seen: set[str] = set()
        for message, found in said:
            account = self._account_name(state, message.user_id)
            speaker = names.get(message.user_id) or account or "Someone"
            for statement in found:
                in_bio = False
                if statement.kind == "name":
                    claim = (
                        f"{account}'s name is {statement.value}"
                        if account
                        else f"Their name is {statement.value}"
                    )
                    # The account already shows this name: nothing new to learn.
                    in_bio = bool(account) and account.lower() == statement.value.lower()
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
                    }
                )
        return claims

    @staticmethod
    def _account_name(state: State, user_id: str) -> str | None:
        if state.sender is not None and state.sender.id == user_id:
            return state.sender.name
        account = state.actors.get(user_id)
        return account.name if account else None

    # -- goals -----------------------------------------------------------------------------

    def _goal_updates(self, state: State) -> list[dict[str, Any]]:
        messages = list(_user_messages(state))
        in_progress = [g for g in state.goals if g.status == "IN_PROGRESS"]
        updates: list[dict[str, Any]] = []
        for goal in in_progress:
            own = [m for m in messages if goal.user_id is None or m.user_id == goal.user_id]
            texts = [_normalise(m.content.text) for m in own]
            if self._failed(goal, texts, only_goal=len(in_progress) == 1):
                updates.append({"id": goal.id, "status": "FAILED"})
                continue
            update = self._progress(goal, texts)
            if update is not None:
                updates.append(update)
        return updates

    @staticmethod
    def _failed(goal: Goal, texts: Iterable[str], *, only_goal: bool) -> bool:
        goal_keys = _key_words(goal.name)
        for text in texts:
            for clause in _clauses(text):
                if not _FAILURE.search(clause) or _negated_failure(clause):
                    continue
                if goal_keys & _key_words(clause):
                    return True
                if only_goal and _FAILURE_GENERIC.search(clause):
                    return True
        return False

    @staticmethod
    def _progress(goal: Goal, texts: list[str]) -> dict[str, Any] | None:
        completions = [
            _key_words(clause)
            for text in texts
            for clause in _clauses(text)
            if _COMPLETION.search(clause) and not _NEGATION.search(clause)
        ]
        if not completions:
            return None

        def matches(description: str) -> bool:
            keys = _key_words(description)
            if not keys:
                return False
            needed = min(2, len(keys))
            return any(len(keys & said) >= needed for said in completions)

        if not goal.objectives:
            return {"id": goal.id, "status": "DONE"} if matches(goal.name) else None
        objectives = [
            {
                "description": o.description,
                "completed": o.completed or matches(o.description),
            }
            for o in goal.objectives
        ]
        if all(
            o["completed"] == old.completed
            for o, old in zip(objectives, goal.objectives, strict=True)
        ):
            return None
        update: dict[str, Any] = {"id": goal.id, "objectives": objectives}
        if all(o["completed"] for o in objectives):
            update["status"] = "DONE"
        return update


def _clauses(text: str) -> Iterator[str]:
    """Sentences and but-clauses: "I finished X but not Y" completes X."""
    for sentence in re.split(r"(?<=[.!?;])\s+|\s+but\s+", text):
        if sentence.strip():
            yield sentence


def _negated_failure(clause: str) -> bool:
    return bool(
        re.search(
            r"\b(?:not|never|won't|don't|didn't)\s+(?:\w+\s+)?(?:give|cancel|quit|abandon)",
            clause,
            re.I,
        )
    )


def _user_messages(state: State) -> Iterator[Memory]:
    """People's messages, oldest first, including the message being evaluated."""
    messages = list(state.recent_messages)
    if all(m.id != state.message.id for m in messages):
        messages.append(state.message)
    # Stable sort: providers may list newest first; equal timestamps keep their given order.
    for message in sorted(messages, key=lambda m: m.created_at):
        if message.user_id != state.agent_id and message.content.text.strip():
            yield message


def sentiment(text: str) -> dict[str, Any]:
    """A lexicon score in [-1, 1]: (positive - negative) / (positive + negative + 1)."""
    words = re.findall(r"[a-z']+", _normalise(text).lower())
    positive = negative = 0
    for index, word in enumerate(words):
        polarity = 1 if word in _POSITIVE else -1 if word in _NEGATIVE else 0
        if not polarity:
            continue
        window = words[max(0, index - 2) : index]
        if any(w in _NEGATORS or w.endswith("n't") for w in window):
            polarity = -polarity
        if polarity > 0:
            positive += 1
        else:
            negative += 1
    score = round((positive - negative) / (positive + negative + 1), 3)
    label = "positive" if score > 0.2 else "negative" if score < -0.2 else "neutral"
    return {"score": score, "label": label}

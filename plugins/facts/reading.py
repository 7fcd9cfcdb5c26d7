"""Reading the model's answer into claims with their evidence.

The answer is untrusted input: every note is read on its own, and one that cannot be used is
counted by reason while the rest are kept. A note is either a label and a value copied from
the message ({"about": "home city", "value": "Porto"}: the fact "home city: Porto"), or a
sentence with the words it rests on ({"fact": "Ana lives in Porto", "quote": "I moved to
Porto"}, what the offline rules and elizaOS-style prompts answer). Either way the memory is
handed the person's own words as evidence: the sentence of their message that holds the value
or the quote (`locate`), never the model's copy of it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot import Claim, Memory, parse_json

from .claims import named_naturally, told_name

# Why a note was not proposed (counted in the rejects ledger, as the memory's reasons are).
UNREADABLE_NOTE = "malformed claim"
NOT_ABOUT_THEM = "not about the person"
OF_SOMEONE_HERE = "about someone else here"
TOO_LONG = "too long to be one fact"

# A label names a slot, not a fact; a value is a few words, not a paragraph.
MAX_LABEL_WORDS = 6
MAX_VALUE_WORDS = 16
# What the reading's examples file a stated goal under (the prompt asks for "goal").
GOAL_LABELS = frozenset({"goal", "goals", "aim", "plan"})
_MESSAGE_KEY = re.compile(r"^\s*m?\s*(\d{1,3})\s*$", re.I)


@dataclass(frozen=True)
class Note:
    """One item of the answer: the message it is filed under (1-based; None: unsaid), and
    either a label and value or a sentence and quote."""

    message: int | None
    about: str | None = None
    value: str | None = None
    fact: str | None = None
    quote: str | None = None
    ends: bool = False


@dataclass
class Reading:
    notes: list[Note]
    malformed: int = 0


def read_answer(raw: str) -> Reading | None:
    """The notes of an answer: `{"m1": [...], "m2": [...]}` (what the prompt asks), or a list
    of notes under any key, or a bare list; None when the answer holds no JSON at all."""
    parsed = parse_json(raw)
    if parsed is None:
        return None
    reading = Reading([])
    if isinstance(parsed, Mapping):
        for key, items in parsed.items():
            number = _MESSAGE_KEY.match(str(key))
            index = int(number.group(1)) if number else None
            for item in items if isinstance(items, list) else [items]:
                _add(reading, item, index)
    elif isinstance(parsed, list):
        for item in parsed:
            _add(reading, item, None)
    return reading


def _add(reading: Reading, item: Any, index: int | None) -> None:
    if not isinstance(item, Mapping):
        reading.malformed += 1
        return
    fields = {str(k).strip().casefold(): v for k, v in item.items()}
    text = {k: v.strip() for k, v in fields.items() if isinstance(v, str) and v.strip()}
    about = text.get("about") or text.get("attribute")
    fact = text.get("fact") or text.get("claim")
    value = text.get("value")
    if value is None and fact is None:
        reading.malformed += 1
        return
    reading.notes.append(
        Note(
            message=index if isinstance(index, int) else _int(fields.get("m")),
            about=about,
            value=value,
            fact=fact,
            quote=text.get("quote"),
            ends=fields.get("ends") is True or fields.get("change") == "retract",
        )
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def claims_of(
    reading: Reading,
    *,
    person_id: str,
    names: Sequence[str],
    messages: Sequence[Memory],
    others: Sequence[str] = (),
) -> tuple[list[Claim], Counter[str]]:
    """The claims a reading of one person's `messages` makes about them; and why the other
    notes were not proposed. The memory finds the sentence of theirs each rests on.
    `others`: the names of the other people in the conversation. A fact naming one of them
    ("Tobrin owes Quorra money") is about them too, and one person's word is not enough for
    a fact about another who is right there: it is not proposed."""
    rejected: Counter[str] = Counter()
    claims: list[Claim] = []
    for note in reading.notes:
        claim = _claim(note, person_id, names, messages)
        if (
            not isinstance(claim, str)
            # A name they give themselves is theirs even when someone here has it too
            # ("my name is Tobrin": told apart as "Tobrin (Zedevil)").
            and told_name(named_naturally(claim.text)) is None
            and _names_them(claim.text, others, their=False)
        ):
            claim = OF_SOMEONE_HERE
        if isinstance(claim, str):
            rejected[claim] += 1
        else:
            claims.append(claim)
    rejected[UNREADABLE_NOTE] += reading.malformed
    return claims, +rejected


def _claim(
    note: Note, person_id: str, names: Sequence[str], messages: Sequence[Memory]
) -> Claim | str:
    """The claim a note makes, or why it makes none."""
    filed = (
        messages[note.message - 1] if note.message and 0 < note.message <= len(messages) else None
    )
    if note.value is not None and note.fact is None:
        label, value = _clean(note.about or ""), _clean(note.value)
        if not label or not value or label.casefold() == value.casefold():
            return UNREADABLE_NOTE
        if len(label.split()) > MAX_LABEL_WORDS or len(value.split()) > MAX_VALUE_WORDS:
            return TOO_LONG
        return Claim(
            text=f"{label}: {value}",
            about=person_id,
            quote=value,
            message_id=filed.id if filed is not None else None,
            attribute=label,
            value=value,
            ends=note.ends,
        )
    # "User's name is Ana" (a model shown the console's placeholder name) is their name.
    fact = named_naturally(_clean(note.fact or ""))
    if not _names_them(fact, names):
        # "We'll have 5 people at the outing", "I'm flying from DC": a model's copy of the
        # person's words, or a sentence about something else; whose fact it is is unclear.
        return NOT_ABOUT_THEM
    about = _clean(note.about) if note.about else None
    # A goal the person states is an aim, not a value of an attribute: several can hold.
    goal = about is not None and about.casefold() in GOAL_LABELS
    return Claim(
        text=fact,
        about=person_id,
        quote=note.quote or "",
        message_id=filed.id if filed is not None else None,
        attribute=None if goal else about,
        type="goal" if goal else "fact",
        ends=note.ends,
    )


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(" .;,\"'“”«»")


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def _names_them(fact: str, names: Sequence[str], *, their: bool = True) -> bool:
    """Whether a sentence names the person ("Ana lives in Porto", "Their name is Ana");
    `their`: a sentence starting "Their" is taken as naming them."""
    words = _words(fact)
    if their and words[:1] == ["their"]:
        return True
    for name in names:
        wanted = _words(name)
        size = len(wanted)
        if size and any(words[i : i + size] == wanted for i in range(len(words) - size + 1)):
            return True
    return False

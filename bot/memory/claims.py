"""What a plugin proposes to the memory, and what came of it.

A claim is a fact someone's words support: its text as people will read it, whom it is about,
the words of one message it rests on and that message's id (its speaker is who said it), and,
when the fact is one value of something that changes, what it is about (`attribute`: "home
city", "employer"), so that a newer value replaces it. The memory decides whether to keep it
(evidence.py, the gate); a plugin never writes facts itself.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bot.domain.records import Fact, FactType


@dataclass(frozen=True)
class Claim:
    # The fact as it will be shown ("Sofía lives in Málaga"), in the words of the plugin.
    text: str
    # The account id of whom it is about.
    about: str
    # The words of the message it rests on, copied from it ("vivo en Málaga desde marzo"); a
    # near copy is enough: the memory keeps the sentence of the message it stands for, and
    # checks the claim against that (bot/memory/evidence.py).
    quote: str
    # The message those words are from; its author is who said it. None: one of the messages
    # the claims are proposed with, by `said_by`.
    message_id: str | None = None
    # Who said it, when no message is named (default: the person it is about).
    said_by: str | None = None
    # What the value is about: one current fact per person and attribute.
    attribute: str | None = None
    # The value in the person's own words ("Málaga"), when `text` states one: it must stand in
    # the quote word for word, whatever else the text says.
    value: str | None = None
    type: FactType = "fact"
    # A take-back ("I sold the car"): the attribute's current value stops being true; `text`
    # says what ended. Only its subject's own word ends a fact.
    ends: bool = False


@dataclass
class Learned:
    """The outcome of a proposal: the facts stored, the ids of the facts their new values
    or take-backs closed, and why the claims not kept were not (by reason; the memory has
    counted them in the world's ledger already: a plugin counts only what it did not
    propose, with `count_rejected`)."""

    stored: list[Fact] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    duplicates: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

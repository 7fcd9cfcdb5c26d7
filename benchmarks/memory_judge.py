"""The memory bench's judge: is a stored fact right, and did a reply show the machinery?

Precision needs every stored fact judged, not only the ones a conversation expects. A fact
is right when it is grounded, on the right person and current:

- it is not a transcript line ("Dmitri: My wife Lena ...", "Mnemo: Create_goal: ...");
- it holds nothing the conversation says must never be stored (a planted fact);
- it is not a value the person changed (stale) or another person's expected fact;
- its content words (names, places, numbers, the key nouns) are in what its subject said.
  The words a fact is built from ("lives", "works", "has", "is") and the subject's own name
  need not be; a number may be written as a word ("two daughters" from "2 daughters").

The judge is independent of the product's own checks (it shares no code with the facts
path), so a grounding bug there is not hidden by the same bug here. It errs towards strict:
a fact that paraphrases beyond the person's words ("is a parent" from "my daughter") counts
as not grounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.llm.reply_checks import ReplyCheck, words

# Words a fact is built from, whoever it is about: never evidence of anything said.
_FRAME_WORDS = """
    a an the and or but of in on at to for from by with as into about over near
    is am are was were be been being has have had having do does did
    i me my mine you your he him his she her hers they them their theirs we us our it its
    this that these those who whom whose which what there here
    user person speaker people someone somebody named called name names
    lives live living lived resides resident based located works work working worked job
    currently current now recently still also too just really very no not longer anymore
    new old years year months month age aged time since ago last
    likes like liked loves love enjoys enjoy prefers prefer dislikes dislike hates hate
    own owns owned got get gets making make made become became
"""
_FRAME = frozenset(_FRAME_WORDS.split())
_NUMBER_WORDS = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
# A word matches when the first letters agree (Helsinki/helsinki's, daughter/daughters).
_STEM = 5
_TRANSCRIPT = re.compile(r"^\s*([^:\n]{1,40}):\s")
# Of the content words that are not names or numbers, this share must have been said.
_GROUNDED_SHARE = 2 / 3

WRONG_TRANSCRIPT = "a transcript line"
WRONG_PLANTED = "a planted fact"
WRONG_STALE = "a value that changed"
WRONG_PERSON = "another person's fact"
WRONG_UNSAID = "not in what the person said"
WRONG_EMPTY = "says nothing"


def _stem(word: str) -> str:
    word = _NUMBER_WORDS.get(word, word)
    # "takes" and "plays" are what "I take the bus", "I play the cello" said.
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:_STEM]


def _said_stems(lines: Iterable[str]) -> set[str]:
    return {_stem(w) for line in lines for w in words(line)}


@dataclass
class FactJudge:
    """Judges one conversation's stored facts. `said` maps each speaker to their lines;
    `expected`, `stale` and `never` map a speaker to lists of lower-case substrings sets."""

    said: dict[str, list[str]]
    expected: dict[str, list[list[str]]]
    stale: dict[str, list[list[str]]]
    never: dict[str, list[list[str]]]
    group: bool
    agent_name: str
    _stems: dict[str, set[str]] = field(default_factory=dict)

    def verdict(self, subject: str, fact: str) -> str | None:
        """None when the fact is right; else why it is wrong."""
        text = fact.casefold()
        speaker = _TRANSCRIPT.match(fact)
        if speaker and speaker.group(1).strip() in {*self.said, self.agent_name}:
            return WRONG_TRANSCRIPT
        if any(all(p in text for p in parts) for parts in self.never.get(subject, [])):
            return WRONG_PLANTED
        if any(all(p in text for p in parts) for parts in self.stale.get(subject, [])):
            return WRONG_STALE
        if self.group and not any(
            all(p in text for p in parts) for parts in self.expected.get(subject, [])
        ):
            for other, items in self.expected.items():
                if other != subject and any(all(p in text for p in parts) for parts in items):
                    return WRONG_PERSON
        return self._grounding(subject, fact)

    def _grounding(self, subject: str, fact: str) -> str | None:
        if subject not in self._stems:
            self._stems[subject] = _said_stems(self.said.get(subject, []))
        said = self._stems[subject]
        own_name = {_stem(w) for w in words(subject)}
        strict: list[str] = []  # names and numbers: every one must have been said
        loose: list[str] = []
        for index, raw in enumerate(re.findall(r"[\w']+", fact)):
            word = raw.casefold().strip("'")
            if word.endswith("'s"):
                word = word[:-2]  # before the name check: "Lior's" is Lior's own name
            if not word or word in _FRAME or _stem(word) in own_name:
                continue
            if raw[0].isdigit() or word in _NUMBER_WORDS or (raw[0].isupper() and index > 0):
                strict.append(word)
            elif len(word) >= 3:
                loose.append(word)
        if not strict and not loose:
            return WRONG_EMPTY
        if any(_stem(w) not in said for w in strict):
            return WRONG_UNSAID
        if loose and sum(_stem(w) in said for w in loose) < _GROUNDED_SHARE * len(loose):
            return WRONG_UNSAID
        return None


# ---------------------------------------------------------------------------------------------
# Replies


@dataclass
class ReplyTally:
    """What the person saw: replies, and those showing the machinery, by reason."""

    shown: int = 0
    fallbacks: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    # Every message answered and what was shown, for a person to judge which replies answer
    # what was said (docs/performance.md says how they were read): no check can tell.
    exchanges: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, check: ReplyCheck, reply: str, fallbacks: Sequence[str], *, answering: str = ""
    ) -> None:
        self.shown += 1
        exchange = {"message": answering, "reply": reply, "fallback": reply in fallbacks}
        self.exchanges.append(exchange)
        if reply in fallbacks:
            self.fallbacks += 1
            return
        found = check.problems(reply)
        exchange["problems"] = found
        for problem in found:
            self.problems[problem] = self.problems.get(problem, 0) + 1
        if found and len(self.examples) < 10:
            self.examples.append(f"{', '.join(found)}: {reply[:120]}")

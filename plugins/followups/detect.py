"""What a person said will happen, and when: "my exam is on Friday" -> (your exam, Friday).

Read from the words, with no model call (an evaluator that costs nothing per message): the
time phrase (dates.py) must follow the event directly, in one of the plain shapes people use:

    my exam is on Friday · the interview's tomorrow · our move is next week
    I have an exam on Friday · I've got a job interview tomorrow
    I'm moving house next week · we're flying to Rome in two days
    I need to finish my thesis by Friday · my goal is to run 10k by next week (a deadline)

"The weather is nice today" names no event (the time does not follow the verb), a question
("is the party tonight?") asks rather than tells, and anything else is left alone: a wrong
follow-up is worse than none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from .dates import find_when, sentences

_WORD = r"(?!(?:my|our|the|a|an|i|we)\b)[a-z][\w'-]*"
_TOPIC = rf"(?P<topic>(?:{_WORD}\s+){{0,3}}{_WORD})"
_SCHEDULED = r"(?:\s+(?:on|at|due|scheduled\s+for|set\s+for|planned\s+for|coming\s+up))?"
# Each anchored at the end of what precedes the time phrase.
_SHAPES = (
    # my exam is / the interview's / our move will be
    re.compile(
        rf"(?:^|[^\w'])(?P<owner>my|our|the)\s+{_TOPIC}\s*(?:'s|\s+is|\s+are|\s+will\s+be)"
        rf"{_SCHEDULED}\s*$",
        re.IGNORECASE,
    ),
    # I have an exam / I've got a job interview / we have our final
    re.compile(
        rf"(?:^|[^\w'])(?:i|we)(?:'ve|\s+have)?(?:\s+got)?\s+(?P<owner>a|an|my|our|the)\s+"
        rf"{_TOPIC}{_SCHEDULED}\s*$",
        re.IGNORECASE,
    ),
    # A deadline: I need to finish my thesis by / my goal is to run 10k by
    re.compile(
        r"(?:^|[^\w'])(?:(?:i|we)(?:'ll|\s+need\s+to|\s+have\s+to|\s+must|\s+want\s+to"
        r"|\s+will|\s+plan\s+to|\s+hope\s+to|'m\s+going\s+to|\s+am\s+going\s+to)"
        r"|(?:my|our)\s+(?:goal|plan|aim)\s+is\s+to)"
        r"\s+(?P<deadline>[a-z][\w'-]*(?:\s+[\w'-]+){0,5}?)\s+by\s*$",
        re.IGNORECASE,
    ),
    # I'm moving house / we are flying to Rome
    re.compile(
        rf"(?:^|[^\w'])(?:i'm|i\s+am|we're|we\s+are)\s+(?P<doing>{_WORD}ing(?:\s+{_WORD}){{0,3}})"
        r"\s*$",
        re.IGNORECASE,
    ),
)
# Words that are no event to ask about ("I have a cold today", "my day is tomorrow").
_NOT_EVENTS = frozenset(
    [
        "it",
        "this",
        "that",
        "day",
        "week",
        "time",
        "one",
        "thing",
        "things",
        "cold",
        "headache",
        "feeling",
        "going",
        "doing",
        "being",
        "having",
        "working",
        "something",
        "nothing",
        "everything",
        "weather",
        "be",
        "go",
    ]
)
_OWNERS = {"my": "your", "our": "your", "a": "your", "an": "your", "the": "the"}
# A deadline said back to its speaker: "finish my thesis" -> "finish your thesis".
_SAID_BACK = {"my": "your", "our": "your", "me": "you", "i": "you", "myself": "yourself"}
MAX_TOPIC_CHARS = 60


@dataclass(frozen=True)
class Event:
    """Something a person said will happen: `topic` as the bot says it back ("your exam",
    "moving house"), `key` to tell the same event apart ("exam"), the time phrase, the last
    day it may happen on, and the sentence it was said in."""

    topic: str
    key: str
    phrase: str
    last_day: date
    sentence: str
    # "event" (asked how it went) or "deadline" (asked whether they managed it).
    kind: str = "event"


def find_event(text: str, today: date) -> Event | None:
    """The first event with a time in the text, or None."""
    for sentence in sentences(text.replace("\u2019", "'")):
        if sentence.rstrip().endswith("?"):
            continue
        when = find_when(sentence, today)
        if when is None:
            continue
        found = _event_before(sentence[: when.start])
        if found is None:
            continue
        topic, key, kind = found
        return Event(
            topic=topic,
            key=key,
            phrase=when.phrase,
            last_day=when.last_day,
            sentence=sentence,
            kind=kind,
        )
    return None


def _event_before(before: str) -> tuple[str, str, str] | None:
    for shape in _SHAPES:
        match = shape.search(before)
        if match is None:
            continue
        groups = match.groupdict()
        if groups.get("deadline"):
            words = groups["deadline"].split()
            if words[0].casefold() in _NOT_EVENTS:
                continue
            said_back = " ".join(_SAID_BACK.get(word.casefold(), word) for word in words)
            return said_back[:MAX_TOPIC_CHARS], " ".join(words).casefold(), "deadline"
        if groups.get("doing"):
            words = groups["doing"].split()
            if words[0].casefold() in _NOT_EVENTS:
                continue
            said = " ".join(words)
            return said[:MAX_TOPIC_CHARS], said.casefold(), "event"
        words = groups["topic"].split()
        if not words or words[-1].casefold() in _NOT_EVENTS:
            continue
        key = " ".join(words).casefold()
        owner = _OWNERS[groups["owner"].casefold()]
        return f"{owner} {' '.join(words)}"[:MAX_TOPIC_CHARS], key, "event"
    return None

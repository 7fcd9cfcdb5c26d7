"""When something a person mentions happens: "my exam is on Friday", "the interview is
tomorrow", "I'm moving house next week", "in two days".

Deterministic given `today` (the person's local date): no model, no set-up, so the offline
model follows up too. Only the simple, common forms are read; anything else is left alone
rather than guessed (a follow-up on the wrong day is worse than none). Day arithmetic is
python-dateutil's (`relativedelta` with weekdays), not ours.

`find_event` returns what happens and the last day it may happen on; the follow-up is asked
the day after that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from dateutil.relativedelta import FR, MO, SA, SU, TH, TU, WE, relativedelta, weekday

_WEEKDAYS: dict[str, weekday] = {
    "monday": MO,
    "tuesday": TU,
    "wednesday": WE,
    "thursday": TH,
    "friday": FR,
    "saturday": SA,
    "sunday": SU,
}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "couple of": 2,
    "few": 3,
}
_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = r"(?:\d{1,2}|a|an|one|two|three|four|five|six|seven|couple\s+of|few)"

# The time phrases read, longest first so "day after tomorrow" wins over "tomorrow". A
# weekday in the plural ("on Fridays") is a habit, not an event: not matched.
_WHEN = re.compile(
    r"\b(?:"
    r"(?P<after_tomorrow>(?:the\s+)?day\s+after\s+tomorrow)"
    r"|(?P<tomorrow>tomorrow|tmrw|tmr)"
    r"|(?P<today>today|tonight|this\s+(?:morning|afternoon|evening))"
    r"|(?P<next_weekend>next\s+weekend)"
    r"|(?P<weekend>(?:this|the|at\s+the|on\s+the)\s+weekend)"
    r"|(?P<next_week>next\s+week)"
    r"|(?P<this_week>(?:later\s+)?this\s+week)"
    r"|(?:on\s+|this\s+|next\s+|coming\s+|this\s+coming\s+)?(?P<weekday>" + _DAY + r")(?!s\b)"
    r"|in\s+(?P<count>" + _COUNT + r")\s+(?P<unit>days?|weeks?)"
    r")\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True)
class When:
    """A time phrase found in a sentence and the last day it may mean (local date)."""

    phrase: str
    last_day: date
    # Where the phrase starts in the sentence (what comes before it names the event).
    start: int = 0


def find_when(sentence: str, today: date) -> When | None:
    """The first time phrase of the sentence and the day it ends on, or None."""
    match = _WHEN.search(sentence)
    if match is None:
        return None
    last_day = _last_day(match, today)
    if last_day is None or last_day < today:
        return None
    return When(phrase=" ".join(match.group(0).split()), last_day=last_day, start=match.start())


def _last_day(match: re.Match[str], today: date) -> date | None:
    day: date | None = _relative_day(match, today)
    return day


def _relative_day(match: re.Match[str], today: date) -> Any:
    # dateutil is untyped: `date + relativedelta` is Any to the checker, a date at run time.
    found = {name: value for name, value in match.groupdict().items() if value}
    if "after_tomorrow" in found:
        return today + relativedelta(days=2)
    if "tomorrow" in found:
        return today + relativedelta(days=1)
    if "today" in found:
        return today
    if "next_weekend" in found:
        return today + relativedelta(weeks=1, weekday=SU(+1))
    if "weekend" in found:
        return today + relativedelta(weekday=SU(+1))
    if "next_week" in found:
        # The Sunday ending next week (weeks start on Monday).
        return today + relativedelta(weeks=1, weekday=SU(+1))
    if "this_week" in found:
        return today + relativedelta(weekday=SU(+1))
    if "weekday" in found:
        # The coming one, never today: "my exam is on Friday" said on a Friday means next week.
        return today + relativedelta(days=1, weekday=_WEEKDAYS[found["weekday"].casefold()](+1))
    if "count" in found:
        amount = _NUMBERS.get(" ".join(found["count"].casefold().split()))
        if amount is None:
            amount = int(found["count"])
        if amount <= 0:
            return None
        if found["unit"].casefold().startswith("week"):
            return today + relativedelta(weeks=amount)
        return today + relativedelta(days=amount)
    return None


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE.split(text) if part.strip()]

"""The follow-up question: the LARGE model writes it in character from what the person said
and what Mnemo knows about them; the offline model (and any unusable answer) gets a plain,
friendly line built from the same facts.

A model's answer is untrusted: it is cut to a couple of sentences, and one that shows
template syntax, JSON or our prompt is not sent (counted as a reject) - the plain line is.
"""

from __future__ import annotations

import re
import zlib
from datetime import date
from typing import Any

from bot import OfflineRequest

TEMPLATE_NAME = "followupTemplate"
TASK = "task:followups"
# Where the offline answer finds the follow-up (State.data).
DATA_KEY = "followup"
MAX_CHARS = 280

TEMPLATE = """You are {{agentName}}. {{bio}}

Recently {{name}} told you: "{{said}}"
That was for {{when}}, which is past now.
What you know about {{name}}:
{{facts}}

Write one short, warm message (one or two sentences) to {{name}} {{ask}}, in your own voice.
Name what it was about. Use what you know only if it fits naturally.
Write only the message, nothing else."""

_PLAIN = {
    "event": (
        "Hi {name}! How did {topic} go{when}?",
        "Hey {name}, I've been wondering: how did {topic} go{when}?",
        "{name}, how did {topic} go{when}? I hope it went well!",
    ),
    "deadline": (
        "Hi {name}! Did you manage to {topic}{when}?",
        "Hey {name}, I've been wondering: did you manage to {topic}{when}?",
        "{name}, did you get to {topic}{when}? I hope it worked out!",
    ),
}
_NOT_A_MESSAGE = re.compile(r"\{\{|\}\}|^\s*[\[{]|\bYou are\b|\bWrite one short\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def when_words(event_day: date, asked_on: date, kind: str = "event") -> str:
    """How the event's day is named when asking: "on Friday" ("by Friday" for a deadline)
    within the week, else ""."""
    days = (asked_on - event_day).days
    if 0 < days < 7:
        return f"{'by' if kind == 'deadline' else 'on'} {event_day.strftime('%A')}"
    return ""


def ask_words(kind: str, topic: str) -> str:
    """What the model is asked to ask."""
    if kind == "deadline":
        return f"asking whether they managed to {topic}"
    return f"asking how {topic} went"


def plain_question(data: dict[str, Any]) -> str:
    """A sensible follow-up with no language model, varied by the follow-up's id."""
    lines = _PLAIN["deadline" if data.get("kind") == "deadline" else "event"]
    pick = zlib.crc32(str(data.get("id", "")).encode()) % len(lines)
    when = data.get("when") or ""
    return lines[pick].format(
        name=data.get("name") or "there",
        topic=data.get("topic") or "it",
        when=f" {when}" if when else "",
    )


def offline_question(request: OfflineRequest) -> str | None:
    """The offline model's answer to TASK: reads the follow-up from the state, not the prompt."""
    state = request.state
    if state is None or DATA_KEY not in state.data:
        return None
    return plain_question(state.data[DATA_KEY])


def usable(raw: str, topic_key: str) -> str | None:
    """The model's message, tidied; None when it is no message to send."""
    text = " ".join(raw.strip().strip('"').split())
    if not text or _NOT_A_MESSAGE.search(text):
        return None
    sentences = _SENTENCE_END.split(text)
    text = " ".join(sentences[:3])
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS].rsplit(" ", 1)[0] + "…"
    # It must ask about the event, not about something else.
    if not any(word in text.casefold() for word in topic_key.casefold().split()):
        return None
    return text

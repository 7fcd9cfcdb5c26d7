"""Tolerant parsing of model output.

Models wrap JSON in fences (```json ... ``` and, as the elizaOS fact examples do, the misplaced
json``` ... ```), surround it with prose, return one object where an array was asked for, and
leave trailing commas. The JSON itself is always decoded by `json`; this module only finds where
it starts and, failing a strict decode, retries once with trailing commas removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# A fenced block: the opening fence may carry a language tag, or have it before the backticks
# (the seed's `json```` mistake). Non-greedy, so several blocks are found separately.
_FENCE = re.compile(r"(?:\bjson)?```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?(.*?)```", re.S)
_DECODER = json.JSONDecoder()
_CLOSER_AHEAD = re.compile(r"\s*[\]}]")
# Bracket positions tried per candidate: bounds the work on long, bracket-heavy prose.
_MAX_STARTS = 200


def _candidates(text: str) -> Iterator[str]:
    """Fenced blocks first (what the model meant as JSON), then the whole text."""
    for match in _FENCE.finditer(text):
        yield match.group(1)
    yield text


def _trailing_commas(text: str) -> list[int]:
    """Positions of commas directly before a closing bracket, outside strings."""
    found: list[int] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "," and _CLOSER_AHEAD.match(text, index + 1):
            found.append(index)
    return found


def _decode_at(text: str, start: int) -> tuple[Any, int] | None:
    """Decode one JSON value starting at `start`; returns it and where it ended, or None.

    Strict first; only on failure is it retried without trailing commas.
    """
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
        pass
    commas = _trailing_commas(text[start:])
    if not commas:
        return None
    tail = text[start:]
    repaired = "".join(
        tail[i + 1 : j] for i, j in zip([-1, *commas], [*commas, len(tail)], strict=True)
    )
    try:
        value, end = _DECODER.raw_decode(repaired)
    except json.JSONDecodeError:
        return None
    # `end` indexes the repaired text: map it back past the commas removed before it, so
    # callers can keep scanning the original string.
    offset = 0
    for position in commas:
        if position - offset >= end:
            break
        offset += 1
    return value, start + end + offset


def _values(text: str, openers: str) -> Iterator[tuple[Any, str, int]]:
    """Every JSON value that starts at one of `openers`, in order of position per candidate."""
    for candidate in _candidates(text):
        tried = 0
        for index, char in enumerate(candidate):
            if char not in openers:
                continue
            tried += 1
            if tried > _MAX_STARTS:
                break
            decoded = _decode_at(candidate, index)
            if decoded is not None:
                yield decoded[0], candidate, decoded[1]


def parse_json_array(text: str) -> list[Any] | None:
    """The first JSON array in `text`; a lone object (or a run of objects) becomes a list."""
    if not text:
        return None
    for value, candidate, end in _values(text, "[{"):
        if isinstance(value, list):
            return value
        if isinstance(value, dict):
            # Some models emit one object per claim without the surrounding brackets.
            items: list[Any] = [value]
            position = end
            while True:
                while position < len(candidate) and candidate[position] in " \t\r\n,":
                    position += 1
                if position >= len(candidate) or candidate[position] != "{":
                    break
                decoded = _decode_at(candidate, position)
                if decoded is None or not isinstance(decoded[0], dict):
                    break
                items.append(decoded[0])
                position = decoded[1]
            return items
    return None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (fenced or in prose), or None."""
    if not text:
        return None
    for value, _candidate, _end in _values(text, "{"):
        if isinstance(value, dict):
            return value
    return None


@dataclass(frozen=True)
class ReplyDraft:
    """What the model wants to say, and the action it names (None for no action)."""

    text: str
    action: str | None = None


# Keys a model might use for the reply text when it strays from the template's "text".
_TEXT_KEYS = ("text", "reply", "response", "message", "content")
# Salvage the text of a reply whose JSON is broken (typically an unescaped quote inside it):
# greedy up to the last quote before the action, or else before the closing brace.
_BROKEN_REPLY_WITH_ACTION = re.compile(
    r'"text"\s*:\s*"(?P<text>.*)"\s*,\s*"action"\s*:\s*(?:"(?P<action>[^"]*)"|null)\s*}', re.S
)
_BROKEN_REPLY = re.compile(r'"text"\s*:\s*"(?P<text>.*)"\s*}', re.S)
# A reply cut off mid-string (max_tokens, a dropped connection): everything after the quote.
_TRUNCATED_REPLY = re.compile(
    r'^\W*(?:json)?\W*\{\s*"text"\s*:\s*"(?P<text>(?:[^"\\]|\\.)*)$', re.S
)
_BROKEN_ACTION = re.compile(r'"action"\s*:\s*"(?P<action>[^"]*)"')


def _action(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    action = value.strip()
    if not action or action.upper() == "NONE":
        return None
    return action


def _unescape(text: str) -> str:
    try:
        value = json.loads(f'"{text}"')
    except json.JSONDecodeError:
        return text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
    return value if isinstance(value, str) else text


def _strip_fences(text: str) -> str:
    match = _FENCE.search(text)
    if match and not text[: match.start()].strip() and not text[match.end() :].strip():
        return match.group(1).strip()
    return text.strip()


def _salvage_reply(text: str) -> ReplyDraft | None:
    match = _BROKEN_REPLY_WITH_ACTION.search(text)
    if match:
        return ReplyDraft(_unescape(match.group("text")).strip(), _action(match.group("action")))
    match = _BROKEN_REPLY.search(text)
    if match:
        # The action may come before the text: {"action": "X", "text": "..."}.
        found = _BROKEN_ACTION.search(text[: match.start()])
        action = found.group("action") if found else None
        return ReplyDraft(_unescape(match.group("text")).strip(), _action(action))
    match = _TRUNCATED_REPLY.search(text.strip())
    if match and match.group("text").strip():
        return ReplyDraft(_unescape(match.group("text").rstrip("\\")).strip(), None)
    return None


def parse_reply(text: str) -> ReplyDraft:
    """Read the reply template's {"text", "action"}; plain text is the whole reply.

    The reply text is never lost: malformed JSON is salvaged by pattern, and failing that the
    raw text (without fences) is the reply.
    """
    obj = parse_json_object(text)
    if obj is not None:
        for key in _TEXT_KEYS:
            if isinstance(obj.get(key), str):
                return ReplyDraft(obj[key].strip(), _action(obj.get("action")))
        if "action" in obj:
            return ReplyDraft("", _action(obj.get("action")))
    salvaged = _salvage_reply(text)
    if salvaged is not None:
        return salvaged
    return ReplyDraft(_strip_fences(text), None)


def _normalise_name(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip()).upper()


def _strings(value: Any) -> Iterator[str]:
    """Every string in a parsed JSON value, depth first (names may be nested in objects)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def parse_evaluator_selection(
    text: str, candidates: Sequence[tuple[str, Sequence[str]]]
) -> list[str]:
    """The evaluator names the model chose, canonical and in the order of `candidates`.

    A simile selects its evaluator; case, spaces and hyphens do not matter; unknown names are
    ignored. A parsed array (even an empty one) is the answer; only when no array parses are
    names looked for as whole words in the text.
    """
    lookup: dict[str, str] = {}
    for name, similes in candidates:
        for alias in (name, *similes):
            lookup.setdefault(_normalise_name(alias), name)
    chosen: set[str] = set()
    parsed = parse_json_array(text)
    if parsed is not None:
        for item in _strings(parsed):
            canonical = lookup.get(_normalise_name(item))
            if canonical is not None:
                chosen.add(canonical)
    else:
        for alias, canonical in lookup.items():
            # Underscores and hyphens are interchangeable; spaces are not, so ordinary prose
            # ("no need to update goals") does not select anything.
            words = r"[_\-]".join(re.escape(part) for part in alias.split("_"))
            if re.search(rf"(?<![A-Za-z0-9_]){words}(?![A-Za-z0-9_])", text, re.I):
                chosen.add(canonical)
    return [name for name, _similes in candidates if name in chosen]

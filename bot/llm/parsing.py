"""Tolerant parsing of model output.

Real models (see tests/unit/llm/test_real_model_answers.py) wrap JSON in fences
(```json ... ``` and, as the elizaOS fact examples do, the misplaced json``` ... ```), surround it
with prose, return one object where an array was asked for, and write broken JSON: bare words
(`"action": NONE`, `"id": e5683f6f-...`), single quotes, trailing or missing commas, unescaped
quotes, strings cut off by `max_tokens`. This module finds where the JSON starts and where the
first value ends; strict `json` decodes it when it can, and the `json_repair` library repairs it
when it cannot.

It never falls back to a value nested inside a broken one: when the top-level value is broken
it is repaired as a whole (a list inside a broken object is not the answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import json_repair
from pydantic_core import from_json

# A fenced block: the opening fence may carry a language tag, or have it before the backticks
# (the seed's `json```` mistake). Non-greedy, so several blocks are found separately.
_FENCE = re.compile(r"(?:\bjson)?```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?(.*?)```", re.S)
# An opening fence whose closing fence never came (the answer was cut off).
_OPEN_FENCE = re.compile(r"(?:\bjson)?```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?")
_DECODER = json.JSONDecoder()
# Bracket positions tried per candidate: bounds the work on long, bracket-heavy prose.
_MAX_STARTS = 50
_CLOSERS = {"[": "]", "{": "}"}


def _candidates(text: str) -> Iterator[str]:
    """Fenced blocks first (what the model meant as JSON), then the whole text."""
    found = False
    for match in _FENCE.finditer(text):
        found = True
        yield match.group(1)
    if not found:
        opened = _OPEN_FENCE.search(text)
        if opened is not None:
            yield text[opened.end() :]
    yield text


def _end_of_value(text: str, start: int) -> int | None:
    """Index just past the bracket closing the one at `start` (double-quoted strings skipped),
    or None when it never closes (the value was cut off)."""
    depth = 0
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _looks_like_json(segment: str) -> bool:
    """Brackets around prose (`[see below]`, `{curly}`) are not an answer to repair."""
    inner = segment[1:].rstrip()
    if inner.endswith(("]", "}")):
        inner = inner[:-1]
    inner = inner.strip()
    return not inner or inner[0] in "\"'[{-0123456789" or ":" in inner


def _decode_at(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value starting at `start` and where it ends: strict, else repaired."""
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
        pass
    end = _end_of_value(text, start)
    segment = text[start:end] if end is not None else text[start:]
    if not _looks_like_json(segment):
        return None
    try:
        value = json_repair.loads(segment)
    except (ValueError, RecursionError):  # json_repair raises only on pathological input
        return None
    if not isinstance(value, list | dict) or (not value and len(segment.strip()) > 2):
        return None
    return value, end if end is not None else len(text)


def _first_value(text: str, openers: str) -> tuple[Any, str, int] | None:
    """The first JSON value starting at one of `openers`: fenced blocks first, then the text.

    At each opener a value either decodes (strictly or repaired) or the opener is skipped as
    prose; a value that decodes is the answer, whatever is nested inside it.
    """
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
                return decoded[0], candidate, decoded[1]
    return None


def parse_json(text: str, openers: str = "[{") -> Any | None:
    """The first JSON array or object in `text` (fenced or in prose), repaired; or None."""
    if not text or not text.strip():
        return None
    found = _first_value(text, openers)
    return None if found is None else found[0]


def parse_json_array(text: str) -> list[Any] | None:
    """The first JSON array in `text`; a lone object (or a run of objects) becomes a list."""
    if not text or not text.strip():
        return None
    found = _first_value(text, "[{")
    if found is None:
        return None
    value, candidate, end = found
    if isinstance(value, list):
        return value
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


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (fenced or in prose), or None."""
    value = parse_json(text, "{") if text else None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------------ replies


@dataclass(frozen=True)
class ReplyDraft:
    """What the model wants to say, and the action it names (None for no action).

    `readable` is False when the text had to be dug out of an answer that was neither the
    template's JSON nor plain prose: it may be shown, but it is not the bot's words to store
    (stored, it feeds back into later prompts and the model copies it).
    """

    text: str
    action: str | None = None
    readable: bool = field(default=True, compare=False)


# Keys a model might use for the reply text when it strays from the template's "text".
_TEXT_KEYS = ("text", "reply", "response", "message", "content", "answer")
# An answer meant as JSON: it starts with a bracket or a fence, or names the template's keys.
_JSONISH = re.compile(r"""^\W*(?:json)?\s*(?:```|[\[{])|["'](?:text|action)["']\s*:""", re.I)
# What is left of JSON syntax in a text: quoted keys, brackets at the edges, fences.
_SYNTAX_KEY = re.compile(r"""["']?\b[A-Za-z_]+\b["']?\s*:\s*""")


def _action(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    action = value.strip()
    if not action or action.upper() in {"NONE", "NULL", "NO_ACTION"}:
        return None
    return action


def _strip_fences(text: str) -> str:
    match = _FENCE.search(text)
    if match and not text[: match.start()].strip() and not text[match.end() :].strip():
        return match.group(1).strip()
    return text.strip()


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


def _text_of(obj: dict[str, Any]) -> str | None:
    for key in _TEXT_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            inner = value.strip()
            # A reply wrapped twice: {"text": "{\"text\": \"Hi\"}"}.
            if inner.startswith("{") and _JSONISH.search(inner):
                nested = parse_json_object(inner)
                if nested is not None and isinstance(_text_of(nested), str):
                    return _text_of(nested)
            return inner
    return None


def _scrub(text: str) -> str:
    """Plain words from a JSON-ish answer: no fences, brackets, quotes or `key:` prefixes."""
    text = text.replace("```json", " ").replace("```", " ")
    text = _SYNTAX_KEY.sub(" ", text)
    text = re.sub(r"""[\[\]{}"]|(?<!\w)'|'(?!\w)|\\n""", " ", text)
    words = [w for w in text.split() if w.upper() not in {"NONE", "NULL", ","}]
    return " ".join(words).strip(" ,")


def parse_reply(text: str) -> ReplyDraft:
    """Read the reply template's {"text", "action"}; plain prose is the whole reply.

    The reply never carries JSON syntax: broken JSON is repaired, and failing that the plain
    words are recovered and the draft marked unreadable. An empty answer gives an empty,
    unreadable draft (the caller sends its fallback).
    """
    stripped = (text or "").strip()
    if not stripped:
        return ReplyDraft("", None, readable=False)
    if not _JSONISH.search(stripped):
        return ReplyDraft(stripped, None)
    obj = parse_json_object(stripped)
    if obj is not None:
        said = _text_of(obj)
        if said is not None:
            return ReplyDraft(said, _action(obj.get("action")))
        action = _action(obj.get("action"))
        rest = " ".join(s for k, s in obj.items() if k != "action" and isinstance(s, str))
        return ReplyDraft(_scrub(rest), action, readable=False)
    unfenced = _strip_fences(stripped)
    if not _JSONISH.search(unfenced):
        return ReplyDraft(unfenced, None, readable=bool(unfenced))  # fenced plain text
    return ReplyDraft(_scrub(unfenced), None, readable=False)


def partial_reply_text(answer: str) -> str | None:
    """The words to show of a reply answer still being written, or None when none can be
    shown yet (nothing of the text field yet, or an answer that is not taking a readable
    shape). Never JSON syntax: the text field of the partial JSON object, read by
    pydantic_core's partial JSON parser, or the plain prose so far up to anything that may
    become syntax (a brace or a fence). `parse_reply` reads the finished answer.
    """
    stripped = answer.lstrip()
    if not stripped:
        return None
    if not _JSONISH.search(stripped):
        # Prose so far; a brace or backticks may start JSON or a fence: not shown.
        cut = min((i for i in (stripped.find("{"), stripped.find("`")) if i >= 0), default=None)
        return stripped if cut is None else stripped[:cut]
    start = stripped.find("{")
    if start < 0:
        return None
    body = stripped[start:]
    fence = body.find("```")
    if fence >= 0:
        body = body[:fence]
    try:
        value = from_json(body, allow_partial="trailing-strings")
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    for key in _TEXT_KEYS:
        text = value.get(key)
        if isinstance(text, str):
            # A reply wrapped twice ({"text": "{\"text\": ...}") shows nothing until read whole.
            return None if text.lstrip().startswith("{") else text
    return None


_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*(?=\s)")


def cap_reply(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at the last sentence end that fits.

    Without a sentence end in the second half of the allowance, it is cut at a word boundary
    and marked with an ellipsis.
    """
    if len(text) <= limit:
        return text
    window = text[: limit + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() <= limit]
    if ends and ends[-1] >= limit // 2:
        return text[: ends[-1]].rstrip()
    head = text[: limit - 1]  # room for the ellipsis
    if text[limit - 1 : limit].strip() and " " in head:
        head = head.rsplit(None, 1)[0]  # no half word
    return head.rstrip(" ,;:") + "…"


# ------------------------------------------------------------------------------ selection


def _normalise_name(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip()).upper()


@dataclass(frozen=True)
class Selection:
    """The evaluator selection answer as read: the known names chosen (canonical, in the
    candidates' order), the names that matched nothing, and whether any JSON was found."""

    names: list[str]
    unknown: list[str]
    parsed: bool

    @property
    def named_nothing_known(self) -> bool:
        """Names were given and none is a candidate (`["EVALUATOR_NAME"]` copied from a
        template): unlike an empty array, that is not a decision to run nothing."""
        return not self.names and bool(self.unknown)


def read_evaluator_selection(
    text: str, candidates: Sequence[tuple[str, Sequence[str]]]
) -> Selection:
    """The evaluator names the model chose.

    A simile selects its evaluator; case, spaces and hyphens do not matter; unknown names are
    collected, never taken. A parsed array (even an empty one), or an object holding one under
    "evaluators", is the answer; only when none parses are names looked for as whole words in
    the text.
    """
    lookup: dict[str, str] = {}
    for name, similes in candidates:
        for alias in (name, *similes):
            lookup.setdefault(_normalise_name(alias), name)
    chosen: set[str] = set()
    unknown: list[str] = []
    parsed = parse_json(text)
    if isinstance(parsed, dict):
        parsed = parsed.get("evaluators", parsed.get("names", list(parsed.values())))
    if parsed is not None:
        for item in _strings(parsed):
            canonical = lookup.get(_normalise_name(item))
            if canonical is not None:
                chosen.add(canonical)
            elif item.strip():
                unknown.append(item.strip())
    else:
        for alias, canonical in lookup.items():
            # Underscores and hyphens are interchangeable; spaces are not, so ordinary prose
            # ("no need to update anything") does not select anything.
            words = r"[_\-]".join(re.escape(part) for part in alias.split("_"))
            if re.search(rf"(?<![A-Za-z0-9_]){words}(?![A-Za-z0-9_])", text, re.I):
                chosen.add(canonical)
    names = [name for name, _similes in candidates if name in chosen]
    return Selection(names, unknown, parsed is not None)

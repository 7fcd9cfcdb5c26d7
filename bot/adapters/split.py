"""Splitting long replies to fit a platform's message limit (Discord 2,000, Telegram 4,096).

A reply is cut on the biggest boundary that works: between paragraphs, then lines, then
sentences, then words, and only as a last resort inside a word. A ``` code block is never cut
in the middle of a part: it moves whole to the next part, and a block that alone exceeds the
limit is cut between its lines with the fence closed and reopened in every part, so each part
renders as code on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

DISCORD_LIMIT = 2000
TELEGRAM_LIMIT = 4096

_FENCE = re.compile(r"^[ \t]*```")
_CLOSE = "```"
# Boundaries from biggest to smallest; each keeps its separator on the left-hand piece, so
# joining the pieces gives back the text exactly.
_BOUNDARIES: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?<=\n)[ \t]*\n"),  # a blank line: paragraphs
    re.compile(r"(?<=\n)"),  # lines
    re.compile(r"(?<=[.!?…])[\"')\]]*\s+"),  # sentences
    re.compile(r"\s+"),  # words
)


@dataclass(frozen=True)
class _Block:
    text: str
    code: bool


def split_message(text: str, limit: int) -> list[str]:
    """Parts of `text`, each at most `limit` characters and none empty, in order."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if len(text) <= limit:
        return [text] if text.strip() else []
    pieces: list[str] = []
    for block in _blocks(text):
        if block.code:
            pieces.extend(_split_code(block.text, limit))
        else:
            pieces.extend(_split_prose(block.text, limit, 0))
    return _pack(pieces, limit)


def _blocks(text: str) -> list[_Block]:
    """Prose and fenced code, in order; an unclosed fence runs to the end of the text."""
    blocks: list[_Block] = []
    prose: list[str] = []
    code: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if code is None:
            if _FENCE.match(line) and not _inline_code(line):
                if prose:
                    blocks.append(_Block("".join(prose), code=False))
                    prose = []
                code = [line]
            else:
                prose.append(line)
        else:
            code.append(line)
            if _FENCE.match(line):
                blocks.append(_Block("".join(code), code=True))
                code = None
    if code is not None:
        blocks.append(_Block("".join(code), code=True))
    if prose:
        blocks.append(_Block("".join(prose), code=False))
    return blocks


def _inline_code(line: str) -> bool:
    """```x``` on one line opens nothing: it is code inside a line of prose."""
    return line.strip().count("```") >= 2


def _split_prose(text: str, limit: int, level: int) -> list[str]:
    """Pieces of at most `limit`, cut on the biggest boundary that makes them fit."""
    if len(text) <= limit:
        return [text]
    if level == len(_BOUNDARIES):
        return [text[i : i + limit] for i in range(0, len(text), limit)]
    pieces: list[str] = []
    for chunk in _cut(text, _BOUNDARIES[level]):
        if len(chunk) > limit:
            pieces.extend(_split_prose(chunk, limit, level + 1))
        else:
            pieces.append(chunk)
    # Merge here, at this level, so a part ends on this boundary rather than a smaller one.
    return _pack(pieces, limit, finish=lambda part: part)


def _cut(text: str, boundary: re.Pattern[str]) -> list[str]:
    chunks: list[str] = []
    start = 0
    for match in boundary.finditer(text):
        if match.end() > start:
            chunks.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        chunks.append(text[start:])
    return chunks


def _split_code(block: str, limit: int) -> list[str]:
    """A code block as one piece, or, when too long, between lines with fences in each part."""
    if len(block) <= limit:
        return [block]
    lines = block.splitlines()
    opening = lines[0].strip()
    closed = len(lines) > 1 and _FENCE.match(lines[-1]) is not None
    body = "\n".join(lines[1:-1] if closed else lines[1:])
    # Each part is `opening\nbody\n```\n`: three newlines besides the fences and the body.
    room = limit - len(opening) - len(_CLOSE) - 3
    if room < 1:
        # A limit smaller than the fences themselves: plain cutting is all that is left.
        return _split_prose(block, limit, 0)
    chunks = _pack(_split_prose(body + "\n", room, 1), room, finish=lambda part: part)
    return [f"{opening}\n{chunk.rstrip(chr(10))}\n{_CLOSE}\n" for chunk in chunks if chunk.strip()]


def _pack(
    pieces: list[str], limit: int, finish: Callable[[str], str] = lambda part: part.strip()
) -> list[str]:
    """Join consecutive pieces while they fit; `finish` tidies each part (not empty after)."""
    parts: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) > limit:
            parts.append(current)
            current = ""
        current += piece
    if current:
        parts.append(current)
    return [done for done in (finish(part) for part in parts) if done]

"""Long replies split at the platform's limit, on the best boundary, with code blocks intact."""

from __future__ import annotations

import re

import pytest

from bot.adapters.split import DISCORD_LIMIT, TELEGRAM_LIMIT, split_message

FENCE = "```"


def sentence(n: int) -> str:
    return f"This is sentence number {n} of the reply."


def paragraph(n: int, sentences: int = 8) -> str:
    return " ".join(sentence(n * 100 + i) for i in range(sentences))


def code_block(lines: int, language: str = "python") -> str:
    body = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(lines))
    return f"{FENCE}{language}\n{body}\n{FENCE}"


def letters(text: str) -> str:
    """The text without whitespace and fences: what a split must neither lose nor reorder."""
    return re.sub(r"```\w*|\s+", "", text)


def fences_balanced(part: str) -> bool:
    return len(re.findall(r"^[ \t]*```", part, flags=re.MULTILINE)) % 2 == 0


# (name, text, limit, expected number of parts or None when only the invariants matter)
CASES = [
    ("short text is one part", "Hello there.", 100, 1),
    ("exactly the limit", "x" * 50, 50, 1),
    # Paragraphs of ~335 characters: two per part.
    ("paragraphs", "\n\n".join(paragraph(i) for i in range(6)), 700, 3),
    ("lines", "\n".join(sentence(i) for i in range(60)), 500, None),
    ("sentences in one paragraph", paragraph(1, sentences=60), 400, None),
    ("one very long word", "a" * 250, 100, 3),
    ("discord 5,000 characters", paragraph(2, sentences=120), DISCORD_LIMIT, 3),
    ("telegram 6,000 characters", paragraph(3, sentences=145), TELEGRAM_LIMIT, 2),
    (
        "code block kept whole",
        paragraph(4, 10) + "\n\n" + code_block(10) + "\n\n" + paragraph(5, 10),
        900,
        None,
    ),
    ("code block longer than the limit", "Here:\n" + code_block(120) + "\nDone.", 600, None),
    ("unclosed code block", "Look:\n```\n" + "print(1)\n" * 200, 300, None),
    ("emoji and accents", "Café ☕ déjà vu. " * 300, 1000, None),
]


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_parts_fit_are_not_empty_and_lose_no_words(
    text: str, limit: int, expected: int | None
) -> None:
    parts = split_message(text, limit)

    assert all(0 < len(part) <= limit for part in parts)
    assert all(part.strip() for part in parts)
    if expected is not None:
        assert len(parts) == expected
    # Fences added to reopen a split code block aside, nothing is lost or reordered.
    assert letters("\n".join(parts)) == letters(text)


@pytest.mark.parametrize(
    ("text", "limit", "cut_after"),
    [
        # A part ends where a paragraph ends, even when a sentence more would still fit.
        (paragraph(1, 5) + "\n\n" + paragraph(2, 5), 300, paragraph(1, 5)),
        # Lines next: no part ends in the middle of a line.
        ("\n".join(sentence(i) for i in range(20)), 200, sentence(4)),
        # Then sentences: a part ends with a full stop.
        (paragraph(7, 30), 300, sentence(706)),
    ],
    ids=["paragraph", "line", "sentence"],
)
def test_cuts_on_the_biggest_boundary(text: str, limit: int, cut_after: str) -> None:
    first = split_message(text, limit)[0]

    assert first.endswith(cut_after)


def test_a_code_block_that_fits_is_never_cut() -> None:
    block = code_block(20)
    text = paragraph(1, 12) + "\n\n" + block + "\n\n" + paragraph(2, 4)
    parts = split_message(text, 1200)

    assert any(block in part for part in parts)
    assert all(fences_balanced(part) for part in parts)


def test_a_code_block_longer_than_the_limit_is_fenced_in_every_part() -> None:
    text = "Here is the script:\n" + code_block(150, language="js") + "\nThat's it."
    parts = split_message(text, 800)
    code_parts = [part for part in parts if "value_" in part]

    assert len(code_parts) > 2
    for part in code_parts:
        assert fences_balanced(part)
        assert "```js\n" in part  # the language is kept, so each part is highlighted
    assert all(len(part) <= 800 for part in parts)
    # Every code line arrives whole in exactly one part.
    lines = [f"    value_{i} = compute({i})  # step {i}" for i in range(150)]
    for line in lines:
        assert sum(line in part.split("\n") for part in parts) == 1


@pytest.mark.parametrize("text", ["", "   ", "\n\n\n"])
def test_nothing_to_say_gives_no_parts(text: str) -> None:
    assert split_message(text, 10) == []


def test_inline_code_on_one_line_is_prose() -> None:
    text = "```x``` is inline. " * 40
    parts = split_message(text, 200)

    assert all(len(part) <= 200 for part in parts)
    assert "".join(parts).count("```x```") == 40

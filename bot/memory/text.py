"""The one way the memory reads text: folded for comparison, split into words and sentences.

Every check of the memory compares what a model wrote with what a person said, in any language
and any script, so both sides go through the same folding: Unicode NFKC (full-width letters and
compatibility forms become plain ones), case folded, accents dropped ("Málaga" = "malaga",
"Zürich" = "zurich"), and every run of punctuation, symbols or spaces read as one space. Words
are runs of letters, marks and digits (`regex`'s Unicode classes); scripts written without
spaces (Chinese, Japanese, Thai) are compared as folded text, never word by word.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import regex

# A word: letters (with their combining marks) and digits, kept together with an inner
# apostrophe or hyphen ("don't", "Saint-Étienne").
_WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+(?:['’\-][\p{L}\p{M}\p{N}]+)*")
# What separates words once folded: anything that is not a letter, mark or digit.
_NOT_WORD = regex.compile(r"[^\p{L}\p{M}\p{N}]+")
# A sentence ends at a terminal mark (any script's: . ! ? 。 ！ ？ । ...) followed by a space, or
# at a line break; CJK terminals end one even with no space after them.
_SENTENCE_END = regex.compile(r"(?<=\p{Sentence_Terminal}['\"”’»)\]]*)\s+|\s*\n+\s*|(?<=[。！？])")
# The marks that make a sentence a question, in the scripts people write in.
_QUESTION_MARKS = ("?", "？", "¿", ";", "؟", "՞", "፧")
_DIGITS = regex.compile(r"\p{N}+")


def fold(text: str) -> str:
    """`text` as every memory check compares it: NFKC, case folded, no accents, one space
    between words, no punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    # Accents are combining marks once decomposed; letters of other scripts stay letters.
    decomposed = unicodedata.normalize("NFD", folded)
    bare = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    return " ".join(_NOT_WORD.sub(" ", unicodedata.normalize("NFC", bare)).split())


def words(text: str) -> list[str]:
    """The words of `text`, as written (not folded)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text))


def folded_words(text: str) -> list[str]:
    return fold(text).split()


def numbers(text: str) -> list[str]:
    """The runs of digits in `text`, in any script's digits ("١٢" is 12), as ASCII digits."""
    found = []
    for run in _DIGITS.findall(unicodedata.normalize("NFKC", text)):
        try:
            found.append(str(int(run)))
        except ValueError:  # a digit-like numeral with no decimal value (Roman, fractions)
            found.append(run)
    return found


def sentences(text: str) -> list[str]:
    """The sentences of a message, in order, as written."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def is_question(sentence: str) -> bool:
    stripped = sentence.strip()
    return stripped.endswith(_QUESTION_MARKS) or stripped.startswith(("¿", "؟"))


@dataclass(frozen=True)
class Found:
    """Where folded words were found in a folded text: the word positions [start, end)."""

    start: int
    end: int


def find_words(needle: str, haystack: str) -> Found | None:
    """Where the words of `needle` stand together, in order, in `haystack` (both folded);
    None when they do not. For text with no spaces (CJK) a folded substring is enough."""
    wanted, text = folded_words(needle), folded_words(haystack)
    if not wanted:
        return None
    size = len(wanted)
    for start in range(len(text) - size + 1):
        if text[start : start + size] == wanted:
            return Found(start, start + size)
    # Scripts without spaces: a "word" is a whole clause; compare the folded characters.
    joined_needle, joined_text = "".join(wanted), "".join(text)
    if _unspaced(joined_needle) and joined_needle in joined_text:
        return Found(0, len(text))
    return None


def _unspaced(text: str) -> bool:
    """Whether `text` is mostly in a script written without spaces between words."""
    unspaced = sum(1 for c in text if regex.match(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}]", c))
    return unspaced * 2 >= len(text) > 0


_MENTIONS = regex.compile(r"^\s*(?:@\S+\s*)+")


def written_as_turn(line: str, names: Iterable[str]) -> bool:
    """Whether a line of text reads as the turn of one of `names` in a transcript
    ("Tobrin: ...", "@mnemo_bot Mnemo: ...", "SYSTEM：..."): what stands before its first
    colon, @mentions in front skipped, is one of the names (all folded alike; a full-width
    colon is one, by NFKC)."""
    head, colon, _ = unicodedata.normalize("NFKC", line).partition(":")
    if not colon:
        return False
    return fold(_MENTIONS.sub("", head)) in {fold(name) for name in names if fold(name)}

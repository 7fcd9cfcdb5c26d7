"""Whether two near-identical claims state different values.

An embedding puts "Sarah has 2 kids" and "Sarah has 3 kids" 0.028 apart, closer than many true
paraphrases ("works as a nurse" / "is a nurse": 0.043). The difference that matters is in
the numbers, dates and proper names, so those are compared as words: a claim whose values
differ is a change, never a duplicate.
"""

from __future__ import annotations

import re

_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "  # noqa: SIM905
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update(a="1", an="1", single="1", no="0", none="0", twice="2", once="1")
# Capitalised words that are not names (sentence starts are names often enough in claims,
# which begin with the subject's name).
_NOT_NAMES = frozenset({"i", "i'm", "i've", "i'd", "i'll", "the", "a", "an", "my", "their"})
_TOKEN = re.compile(r"[\w'][\w'.:/-]*")


def _words(text: str) -> list[str]:
    # "Sam's home" names Sam as "Sam lives" does.
    tokens = (token.strip(".'") for token in _TOKEN.findall(text.replace("\u2019", "'")))
    return [token.removesuffix("'s") for token in tokens if token]


def _normal(word: str) -> str:
    folded = word.casefold()
    return _NUMBER_WORDS.get(folded, folded)


def values_in(text: str) -> frozenset[str]:
    """The numbers (digits or words up to twenty), and the capitalised words, normalised."""
    found = set()
    for word in _words(text):
        folded = word.casefold()
        if any(ch.isdigit() for ch in word):
            found.add(folded)
        elif folded in _NUMBER_WORDS and folded not in {"a", "an", "no", "once"}:
            found.add(_NUMBER_WORDS[folded])
        elif word[:1].isupper() and folded not in _NOT_NAMES:
            found.add(folded)
    return frozenset(found)


def state_different_values(first: str, second: str) -> bool:
    """True when a value of one claim is missing from the other ("2 kids" / "3 kids",
    "May 3" / "June 3"); "two kids" and "2 kids" state the same value."""
    first_words = {_normal(w) for w in _words(first)}
    second_words = {_normal(w) for w in _words(second)}
    return not (values_in(first) <= second_words and values_in(second) <= first_words)

"""Claims copied from the prompt's examples are not facts about anyone.

A small real model (Qwen2.5-Coder-0.5B, `mnemo bench memory`) answered "Sam has 2 kids" for a
Sam who never spoke of children, and "Priya has a dog named Comet" for a Priya with a *cat*
named Comet: both are the examples' claims with the person's name put in. A claim is taken for
such a copy when, without the people's names, it says what an example claim says, and the
messages it was extracted from lack one of its words. Said in the conversation ("I have 2
kids"), the same claim is kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

import bm25s

from bot import EvaluatorExample, parse_json

# Why a claim was not used: counted per reason by the model handle's `reject`.
COPIED_EXAMPLE = "claim copies the prompt's example"

_PLACEHOLDER = re.compile(r"\{\{\w+\}\}(?:'s)?")
# The claims' relation words, which a person rarely says as the claim does ("I moved to
# Berlin" -> "lives in Berlin"): what must have been said is the rest ("berlin", "dog").
_RELATION_WORDS = frozenset(
    {"lives", "live", "living", "works", "work", "working", "named", "called", "thinks"}
)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _without(text: str, names: Iterable[str]) -> str:
    for name in sorted({n for n in names if n.strip()}, key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(name)}(?:'s)?(?!\w)", " ", text, flags=re.IGNORECASE)
    return _normalise(text)


def _words(text: str) -> frozenset[str]:
    [tokens] = bm25s.tokenize(
        [text], lower=True, stopwords="en_plus", return_ids=False, show_progress=False
    )
    return frozenset(tokens) - _RELATION_WORDS


def example_claims(examples: Sequence[EvaluatorExample]) -> frozenset[str]:
    """What the examples' claims say, their people left out ("has 2 kids")."""
    found: set[str] = set()
    for example in examples:
        answer = parse_json(example.outcome)
        items = answer.get("claims") if isinstance(answer, dict) else answer
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("claim"), str):
                found.add(_normalise(_PLACEHOLDER.sub(" ", item["claim"])))
    return frozenset(found)


def copies_an_example(
    claim: str, names: Iterable[str], said: Sequence[str], examples: frozenset[str]
) -> bool:
    """Whether `claim` is an example's claim that the messages `said` do not support;
    `names` are the people's names (the subject's among them)."""
    names = list(names)
    if _without(claim, names) not in examples:
        return False
    heard = _words(" ".join(said))
    return not _words(_without(claim, names)) <= heard

"""The sentiment plugin's offline answer: a lexicon score, when no language model is set."""

from __future__ import annotations

import json
import re
from typing import Any

from bot import OfflineRequest
from bot.offline import normalise


def _words(text: str) -> frozenset[str]:
    """A word list written as prose: easier to read and extend than a list of literals."""
    return frozenset(text.split())


_POSITIVE = _words("""
    good great love loved lovely awesome amazing happy glad excited fantastic wonderful nice
    thanks thank excellent proud fun enjoy enjoyed cool perfect yay beautiful best brilliant
    delighted grateful thrilled like liked win won relieved
    """)
_NEGATIVE = _words("""
    bad terrible awful hate hated sad angry upset annoyed frustrated horrible worst sick tired
    stressed worried anxious disappointed depressed lonely hurt pain sucks boring miserable ugh
    scared afraid lost fail failed broke broken exhausted
    """)
_NEGATORS = _words("not no never")


def sentiment(text: str) -> dict[str, Any]:
    """A lexicon score in [-1, 1]: (positive - negative) / (positive + negative + 1)."""
    words = re.findall(r"[a-z']+", normalise(text).lower())
    positive = negative = 0
    for index, word in enumerate(words):
        polarity = 1 if word in _POSITIVE else -1 if word in _NEGATIVE else 0
        if not polarity:
            continue
        window = words[max(0, index - 2) : index]
        if any(w in _NEGATORS or w.endswith("n't") for w in window):
            polarity = -polarity
        if polarity > 0:
            positive += 1
        else:
            negative += 1
    score = round((positive - negative) / (positive + negative + 1), 3)
    label = "positive" if score > 0.2 else "negative" if score < -0.2 else "neutral"
    return {"score": score, "label": label}


def answer(request: OfflineRequest) -> str | None:
    if request.state is None:
        return None
    return json.dumps(sentiment(request.state.message.content.text))

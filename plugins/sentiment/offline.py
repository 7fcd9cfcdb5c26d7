"""The sentiment plugin's offline answer (the `model` scorer without a language model): the
same VADER score the default scorer records."""

from __future__ import annotations

import json
from typing import Any

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from bot import OfflineRequest


def sentiment(text: str, analyzer: SentimentIntensityAnalyzer | None = None) -> dict[str, Any]:
    """VADER's compound score in [-1, 1], labelled on the plugin's scale."""
    # Imported here: evaluator.py imports this module for its offline answer.
    from .evaluator import vader_score

    found = vader_score(analyzer or SentimentIntensityAnalyzer(), text)
    return {"score": found.score, "label": found.label}


def answer(request: OfflineRequest) -> str | None:
    if request.state is None:
        return None
    return json.dumps(sentiment(request.state.message.content.text))

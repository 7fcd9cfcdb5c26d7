"""Sentiment: a custom evaluator written from scratch, as an example of how to write one.

After every message a person writes (also in groups, where the bot only overhears), the
SENTIMENT evaluator asks the model how positive or negative it was and keeps a running
sentiment per person and room in its own MongoDB collection, `sentiment`. The admin commands
show it through `sentiment_summary()` and `format_summary()`.

Settings (environment or `.env`): `MNEMO_SENTIMENT_MODEL_CLASS` (small | large, default
small), `MNEMO_SENTIMENT_MIN_CHARS` (default 3). Disable with
`MNEMO_DISABLED_PLUGINS=sentiment`.
"""

from __future__ import annotations

from bot.plugin_api import Plugin, PluginContext

from .evaluator import (
    SENTIMENT_TEMPLATE,
    SentimentScore,
    parse_sentiment,
    sentiment_evaluator,
)
from .settings import SentimentSettings
from .store import (
    COLLECTION,
    SentimentRow,
    ensure_indexes,
    format_summary,
    sentiment_summary,
)


async def setup(ctx: PluginContext) -> None:
    # Indexes are created at start-up (idempotent), not on the first message.
    await ensure_indexes(ctx.knowledge.store.db[COLLECTION])


plugin = Plugin(
    name="sentiment",
    description="Tracks each person's running sentiment per room.",
    evaluators=[sentiment_evaluator],
    settings_model=SentimentSettings,
    setup=setup,
)

__all__ = [
    "COLLECTION",
    "SENTIMENT_TEMPLATE",
    "SentimentRow",
    "SentimentScore",
    "SentimentSettings",
    "format_summary",
    "parse_sentiment",
    "plugin",
    "sentiment_summary",
]

"""Sentiment: a custom evaluator written from scratch, as an example of how to write one.

After every message a person writes (also in groups, where the bot only overhears), the
SENTIMENT evaluator scores how positive or negative it was (VADER by default, no model call)
and keeps a running sentiment per person and room in its own MongoDB collection
(`plugin_sentiment_scores`). The `/sentiment` command shows it to admins on every surface.

Settings (environment or `.env`): `MNEMO_SENTIMENT_SCORER` (vader | model, default vader),
`MNEMO_SENTIMENT_MODEL_CLASS` (small | large, default small; the `model` scorer's),
`MNEMO_SENTIMENT_MIN_CHARS` (default 3). Disable with `MNEMO_DISABLED_PLUGINS=sentiment`.
"""

from __future__ import annotations

from typing import Any

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from bot import Command, CommandContext, Plugin, PluginContext

from .evaluator import (
    SENTIMENT_TEMPLATE,
    SentimentScore,
    parse_sentiment,
    sentiment_evaluator,
)
from .settings import SentimentSettings
from .store import (
    COLLECTION,
    LEGACY_COLLECTION,
    SentimentRow,
    ensure_indexes,
    format_summary,
    sentiment_summary,
)


async def setup(ctx: PluginContext) -> SentimentIntensityAnalyzer:
    """Indexes, adopted tallies; returns VADER's analyzer, loaded once (ctx.plugin_state)."""
    scores = ctx.collections[COLLECTION]
    # Indexes are created at start-up (idempotent), not on the first message.
    await ensure_indexes(scores)
    # Tallies an older version kept outside the plugin's namespace move in once.
    moved = await ctx.collections.adopt(COLLECTION, legacy=LEGACY_COLLECTION)
    if moved:
        ctx.log.info("moved %d tallies from the `%s` collection", moved, LEGACY_COLLECTION)
    return SentimentIntensityAnalyzer()


async def summary(ctx: CommandContext) -> str:
    """`/sentiment`: everyone's running sentiment in this world (admins)."""
    rows = await sentiment_summary(
        ctx.collections[COLLECTION], ctx.conversations, world_id=ctx.world_id
    )
    return format_summary(rows)


async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    """The person's tallies in this world go with everything else about them."""
    found = await ctx.collections[COLLECTION].delete_many(
        {"user_id": person_id, "world_id": world_id}
    )
    return found.deleted_count


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, Any]:
    rows = await sentiment_summary(
        ctx.collections[COLLECTION], ctx.conversations, world_id=world_id, user_id=person_id
    )
    return {
        "sentiment": [
            {"room": row.room_name, "messages": row.count, "mean": round(row.mean, 3)}
            for row in rows
        ]
    }


sentiment_command = Command(
    name="sentiment",
    description="Admins: each person's running sentiment here",
    handler=summary,
    admin_only=True,
    after_learning=True,
)

plugin = Plugin(
    name="sentiment",
    description="Tracks each person's running sentiment per room.",
    evaluators=[sentiment_evaluator],
    commands=[sentiment_command],
    settings_model=SentimentSettings,
    setup=setup,
    stores=[COLLECTION],
    forget=forget,
    export=export,
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
    "sentiment_command",
    "sentiment_summary",
]

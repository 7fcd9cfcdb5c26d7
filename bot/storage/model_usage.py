"""The `model_usage` collection: model calls and tokens per world and model, for `/stats`.

One document per (world, model), grown with `$inc`: every process adds what it spent, so the
totals are the deployment's and survive restarts. Written in batches (bot.ops.spend), never
once per model call: a message's reply and evaluation cost no round trip for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pymongo import ASCENDING, IndexModel, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import stable_id
from bot.llm.accounting import TaskUsage


class ModelUsage:
    """Per-world model use: added to in batches, read per world."""

    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        "model_usage": [IndexModel([("world_id", ASCENDING)], name="world")]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db.model_usage

    async def add(self, usage: Mapping[tuple[str, str], TaskUsage]) -> None:
        """Add calls and tokens by (world, model), in one round trip."""
        writes = [
            UpdateOne(
                {"_id": stable_id("model-usage", world_id, model)},
                {
                    "$setOnInsert": {"world_id": world_id, "model": model},
                    "$inc": {
                        "calls": spent.calls,
                        "prompt_tokens": spent.prompt_tokens,
                        "completion_tokens": spent.completion_tokens,
                        "counted_calls": spent.counted_calls,
                    },
                },
                upsert=True,
            )
            for (world_id, model), spent in sorted(usage.items())
            if spent.calls
        ]
        if writes:
            await self._collection.bulk_write(writes, ordered=False)

    async def in_world(self, world_id: str) -> dict[str, TaskUsage]:
        """What was spent in a world, by model."""
        found: dict[str, TaskUsage] = {}
        async for document in self._collection.find({"world_id": world_id}):
            found[str(document["model"])] = TaskUsage(
                calls=int(document.get("calls") or 0),
                prompt_tokens=int(document.get("prompt_tokens") or 0),
                completion_tokens=int(document.get("completion_tokens") or 0),
                counted_calls=int(document.get("counted_calls") or 0),
            )
        return found

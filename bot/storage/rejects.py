"""The `fact_rejects` collection: the claims not stored, counted by world and reason.

A model's claim that fails grounding (bot/memory/grounding.py) or attribution is dropped,
never stored; this ledger is what makes those drops visible to an operator (`/stats`,
`mnemo doctor`) and to `mnemo bench memory`. Only integer counts are kept, never the claims
themselves: a rejected claim is by definition something nobody said, and it must not be kept
anywhere about anyone. One document per (world, reason), grown with `$inc`, so every process
adds to the same totals and they survive restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pymongo import ASCENDING, IndexModel, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import stable_id
from bot.i18n import SOURCE_TEXTS, Texts

COLLECTION = "fact_rejects"


class FactRejects:
    """Counts of claims not stored, per world and reason."""

    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        COLLECTION: [IndexModel([("world_id", ASCENDING)], name="world")]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db[COLLECTION]

    async def add(self, world_id: str, counts: Mapping[str, int]) -> None:
        """Add these counts by reason, in one round trip."""
        writes = [
            UpdateOne(
                {"_id": stable_id("fact-rejects", world_id, reason)},
                # $set, not $setOnInsert (which nx-27017 ignores): the same values every time.
                {"$set": {"world_id": world_id, "reason": reason}, "$inc": {"count": count}},
                upsert=True,
            )
            for reason, count in sorted(counts.items())
            if count > 0
        ]
        if writes:
            await self._collection.bulk_write(writes, ordered=False)

    async def counts(self, world_id: str | None = None) -> dict[str, int]:
        """Claims not stored by reason, in a world or (None) in every world, most first."""
        query = {} if world_id is None else {"world_id": world_id}
        totals: dict[str, int] = {}
        async for document in self._collection.find(query):
            reason = str(document.get("reason") or "unknown")
            totals[reason] = totals.get(reason, 0) + int(document.get("count") or 0)
        return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def describe_rejects(counts: Mapping[str, int], texts: Texts = SOURCE_TEXTS) -> str:
    """One line: "Claims not stored: 3 (2 not said by its speaker, 1 a transcript line)"
    (the reasons as the memory names them, in English)."""
    total = sum(counts.values())
    if not total:
        return texts.gettext("Claims not stored: none")
    reasons = ", ".join(f"{count} {reason}" for reason, count in counts.items() if count)
    return texts.gettext("Claims not stored: {count} ({reasons})").format(
        count=total, reasons=reasons
    )

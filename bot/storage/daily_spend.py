"""The `daily_spend` collection: each world's and each person's model spend today, shared by
every process of a deployment, for the daily caps (bot/llm/caps.py).

One document per (world or person, UTC day), `_id` "<hash>:<day>", grown with one atomic
`$inc` that returns the total after (a process adds what it spent and reads everyone's in one
round trip); and one per room told that a cap was reached that day, `_id` "told:<hash>:<day>",
written once (its insert is the "first time" test across processes). Subjects are hashed
(sha256 of scope and id), so no document names the person it counts; everything is dropped
once its day is over. Kept out of `/forgetme`'s reach on purpose: forgetting oneself must not
reset a cap (the counts are a day's numbers, about no one by name).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from typing import ClassVar

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from bot.llm.caps import CapKey, Spent

COLLECTION = "daily_spend"


def _hashed(key: CapKey) -> str:
    return hashlib.sha256(f"{key[0]}:{key[1]}".encode()).hexdigest()[:32]


class DailySpendStore:
    """Implements `SpendCounter` (bot/llm/caps.py) on MongoDB."""

    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        COLLECTION: [IndexModel([("day", ASCENDING)], name="day")]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db[COLLECTION]

    async def add(self, day: str, spent: Mapping[CapKey, Spent]) -> dict[CapKey, Spent]:
        async def one(key: CapKey, amount: Spent) -> tuple[CapKey, Spent]:
            document = await self._collection.find_one_and_update(
                {"_id": f"{_hashed(key)}:{day}"},
                {
                    "$inc": {"tokens": amount.tokens, "micro_usd": amount.micro_usd},
                    # Written on every add (nx-27017 ignores $setOnInsert); the same value.
                    "$set": {"day": day},
                },
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
            found = document or {}
            return key, Spent(int(found.get("tokens") or 0), int(found.get("micro_usd") or 0))

        return dict(await asyncio.gather(*(one(key, amount) for key, amount in spent.items())))

    async def first_notice(self, day: str, key: CapKey, room_id: str) -> bool:
        room = hashlib.sha256(room_id.encode()).hexdigest()[:16]
        told = f"told:{_hashed(key)}:{room}:{day}"
        try:
            await self._collection.insert_one({"_id": told, "day": day})
        except DuplicateKeyError:
            return False
        return True

    async def forget_before(self, day: str) -> None:
        await self._collection.delete_many({"day": {"$lt": day}})

"""The `goals` collection: goals people are working on, with their objectives."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.models import Goal
from bot.storage.documents import (
    dump,
    fields,
    load_all,
    load_one,
)

logger = logging.getLogger(__name__)


class Goals:
    """Goals: inserted, replaced whole, read by room or world."""

    # The indexes its queries need (names fixed: a second start-up asks for the same).
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        "goals": [
            IndexModel([("room_id", ASCENDING), ("status", ASCENDING)], name="room_status"),
            IndexModel([("world_id", ASCENDING)], name="world"),
        ]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db.goals

    async def insert(self, goal: Goal) -> None:
        await self._collection.insert_one(dump(goal))

    async def get(self, goal_id: str) -> Goal | None:
        return load_one(Goal, await self._collection.find_one({"_id": goal_id}))

    async def in_room(
        self, room_id: str, *, only_in_progress: bool = True, limit: int = 20
    ) -> list[Goal]:
        """The room's goals, newest first."""
        query: dict[str, Any] = {"room_id": room_id}
        if only_in_progress:
            query["status"] = "IN_PROGRESS"
        return await self._newest(query, limit)

    async def in_world(self, world_id: str, *, limit: int = 50) -> list[Goal]:
        """Every goal of the world (any status), newest first."""
        return await self._newest({"world_id": world_id}, limit)

    async def replace(self, goal: Goal) -> None:
        # A whole-document replace keeps datetimes and booleans typed on every server.
        result = await self._collection.replace_one({"_id": goal.id}, fields(goal))
        if result.matched_count == 0:
            logger.warning("goal %s was not replaced: it no longer exists", goal.id)

    async def delete_of(self, *, user_id: str, world_id: str) -> int:
        """Delete the goals a person owns in a world; returns how many."""
        result = await self._collection.delete_many({"user_id": user_id, "world_id": world_id})
        return result.deleted_count

    async def _newest(self, query: dict[str, Any], limit: int) -> list[Goal]:
        if limit <= 0:
            return []
        cursor = self._collection.find(query).sort("created_at", DESCENDING)
        return load_all(Goal, await cursor.limit(limit).to_list())

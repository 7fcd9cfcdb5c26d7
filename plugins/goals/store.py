"""The goals plugin's data: the `Goal` model and its collection, `plugin_goals_goals`
(`ctx.collections["goals"]`), a plugin collection like any other: the core of Mnemo knows
nothing of goals.

Goals are inserted, replaced whole (a whole-document replace keeps datetimes and booleans
typed on every server, nx-27017 included) and read by room or world, newest first.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field
from pymongo import ASCENDING, DESCENDING, IndexModel

from bot import Document, new_id, utcnow

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

    from bot import Collections

log = logging.getLogger(__name__)

# ctx.collections["goals"], stored as `plugin_goals_goals`.
COLLECTION = "goals"
# Where goals lived while they were part of Mnemo's core; moved over once at start-up.
LEGACY_COLLECTION = "goals"

GoalStatus = Literal["IN_PROGRESS", "DONE", "FAILED"]

_INDEXES = [
    IndexModel([("room_id", ASCENDING), ("status", ASCENDING)], name="room_status"),
    IndexModel([("world_id", ASCENDING)], name="world"),
]


class Objective(Document):
    description: str
    completed: bool = False


class Goal(Document):
    id: str = Field(default_factory=new_id)
    name: str
    room_id: str
    world_id: str
    user_id: str | None = None
    status: GoalStatus = "IN_PROGRESS"
    objectives: list[Objective] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class GoalStore:
    """The goals collection behind the methods the plugin's parts use."""

    def __init__(self, collection: AsyncCollection) -> None:
        self._collection = collection

    @classmethod
    def of(cls, collections: Collections) -> GoalStore:
        """The store over a context's collections (`GoalStore.of(ctx.collections)`)."""
        return cls(collections[COLLECTION])

    async def ensure_indexes(self) -> None:
        await self._collection.create_indexes(_INDEXES)

    async def insert(self, goal: Goal) -> None:
        await self._collection.insert_one(_dump(goal))

    async def get(self, goal_id: str) -> Goal | None:
        document = await self._collection.find_one({"_id": goal_id})
        return None if document is None else _load(document)

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

    async def of_person(self, world_id: str, user_id: str, *, limit: int = 50) -> list[Goal]:
        """A person's goals in a world (any status), newest first."""
        return await self._newest({"world_id": world_id, "user_id": user_id}, limit)

    async def count(self, world_id: str, *, status: GoalStatus | None = None) -> int:
        query: dict[str, Any] = {"world_id": world_id}
        if status is not None:
            query["status"] = status
        return await self._collection.count_documents(query)

    async def replace(self, goal: Goal) -> None:
        document = _dump(goal)
        del document["_id"]
        result = await self._collection.replace_one({"_id": goal.id}, document)
        if result.matched_count == 0:
            log.warning("goal %s was not replaced: it no longer exists", goal.id)

    async def delete_of(self, *, user_id: str, world_id: str) -> int:
        """Delete the goals a person owns in a world; returns how many."""
        result = await self._collection.delete_many({"user_id": user_id, "world_id": world_id})
        return result.deleted_count

    async def _newest(self, query: dict[str, Any], limit: int) -> list[Goal]:
        if limit <= 0:
            return []
        cursor = self._collection.find(query).sort("created_at", DESCENDING)
        return [_load(document) for document in await cursor.limit(limit).to_list()]


def _dump(goal: Goal) -> dict[str, Any]:
    values = goal.model_dump(mode="python")
    return {"_id": values.pop("id"), **values}


def _load(document: dict[str, Any]) -> Goal:
    values = dict(document)
    values["id"] = values.pop("_id")
    return Goal.model_validate(values)

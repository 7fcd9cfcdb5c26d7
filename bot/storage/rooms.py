"""The `rooms` collection: chats and channels, their marks (per-room bookmarks a plugin
keeps, e.g. when facts were last extracted) and which rooms have gone idle."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from pymongo import DESCENDING, IndexModel
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import Room
from bot.storage.documents import (
    as_utc,
    fields,
    load,
    utc,
)

_MARK_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")


def check_mark_key(key: str) -> None:
    # The key becomes a dotted path (marks.<key>): a dot or a $ would address something else.
    if not _MARK_KEY.match(key):
        raise ValueError(f"invalid room mark key {key!r}: use letters, digits, '_' or '-'")


class Rooms:
    """Rooms, their marks, and the rooms that have gone idle."""

    # The indexes its queries need (names fixed: a second start-up asks for the same).
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {}

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db.rooms
        self._memories: AsyncCollection = db.memories

    async def upsert(self, room: Room) -> None:
        # $set keeps the room's marks; a new room starts with an empty map of them.
        await self._collection.update_one(
            {"_id": room.id},
            # A room described before its first message starts counted (no scan later).
            {"$set": fields(room), "$setOnInsert": {"marks": {}, "message_count": 0}},
            upsert=True,
        )

    async def get(self, room_id: str) -> Room | None:
        document = await self._collection.find_one({"_id": room_id})
        # A mark can be set before the adapter has described the room: such a placeholder
        # holds only marks and is not a room yet.
        if document is None or "kind" not in document:
            return None
        return load(Room, document)

    async def ids_in_world(self, world_id: str) -> list[str]:
        """The ids of a world's rooms."""
        return [
            str(doc["_id"])
            async for doc in self._collection.find({"world_id": world_id}, {"_id": 1})
        ]

    async def get_mark(self, room_id: str, key: str) -> datetime | None:
        """A per-room bookmark (e.g. when facts were last extracted); None if never set."""
        check_mark_key(key)
        document = await self._collection.find_one({"_id": room_id}, {"marks": 1})
        marks = (document or {}).get("marks") or {}
        return as_utc(marks.get(key))

    async def set_mark(self, room_id: str, key: str, value: datetime) -> None:
        check_mark_key(key)
        await self._collection.update_one(
            {"_id": room_id}, {"$set": {f"marks.{key}": value}}, upsert=True
        )

    async def idle(self, *, mark: str, idle_since: datetime) -> list[str]:
        """Rooms whose newest message is older than `idle_since` and newer than their `mark`
        (a room never marked counts), the longest idle first."""
        check_mark_key(mark)
        cutoff = utc(idle_since)
        # On MongoDB, $sort on the (room_id, created_ms) index + $group/$first is a distinct
        # scan: one index probe per room, not a read of every message.
        pipeline: list[dict[str, Any]] = [
            {"$sort": {"room_id": DESCENDING, "created_ms": DESCENDING}},
            {"$group": {"_id": "$room_id", "last": {"$first": "$created_at"}}},
        ]
        newest: dict[str, datetime] = {}
        async for row in await self._memories.aggregate(pipeline):
            last = as_utc(row.get("last"))
            if last is not None and last < cutoff:
                newest[row["_id"]] = last
        if not newest:
            return []
        marks: dict[str, datetime | None] = {}
        async for room in self._collection.find({"_id": {"$in": list(newest)}}, {"marks": 1}):
            marks[room["_id"]] = as_utc((room.get("marks") or {}).get(mark))
        idle = [
            room_id
            for room_id, last in newest.items()
            if (marked := marks.get(room_id)) is None or last > marked
        ]
        return sorted(idle, key=lambda room_id: (newest[room_id], room_id))

    async def delete_empty_dms(self, world_id: str) -> list[str]:
        """Delete the direct-message rooms of a world that no longer hold a message (a DM's
        room carries the person's name: Telegram names a private chat after them); returns
        their ids."""
        deleted = []
        async for room in self._collection.find({"world_id": world_id, "kind": "dm"}, {"_id": 1}):
            if await self._memories.find_one({"room_id": room["_id"]}, {"_id": 1}) is None:
                result = await self._collection.delete_one({"_id": room["_id"]})
                if result.deleted_count:
                    deleted.append(str(room["_id"]))
        return deleted

"""The `memories` collection: every message Mnemo stored, with its room's message count.

The count is kept on the room document (`$inc` on insert), so a room's position and size
are O(1); `Rooms` reads the same documents for marks and idle rooms.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from bot.domain.records import Memory
from bot.storage.batch import Insert
from bot.storage.documents import (
    by_ids,
    dump,
    load_all,
    load_one,
    millis,
)


class Memories:
    """Messages: stored once (a redelivery changes nothing), read by room or world."""

    # The indexes its queries need (names fixed: a second start-up asks for the same).
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        "memories": [
            # recent / since / count_in_room / Rooms.idle. Sorts use exactly
            # an index's fields, never an `_id` tie-break, so MongoDB walks the index instead of
            # sorting a room's whole history (equal keys come back in insertion order there; nx
            # cannot index `_id` inside a compound index at all).
            IndexModel([("room_id", ASCENDING), ("created_ms", ASCENDING)], name="room_created_ms"),
            IndexModel([("user_id", ASCENDING), ("world_id", ASCENDING)], name="user_world"),
            IndexModel(
                [("world_id", ASCENDING), ("created_ms", ASCENDING)], name="world_created_ms"
            ),
        ]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db.memories
        self._rooms: AsyncCollection = db.rooms

    async def insert(self, memory: Memory) -> int | None:
        """Store a message and return its position in the room (1 for the first message);
        None when a memory with this id exists already (a redelivery changes nothing)."""
        try:
            await self._collection.insert_one(dict(self.insert_write(memory).document))
        except DuplicateKeyError:
            return None
        return await self.add_to_count(memory.room_id, 1)

    @staticmethod
    def insert_write(memory: Memory) -> Insert:
        """The write storing a message, for a batch (bot.storage.batch)."""
        document = dump(memory)
        # Times are queried as integer milliseconds: nx-27017 compares dates only to the
        # second, and an integer compares exactly on every server.
        document["created_ms"] = millis(memory.created_at)
        return Insert("memories", document)

    async def add_to_count(self, room_id: str, stored: int, *, unwritten: int = 0) -> int:
        """Count `stored` more messages (0: none) and return the room's count; `unwritten` of
        them are about to be stored (a batch writes them after this). Kept on the room:
        counting a room's messages on every message costs a scan (on nx-27017, and index
        entries on MongoDB); `$inc` is O(1)."""
        room = await self._rooms.find_one_and_update(
            {"_id": room_id, "message_count": {"$exists": True}},
            {"$inc": {"message_count": stored}},
            projection={"message_count": 1},
            return_document=ReturnDocument.AFTER,
        )
        if room is not None:
            return int(room["message_count"])
        # First count for this room (or no room document at all): count once, then keep it.
        count = await self._collection.count_documents({"room_id": room_id}) + unwritten
        await self._rooms.update_one(
            {"_id": room_id, "message_count": {"$exists": False}},
            {"$set": {"message_count": count}},
        )
        return count

    async def set_text(self, memory_id: str, text: str) -> bool:
        """A message's words as its author edited them; False when it is not stored."""
        result = await self._collection.update_one(
            {"_id": memory_id}, {"$set": {"content.text": text}}
        )
        return result.matched_count == 1

    async def get(self, memory_id: str) -> Memory | None:
        return load_one(Memory, await self._collection.find_one({"_id": memory_id}))

    async def get_many(self, ids: list[str]) -> list[Memory]:
        """The memories with these ids that exist, in the order of `ids`."""
        return await by_ids(self._collection, Memory, ids)

    async def recent(
        self, room_id: str, limit: int, *, before: datetime | None = None
    ) -> list[Memory]:
        """The room's last `limit` messages (created before `before` if given), oldest first."""
        query: dict[str, Any] = {"room_id": room_id}
        if before is not None:
            query["created_ms"] = {"$lt": millis(before)}
        return await self._last_in_room(query, limit)

    async def since(
        self,
        room_id: str,
        after: datetime | None,
        *,
        until: datetime | None = None,
        limit: int = 200,
    ) -> list[Memory]:
        """Messages with after < created_at <= until, oldest first (the last `limit` of them)."""
        window: dict[str, int] = {}
        if after is not None:
            window["$gt"] = millis(after)
        if until is not None:
            window["$lte"] = millis(until)
        query: dict[str, Any] = {"room_id": room_id}
        if window:
            query["created_ms"] = window
        return await self._last_in_room(query, limit)

    async def count_in_room(self, room_id: str) -> int:
        room = await self._rooms.find_one({"_id": room_id}, {"message_count": 1})
        if room is not None and isinstance(room.get("message_count"), int):
            return int(room["message_count"])
        return await self._collection.count_documents({"room_id": room_id})

    async def in_world(self, world_id: str, *, after: datetime | None = None) -> list[Memory]:
        """Every message of a world (after `after` if given), oldest first."""
        query: dict[str, Any] = {"world_id": world_id}
        if after is not None:
            query["created_ms"] = {"$gt": millis(after)}
        cursor = self._collection.find(query).sort("created_ms", ASCENDING)
        return load_all(Memory, await cursor.to_list())

    async def newest_id(self, world_id: str) -> str | None:
        found = await self._collection.find_one(
            {"world_id": world_id}, {"_id": 1}, sort=[("created_ms", DESCENDING)]
        )
        return None if found is None else str(found["_id"])

    async def count_in_world(self, world_id: str) -> int:
        return await self._collection.count_documents({"world_id": world_id})

    async def speakers(self, world_id: str) -> list[str]:
        """The ids of everyone who wrote a message in a world (the bot's replies included)."""
        return [str(i) for i in await self._collection.distinct("user_id", {"world_id": world_id})]

    async def rooms_of_messages_by(self, *, user_id: str, world_id: str) -> dict[str, str]:
        """Every message a person wrote in a world: its id -> its room's id."""
        query = {"user_id": user_id, "world_id": world_id}
        cursor = self._collection.find(query, {"_id": 1, "room_id": 1})
        return {str(doc["_id"]): str(doc["room_id"]) async for doc in cursor}

    async def by(self, *, user_id: str, world_id: str) -> list[Memory]:
        """Every message a person wrote in a world, oldest first."""
        query = {"user_id": user_id, "world_id": world_id}
        cursor = self._collection.find(query).sort("created_ms", ASCENDING)
        return load_all(Memory, await cursor.to_list())

    async def reply_ids(self, message_ids: list[str], *, agent_id: str, world_id: str) -> list[str]:
        """The ids of the agent's replies to these messages (every stored reply names the
        message it answers in `content.in_reply_to`)."""
        if not message_ids:
            return []
        query = {
            "world_id": world_id,
            "user_id": agent_id,
            "content.in_reply_to": {"$in": list(message_ids)},
        }
        return [str(doc["_id"]) async for doc in self._collection.find(query, {"_id": 1})]

    async def count_by(self, user_id: str) -> int:
        """How many messages a person wrote, in every world."""
        return await self._collection.count_documents({"user_id": user_id})

    async def delete(self, *, user_id: str, world_id: str) -> int:
        """Delete every message a person wrote in a world."""
        said = await self.rooms_of_messages_by(user_id=user_id, world_id=world_id)
        return await self.delete_ids(list(said))

    async def delete_ids(self, ids: list[str]) -> int:
        """Delete these messages; the rooms they were in are recounted."""
        if not ids:
            return 0
        query = {"_id": {"$in": list(dict.fromkeys(ids))}}
        # Not `distinct`: nx-27017's ignores an `$in` filter and names every room.
        rooms = {doc["room_id"] async for doc in self._collection.find(query, {"room_id": 1})}
        result = await self._collection.delete_many(query)
        for room_id in rooms:  # forgetting is rare: recount the rooms it touched
            count = await self._collection.count_documents({"room_id": room_id})
            await self._rooms.update_one(
                {"_id": room_id, "message_count": {"$exists": True}},
                {"$set": {"message_count": count}},
            )
        return result.deleted_count

    async def delete_created_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        """Delete up to `limit` messages created before `cutoff`, replies included (the
        retention job); returns their ids. Runs once a day, so it may scan: an index on the
        time alone would cost every message's insert an index entry."""
        query = {"created_ms": {"$lt": millis(cutoff)}}
        found = await self._collection.find(query, {"_id": 1}).limit(limit).to_list()
        ids = [str(document["_id"]) for document in found]
        await self.delete_ids(ids)
        return ids

    async def _last_in_room(self, query: dict[str, Any], limit: int) -> list[Memory]:
        if limit <= 0:  # PyMongo reads limit(0) as "no limit"
            return []
        cursor = self._collection.find(query).sort("created_ms", DESCENDING).limit(limit)
        return load_all(Memory, reversed(await cursor.to_list()))

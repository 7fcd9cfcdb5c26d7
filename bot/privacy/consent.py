"""Who the bot may learn from: a person's opt-out in a world, and learning turned off by an
admin for a room or a whole world (a Discord server, a Telegram group).

One small MongoDB collection, `consent`: a document per choice that stops learning, deleted
when learning resumes (no document: learning is on, the default). Ids are stable UUIDs of the
choice's scope, so choosing twice is one document and every process reads the same one.
Times are integer milliseconds (nx-27017 stores `$set` dates as strings, compared to the
second) and no field is a boolean (nx stores a `$set` boolean as 1).

An opt-out holds only ids and outlives `/forgetme`: the person asked not to be remembered
from now on too, and a deleted opt-out would start learning from them again.

`check()` is one `_id $in` read of at most three documents, made for every message before
anything of it is stored: an opt-out takes effect on the next message, in every process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import now_ms, stable_id

# Narrowest first: a person's own choice is what they are told about.
ScopeKind = Literal["person", "room", "world"]
COLLECTION = "consent"


def consent_id(kind: ScopeKind, world_id: str, key: str = "") -> str:
    """The document id of a choice: one per (kind, world, person or room)."""
    return stable_id("consent", kind, world_id, key)


@dataclass(frozen=True)
class NotLearning:
    """Why a message may not be stored or learned from."""

    scope: ScopeKind
    # The person opted out and has not been told yet since (their first message after it).
    notify: bool = False


@dataclass(frozen=True)
class LearningState:
    """What `/privacy` and `/learning` show about a place and a person."""

    room_off: bool
    world_off: bool
    person_off: bool

    @property
    def learning(self) -> bool:
        return not (self.room_off or self.world_off or self.person_off)


class ConsentStore:
    """Opt-outs and learning switches, persisted in MongoDB."""

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db[COLLECTION]

    # ------------------------------------------------------------------ a person's choice
    async def opt_out(self, *, user_id: str, world_id: str) -> bool:
        """Stop learning from this person in this world; False if they had already opted out.
        Opting out again after opting in tells them once more on their next message."""
        result = await self._collection.update_one(
            {"_id": consent_id("person", world_id, user_id)},
            {
                "$setOnInsert": {
                    "kind": "person",
                    "world_id": world_id,
                    "user_id": user_id,
                    "room_id": None,
                    "changed_ms": now_ms(),
                    "notified_ms": None,
                }
            },
            upsert=True,
        )
        return result.upserted_id is not None

    async def opt_in(self, *, user_id: str, world_id: str) -> bool:
        """Learn from this person again; False if they had not opted out."""
        result = await self._collection.delete_one({"_id": consent_id("person", world_id, user_id)})
        return result.deleted_count > 0

    async def opted_out_since(self, *, user_id: str, world_id: str) -> int | None:
        """When (ms) this person opted out in this world, or None: part of their /export."""
        found = await self._collection.find_one(
            {"_id": consent_id("person", world_id, user_id)}, {"changed_ms": 1}
        )
        return None if found is None else int(found["changed_ms"])

    async def claim_notice(self, *, user_id: str, world_id: str) -> bool:
        """True exactly once per opt-out: the caller tells the person. Conditional on the
        notice not being claimed yet, so two processes never both send it."""
        claimed = await self._collection.find_one_and_update(
            {"_id": consent_id("person", world_id, user_id), "notified_ms": None},
            {"$set": {"notified_ms": now_ms()}},
        )
        return claimed is not None

    # ------------------------------------------------------------------ an admin's switch
    async def set_learning(self, *, world_id: str, room_id: str | None, on: bool, by: str) -> bool:
        """Turn learning on or off for a room (or, with `room_id` None, the whole world);
        False when it already was so."""
        kind: ScopeKind = "world" if room_id is None else "room"
        key = consent_id(kind, world_id, room_id or "")
        if on:
            return (await self._collection.delete_one({"_id": key})).deleted_count > 0
        result = await self._collection.update_one(
            {"_id": key},
            {
                "$setOnInsert": {
                    "kind": kind,
                    "world_id": world_id,
                    "room_id": room_id,
                    "user_id": None,
                    "changed_ms": now_ms(),
                    # Who turned it off: an admin asking "why is nothing learned here?" sees.
                    "changed_by": by,
                }
            },
            upsert=True,
        )
        return result.upserted_id is not None

    # ------------------------------------------------------------------ the checks
    async def check(self, *, user_id: str, room_id: str, world_id: str) -> NotLearning | None:
        """None when this person's message here may be stored and learned from."""
        found = await self._found(user_id=user_id, room_id=room_id, world_id=world_id)
        return self._refusal(found)

    @staticmethod
    def ids(*, user_id: str, room_id: str, world_id: str) -> dict[str, ScopeKind]:
        """The documents `check` reads, by id: for a caller that reads them with other
        things in one round trip (the runtime's intake reads them with the room's window)."""
        return {
            consent_id("person", world_id, user_id): "person",
            consent_id("room", world_id, room_id): "room",
            consent_id("world", world_id): "world",
        }

    def check_found(
        self, documents: list[dict[str, Any]], *, user_id: str, room_id: str, world_id: str
    ) -> NotLearning | None:
        """`check` on the documents of `ids` a caller read itself."""
        ids = self.ids(user_id=user_id, room_id=room_id, world_id=world_id)
        return self._refusal({ids[d["_id"]]: d for d in documents if d.get("_id") in ids})

    @staticmethod
    def _refusal(found: dict[str, Any]) -> NotLearning | None:
        person = found.get("person")
        if person is not None:
            return NotLearning("person", notify=person.get("notified_ms") is None)
        for kind in ("room", "world"):
            if kind in found:
                return NotLearning(kind)
        return None

    async def state(self, *, user_id: str, room_id: str, world_id: str) -> LearningState:
        found = await self._found(user_id=user_id, room_id=room_id, world_id=world_id)
        return LearningState(
            room_off="room" in found, world_off="world" in found, person_off="person" in found
        )

    async def _found(self, *, user_id: str, room_id: str, world_id: str) -> dict[str, Any]:
        ids = self.ids(user_id=user_id, room_id=room_id, world_id=world_id)
        found: dict[str, Any] = {}
        async for document in self._collection.find({"_id": {"$in": list(ids)}}):
            found[ids[document["_id"]]] = document
        return found

"""Leases in MongoDB: which process of a deployment holds a room's evaluations (or a timed job's
run), and until when.

One document per lease in `leases`: `{_id: key, owner: <process uuid>, expires_ms: <int ms>}`.
Taking and renewing are the same single `find_one_and_update` with `upsert`, whose filter
matches only a lease this owner holds or one that has expired; when another owner holds it, the
filter matches nothing and the upsert collides with the existing `_id` (a real MongoDB raises
DuplicateKeyError; nx-27017 answers "nothing"). Either way exactly one taker wins. Times are
integer milliseconds: nx-27017 compares dates to the second and stores a `$set` date as a string.
nx-27017 also ignores the `_id` of an update filter beside a top-level `$or` (a plain `find`
is right), hence the `$and` around them.

Keys: `process:<uuid>` while a process runs, `room:<room id>` for a room's evaluations,
`run:<job name>:<period>` for a timed job's run in one period (see bot/app/scheduler.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import ClassVar

from pymongo import IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from bot.domain.records import now_ms

COLLECTION = "leases"


def room_key(room_id: str) -> str:
    return f"room:{room_id}"


def process_key(owner: str) -> str:
    """A process's own lease: held while it runs, so the others can tell it died."""
    return f"process:{owner}"


class Leases:
    """Take, renew and release leases; find the live ones."""

    # `_id` is the key; the rest is read by key, so no other index is needed.
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {}

    def __init__(self, db: AsyncDatabase, *, collection: str = COLLECTION) -> None:
        # Another `collection` keeps a lease where earlier releases kept it (the migration
        # lock, in mnemo_meta), so processes of both releases contend for the same document.
        self._leases = db[collection]

    async def take(self, key: str, owner: str, ttl_ms: int, *, now: int | None = None) -> bool:
        """Take or renew `key` for `ttl_ms` from `now` (ms; default the clock's); False while
        another owner holds it."""
        now = now_ms() if now is None else now
        try:
            document = await self._leases.find_one_and_update(
                # In `$and`: nx-27017's find-and-modify drops the `_id` beside a top-level
                # `$or` and would take over some other expired lease.
                {
                    "$and": [
                        {"_id": key},
                        {"$or": [{"owner": owner}, {"expires_ms": {"$lte": now}}]},
                    ]
                },
                {"$set": {"owner": owner, "expires_ms": now + ttl_ms}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:
            return False
        return document is not None and document.get("owner") == owner

    async def renew(self, keys: Collection[str], owner: str, ttl_ms: int) -> set[str]:
        """Extend every lease of `keys` this owner still holds, in one write; returns the keys
        it no longer holds (taken over after it expired)."""
        if not keys:
            return set()
        result = await self._leases.update_many(
            {"_id": {"$in": list(keys)}, "owner": owner},
            {"$set": {"expires_ms": now_ms() + ttl_ms}},
        )
        if result.matched_count == len(keys):
            return set()
        cursor = self._leases.find({"_id": {"$in": list(keys)}, "owner": owner}, {"_id": 1})
        held = {d["_id"] async for d in cursor}
        return set(keys) - held

    async def release(self, key: str, owner: str) -> None:
        """Give the lease up (only if this owner still holds it)."""
        await self._leases.delete_one({"_id": key, "owner": owner})

    async def release_many(self, keys: Collection[str], owner: str) -> None:
        """Give up every lease of `keys` this owner still holds, in one write."""
        await self._leases.delete_many({"_id": {"$in": list(keys)}, "owner": owner})

    async def others_live(self, owner: str) -> bool:
        """Whether a process other than `owner` holds a live process lease."""
        found = await self._leases.find_one(
            {
                # The `process:` keys, as a range on `_id` (its index serves it).
                "_id": {"$gte": process_key(""), "$lt": "process;"},
                "owner": {"$ne": owner},
                "expires_ms": {"$gt": now_ms()},
            },
            {"_id": 1},
        )
        return found is not None

    async def live(self, keys: Collection[str]) -> dict[str, str]:
        """The keys of `keys` whose lease has not expired, with their owners."""
        if not keys:
            return {}
        cursor = self._leases.find(
            {"_id": {"$in": list(keys)}, "expires_ms": {"$gt": now_ms()}}, {"owner": 1}
        )
        return {d["_id"]: d["owner"] async for d in cursor}

    async def clear(self) -> int:
        """Drop every lease: for a deployment that is one process by construction (the bundled
        server belongs to one Mnemo), whatever is left is from a process that is gone."""
        return (await self._leases.delete_many({})).deleted_count

    async def release_owner(self, owner: str) -> int:
        """Give up the process and room leases of `owner`, a process known to be gone (this
        process's predecessor). Its timed-job runs keep their periods: each ran, or died
        running, in its period, and the next period comes soon enough."""
        cursor = self._leases.find({"owner": owner}, {"_id": 1})
        keys = [d["_id"] async for d in cursor if not str(d["_id"]).startswith("run:")]
        if not keys:
            return 0
        result = await self._leases.delete_many({"_id": {"$in": keys}, "owner": owner})
        return result.deleted_count

    async def drop_expired(self, *, now: int | None = None) -> int:
        """Delete leases expired by `now` (ms; default the clock's): timed jobs' old periods.
        An expired room lease is as good as none, so dropping it changes nothing."""
        now = now_ms() if now is None else now
        return (await self._leases.delete_many({"expires_ms": {"$lte": now}})).deleted_count

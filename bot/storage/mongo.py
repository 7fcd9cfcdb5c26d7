"""MongoDB through PyMongo's AsyncMongoClient: the source of truth for everything Mnemo learns.

Works against a real MongoDB and against the bundled nx-27017 server, whose gaps shape a few
choices here:

- ids are UUID strings, never ObjectId (nx matches ObjectIds only in `_id`);
- booleans and datetimes are always read back through the pydantic models, and datetimes are
  normalised to aware UTC on read: nx stores a `$set` boolean as 1 and a `$set` datetime on an
  existing document as a naive string, and a client without `tz_aware=True` returns naive
  datetimes. Filters never test a boolean or a `$set`-written datetime on the server;
- arrays are written whole on insert (nx's `$addToSet` ignores a missing field);
- projections name top-level fields only (nx flattens `{"a.b": 1}` into a key "a.b");
- aggregations stick to `$sort` + `$group` with `$first` (nx turns `$max` of dates into a
  string and `$match` on dates inside a pipeline matches nothing);
- no text indexes (nx fails creating one twice); searching is a regex over the text.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, get_args
from urllib.parse import quote, unquote, urlsplit

from pydantic import BaseModel
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError, PyMongoError

from bot.models import Account, EvaluationJob, Fact, Goal, JobStatus, Memory, Room, utcnow

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

_JOB_STATUSES: frozenset[str] = frozenset(get_args(JobStatus))
_MARK_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")

# Every index the queries need, by collection. Names are fixed so that a second start-up asks
# for exactly the same index (a real MongoDB rejects the same keys under a different name).
_INDEXES: dict[str, list[IndexModel]] = {
    "memories": [
        # recent_memories / memories_since / count_memories / idle_rooms. Sorts use exactly
        # an index's fields, never an `_id` tie-break, so MongoDB walks the index instead of
        # sorting a room's whole history (equal keys come back in insertion order there; nx
        # cannot index `_id` inside a compound index at all).
        IndexModel([("room_id", ASCENDING), ("created_ms", ASCENDING)], name="room_created_ms"),
        IndexModel([("user_id", ASCENDING), ("world_id", ASCENDING)], name="user_world"),
        IndexModel([("world_id", ASCENDING), ("created_ms", ASCENDING)], name="world_created_ms"),
    ],
    "facts": [
        IndexModel(
            [("subject_id", ASCENDING), ("world_id", ASCENDING), ("created_at", DESCENDING)],
            name="subject_world_created",
        ),
        IndexModel([("world_id", ASCENDING), ("created_at", DESCENDING)], name="world_created"),
        IndexModel([("indexed_at", ASCENDING)], name="indexed_at"),
    ],
    "goals": [
        IndexModel([("room_id", ASCENDING), ("status", ASCENDING)], name="room_status"),
        IndexModel([("world_id", ASCENDING)], name="world"),
    ],
    "evaluations": [
        IndexModel(
            [("room_id", ASCENDING), ("status", ASCENDING), ("created_ms", ASCENDING)],
            name="room_status_created_ms",
        ),
        IndexModel([("status", ASCENDING)], name="status"),
    ],
}


# The filter for facts that still hold. `$in: [None]`, not `None`: nx-27017 counts
# (`count_documents`, an aggregation) miss documents on a plain None, and both servers match
# a fact stored before lifetimes existed (no field at all) this way.
_CURRENT: dict[str, Any] = {"valid_until": {"$in": [None]}}


class StorageUnavailable(RuntimeError):
    """The database cannot be reached (or refuses us). The message never holds a password."""


def fact_text_key(text: str) -> str:
    """The form two facts share when they say the same thing up to case, spacing and the
    final full stop: the exact-duplicate key stored as `text_key`."""
    key = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    end = len(key)
    while end and (unicodedata.category(key[end - 1]).startswith("P") or key[end - 1].isspace()):
        end -= 1
    return key[:end]


def redact_uri(uri: str) -> str:
    """The URI with its password replaced by `***`, fit for logs and error messages."""
    return re.sub(r"(?<=://)([^:/@]*):([^@/]*)@", r"\1:***@", uri)


class MongoStore:
    """Typed access to Mnemo's collections.

    Give it a client created with `tz_aware=True` (as `from_uri` does); datetimes are normalised
    to aware UTC on read either way, so models always hold aware UTC datetimes.
    """

    def __init__(
        self, client: AsyncMongoClient, database: str, *, secrets: Iterable[str] = ()
    ) -> None:
        self.client = client
        self.db: AsyncDatabase = client[database]
        # Strings that must never reach an error message (the URI's password).
        self._secrets = tuple(secret for secret in secrets if secret)

    @classmethod
    def from_uri(
        cls,
        uri: str,
        database: str,
        *,
        server_selection_timeout_ms: int = 5000,
        app_name: str = "mnemo",
    ) -> MongoStore:
        """A store on its own client. The client connects lazily; call `ping()` to find out
        early whether the database is there."""
        client: AsyncMongoClient = AsyncMongoClient(
            uri,
            tz_aware=True,
            tzinfo=UTC,
            serverSelectionTimeoutMS=server_selection_timeout_ms,
            connectTimeoutMS=min(server_selection_timeout_ms, 10_000),
            appname=app_name,
        )
        return cls(client, database, secrets=_uri_secrets(uri))

    async def close(self) -> None:
        await self.client.close()

    async def ensure_indexes(self) -> None:
        """Create every index the queries below need; safe to call on every start-up."""
        for collection, indexes in _INDEXES.items():
            await self.db[collection].create_indexes(indexes)

    async def ping(self) -> None:
        """Round-trip to the server; raises StorageUnavailable (within the client's server
        selection time-out) instead of hanging when the database is down or refuses us."""
        try:
            await self.client.admin.command("ping")
        except PyMongoError as error:
            where = ", ".join(sorted(f"{host}:{port}" for host, port in self._addresses())) or "?"
            # PyMongo appends a full topology description after ", Timeout:"; the reasons
            # before it are what a person needs.
            detail = str(error).split(", Timeout:", 1)[0]
            reason = self._scrub(f"{type(error).__name__}: {detail}")
            raise StorageUnavailable(f"MongoDB at {where} is unavailable ({reason})") from None

    # memories -----------------------------------------------------------------------------
    async def insert_memory(self, memory: Memory) -> int | None:
        """Store a message and return its position in the room (1 for the first message);
        None when a memory with this id exists already (a redelivery changes nothing)."""
        document = _dump(memory)
        # Times are queried as integer milliseconds: nx-27017 compares dates only to the
        # second, and an integer compares exactly on every server.
        document["created_ms"] = _millis(memory.created_at)
        try:
            await self.db.memories.insert_one(document)
        except DuplicateKeyError:
            return None
        return await self._count_one_more(memory.room_id)

    async def _count_one_more(self, room_id: str) -> int:
        """Keep the room's message count on the room: counting a room's messages on every
        message costs a scan (on nx-27017, and index entries on MongoDB); `$inc` is O(1)."""
        room = await self.db.rooms.find_one_and_update(
            {"_id": room_id, "message_count": {"$exists": True}},
            {"$inc": {"message_count": 1}},
            projection={"message_count": 1},
            return_document=ReturnDocument.AFTER,
        )
        if room is not None:
            return int(room["message_count"])
        # First count for this room (or no room document at all): count once, then keep it.
        count = await self.db.memories.count_documents({"room_id": room_id})
        await self.db.rooms.update_one(
            {"_id": room_id, "message_count": {"$exists": False}},
            {"$set": {"message_count": count}},
        )
        return count

    async def get_memory(self, memory_id: str) -> Memory | None:
        return _load_one(Memory, await self.db.memories.find_one({"_id": memory_id}))

    async def get_memories(self, ids: list[str]) -> list[Memory]:
        """The memories with these ids that exist, in the order of `ids`."""
        return await self._by_ids("memories", Memory, ids)

    async def recent_memories(
        self, room_id: str, limit: int, *, before: datetime | None = None
    ) -> list[Memory]:
        """The room's last `limit` messages (created before `before` if given), oldest first."""
        query: dict[str, Any] = {"room_id": room_id}
        if before is not None:
            query["created_ms"] = {"$lt": _millis(before)}
        return await self._last_in_room(query, limit)

    async def memories_since(
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
            window["$gt"] = _millis(after)
        if until is not None:
            window["$lte"] = _millis(until)
        query: dict[str, Any] = {"room_id": room_id}
        if window:
            query["created_ms"] = window
        return await self._last_in_room(query, limit)

    async def count_memories(self, room_id: str) -> int:
        room = await self.db.rooms.find_one({"_id": room_id}, {"message_count": 1})
        if room is not None and isinstance(room.get("message_count"), int):
            return int(room["message_count"])
        return await self.db.memories.count_documents({"room_id": room_id})

    async def world_memories(self, world_id: str, *, after: datetime | None = None) -> list[Memory]:
        """Every message of a world (after `after` if given), oldest first."""
        query: dict[str, Any] = {"world_id": world_id}
        if after is not None:
            query["created_ms"] = {"$gt": _millis(after)}
        cursor = self.db.memories.find(query).sort("created_ms", ASCENDING)
        return _load_all(Memory, await cursor.to_list())

    async def newest_memory_id(self, world_id: str) -> str | None:
        found = await self.db.memories.find_one(
            {"world_id": world_id}, {"_id": 1}, sort=[("created_ms", DESCENDING)]
        )
        return None if found is None else str(found["_id"])

    async def count_memories_in_world(self, world_id: str) -> int:
        return await self.db.memories.count_documents({"world_id": world_id})

    async def delete_memories(self, *, user_id: str, world_id: str) -> int:
        query = {"user_id": user_id, "world_id": world_id}
        rooms = await self.db.memories.distinct("room_id", query)
        result = await self.db.memories.delete_many(query)
        for room_id in rooms:  # forgetting is rare: recount the rooms it touched
            count = await self.db.memories.count_documents({"room_id": room_id})
            await self.db.rooms.update_one(
                {"_id": room_id, "message_count": {"$exists": True}},
                {"$set": {"message_count": count}},
            )
        return result.deleted_count

    # accounts and rooms -------------------------------------------------------------------
    async def upsert_account(self, account: Account) -> None:
        # $set, not replace: fields other code adds to the document survive a profile refresh.
        await self.db.accounts.update_one(
            {"_id": account.id}, {"$set": _fields(account)}, upsert=True
        )

    async def find_account_by_username(self, platform: str, username: str) -> Account | None:
        """Usernames are case-insensitive on Discord and Telegram: an anchored `i` regex."""
        pattern = {"$regex": f"^{re.escape(username)}$", "$options": "i"}
        document = await self.db.accounts.find_one({"platform": platform, "username": pattern})
        return _load_one(Account, document)

    async def get_accounts(self, ids: list[str]) -> dict[str, Account]:
        return {account.id: account for account in await self._by_ids("accounts", Account, ids)}

    async def upsert_room(self, room: Room) -> None:
        # $set keeps the room's marks; a new room starts with an empty map of them.
        await self.db.rooms.update_one(
            {"_id": room.id},
            # A room described before its first message starts counted (no scan later).
            {"$set": _fields(room), "$setOnInsert": {"marks": {}, "message_count": 0}},
            upsert=True,
        )

    async def get_room(self, room_id: str) -> Room | None:
        document = await self.db.rooms.find_one({"_id": room_id})
        # A mark can be set before the adapter has described the room: such a placeholder
        # holds only marks and is not a room yet.
        if document is None or "kind" not in document:
            return None
        return _load(Room, document)

    async def get_room_mark(self, room_id: str, key: str) -> datetime | None:
        """A per-room bookmark (e.g. when facts were last extracted); None if never set."""
        _check_mark_key(key)
        document = await self.db.rooms.find_one({"_id": room_id}, {"marks": 1})
        marks = (document or {}).get("marks") or {}
        return _as_utc(marks.get(key))

    async def set_room_mark(self, room_id: str, key: str, value: datetime) -> None:
        _check_mark_key(key)
        await self.db.rooms.update_one(
            {"_id": room_id}, {"$set": {f"marks.{key}": value}}, upsert=True
        )

    # facts --------------------------------------------------------------------------------
    # Reads for the prompt, /me and /facts see only current facts (see Fact); the history
    # is read through `fact_history`.
    async def insert_fact(self, fact: Fact) -> None:
        """Store a new fact (a DuplicateKeyError if its id exists: ids are never reused)."""
        await self.db.facts.insert_one({**_dump(fact), "text_key": fact_text_key(fact.text)})

    async def mark_fact_indexed(self, fact_id: str, when: datetime) -> None:
        await self.db.facts.update_one({"_id": fact_id}, {"$set": {"indexed_at": when}})

    async def unindexed_facts(self, limit: int = 500) -> list[Fact]:
        """Facts whose vector write has not been confirmed (indexed_at is None)."""
        if limit <= 0:
            return []
        # Facts are inserted with an explicit indexed_at: None, which both servers match
        # (nx does not match a missing field against None).
        cursor = self.db.facts.find({"indexed_at": None}).sort("created_at", ASCENDING)
        return _load_all(Fact, await cursor.limit(limit).to_list())

    async def get_facts(self, ids: list[str]) -> list[Fact]:
        """The facts with these ids that exist, in the order of `ids`."""
        return await self._by_ids("facts", Fact, ids)

    async def find_fact_by_text(self, *, subject_id: str, world_id: str, text: str) -> Fact | None:
        """Exact duplicate check: same subject, same world, same normalised text, current
        (a value that held before and holds again is stored again: "moved back to Seattle")."""
        document = await self.db.facts.find_one(
            {
                "subject_id": subject_id,
                "world_id": world_id,
                "text_key": fact_text_key(text),
                **_CURRENT,
            }
        )
        return _load_one(Fact, document)

    async def facts_about(
        self, subject_ids: list[str], world_id: str, *, limit: int = 10
    ) -> list[Fact]:
        """Most recent current facts about these subjects in this world, newest first."""
        if not subject_ids or limit <= 0:
            return []
        cursor = self.db.facts.find(
            {
                "subject_id": {"$in": list(dict.fromkeys(subject_ids))},
                "world_id": world_id,
                **_CURRENT,
            }
        ).sort("created_at", DESCENDING)
        return _load_all(Fact, await cursor.limit(limit).to_list())

    async def list_facts(
        self,
        world_id: str,
        *,
        subject_id: str | None = None,
        search: str | None = None,
        skip: int = 0,
        limit: int = 20,
    ) -> tuple[list[Fact], int]:
        """A page of a world's current facts (newest first), optionally for one subject and
        containing `search` (case-insensitive substring), with the total count."""
        query: dict[str, Any] = {"world_id": world_id, **_CURRENT}
        if subject_id is not None:
            query["subject_id"] = subject_id
        if search and search.strip():
            query["text"] = {"$regex": re.escape(search.strip()), "$options": "i"}
        total = await self.db.facts.count_documents(query)
        if limit <= 0 or skip >= total:
            return [], total
        cursor = (
            self.db.facts.find(query).sort("created_at", DESCENDING).skip(max(skip, 0)).limit(limit)
        )
        return _load_all(Fact, await cursor.to_list()), total

    async def fact_history(self, subject_id: str, world_id: str, *, limit: int = 500) -> list[Fact]:
        """Every fact about a subject in a world, current and closed, oldest first."""
        cursor = self.db.facts.find({"subject_id": subject_id, "world_id": world_id})
        facts = _load_all(Fact, await cursor.limit(limit).to_list())
        return sorted(facts, key=lambda fact: (fact.valid_from, fact.created_at))

    async def close_fact(
        self, fact_id: str, *, world_id: str, until: int, superseded_by: str | None
    ) -> bool:
        """End a current fact's lifetime. Only a current fact is closed, so a redelivered or
        re-run extraction never closes one twice (nor moves its end or successor)."""
        result = await self.db.facts.update_one(
            {"_id": fact_id, "world_id": world_id, **_CURRENT},
            {"$set": {"valid_until": until, "superseded_by": superseded_by}},
        )
        return result.modified_count == 1

    async def facts_with_id_prefix(
        self, world_id: str, prefix: str, *, limit: int = 5
    ) -> list[Fact]:
        """Facts of a world whose id starts with `prefix` (the short ids listings show)."""
        if not re.fullmatch(r"[0-9a-fA-F-]{1,36}", prefix):
            return []
        query = {"world_id": world_id, "_id": {"$regex": f"^{re.escape(prefix.lower())}"}}
        return _load_all(Fact, await self.db.facts.find(query).limit(limit).to_list())

    async def delete_fact(self, fact_id: str, *, world_id: str) -> bool:
        # The world in the filter: an admin of one server cannot delete another's facts by id.
        result = await self.db.facts.delete_one({"_id": fact_id, "world_id": world_id})
        return result.deleted_count == 1

    async def delete_facts(self, *, subject_id: str, world_id: str) -> list[str]:
        """Delete every fact about a subject in a world; returns the deleted ids."""
        query = {"subject_id": subject_id, "world_id": world_id}
        ids = [doc["_id"] async for doc in self.db.facts.find(query, {"_id": 1})]
        if ids:
            # By id, so a fact learned meanwhile is neither deleted nor missing from the answer.
            await self.db.facts.delete_many({**query, "_id": {"$in": ids}})
        return ids

    # goals --------------------------------------------------------------------------------
    async def insert_goal(self, goal: Goal) -> None:
        await self.db.goals.insert_one(_dump(goal))

    async def get_goal(self, goal_id: str) -> Goal | None:
        return _load_one(Goal, await self.db.goals.find_one({"_id": goal_id}))

    async def goals_in_room(
        self, room_id: str, *, only_in_progress: bool = True, limit: int = 20
    ) -> list[Goal]:
        """The room's goals, newest first."""
        query: dict[str, Any] = {"room_id": room_id}
        if only_in_progress:
            query["status"] = "IN_PROGRESS"
        return await self._goals(query, limit)

    async def goals_in_world(self, world_id: str, *, limit: int = 50) -> list[Goal]:
        """Every goal of the world (any status), newest first."""
        return await self._goals({"world_id": world_id}, limit)

    async def replace_goal(self, goal: Goal) -> None:
        # A whole-document replace keeps datetimes and booleans typed on every server.
        result = await self.db.goals.replace_one({"_id": goal.id}, _fields(goal))
        if result.matched_count == 0:
            logger.warning("goal %s was not replaced: it no longer exists", goal.id)

    async def delete_goals(self, *, user_id: str, world_id: str) -> int:
        """Delete the goals a person owns in a world; returns how many."""
        result = await self.db.goals.delete_many({"user_id": user_id, "world_id": world_id})
        return result.deleted_count

    # evaluation jobs (the durable queue) ----------------------------------------------------
    async def enqueue_job(self, job: EvaluationJob) -> bool:
        """Insert a pending job; False if one with this id exists (same message twice)."""
        document = _dump(job)
        document["created_ms"] = _millis(job.created_at)
        try:
            await self.db.evaluations.insert_one(document)
        except DuplicateKeyError:
            return False
        return True

    async def get_job(self, job_id: str) -> EvaluationJob | None:
        return _load_one(EvaluationJob, await self.db.evaluations.find_one({"_id": job_id}))

    async def claim_next_job(self, room_id: str) -> EvaluationJob | None:
        """Atomically move the room's oldest pending job to running and return it.

        One `find_one_and_update`, so any number of processes can share the queue: a job is
        handed to exactly one claimer.
        """
        document = await self.db.evaluations.find_one_and_update(
            {"room_id": room_id, "status": "pending"},
            {"$set": {"status": "running", "claimed_at": utcnow()}, "$inc": {"attempts": 1}},
            sort=[("created_ms", ASCENDING)],
            return_document=ReturnDocument.AFTER,
        )
        return _load_one(EvaluationJob, document)

    async def finish_job(
        self, job_id: str, *, status: str, error: str | None = None, ran: list[str] | None = None
    ) -> None:
        """Record a job's outcome; `ran` names the evaluators whose handlers completed."""
        if status not in _JOB_STATUSES:
            raise ValueError(f"unknown job status {status!r}; expected one of {_JOB_STATUSES}")
        fields: dict[str, Any] = {"status": status, "finished_at": utcnow(), "error": error}
        if ran is not None:
            fields["ran"] = list(ran)  # written whole: nx ignores $addToSet on a missing field
        await self.db.evaluations.update_one({"_id": job_id}, {"$set": fields})

    async def requeue_stale_jobs(self, *, claimed_before: datetime | None = None) -> int:
        """At start-up: jobs left running by a crash become pending again. Returns how many.

        With several processes sharing the queue, pass `claimed_before` (e.g. now minus the
        longest evaluation) so the jobs other live processes are running stay theirs.
        """
        query: dict[str, Any] = {"status": "running"}
        if claimed_before is not None:
            # claimed_at is compared here, not on the server: nx stores it as a string.
            running = await self.db.evaluations.find(query, {"claimed_at": 1}).to_list()
            cutoff = _utc(claimed_before)
            stale = [
                doc["_id"]
                for doc in running
                if (claimed := _as_utc(doc.get("claimed_at"))) is None or claimed < cutoff
            ]
            if not stale:
                return 0
            query["_id"] = {"$in": stale}
        result = await self.db.evaluations.update_many(query, {"$set": {"status": "pending"}})
        if result.modified_count:
            logger.info("requeued %d evaluation job(s) left running", result.modified_count)
        return result.modified_count

    async def rooms_with_pending_jobs(self) -> list[str]:
        return sorted(await self.db.evaluations.distinct("room_id", {"status": "pending"}))

    async def count_jobs(self, *, room_id: str | None = None, status: str | None = None) -> int:
        query: dict[str, Any] = {}
        if room_id is not None:
            query["room_id"] = room_id
        if status is not None:
            query["status"] = status
        return await self.db.evaluations.count_documents(query)

    async def idle_rooms(self, *, mark: str, idle_since: datetime) -> list[str]:
        """Rooms whose newest message is older than `idle_since` and newer than their `mark`
        (a room never marked counts), the longest idle first."""
        _check_mark_key(mark)
        cutoff = _utc(idle_since)
        # On MongoDB, $sort on the (room_id, created_ms) index + $group/$first is a distinct
        # scan: one index probe per room, not a read of every message.
        pipeline: list[dict[str, Any]] = [
            {"$sort": {"room_id": DESCENDING, "created_ms": DESCENDING}},
            {"$group": {"_id": "$room_id", "last": {"$first": "$created_at"}}},
        ]
        newest: dict[str, datetime] = {}
        async for row in await self.db.memories.aggregate(pipeline):
            last = _as_utc(row.get("last"))
            if last is not None and last < cutoff:
                newest[row["_id"]] = last
        if not newest:
            return []
        marks: dict[str, datetime | None] = {}
        async for room in self.db.rooms.find({"_id": {"$in": list(newest)}}, {"marks": 1}):
            marks[room["_id"]] = _as_utc((room.get("marks") or {}).get(mark))
        idle = [
            room_id
            for room_id, last in newest.items()
            if (marked := marks.get(room_id)) is None or last > marked
        ]
        return sorted(idle, key=lambda room_id: (newest[room_id], room_id))

    # helpers ------------------------------------------------------------------------------
    async def _last_in_room(self, query: dict[str, Any], limit: int) -> list[Memory]:
        if limit <= 0:  # PyMongo reads limit(0) as "no limit"
            return []
        cursor = self.db.memories.find(query).sort("created_ms", DESCENDING).limit(limit)
        return _load_all(Memory, reversed(await cursor.to_list()))

    async def _goals(self, query: dict[str, Any], limit: int) -> list[Goal]:
        if limit <= 0:
            return []
        cursor = self.db.goals.find(query).sort("created_at", DESCENDING)
        return _load_all(Goal, await cursor.limit(limit).to_list())

    async def _by_ids(self, collection: str, model: type[M], ids: list[str]) -> list[M]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        found = {
            doc["_id"]: doc async for doc in self.db[collection].find({"_id": {"$in": wanted}})
        }
        return [_load(model, found[i]) for i in wanted if i in found]

    def _addresses(self) -> list[tuple[str, int | None]]:
        try:
            return list(self.client.topology_description.server_descriptions())
        except Exception:  # a description is a courtesy in an error message, never a new error
            return []

    def _scrub(self, text: str) -> str:
        """Remove the URI's password from a message, in whatever encoding it appears."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return redact_uri(text)


# documents <-> models ---------------------------------------------------------------------
def _fields(model: BaseModel) -> dict[str, Any]:
    """The model as document fields, without its id (the `_id`, which `$set` cannot touch)."""
    fields = model.model_dump(mode="python")
    fields.pop("id", None)
    return fields


def _dump(model: BaseModel) -> dict[str, Any]:
    return {"_id": model.id, **_fields(model)}  # type: ignore[attr-defined]


def _load(model: type[M], document: Mapping[str, Any]) -> M:
    data = dict(document)
    data["id"] = data.pop("_id")
    return _utc_fields(model.model_validate(data))


def _load_one(model: type[M], document: Mapping[str, Any] | None) -> M | None:
    return None if document is None else _load(model, document)


def _load_all(model: type[M], documents: Iterable[Mapping[str, Any]]) -> list[M]:
    return [_load(model, document) for document in documents]


def _utc_fields(instance: M) -> M:
    """Make every datetime of a validated model (nested ones too) aware UTC in place."""
    for name in type(instance).model_fields:
        value = getattr(instance, name)
        if isinstance(value, datetime):
            setattr(instance, name, _utc(value))
        elif isinstance(value, BaseModel):
            _utc_fields(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, BaseModel):
                    _utc_fields(item)
    return instance


def _as_utc(value: object) -> datetime | None:
    """A stored datetime as aware UTC, or None. Also accepts nx-27017's stand-ins: an ISO
    string (from `$set`) or an extended-JSON `{"$date": ...}` string (from aggregations)."""
    if isinstance(value, datetime):
        return _utc(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.startswith("{"):
        try:
            text = str(json.loads(text)["$date"])
        except (ValueError, KeyError, TypeError):
            return None
    try:
        return _utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def _millis(value: datetime) -> int:
    return int(_utc(value).timestamp() * 1000)


def _utc(value: datetime) -> datetime:
    # Naive means UTC: that is what MongoDB stores and a client without tz_aware returns.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _uri_secrets(uri: str) -> set[str]:
    try:
        password = urlsplit(uri).password
    except ValueError:
        return set()
    return {password, unquote(password), quote(unquote(password), safe="")} if password else set()


def _check_mark_key(key: str) -> None:
    # The key becomes a dotted path (marks.<key>): a dot or a $ would address something else.
    if not _MARK_KEY.match(key):
        raise ValueError(f"invalid room mark key {key!r}: use letters, digits, '_' or '-'")

"""MongoDB through PyMongo's AsyncMongoClient: the source of truth for everything Mnemo learns.

Works against a real MongoDB and against the bundled nx-27017 server, so: UUID strings as ids
(never ObjectId), no `$addToSet` on missing fields, booleans read back through pydantic
(nx stores a `$set` boolean as 1), indexes created idempotently.
"""

from __future__ import annotations

from datetime import datetime

from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from bot.models import Account, EvaluationJob, Fact, Goal, Memory, Room


class MongoStore:
    def __init__(self, client: AsyncMongoClient, database: str) -> None:
        self.client = client
        self.db: AsyncDatabase = client[database]

    async def ensure_indexes(self) -> None:
        """Create every index the queries below need; safe to call on every start-up."""
        raise NotImplementedError

    async def ping(self) -> None:
        raise NotImplementedError

    # memories -----------------------------------------------------------------------------
    async def insert_memory(self, memory: Memory) -> bool:
        """Store a message; False when a memory with this id exists already (redelivery)."""
        raise NotImplementedError

    async def get_memory(self, memory_id: str) -> Memory | None:
        raise NotImplementedError

    async def get_memories(self, ids: list[str]) -> list[Memory]:
        """The memories with these ids that exist, in the order of `ids`."""
        raise NotImplementedError

    async def recent_memories(
        self, room_id: str, limit: int, *, before: datetime | None = None
    ) -> list[Memory]:
        """The room's last `limit` messages (created before `before` if given), oldest first."""
        raise NotImplementedError

    async def memories_since(
        self, room_id: str, after: datetime | None, *, until: datetime | None = None,
        limit: int = 200,
    ) -> list[Memory]:
        """Messages with after < created_at <= until, oldest first (the last `limit` of them)."""
        raise NotImplementedError

    async def count_memories(self, room_id: str) -> int:
        raise NotImplementedError

    async def delete_memories(self, *, user_id: str, world_id: str) -> int:
        raise NotImplementedError

    # accounts and rooms -------------------------------------------------------------------
    async def upsert_account(self, account: Account) -> None:
        raise NotImplementedError

    async def get_accounts(self, ids: list[str]) -> dict[str, Account]:
        raise NotImplementedError

    async def upsert_room(self, room: Room) -> None:
        raise NotImplementedError

    async def get_room(self, room_id: str) -> Room | None:
        raise NotImplementedError

    async def get_room_mark(self, room_id: str, key: str) -> datetime | None:
        """A per-room bookmark (e.g. when facts were last extracted); None if never set."""
        raise NotImplementedError

    async def set_room_mark(self, room_id: str, key: str, value: datetime) -> None:
        raise NotImplementedError

    # facts --------------------------------------------------------------------------------
    async def insert_fact(self, fact: Fact) -> None:
        raise NotImplementedError

    async def mark_fact_indexed(self, fact_id: str, when: datetime) -> None:
        raise NotImplementedError

    async def unindexed_facts(self, limit: int = 500) -> list[Fact]:
        """Facts whose vector write has not been confirmed (indexed_at is None)."""
        raise NotImplementedError

    async def get_facts(self, ids: list[str]) -> list[Fact]:
        """The facts with these ids that exist, in the order of `ids`."""
        raise NotImplementedError

    async def find_fact_by_text(self, *, subject_id: str, world_id: str, text: str) -> Fact | None:
        """Exact duplicate check: same subject, same world, same normalised text."""
        raise NotImplementedError

    async def facts_about(
        self, subject_ids: list[str], world_id: str, *, limit: int = 10
    ) -> list[Fact]:
        """Most recent facts about these subjects in this world, newest first."""
        raise NotImplementedError

    async def list_facts(
        self, world_id: str, *, subject_id: str | None = None, search: str | None = None,
        skip: int = 0, limit: int = 20,
    ) -> tuple[list[Fact], int]:
        """A page of a world's facts (newest first), optionally for one subject and containing
        `search` (case-insensitive substring), with the total count."""
        raise NotImplementedError

    async def delete_fact(self, fact_id: str, *, world_id: str) -> bool:
        raise NotImplementedError

    async def delete_facts(self, *, subject_id: str, world_id: str) -> list[str]:
        """Delete every fact about a subject in a world; returns the deleted ids."""
        raise NotImplementedError

    # goals --------------------------------------------------------------------------------
    async def insert_goal(self, goal: Goal) -> None:
        raise NotImplementedError

    async def get_goal(self, goal_id: str) -> Goal | None:
        raise NotImplementedError

    async def goals_in_room(
        self, room_id: str, *, only_in_progress: bool = True, limit: int = 20
    ) -> list[Goal]:
        raise NotImplementedError

    async def goals_in_world(self, world_id: str, *, limit: int = 50) -> list[Goal]:
        raise NotImplementedError

    async def replace_goal(self, goal: Goal) -> None:
        raise NotImplementedError

    # evaluation jobs (the durable queue) ----------------------------------------------------
    async def enqueue_job(self, job: EvaluationJob) -> bool:
        """Insert a pending job; False if one with this id exists (same message twice)."""
        raise NotImplementedError

    async def claim_next_job(self, room_id: str) -> EvaluationJob | None:
        """Atomically move the room's oldest pending job to running and return it."""
        raise NotImplementedError

    async def finish_job(self, job_id: str, *, status: str, error: str | None = None) -> None:
        raise NotImplementedError

    async def requeue_stale_jobs(self) -> int:
        """At start-up: jobs left running by a crash become pending again. Returns how many."""
        raise NotImplementedError

    async def rooms_with_pending_jobs(self) -> list[str]:
        raise NotImplementedError

    async def count_jobs(self, *, room_id: str | None = None, status: str | None = None) -> int:
        raise NotImplementedError

    async def idle_rooms(self, *, mark: str, idle_since: datetime) -> list[str]:
        """Rooms whose newest message is older than `idle_since` and newer than their `mark`."""
        raise NotImplementedError

"""The evaluation queue's storage: one document per job in `evaluations`, moved through

    intake -> pending -> running -> done
                           |-> retrying -> running ... -> dead (out of attempts)

by single-document writes, so a crash anywhere leaves a state `recover` can finish from.
An intake job carries a copy of its message: writing it is writing the message durably.
Times that are compared on the server are integer milliseconds (nx-27017 compares dates to
the second and stores a `$set` date as a string).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from bot.domain.records import EvaluationJob, now_ms, utcnow
from bot.storage.batch import Insert, Update
from bot.storage.documents import dump, load_one, millis

logger = logging.getLogger(__name__)

RUNNABLE = ["pending", "retrying"]
# The statuses an operator watches; done jobs are counted separately (they are the history).
WATCHED = ("intake", "pending", "running", "retrying", "failed", "dead")


@dataclass(frozen=True)
class Head:
    """A room's next runnable job, as much of it as claiming needs."""

    id: str
    status: str
    # Interrupted by a crash together with other jobs: runs alone (see recover_interrupted).
    suspect: bool
    # The process that claimed it (`running`) or is answering its message (`intake`).
    owner: str


@dataclass(frozen=True)
class Running:
    """A job in `running`: the process that claimed it (`owner`) may be gone."""

    id: str
    room_id: str
    owner: str
    attempts: int
    # Crashes it was running at, charged or not (see recover_interrupted).
    interruptions: int = 0


class JobStore:
    """The evaluation queue: intake, release, claim, finish or fail, recover after a crash."""

    # The indexes its queries need (names fixed: a second start-up asks for the same).
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        "evaluations": [
            IndexModel(
                [("room_id", ASCENDING), ("status", ASCENDING), ("created_ms", ASCENDING)],
                name="room_status_created_ms",
            ),
            IndexModel([("status", ASCENDING)], name="status"),
        ]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._jobs = db.evaluations

    async def open_intake(
        self, job: EvaluationJob, *, owner: str = ""
    ) -> tuple[EvaluationJob, bool]:
        """Write a job in `intake` holding its message, for the process `owner` that answers
        it; returns the stored job and whether it was created now (False: a job with this id
        existed, returned as stored)."""
        try:
            await self._jobs.insert_one(dict(self.intake_write(job, owner=owner).document))
        except DuplicateKeyError:
            existing = await self.get(job.id)
            if existing is not None:
                return existing, False
            raise
        return job, True

    @staticmethod
    def intake_write(job: EvaluationJob, *, owner: str = "") -> Insert:
        """The write of a job in `intake` for the process `owner` that answers it, for a batch
        (bot.storage.batch)."""
        document = dump(job)
        document["created_ms"] = millis(job.created_at)
        document["owner"] = owner
        if job.message is not None and job.message_ms is None:
            document["message_ms"] = millis(job.message.created_at)
        if job.message is not None and not job.people:
            document["people"] = list(dict.fromkeys([job.message.user_id, *job.message.mentions]))
        return Insert("evaluations", document)

    async def insert(self, job: EvaluationJob) -> bool:
        """Insert a runnable job; False if one with this id exists (the same message twice)."""
        document = dump(job)
        document["created_ms"] = millis(job.created_at)
        try:
            await self._jobs.insert_one(document)
        except DuplicateKeyError:
            return False
        return True

    async def release(self, job_id: str, *, did_respond: bool, position: int | None) -> None:
        """The reply is settled: the job may run. Drops the message copy (now in memories)."""
        write = self.release_write(job_id, did_respond=did_respond, position=position)
        await self._jobs.update_one(dict(write.filter), dict(write.update))

    @staticmethod
    def release_write(job_id: str, *, did_respond: bool, position: int | None) -> Update:
        """The write of `release`, for a batch (bot.storage.batch)."""
        return Update(
            "evaluations",
            {"_id": job_id, "status": "intake"},
            {
                "$set": {
                    "status": "pending",
                    "did_respond": did_respond,
                    "position": position,
                    "message": None,
                    "due_ms": 0,
                }
            },
        )

    async def get(self, job_id: str) -> EvaluationJob | None:
        return load_one(EvaluationJob, await self._jobs.find_one({"_id": job_id}))

    async def intake_owners(self) -> set[str]:
        """The processes answering messages right now (or that died doing so)."""
        owners = await self._jobs.distinct("owner", {"status": "intake"})
        return {str(owner or "") for owner in owners}

    async def in_intake(self, *, not_owned_by: Collection[str] = ()) -> list[EvaluationJob]:
        """Jobs whose message was taken in but never released (a crash mid-reply), oldest
        first; those of the processes `not_owned_by` (alive, still answering) left out."""
        cursor = self._jobs.find({"status": "intake"}).sort("created_ms", ASCENDING)
        return [
            job
            for doc in await cursor.to_list()
            if str(doc.get("owner") or "") not in not_owned_by
            and (job := load_one(EvaluationJob, doc))
        ]

    async def head(self, room_id: str, *, running_blocks: bool = True) -> Head | int | None:
        """The room's oldest unfinished job: a runnable one, or one the room waits for (still
        `running`, or in `intake`: its message is being answered, maybe by another process),
        the time (ms) it becomes due when it is backing off (the room waits, so its
        evaluations stay in order), or None. `running_blocks=False` skips the last two."""
        statuses = [*RUNNABLE, "running", "intake"] if running_blocks else RUNNABLE
        document = await self._jobs.find_one(
            {"room_id": room_id, "status": {"$in": statuses}},
            {"due_ms": 1, "status": 1, "suspect": 1, "owner": 1},
            sort=[("created_ms", ASCENDING)],
        )
        if document is None:
            return None
        due = int(document.get("due_ms") or 0)
        if document["status"] in RUNNABLE and due > now_ms():
            return due
        return Head(
            document["_id"],
            document["status"],
            bool(document.get("suspect")),
            str(document.get("owner") or ""),
        )

    async def claim(self, head: Head, *, owner: str) -> EvaluationJob | None:
        """Claim the job `head` names for the process `owner`: one `find_one_and_update` on its
        id and status, so a job is handed to exactly one claimer (None: someone else was first).
        """
        document = await self._jobs.find_one_and_update(
            {"_id": head.id, "status": head.status},
            {
                "$set": {"status": "running", "claimed_at": utcnow(), "owner": owner, "suspect": 0},
                "$inc": {"attempts": 1},
            },
            return_document=ReturnDocument.AFTER,
        )
        return load_one(EvaluationJob, document)

    async def claim_next(self, room_id: str, *, owner: str = "") -> EvaluationJob | int | None:
        """The room's oldest runnable job claimed (`head` then `claim`, again while someone else
        claims first), the time it becomes due, or None. For tests and tools: the worker holds
        the room's lease and a run slot between the two, and waits for a running job."""
        while True:
            head = await self.head(room_id, running_blocks=False)
            if not isinstance(head, Head):
                return head
            job = await self.claim(head, owner=owner)
            if job is not None:
                return job

    async def has_due(self, room_id: str) -> bool:
        """Whether the room has a job that may run now."""
        found = await self._jobs.find_one(
            {"room_id": room_id, "status": {"$in": RUNNABLE}, "due_ms": {"$lte": now_ms()}},
            {"_id": 1},
        )
        return found is not None

    async def record_selection(self, job_id: str, names: list[str]) -> None:
        await self._jobs.update_one({"_id": job_id}, {"$set": {"selected": list(names)}})

    async def record_ran(self, job_id: str, names: list[str]) -> None:
        # Written whole: nx ignores $addToSet on a missing field.
        await self._jobs.update_one({"_id": job_id}, {"$set": {"ran": list(names)}})

    async def finish(self, job_id: str, *, ran: list[str]) -> None:
        await self._jobs.update_one(
            {"_id": job_id},
            {"$set": {"status": "done", "finished_at": utcnow(), "error": None, "ran": ran}},
        )

    async def fail(self, job_id: str, *, error: str, retry_at_ms: int | None) -> None:
        """A failed attempt: retried at `retry_at_ms`, or `dead` when None (out of attempts)."""
        fields: dict[str, Any] = {"error": error[:500], "finished_at": utcnow()}
        if retry_at_ms is None:
            fields["status"] = "dead"
        else:
            fields.update(status="retrying", due_ms=retry_at_ms)
        await self._jobs.update_one({"_id": job_id}, {"$set": fields})

    async def running(self) -> list[Running]:
        """Every job in `running`, with its room and the process that claimed it."""
        fields = {"room_id": 1, "owner": 1, "attempts": 1, "interruptions": 1}
        cursor = self._jobs.find({"status": "running"}, fields)
        return [
            Running(
                d["_id"],
                d["room_id"],
                str(d.get("owner") or ""),
                int(d.get("attempts") or 0),
                int(d.get("interruptions") or 0),
            )
            async for d in cursor
        ]

    async def hand_back(self, job_ids: Collection[str], *, owner: str) -> int:
        """Jobs `owner` stopped running on purpose (a shutdown) run again first, their attempt
        given back: stopping is no crash. Returns how many went back."""
        if not job_ids:
            return 0
        result = await self._jobs.update_many(
            {"_id": {"$in": list(job_ids)}, "status": "running", "owner": owner},
            {"$set": {"status": "retrying", "due_ms": 0}, "$inc": {"attempts": -1}},
        )
        return result.modified_count

    async def recover_interrupted(
        self,
        interrupted: list[Running],
        *,
        charged: Collection[str],
        max_attempts: int,
    ) -> tuple[int, int]:
        """Jobs a dead process left `running` run again. Returns (requeued, dead).

        A crash is charged as an attempt only to the jobs in `charged` (the caller's blame: a
        job that was the only thing the dead process was doing); the others get their attempt
        back and are marked `suspect`, and the worker runs suspects one at a time
        (bot/queue/worker.py), so that a job that kills the process is charged on its next run
        and ends `dead` after `max_attempts`, while its innocent neighbours never do.
        A job that kills its process while messages keep arriving is never alone, so every
        crash is also counted, charged or not, and a job at twice `max_attempts` of them is
        `dead` too: a crash loop ends.
        Each write names the job's owner: a job another process has meanwhile reclaimed and
        claimed again is left alone.
        """
        ceiling = 2 * max_attempts
        dead = requeued = 0
        for job in interrupted:
            update: dict[str, Any] = {
                "$set": {"status": "retrying", "due_ms": 0, "suspect": 1},
                "$inc": {"interruptions": 1},
            }
            if job.id in charged and job.attempts >= max_attempts:
                error = "interrupted on every attempt"
            elif job.interruptions + 1 >= ceiling:
                error = f"running at {job.interruptions + 1} crashes of its process"
            else:
                error = None
            gone = error is not None
            if gone:
                update = {"$set": {"status": "dead", "error": error}}
            elif job.id not in charged:
                update["$inc"]["attempts"] = -1
            # A job claimed before owners were recorded has none (None matches a missing field).
            owner = job.owner or {"$in": ["", None]}
            result = await self._jobs.update_one(
                {"_id": job.id, "status": "running", "owner": owner}, update
            )
            if result.modified_count:
                dead += gone
                requeued += not gone
        return requeued, dead

    async def rooms_with_runnable(self) -> list[str]:
        # One `distinct` per status: nx-27017's `distinct` ignores an `$in` filter and would
        # name every room that ever had a job.
        rooms: set[str] = set()
        for status in RUNNABLE:
            rooms.update(await self._jobs.distinct("room_id", {"status": status}))
        return sorted(rooms)

    async def counts(self, *, room_ids: list[str] | None = None) -> dict[str, int]:
        """Jobs per status, every status of `WATCHED` and `done` present (0 when none); only
        those of `room_ids` if given (a world's rooms, for its admins' /stats)."""
        counts = dict.fromkeys((*WATCHED, "done"), 0)
        where: dict[str, Any] = {} if room_ids is None else {"room_id": {"$in": list(room_ids)}}
        for status in counts:
            counts[status] = await self._jobs.count_documents({**where, "status": status})
        return counts

    async def delete_for_messages(
        self, message_ids: list[str], *, user_id: str, world_id: str, statuses: list[str] | None
    ) -> int:
        """Delete the jobs of these messages, and the intake jobs holding a copy of a message
        the person wrote in the world (an evaluation job carries the message text until it
        is released). `statuses` None: in any status. Returns how many went."""
        about: list[dict[str, Any]] = [
            {"status": "intake", "message.user_id": user_id, "message.world_id": world_id}
        ]
        if message_ids:
            about.append({"message_id": {"$in": list(message_ids)}})
        query: dict[str, Any] = {"$or": about}
        if statuses is not None:
            query = {"$and": [query, {"status": {"$in": list(statuses)}}]}
        result = await self._jobs.delete_many(query)
        return result.deleted_count

    async def count_for_messages(self, message_ids: list[str], *, statuses: list[str]) -> int:
        """How many jobs of these messages are in one of `statuses`."""
        if not message_ids:
            return 0
        query = {"message_id": {"$in": list(message_ids)}, "status": {"$in": list(statuses)}}
        return await self._jobs.count_documents(query)

    async def count(self, *, room_id: str | None = None, status: str | None = None) -> int:
        """Jobs in a room and/or in a status (all jobs without either)."""
        query: dict[str, Any] = {}
        if room_id is not None:
            query["room_id"] = room_id
        if status is not None:
            query["status"] = status
        return await self._jobs.count_documents(query)

"""The evaluation worker: durable jobs in MongoDB, run one room at a time, in order.

The reply never waits for evaluators: `enqueue()` writes a job and returns. One asyncio task
per busy room drains that room's jobs in creation order; rooms run concurrently up to a limit.
Jobs are claimed with an atomic find-and-modify, so several Mnemo processes can share the
queue, and a crash leaves jobs `running` for `recover()` to hand out again at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.models import EvaluationJob, Memory, Trigger, stable_id
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# Runs the evaluators for one job; returns the names of the evaluators that ran.
JobRunner = Callable[[EvaluationJob], Awaitable[list[str]]]


class EvaluationQueue:
    def __init__(self, store: MongoStore, run: JobRunner, *, concurrency: int = 8) -> None:
        self._store = store
        self._run = run
        self._limit = asyncio.Semaphore(concurrency)
        self._workers: dict[str, asyncio.Task[None]] = {}
        # Rooms that got a job while their worker was already looking: look again.
        self._dirty: set[str] = set()
        self._stopping = False

    async def enqueue(
        self,
        message: Memory,
        *,
        did_respond: bool,
        trigger: Trigger = "message",
        position: int | None = None,
    ) -> EvaluationJob:
        job = EvaluationJob(
            id=stable_id("evaluation", trigger, message.id),
            room_id=message.room_id,
            message_id=message.id,
            did_respond=did_respond,
            trigger=trigger,
            position=position,
        )
        await self._store.enqueue_job(job)
        self.wake(message.room_id)
        return job

    def wake(self, room_id: str) -> None:
        if self._stopping:
            return
        self._dirty.add(room_id)
        worker = self._workers.get(room_id)
        if worker is None or worker.done():
            self._workers[room_id] = asyncio.create_task(
                self._drain(room_id), name=f"evaluations:{room_id}"
            )

    async def _drain(self, room_id: str) -> None:
        while not self._stopping:
            self._dirty.discard(room_id)
            job = await self._store.claim_next_job(room_id)
            if job is None:
                if room_id in self._dirty:
                    continue
                break
            async with self._limit:
                await self._run_one(job)
        self._workers.pop(room_id, None)

    async def _run_one(self, job: EvaluationJob) -> None:
        try:
            ran = await self._run(job)
        except asyncio.CancelledError:
            raise  # left `running`: recover() hands it out again on the next start
        except Exception as error:
            log.exception("evaluation job %s failed", job.id)
            await self._store.finish_job(job.id, status="failed", error=str(error)[:500])
            return
        await self._store.finish_job(job.id, status="done", ran=ran)

    async def recover(self) -> int:
        """Hand out again the jobs a crash or restart left pending or running."""
        requeued = await self._store.requeue_stale_jobs()
        rooms = await self._store.rooms_with_pending_jobs()
        for room_id in rooms:
            self.wake(room_id)
        if requeued or rooms:
            log.info("resuming evaluations: %d interrupted, %d rooms pending", requeued, len(rooms))
        return requeued

    async def join(self, room_id: str | None = None, timeout: float | None = None) -> bool:
        """Wait until the room's (or every room's) queue is drained; False on time-out.

        The deadline only stops the waiting: running evaluations go on (a slow model is
        normal), so no model call is dropped and no job is left `running` by a caller that
        stopped waiting. `asyncio.wait` never cancels what it waits for; `wait_for` would.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            workers = [
                task
                for room, task in list(self._workers.items())
                if (room_id is None or room == room_id) and not task.done()
            ]
            if not workers:
                return True
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            await asyncio.wait(workers, timeout=remaining)

    @property
    def busy_rooms(self) -> int:
        return sum(1 for task in self._workers.values() if not task.done())

    async def stop(self, grace: float = 10.0) -> None:
        """Let running evaluations finish for `grace` seconds, then cancel the rest."""
        finished = await self.join(timeout=grace)
        self._stopping = True
        if not finished:
            for task in self._workers.values():
                task.cancel()
            await asyncio.gather(*self._workers.values(), return_exceptions=True)
        self._workers.clear()

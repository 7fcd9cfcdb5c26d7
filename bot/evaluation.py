"""The evaluation worker: durable jobs in MongoDB, run one room at a time, in order.

The reply never waits for evaluators. `open_intake()` writes a message's job (holding the
message) before anything else happens to it, and `release()` makes it runnable once the
reply is settled. One asyncio task per busy room drains that room's jobs in creation order;
rooms run concurrently up to a limit. Jobs are claimed with an atomic find-and-modify, so
several Mnemo processes can share the queue.

A failed attempt (selection or a handler) is retried with exponential back-off up to
`max_attempts`, then left `dead` for the operator; a crash leaves the job `running` for
`recover()`, which counts that as an attempt too, so a job that kills the process cannot do
so forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from bot.faults import FaultHook
from bot.models import EvaluationJob, Memory, Trigger, stable_id
from bot.storage.jobs import now_ms
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# Runs the evaluators for one job; returns the names of the evaluators that ran.
JobRunner = Callable[[EvaluationJob], Awaitable[list[str]]]


class EvaluationFailed(Exception):
    """A step of an evaluation failed; the job is retried. The message is its reason."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    # The first retry waits this long, each next one twice as long, up to `max_delay`.
    base_delay: float = 5.0
    max_delay: float = 600.0

    def delay(self, attempts: int) -> float:
        return min(self.base_delay * 2 ** max(attempts - 1, 0), self.max_delay)


def describe_queue(counts: Mapping[str, int]) -> str:
    """One line for /stats and `mnemo doctor`: the jobs an operator may need to look at."""
    shown = ("done", "pending", "running", "retrying", "dead")
    text = ", ".join(f"{counts.get(status, 0)} {status}" for status in shown)
    waiting = counts.get("intake", 0)
    return text + (f", {waiting} awaiting their reply" if waiting else "")


def job_id_for(trigger: Trigger, message_id: str) -> str:
    return stable_id("evaluation", trigger, message_id)


class EvaluationQueue:
    def __init__(
        self,
        store: MongoStore,
        run: JobRunner,
        *,
        concurrency: int = 8,
        retry: RetryPolicy | None = None,
        faults: FaultHook | None = None,
    ) -> None:
        self._store = store
        self.jobs = store.jobs
        self._run = run
        self.retry = retry or RetryPolicy()
        self._faults = faults or FaultHook()
        self._limit = asyncio.Semaphore(concurrency)
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        # Rooms that got a job while their worker was already looking: look again.
        self._dirty: set[str] = set()
        self._stopping = False

    async def open_intake(self, message: Memory) -> tuple[EvaluationJob, bool]:
        """The message's job, written before the message itself and holding a copy of it;
        not runnable until `release()`. Returns the job and whether it is new."""
        job = EvaluationJob(
            id=job_id_for("message", message.id),
            room_id=message.room_id,
            message_id=message.id,
            did_respond=False,
            status="intake",
            message=message,
        )
        return await self.jobs.open_intake(job)

    async def release(self, job: EvaluationJob, *, did_respond: bool, position: int | None) -> None:
        await self.jobs.release(job.id, did_respond=did_respond, position=position)
        self.wake(job.room_id)

    async def enqueue(
        self,
        message: Memory,
        *,
        did_respond: bool,
        trigger: Trigger = "message",
        position: int | None = None,
    ) -> EvaluationJob:
        job = EvaluationJob(
            id=job_id_for(trigger, message.id),
            room_id=message.room_id,
            message_id=message.id,
            did_respond=did_respond,
            trigger=trigger,
            position=position,
        )
        await self.jobs.insert(job)
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
        try:
            while not self._stopping:
                self._dirty.discard(room_id)
                job = await self.jobs.claim_next(room_id)
                if isinstance(job, int):  # the room's next job is backing off
                    self._wake_at(room_id, job)
                    break
                if job is None:
                    if room_id in self._dirty:
                        continue
                    break
                async with self._limit:
                    await self._run_one(job)
        finally:
            # Even when the task dies: join() waits for the workers listed here.
            if self._workers.get(room_id) is asyncio.current_task():
                del self._workers[room_id]

    def _wake_at(self, room_id: str, due_ms: int) -> None:
        if room_id in self._timers:
            self._timers[room_id].cancel()
        delay = max((due_ms - now_ms()) / 1000, 0.0)
        loop = asyncio.get_running_loop()
        self._timers[room_id] = loop.call_later(delay, self._timer_fired, room_id)

    def _timer_fired(self, room_id: str) -> None:
        self._timers.pop(room_id, None)
        self.wake(room_id)

    async def _run_one(self, job: EvaluationJob) -> None:
        self._faults.reached("evaluation:claimed")
        try:
            ran = await self._run(job)
        except asyncio.CancelledError:
            raise  # left `running`: recover() hands it out again on the next start
        except Exception as error:
            reason = str(error) or type(error).__name__
            if job.attempts >= self.retry.max_attempts:
                log.error(
                    "evaluation %s failed %d times, giving up (dead): %s",
                    job.id,
                    job.attempts,
                    reason,
                )
                await self.jobs.fail(job.id, error=reason, retry_at_ms=None)
                return
            delay = self.retry.delay(job.attempts)
            log.warning(
                "evaluation %s failed (attempt %d of %d), retrying in %gs: %s",
                job.id,
                job.attempts,
                self.retry.max_attempts,
                delay,
                reason,
                exc_info=not isinstance(error, EvaluationFailed),
            )
            await self.jobs.fail(job.id, error=reason, retry_at_ms=now_ms() + int(delay * 1000))
            return
        self._faults.reached("evaluation:before-finish")
        await self.jobs.finish(job.id, ran=ran)

    async def recover(self) -> int:
        """Hand out again the jobs a crash or restart left runnable or running."""
        requeued, dead = await self.jobs.recover_running(max_attempts=self.retry.max_attempts)
        if dead:
            log.error("%d evaluation job(s) were interrupted on every attempt: left dead", dead)
        rooms = await self.jobs.rooms_with_runnable()
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

    async def counts(self) -> dict[str, int]:
        """Jobs per status (intake, pending, running, retrying, failed, dead, done)."""
        return await self.jobs.counts()

    @property
    def busy_rooms(self) -> int:
        return sum(1 for task in self._workers.values() if not task.done())

    async def stop(self, grace: float = 10.0) -> None:
        """Let running evaluations finish for `grace` seconds, then cancel the rest."""
        finished = await self.join(timeout=grace)
        self._stopping = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not finished:
            for task in self._workers.values():
                task.cancel()
            await asyncio.gather(*self._workers.values(), return_exceptions=True)
        self._workers.clear()

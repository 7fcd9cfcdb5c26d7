"""The evaluation worker: durable jobs in MongoDB, run one room at a time, in order.

The reply never waits for evaluators. `open_intake()` writes a message's job (holding the
message) before anything else happens to it, and `release()` makes it runnable once the
reply is settled. One asyncio task per busy room drains that room's jobs in creation order;
rooms run concurrently up to a limit.

Several processes share the queue: a room is drained by the one process holding its lease
(bot/queue/leases.py; renewed while it has work, released when drained unless no other process
is live), so its jobs run in order and once, whichever process took its messages in; a process
finding a room leased leaves it to the holder, which looks again after releasing. A keeper
renews this process's leases (its own too) and sweeps: jobs left `running` by a dead process
(its lease expired) run again and unleased rooms with jobs are drained here, within about
`lease_seconds`.

A failed attempt (selection or a handler) is retried with exponential back-off up to
`max_attempts`, then left `dead` for the operator. A crash is charged only to a job that was
all its process was doing (bot/queue/blame.py); jobs interrupted beside other work then run
one at a time. Jobs a shutdown stops are handed back with their attempt (`stop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass

from bot.domain.records import EvaluationJob, Memory, Trigger, now_ms, stable_id
from bot.faults import FaultHook
from bot.i18n import N_, SOURCE_TEXTS, Texts
from bot.queue.blame import blame
from bot.queue.leases import RoomLeases
from bot.queue.slots import RunSlots
from bot.storage.leases import process_key, room_key
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
        return min(self.base_delay * 2.0 ** max(attempts - 1, 0), self.max_delay)


# The jobs' statuses as /stats shows them (in English; the admin's language where shown).
_STATUS_SHOWN = {
    "done": N_("{count} done"),
    "pending": N_("{count} pending"),
    "running": N_("{count} running"),
    "retrying": N_("{count} retrying"),
    "dead": N_("{count} dead"),
}


def describe_queue(counts: Mapping[str, int], texts: Texts = SOURCE_TEXTS) -> str:
    """One line for /stats and `mnemo doctor`: the jobs an operator may need to look at."""
    text = ", ".join(
        texts.gettext(shown).format(count=counts.get(status, 0))
        for status, shown in _STATUS_SHOWN.items()
    )
    waiting = counts.get("intake", 0)
    if not waiting:
        return text
    return text + ", " + texts.gettext("{count} awaiting their reply").format(count=waiting)


def job_id_for(trigger: Trigger, message_id: str, key: str = "") -> str:
    if key:
        return stable_id("evaluation", trigger, message_id, key)
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
        lease_seconds: float = 30.0,
        owner: str | None = None,
    ) -> None:
        self._store = store
        self.jobs = store.jobs
        self._leases = store.leases
        self._run = run
        self.retry = retry or RetryPolicy()
        self._faults = faults or FaultHook()
        self._slots = RunSlots(concurrency)
        # This process, as the owner of its leases and claims (a new one at every start).
        self.owner = owner or uuid.uuid4().hex
        self.lease_seconds = lease_seconds
        self._ttl_ms = int(lease_seconds * 1000)
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        # Rooms that got a job while their worker was already looking: look again.
        self._dirty: set[str] = set()
        # Its own lease and its rooms' (held while draining, kept while alone).
        self._rooms = RoomLeases(store.leases, self.owner, self._ttl_ms)
        # Ids of the jobs this process is running right now.
        self._active: set[str] = set()
        self._keeper: asyncio.Task[None] | None = None
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
        # Owned, so that other processes wait for this one's reply instead of taking the
        # message over, unless this process dies (its process lease expires).
        self._start_keeper()
        return await self.jobs.open_intake(job, owner=self.owner)

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
        key: str = "",
    ) -> EvaluationJob:
        """Queue a job for the message (once: a second call with the same trigger and `key`
        changes nothing). `key` tells apart jobs of one message and trigger (each edit's)."""
        job = EvaluationJob(
            id=job_id_for(trigger, message.id, key),
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
        self._start_keeper()
        self._dirty.add(room_id)
        worker = self._workers.get(room_id)
        if worker is None or worker.done():
            self._workers[room_id] = asyncio.create_task(
                self._drain(room_id), name=f"evaluations:{room_id}"
            )

    async def _drain(self, room_id: str) -> None:
        try:
            while not self._stopping:
                if not await self._rooms.take(room_id):
                    # Another live process drains the room; it looks for new jobs after it
                    # releases the lease, and the keeper's sweep covers its death.
                    return
                try:
                    again = await self._drain_held(room_id)
                finally:
                    await self._rooms.drained(room_id)
                if self._stopping or room_id in self._rooms.lost:
                    return
                # Woken meanwhile (a release, a reclaim here, a job another process wrote
                # while the lease was held here): look again rather than wait for a timer.
                if room_id in self._dirty:
                    continue
                # (Alone, nobody else writes jobs: no need to look.)
                if not again or self._rooms.alone or not await self.jobs.has_due(room_id):
                    return
        finally:
            # Even when the task dies: join() waits for the workers listed here.
            if self._workers.get(room_id) is asyncio.current_task():
                del self._workers[room_id]

    async def _drain_held(self, room_id: str) -> bool:
        """Run the room's jobs in order while holding its lease. False: the room must wait
        (a job backing off, or one still running elsewhere), a timer will look again."""
        while not self._stopping and room_id not in self._rooms.lost:
            self._dirty.discard(room_id)
            head = await self.jobs.head(room_id)
            if isinstance(head, int):  # the room's next job is backing off
                self._wake_at(room_id, head)
                return False
            if head is None:
                if room_id in self._dirty:
                    continue
                return True
            if head.status == "intake":
                # Its message is still being answered (here or in another process): the
                # evaluation waits, in order. `release()` wakes the room; the timer is the
                # fallback for a process that dies answering (then start-up recovery, or a
                # redelivery, finishes the intake).
                self._wake_at(room_id, now_ms() + self._ttl_ms // 3)
                return False
            if head.status == "running":
                # Its process died or lost the lease while stalled. A reclaim that won the
                # race to requeue it (start-up's, the keeper's) wakes the room: look again.
                if await self.reclaim() == 0 and room_id not in self._dirty:
                    self._wake_at(room_id, now_ms() + self._ttl_ms // 3)
                    return False
                continue
            async with self._slots.hold(exclusive=head.suspect):
                job = await self.jobs.claim(head, owner=self.owner)
                if job is None:
                    continue
                self._active.add(job.id)
                try:
                    await self._run_one(job)
                finally:
                    self._active.discard(job.id)
        return False

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

    async def recover(self, *, busy: Collection[str] = ()) -> int:
        """At start-up: announce this process (its process lease), hand out again the jobs
        a dead process left running, wake every room with runnable jobs, start the keeper.
        `busy`: the owners that had a message in intake when start-up began (read by
        `taking_messages_in` before the intake's own recovery took those messages over)."""
        await self._rooms.announce()
        requeued = await self.reclaim(busy=busy)
        rooms = await self.jobs.rooms_with_runnable()
        for room_id in rooms:
            self.wake(room_id)
        self._start_keeper()
        if requeued or rooms:
            log.info("resuming evaluations: %d interrupted, %d rooms pending", requeued, len(rooms))
        return requeued

    async def taking_messages_in(self) -> set[str]:
        """The processes with a message in intake: a crash of theirs is not charged to the
        one evaluation they were running beside it (see `blame`)."""
        return await self.jobs.intake_owners()

    async def reclaim(self, *, busy: Collection[str] = ()) -> int:
        """Requeue the jobs left `running` by a process that is gone (see `blame`); returns
        how many will run again. `busy`: owners known to have had a message in intake, beside
        those that still have one."""
        running = await self.jobs.running()
        if not running:
            return 0
        alive = await self.alive({job.owner for job in running})
        busy = {*busy, *await self.taking_messages_in()}
        interrupted, charged = blame(running, alive, self.owner, self._active, busy)
        if not interrupted:
            return 0
        requeued, dead = await self.jobs.recover_interrupted(
            interrupted, charged=charged, max_attempts=self.retry.max_attempts
        )
        if dead:
            log.error("%d evaluation job(s) were interrupted on every attempt: left dead", dead)
        for room_id in {job.room_id for job in interrupted}:
            self.wake(room_id)
        return requeued

    async def alive(self, owners: Collection[str]) -> set[str]:
        """The processes of `owners` that are running (this one always is)."""
        others = {owner for owner in owners if owner and owner != self.owner}
        live = await self._leases.live([process_key(owner) for owner in others])
        return {self.owner} | {owner for owner in others if process_key(owner) in live}

    async def orphaned_intake(self, answering: Collection[str] = ()) -> list[EvaluationJob]:
        """Messages taken in but never released, oldest first: by a dead process, or by this one
        and not being answered now (ids in `answering`; e.g. left by the journal's replay at
        start-up). Other live processes are still answering theirs."""
        others = await self.alive(await self.jobs.intake_owners()) - {self.owner}
        jobs = await self.jobs.in_intake(not_owned_by=others)
        return [job for job in jobs if job.message_id not in answering]

    async def sweep(self) -> None:
        """Renew this process's leases, then take over what dead processes left: their
        interrupted jobs, and rooms with runnable jobs that nobody holds."""
        await self._rooms.renew()
        requeued = await self.reclaim()
        if requeued:
            log.info("took over %d evaluation(s) interrupted in another process", requeued)
        runnable = await self.jobs.rooms_with_runnable()
        rooms = [room for room in runnable if room not in self._workers]
        if rooms:
            live = await self._leases.live([room_key(room) for room in rooms])
            for room_id in rooms:
                if live.get(room_key(room_id), self.owner) == self.owner:  # unheld, or kept here
                    self.wake(room_id)

    def _start_keeper(self) -> None:
        if self._keeper is None or self._keeper.done():
            self._keeper = asyncio.create_task(self._keep(), name="evaluations:keeper")

    async def _keep(self) -> None:
        # A third of the lease: two renewals may fail (a slow database) before one expires.
        interval = self.lease_seconds / 3
        try:
            await self._rooms.announce()
        except Exception as error:
            log.warning("evaluation leases: could not announce this process: %s", error)
        while not self._stopping:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception as error:
                # The database may be briefly away; the next round tries again.
                log.warning("evaluation leases: renewal or sweep failed: %s", error)

    async def flush_room(self, message: Memory, timeout: float | None = None) -> bool:
        """Learn now from a room's unlearned messages (as the idle flush would), from `message`
        on, and wait up to `timeout` seconds; False when learning is still going on."""
        await self.enqueue(message, did_respond=True, trigger="idle")
        return await self.join(message.room_id, timeout)

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

    async def stop(self, grace: float = 10.0) -> None:
        """Let running evaluations finish for `grace` seconds, then cancel the rest."""
        finished = await self.join(timeout=grace)
        self._stopping = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not finished:
            stopped = set(self._active)
            for task in self._workers.values():
                task.cancel()
            await asyncio.gather(*self._workers.values(), return_exceptions=True)
            # Stopped on purpose, not by a crash: they run first at the next start with their
            # attempt back (left `running`, a restart would charge it as a crash). A slow model
            # outlives the grace, so every restart during a long evaluation counted.
            try:
                await self.jobs.hand_back(stopped, owner=self.owner)
            except Exception as error:  # the database is away: start-up recovery requeues them
                log.warning("could not hand back %d stopped evaluation(s): %s", len(stopped), error)
        self._workers.clear()
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
            self._keeper = None
            # Gone: what this process left (intake, interrupted jobs) is anyone's now.
            with contextlib.suppress(Exception):
                await self._rooms.release_all()

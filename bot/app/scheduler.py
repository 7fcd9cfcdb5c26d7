"""Background jobs on APScheduler's AsyncIOScheduler, in the bot's own event loop.

- idle flush: a conversation that goes quiet before an evaluator's next turn still gets
  learned from: each quiet room with messages past an evaluator's `idle_mark` (what it has
  read up to) gets one evaluation (trigger "idle") on its latest message from a person;
- re-index: vectors whose Chroma write failed are rebuilt from MongoDB;
- retention (when MNEMO_RETENTION_DAYS is set): messages older than that, and their vectors,
  are deleted daily and at start-up, once per UTC day in a deployment (bot/privacy/retention.py);
- plugins' tasks (`Plugin.tasks`, e.g. sending what a plugin planned to say): in every
  process, since each process reaches only the platforms it runs; a task claims each piece of
  its work atomically itself, so none is done twice.

Jobs never overlap themselves (`max_instances=1`), missed runs collapse into one
(`coalesce=True`), and each job logs its own errors so one bad run never stops the schedule.
Each run happens once per deployment, not once per process: a run first takes the lease of its
job's current period (`run:<job>:<period>` in the `leases` collection, see
`OncePerDeployment`), and every other process whose scheduler fires in that period skips it.

    scheduler = build_scheduler(runtime, idle_minutes=10)
    scheduler.start()        # inside the running loop
    ...
    scheduler.shutdown(wait=False)

Even without the lease the jobs would be safe to run twice (idle jobs have a stable id per
message; re-indexing is an upsert), only wasteful; jobs added later need not be.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from bot.domain.records import utcnow
from bot.privacy.forgetting import DatabaseFiles
from bot.privacy.retention import Retention, delete_expired

if TYPE_CHECKING:
    from bot.domain.records import Memory
    from bot.plugin.api import Task
    from bot.plugin.host import PluginHost
    from bot.runtime.agent import AgentRuntime
    from bot.storage.leases import Leases

log = logging.getLogger(__name__)

# Set here: the newest message of the room when it was last flushed, so a room that stays
# quiet (and whose evaluators learn nothing from it) is flushed only once.
FLUSH_MARK = "idle_flushed_at"
# How far back to look for the latest message from a person behind the bot's own replies.
_LOOKBACK = 20

IDLE_FLUSH_JOB = "idle-flush"
REINDEX_JOB = "reindex"
RETENTION_JOB = "retention"


@dataclass(frozen=True)
class OncePerDeployment:
    """Decides which process runs a timed job's run: the first to take the lease of the job's
    current period (wall-clock time divided by its interval). Every process's scheduler fires
    once per interval, so each period sees at least one try while any process is up, and the
    lease lets exactly one of them run."""

    leases: Leases
    # This process (the evaluation queue's owner id).
    owner: str
    clock: Callable[[], float] = time.time

    async def claim(self, job: str, every_seconds: float) -> bool:
        """True if this process runs `job` for the current period; False: another one does."""
        period_ms = max(int(every_seconds * 1000), 1)
        now = int(self.clock() * 1000)
        period = now // period_ms
        # Held to the end of the next period, never released: a process firing late in this
        # period (its clock a little behind) must still find it taken.
        until = (period + 2) * period_ms
        if not await self.leases.take(f"run:{job}:{period}", self.owner, until - now, now=now):
            return False
        await self.leases.drop_expired(now=now)  # earlier periods' leases
        return True


async def run_idle_flush(runtime: AgentRuntime, idle_minutes: float) -> int:
    """Enqueue an idle evaluation for every quiet room with unlearned messages.

    A room qualifies when its newest message is older than `idle_minutes` and newer than its
    last flush and than the mark of at least one evaluator declaring an `idle_mark`. Returns
    the number of rooms enqueued (none when no evaluator declares a mark).
    """
    store = runtime.store
    marks = runtime.registry.idle_marks
    if not marks:
        return 0
    idle_since = utcnow() - timedelta(minutes=idle_minutes)
    unlearned: list[str] = []
    for mark in marks:
        for room_id in await store.rooms.idle(mark=mark, idle_since=idle_since):
            if room_id not in unlearned:
                unlearned.append(room_id)
    if not unlearned:
        return 0
    unflushed = set(await store.rooms.idle(mark=FLUSH_MARK, idle_since=idle_since))
    enqueued = 0
    for room_id in unlearned:  # longest idle first
        if room_id not in unflushed:
            continue
        recent = await store.memories.recent(room_id, _LOOKBACK)
        if not recent:
            continue
        latest = _latest_from_a_person(recent, runtime.agent_id)
        if latest is not None:
            # The job id derives from the message: enqueueing it twice is a no-op.
            await runtime.evaluations.enqueue(latest, did_respond=True, trigger="idle")
            enqueued += 1
        # Marked even without a person's message (a room of only bot replies has nothing
        # to learn), so the room is not looked at again until someone speaks.
        await store.rooms.set_mark(room_id, FLUSH_MARK, recent[-1].created_at)
    if enqueued:
        log.info("idle flush: %d quiet room(s) queued for evaluation", enqueued)
    return enqueued


def _latest_from_a_person(messages: list[Memory], agent_id: str) -> Memory | None:
    return next((m for m in reversed(messages) if m.user_id != agent_id), None)


async def run_reindex(runtime: AgentRuntime) -> int:
    """Rebuild the vectors of facts whose Chroma write failed; returns how many."""
    rebuilt = await runtime.knowledge.reindex_missing()
    if rebuilt:
        log.info("re-indexed %d fact vector(s) after failed writes", rebuilt)
    return rebuilt


async def _plugin_task(plugins: PluginHost, task: Task) -> None:
    try:
        await plugins.run_task(task)
    except Exception:
        log.exception("plugin task %s failed; its next run tries again", task.name)


async def _timed(
    once: OncePerDeployment,
    job: str,
    every_seconds: float,
    run: Callable[[], Awaitable[object]],
    after_a_failure: str,
) -> None:
    try:
        if await once.claim(job, every_seconds):
            await run()
    except Exception:
        log.exception("%s failed; %s", job, after_a_failure)


def build_scheduler(
    runtime: AgentRuntime,
    *,
    idle_minutes: float,
    check_every_seconds: float = 60,
    reindex_every_seconds: float = 300,
    retention: Retention | None = None,
    once: OncePerDeployment | None = None,
    database_files: DatabaseFiles | None = None,
) -> AsyncIOScheduler:
    """A scheduler with the idle-flush and re-index jobs, not started yet.

    `once` decides which process of the deployment runs each period's run (default: the
    runtime's leases, as the evaluation queue's owner). Call `start()` from inside the running
    event loop (the scheduler binds to it) and `shutdown(wait=False)` before the loop closes;
    both are synchronous.
    """
    if idle_minutes <= 0 or check_every_seconds <= 0 or reindex_every_seconds <= 0:
        raise ValueError("idle_minutes and the job intervals must be positive")
    once = once or OncePerDeployment(runtime.store.leases, runtime.evaluations.owner)
    scheduler = AsyncIOScheduler(
        timezone=UTC,
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
    )
    scheduler.add_job(
        _timed,
        IntervalTrigger(seconds=check_every_seconds, timezone=UTC),
        args=(
            once,
            IDLE_FLUSH_JOB,
            check_every_seconds,
            lambda: run_idle_flush(runtime, idle_minutes),
            # The database may be briefly away; the next run tries again.
            "the next run tries again",
        ),
        id=IDLE_FLUSH_JOB,
        name="idle flush: learn from conversations that went quiet",
        max_instances=1,
        coalesce=True,
    )
    scheduler.add_job(
        _timed,
        IntervalTrigger(seconds=reindex_every_seconds, timezone=UTC),
        args=(
            once,
            REINDEX_JOB,
            reindex_every_seconds,
            lambda: run_reindex(runtime),
            # Chroma may still be down; the facts stay marked and the next run tries again.
            "the facts stay marked and the next run tries again",
        ),
        id=REINDEX_JOB,
        name="re-index: rebuild vectors whose write failed",
        max_instances=1,
        coalesce=True,
    )
    for task in runtime.plugins.tasks():
        owner = runtime.registry.plugin_of(task).name
        scheduler.add_job(
            _plugin_task,
            IntervalTrigger(seconds=task.every_seconds, timezone=UTC),
            args=(runtime.plugins, task),
            id=f"plugin:{owner}:{task.name}",
            name=task.description or f"{owner}: {task.name}",
            max_instances=1,
            coalesce=True,
        )
    if retention is not None and retention.enabled:
        scheduler.add_job(
            _timed,
            IntervalTrigger(days=1, timezone=UTC),
            args=(
                once,
                RETENTION_JOB,
                24 * 3600,
                lambda: delete_expired(
                    runtime.store,
                    runtime.knowledge.vectors,
                    retention,
                    database_files=database_files,
                ),
                # The database may be briefly away; tomorrow's run deletes the same messages.
                "tomorrow's run deletes the same messages",
            ),
            id=RETENTION_JOB,
            name=f"retention: delete messages older than {retention.describe()}",
            # Once at start-up too: a bot restarted daily would otherwise never run it.
            next_run_time=utcnow(),
            max_instances=1,
            coalesce=True,
        )
    return scheduler

"""Background jobs on APScheduler's AsyncIOScheduler, in the bot's own event loop.

- idle flush: a conversation that goes quiet before an evaluator's next turn still gets
  learned from: each quiet room with messages past an evaluator's `idle_mark` (what it has
  read up to) gets one evaluation (trigger "idle") on its latest message from a person;
- re-index: vectors whose Chroma write failed are rebuilt from MongoDB;
- retention (when MNEMO_RETENTION_DAYS is set): messages older than that, and their vectors,
  are deleted daily and once at start-up (bot/privacy/retention.py).

Jobs never overlap themselves (`max_instances=1`), missed runs collapse into one
(`coalesce=True`), and each job logs its own errors so one bad run never stops the schedule.

    scheduler = build_scheduler(runtime, idle_minutes=10)
    scheduler.start()        # inside the running loop
    ...
    scheduler.shutdown(wait=False)

The jobs only enqueue and re-index: running several Mnemo processes, each with its scheduler,
is safe (idle jobs have a stable id per message; re-indexing is an upsert).
"""

from __future__ import annotations

import logging
from datetime import UTC, timedelta
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from bot.models import utcnow
from bot.privacy.retention import Retention, delete_expired

if TYPE_CHECKING:
    from bot.models import Memory
    from bot.runtime import AgentRuntime

log = logging.getLogger(__name__)

# Set here: the newest message of the room when it was last flushed, so a room that stays
# quiet (and whose evaluators learn nothing from it) is flushed only once.
FLUSH_MARK = "idle_flushed_at"
# How far back to look for the latest message from a person behind the bot's own replies.
_LOOKBACK = 20

IDLE_FLUSH_JOB = "idle-flush"
REINDEX_JOB = "reindex"
RETENTION_JOB = "retention"


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


async def _idle_flush_job(runtime: AgentRuntime, idle_minutes: float) -> None:
    try:
        await run_idle_flush(runtime, idle_minutes)
    except Exception:
        # The database may be briefly away; the next run tries again.
        log.exception("idle flush failed")


async def _reindex_job(runtime: AgentRuntime) -> None:
    try:
        await run_reindex(runtime)
    except Exception:
        # Chroma may still be down; the facts stay marked and the next run tries again.
        log.exception("re-index failed")


async def _retention_job(runtime: AgentRuntime, retention: Retention) -> None:
    try:
        await delete_expired(runtime.store, runtime.knowledge.vectors, retention)
    except Exception:
        # The database may be briefly away; tomorrow's run deletes the same messages.
        log.exception("retention run failed")


def build_scheduler(
    runtime: AgentRuntime,
    *,
    idle_minutes: float,
    check_every_seconds: float = 60,
    reindex_every_seconds: float = 300,
    retention: Retention | None = None,
) -> AsyncIOScheduler:
    """A scheduler with the idle-flush and re-index jobs, not started yet.

    Call `start()` from inside the running event loop (the scheduler binds to it) and
    `shutdown(wait=False)` before the loop closes; both are synchronous.
    """
    if idle_minutes <= 0 or check_every_seconds <= 0 or reindex_every_seconds <= 0:
        raise ValueError("idle_minutes and the job intervals must be positive")
    scheduler = AsyncIOScheduler(
        timezone=UTC,
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
    )
    scheduler.add_job(
        _idle_flush_job,
        IntervalTrigger(seconds=check_every_seconds, timezone=UTC),
        args=(runtime, idle_minutes),
        id=IDLE_FLUSH_JOB,
        name="idle flush: learn from conversations that went quiet",
        max_instances=1,
        coalesce=True,
    )
    scheduler.add_job(
        _reindex_job,
        IntervalTrigger(seconds=reindex_every_seconds, timezone=UTC),
        args=(runtime,),
        id=REINDEX_JOB,
        name="re-index: rebuild vectors whose write failed",
        max_instances=1,
        coalesce=True,
    )
    if retention is not None and retention.enabled:
        scheduler.add_job(
            _retention_job,
            IntervalTrigger(days=1, timezone=UTC),
            args=(runtime, retention),
            id=RETENTION_JOB,
            name=f"retention: delete messages older than {retention.describe()}",
            # Once at start-up too: a bot restarted daily would otherwise never run it.
            next_run_time=utcnow(),
            max_instances=1,
            coalesce=True,
        )
    return scheduler

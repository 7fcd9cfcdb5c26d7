"""Per-room ordering for every adapter: one FIFO lane (a queue with one worker) per room.

A room's messages are handled in the order they arrived while different rooms are served at
the same time. A lock per room does not give that: asyncio does not promise that the waiters
of a lock start in arrival order (a task woken for a released lock can lose it to a task that
arrives just then), so two quick messages could be answered the wrong way round. A queue with
one worker is FIFO by construction.

Bounded: at most `max_active` rooms run a job at once (a flood of rooms cannot exhaust
connections or the model), and a room with nothing left to do keeps no queue and no task.
`submit` never awaits, so the order of calls is the order of jobs; it returns a future that
resolves when the job has run, for callers (Discord's event tasks) that wait for their message.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]
RoomKey = TypeVar("RoomKey", bound=Hashable)


@dataclass
class _Lane:
    jobs: deque[tuple[Job, asyncio.Future[None]]] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None


class RoomLanes(Generic[RoomKey]):
    """One FIFO worker per room: a room's jobs run in order, different rooms concurrently."""

    def __init__(self, platform: str, *, max_active: int = 64) -> None:
        self.platform = platform
        self._lanes: dict[RoomKey, _Lane] = {}
        self._active = asyncio.Semaphore(max_active)
        self._closed = False

    def submit(self, room: RoomKey, job: Job) -> asyncio.Future[None]:
        """Queue `job` behind the room's earlier jobs. The future resolves once it has run
        (a job's error is logged, never raised to the caller); it is cancelled if the lanes
        close before the job could run."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closed:
            log.debug("%s: dropping a job for room %s: shutting down", self.platform, room)
            done.cancel()
            return done
        lane = self._lanes.setdefault(room, _Lane())
        lane.jobs.append((job, done))
        if lane.worker is None:
            lane.worker = asyncio.create_task(
                self._drain(room, lane), name=f"{self.platform}-room:{room}"
            )
        return done

    async def _drain(self, room: RoomKey, lane: _Lane) -> None:
        try:
            while lane.jobs:
                job, done = lane.jobs.popleft()
                try:
                    async with self._active:
                        await job()
                except Exception:
                    log.exception("%s: handling a message in room %s failed", self.platform, room)
                finally:
                    if not done.done():
                        done.set_result(None)
        finally:
            # No await between the empty check and this: a submit() cannot slip in between.
            for _, done in lane.jobs:
                done.cancel()
            if self._lanes.get(room) is lane:
                del self._lanes[room]

    def __len__(self) -> int:
        """Rooms with work queued or running (idle rooms are not kept)."""
        return len(self._lanes)

    async def join(self) -> None:
        """Wait until no room has work left (including work submitted meanwhile)."""
        while workers := self._workers():
            await asyncio.gather(*workers, return_exceptions=True)

    async def close(self, grace: float) -> None:
        """Take no more jobs; let queued ones finish for `grace` seconds, then cancel."""
        self._closed = True
        workers = self._workers()
        if not workers:
            return
        _, pending = await asyncio.wait(workers, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("%s: %d rooms were still busy at shutdown", self.platform, len(pending))
            await asyncio.gather(*pending, return_exceptions=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _workers(self) -> list[asyncio.Task[None]]:
        return [lane.worker for lane in self._lanes.values() if lane.worker is not None]

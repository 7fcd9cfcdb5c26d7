"""Run slots for the evaluation worker: at most N jobs at once, or one job alone.

A job that was running when its process crashed together with others is `suspect` (see
bot/queue/blame.py): it runs again with no other job of this process beside it, so that if it
kills the process again the crash is charged to it and to nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class RunSlots:
    """At most `limit` jobs at once; an exclusive holder runs with no other job of this process.

    Exclusive holders go first once they wait (new shared holders queue behind them), so a
    suspect job is not starved by a busy queue.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._running = 0
        self._exclusive = False
        self._exclusive_waiting = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, *, exclusive: bool) -> AsyncIterator[None]:
        async with self._changed:
            if exclusive:
                self._exclusive_waiting += 1
                try:
                    await self._changed.wait_for(lambda: self._running == 0)
                finally:
                    self._exclusive_waiting -= 1
                self._exclusive = True
            else:
                await self._changed.wait_for(
                    lambda: (
                        not self._exclusive
                        and not self._exclusive_waiting
                        and self._running < self._limit
                    )
                )
            self._running += 1
        try:
            yield
        finally:
            async with self._changed:
                self._running -= 1
                self._exclusive = False if exclusive else self._exclusive
                self._changed.notify_all()

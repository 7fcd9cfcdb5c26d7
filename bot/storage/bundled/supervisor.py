"""Keeps the bundled MongoDB running: a server that exits on its own (killed, crashed) is
started again on the same port, so every client reconnects by itself.

Restarts wait 0.5 s, then twice as long after each failed attempt, up to `max_delay`; each
death and restart is logged. Meanwhile PyMongo waits for the server (its server-selection
time-out, 5 s), so a message arriving during a restart is handled once it is back.
"""

from __future__ import annotations

import asyncio
import logging

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from bot.cancelling import cancel_and_wait
from bot.storage.bundled.server import EmbeddedMongo, EmbeddedMongoError

logger = logging.getLogger(__name__)

# The pause before the first restart of a server that died.
FIRST_DELAY = 0.5


class MongoSupervisor:
    def __init__(
        self, server: EmbeddedMongo, *, check_every: float = 0.5, max_delay: float = 30.0
    ) -> None:
        self._server = server
        self._check_every = check_every
        self._max_delay = max_delay
        self._task: asyncio.Task[None] | None = None
        self.restarts = 0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="mongodb-supervisor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._check_every)
            code = self._server.exit_code()
            if code is None:
                continue
            logger.error(
                "embedded MongoDB (pid %s) exited with code %s; restarting it in %.1fs",
                self._server.pid,
                code,
                FIRST_DELAY,
            )
            await asyncio.sleep(FIRST_DELAY)
            await self._restart()
            self.restarts += 1

    async def _restart(self) -> None:
        """Start the server again until it runs: each failure waits twice as long as the one
        before (1 s, 2 s, ...), up to `max_delay`."""

        def failed(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            pause = state.next_action.sleep if state.next_action is not None else 0.0
            first = str(error).splitlines()[0] if error is not None else "?"
            logger.error("embedded MongoDB restart failed (%s); next in %.1fs", first, pause)

        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(EmbeddedMongoError),
            wait=wait_exponential(multiplier=2 * FIRST_DELAY, max=self._max_delay),
            before_sleep=failed,
            reraise=True,
        ):
            with attempt:
                await self._server.restart()

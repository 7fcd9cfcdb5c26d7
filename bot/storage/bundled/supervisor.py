"""Keeps the bundled MongoDB running: a server that exits on its own (killed, crashed) is
started again on the same port, so every client reconnects by itself.

Restarts wait 0.5 s, then twice as long after each failed attempt, up to `max_delay`; each
death and restart is logged. Meanwhile PyMongo waits for the server (its server-selection
time-out, 5 s), so a message arriving during a restart is handled once it is back.
"""

from __future__ import annotations

import asyncio
import logging

from bot.cancelling import cancel_and_wait
from bot.storage.bundled.server import EmbeddedMongo, EmbeddedMongoError

logger = logging.getLogger(__name__)


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
        delay = 0.5
        while True:
            await asyncio.sleep(self._check_every)
            code = self._server.exit_code()
            if code is None:
                continue
            logger.error(
                "embedded MongoDB (pid %s) exited with code %s; restarting it in %.1fs",
                self._server.pid,
                code,
                delay,
            )
            await asyncio.sleep(delay)
            try:
                await self._server.restart()
            except EmbeddedMongoError as error:
                delay = min(delay * 2, self._max_delay)
                first = str(error).splitlines()[0]
                logger.error("embedded MongoDB restart failed (%s); next in %.1fs", first, delay)
                continue
            self.restarts += 1
            delay = 0.5

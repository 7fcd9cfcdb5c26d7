"""MongoDB going away under a running app: the bundled server killed (-9) and brought back,
the journal waited on."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from bot.app.composition import App
from bot.testing.harness import TestChat

REPLY = '{"text": "Got it.", "action": "NONE"}'


# For the tests that kill the bundled server: skipped against an external MongoDB.
KILLS_THE_BUNDLED_SERVER = pytest.mark.skipif(
    bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="kills the bundled server"
)


async def kill_database(app: App) -> None:
    """kill -9 the bundled server and keep it down (its supervisor would restart it)."""
    assert app.mongo_supervisor is not None and app.mongo_server is not None
    await app.mongo_supervisor.stop()
    assert app.mongo_server.pid is not None
    os.kill(app.mongo_server.pid, signal.SIGKILL)
    for _ in range(100):
        if app.mongo_server.exit_code() is not None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the bundled MongoDB did not die")


async def bring_database_back(app: App) -> None:
    assert app.mongo_supervisor is not None
    app.mongo_supervisor.start()  # it sees the dead server and restarts it on the same port


async def journal_drained(app: App, timeout: float = 30.0) -> None:
    outage = app.runtime.intake.outage
    assert outage is not None
    for _ in range(int(timeout / 0.05)):
        if not outage.waiting:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"journal not replayed: {len(outage.journal)} message(s) left")


async def texts_in(app: App, chat: TestChat) -> list[str]:
    stored = await app.store.memories.recent(chat.room.id, 50)
    return [m.content.text for m in stored if m.user_id == chat.account.id]

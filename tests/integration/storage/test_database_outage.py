"""The database may go away: the bundled MongoDB is supervised and comes back by itself."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import pytest

from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = '{"text": "Still here.", "action": "NONE"}'


@pytest.mark.skipif(
    bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="needs the bundled server"
)
async def test_a_killed_bundled_mongodb_is_restarted_and_nothing_is_lost(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    with caplog.at_level(logging.INFO):
        async with open_test_app(tmp_path, model=model) as app:
            server = app.mongo_server
            assert server is not None and server.pid is not None
            chat = TestChat(app.runtime)
            await chat.say("before")
            os.kill(server.pid, signal.SIGKILL)
            await asyncio.sleep(0.1)
            result = await chat.say("while it restarts")
            after = await chat.say("after")
            stored = await app.store.memories.recent(chat.room.id, 10)
            assert app.mongo_supervisor is not None
            restarts = app.mongo_supervisor.restarts
    assert result.stored and result.responded and after.responded
    assert [m.content.text for m in stored if m.user_id == chat.account.id] == [
        "before",
        "while it restarts",
        "after",
    ]
    assert restarts == 1
    assert "exited with code -9; restarting it" in caplog.text

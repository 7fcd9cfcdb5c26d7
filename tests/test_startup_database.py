"""MongoDB unreachable when the bot starts: it waits for the database, saying so in the log
once per attempt, instead of exiting; the platforms connect only once messages can be kept, so
a message written meanwhile is answered when the database comes up (Telegram held it).

The real start-up of `mnemo run` (open_app, then run_platforms) with a real Telegram adapter
polling the local fake Bot API; the database is an nx-27017 server started later on the port
MONGODB_URI names."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.adapters.startup import run_platforms
from bot.adapters.telegram import TelegramAdapter
from bot.app import open_app
from bot.config import PlatformSettings
from bot.plugins import Registry
from bot.state import State
from bot.storage.embedded import EmbeddedMongo
from bot.testing.harness import test_settings
from bot.testing.scripted import ScriptedModel
from tests.fakes.telegram_server import FakeTelegramServer


def echo(prompt: str, task: str, state: State | None) -> str:
    assert state is not None
    return f"You said: {state.message.content.text}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_start_up_waits_for_an_unreachable_database_and_loses_no_message(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    settings = test_settings(
        tmp_path / "bot",
        mongodb_uri=f"mongodb://127.0.0.1:{port}",
        model_dir=model_dir,
        mongodb_timeout_seconds=0.5,
    )
    stop = asyncio.Event()
    async with FakeTelegramServer() as telegram:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        adapter = TelegramAdapter(
            PlatformSettings(_env_file=None, telegram_token=SecretStr(telegram.token)),
            base_url=telegram.base_url,
            stop_grace=2,
        )

        async def run() -> None:  # what `mnemo run` does
            async with open_app(
                settings, model=ScriptedModel(echo), registry=Registry(), wait_for_database=True
            ) as app:
                await run_platforms(app, adapters=[adapter], stop=stop, handle_signals=False)

        with caplog.at_level(logging.INFO):
            running = asyncio.create_task(run())
            telegram.push_message(chat, person, "hello while the database is down")
            for _ in range(200):
                if "waiting for it before starting (attempt 2" in caplog.text or running.done():
                    break
                await asyncio.sleep(0.05)
            # Still starting, not exited; and no platform connected before the database.
            assert not running.done(), running.exception()
            assert f"MongoDB at 127.0.0.1:{port} is unavailable" in caplog.text
            assert not telegram.calls_to("getUpdates") and not telegram.sent

            async with EmbeddedMongo(tmp_path / "db", port=port):
                (reply,) = await telegram.wait_for_sent(1, timeout=60)
                assert reply.text == "You said: hello while the database is down"
                assert "MongoDB answers after" in caplog.text
                stop.set()
                await asyncio.wait_for(running, 30)

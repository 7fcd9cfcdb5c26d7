"""Multi-platform start-up: one platform failing does not take the other down.

The platforms here are real Telegram adapters (python-telegram-bot) against local fake Bot API
servers; the app is a real one with a scripted model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.adapters.telegram import BAD_TOKEN, TelegramAdapter
from bot.app.composition import App
from bot.app.platforms import PlatformStartupError, run_platforms
from bot.config.settings import PlatformSettings
from bot.domain.state import State
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.telegram_server import FakeTelegramServer

WRONG_TOKEN = "555555555:AAH-wrong-token-for-start-up-tests-42"


def echo(prompt: str, task: str, state: State | None) -> str:
    assert state is not None
    return f"You said: {state.message.content.text}"


def adapter_for(server: FakeTelegramServer, token: str | None = None) -> TelegramAdapter:
    settings = PlatformSettings(
        _env_file=None, telegram_token=SecretStr(token or server.token), telegram_webhook_url=None
    )
    return TelegramAdapter(settings, base_url=server.base_url, poll_timeout=1, stop_grace=2)


@pytest.fixture
async def app(tmp_path: Path, mongo_uri: str, model_dir: Path) -> AsyncIterator[App]:
    async with open_test_app(
        tmp_path, model=ScriptedModel(echo), mongodb_uri=mongo_uri, model_dir=model_dir
    ) as running:
        yield running


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeTelegramServer, FakeTelegramServer]]:
    async with (
        FakeTelegramServer() as first,
        FakeTelegramServer(bot_username="other_bot", first_user_id=5001) as second,
    ):
        yield first, second


async def answers(server: FakeTelegramServer, text: str) -> str:
    person = server.user("Sarah")
    before = len(server.sent)
    server.push_message(server.private_chat(person), person, text)
    sent = await server.wait_for_sent(before + 1)
    return sent[before].text


async def test_only_a_bad_telegram_token_fails_start_up_in_one_line(
    app: App, servers: tuple[FakeTelegramServer, FakeTelegramServer]
) -> None:
    server, _ = servers
    with pytest.raises(PlatformStartupError) as raised:
        await run_platforms(app, adapters=[adapter_for(server, WRONG_TOKEN)], handle_signals=False)

    assert str(raised.value) == BAD_TOKEN
    assert WRONG_TOKEN not in str(raised.value)


async def test_no_platform_configured_fails_start_up(app: App) -> None:
    # The test settings carry no token at all.
    with pytest.raises(PlatformStartupError, match="no platform configured"):
        await run_platforms(app, handle_signals=False)


async def test_a_platform_with_a_bad_token_does_not_stop_the_other(
    app: App,
    servers: tuple[FakeTelegramServer, FakeTelegramServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    good_server, bad_server = servers
    good, bad = adapter_for(good_server), adapter_for(bad_server, WRONG_TOKEN)
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_platforms(app, adapters=[bad, good], stop=stop, handle_signals=False)
    )
    try:
        assert await answers(good_server, "still there?") == "You said: still there?"
        assert any(BAD_TOKEN in record.getMessage() for record in caplog.records)
    finally:
        stop.set()
        await asyncio.wait_for(running, 15)
    # Stopped gracefully: nothing more is fetched.
    calls = len(good_server.calls_to("getUpdates"))
    await asyncio.sleep(0.3)
    assert len(good_server.calls_to("getUpdates")) == calls


async def test_a_platform_failing_later_is_logged_and_the_other_runs_on(
    app: App,
    servers: tuple[FakeTelegramServer, FakeTelegramServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    first_server, second_server = servers
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_platforms(
            app,
            adapters=[adapter_for(first_server), adapter_for(second_server)],
            stop=stop,
            handle_signals=False,
        )
    )
    try:
        assert await answers(second_server, "hello") == "You said: hello"
        second_server.revoke_token()
        for _ in range(100):
            if any(
                "rejected (Unauthorized) while running" in r.getMessage() for r in caplog.records
            ):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the failure was never logged")
        assert await answers(first_server, "are you ok?") == "You said: are you ok?"
        assert not running.done()
    finally:
        stop.set()
        await asyncio.wait_for(running, 15)


async def test_when_every_platform_has_failed_run_platforms_ends_with_one_line(
    app: App, servers: tuple[FakeTelegramServer, FakeTelegramServer]
) -> None:
    server, _ = servers
    running = asyncio.create_task(
        run_platforms(app, adapters=[adapter_for(server)], handle_signals=False)
    )
    assert await answers(server, "hi") == "You said: hi"
    server.revoke_token()

    with pytest.raises(PlatformStartupError) as raised:
        await asyncio.wait_for(running, 15)
    assert str(raised.value) == (
        "every platform has stopped: telegram: the bot token was rejected (Unauthorized) "
        "while running"
    )
    logging.getLogger(__name__).debug("run_platforms ended as expected")

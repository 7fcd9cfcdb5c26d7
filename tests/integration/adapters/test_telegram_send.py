"""Telegram through network trouble (a 502 from a proxy in front of the Bot API): a part that
failed is sent again, with a growing pause, a few times, and a refusal is not; connecting at
start-up is tried a few times, then start-up fails with one line."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import SecretStr
from telegram import Bot

from bot.adapters.errors import PlatformStartupError
from bot.adapters.telegram import TelegramAdapter
from bot.adapters.telegram.send import send_part
from bot.config.settings import PlatformSettings
from bot.testing.harness import open_test_app
from tests.servers.chroma import free_port

TOKEN = "123:send-test"
ME = {"id": 123, "is_bot": True, "first_name": "Mnemo", "username": "mnemo_bot"}


class FlakyBotApi:
    """A Bot API whose sendMessage answers `statuses` in turn (200 for a sent message), and
    whose getMe answers `me_statuses` in turn (then 200)."""

    def __init__(self, statuses: list[int], me_statuses: tuple[int, ...] = ()) -> None:
        self.statuses = statuses
        self.me_statuses = list(me_statuses)
        self.sends = 0
        self.logins = 0

    async def handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if method == "getMe":
            self.logins += 1
            status = self.me_statuses.pop(0) if self.me_statuses else 200
            if status != 200:
                return web.json_response(
                    {"ok": False, "error_code": status, "description": "Bad Gateway"},
                    status=status,
                )
            return web.json_response({"ok": True, "result": ME})
        self.sends += 1
        status = self.statuses[min(self.sends, len(self.statuses)) - 1]
        if status != 200:
            return web.json_response(
                {"ok": False, "error_code": status, "description": "Bad Gateway"}, status=status
            )
        sent = {"message_id": self.sends, "date": 0, "chat": {"id": 7, "type": "private"}}
        return web.json_response({"ok": True, "result": {**sent, "text": "hello"}})


@asynccontextmanager
async def serving(api: FlakyBotApi) -> AsyncIterator[str]:
    """The API on a local port; yields its base URL."""
    app = web.Application()
    app.router.add_post("/bot{token}/{method}", api.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/bot"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def bot_against(api: FlakyBotApi) -> AsyncIterator[Bot]:
    async with serving(api) as base_url, Bot(TOKEN, base_url=base_url) as bot:
        yield bot


async def test_a_part_lost_to_network_trouble_is_sent_again() -> None:
    api = FlakyBotApi([502, 502, 200])
    async with bot_against(api) as bot:
        sent = await send_part(bot, 7, "hello", None, None, None)
    assert sent is not None and sent.text == "hello"
    assert api.sends == 3


async def test_sending_gives_up_after_its_attempts() -> None:
    api = FlakyBotApi([502])
    async with bot_against(api) as bot:
        assert await send_part(bot, 7, "hello", None, None, None, attempts=2) is None
    assert api.sends == 2


async def test_a_refusal_is_not_sent_again() -> None:
    api = FlakyBotApi([400, 200])
    async with bot_against(api) as bot:
        assert await send_part(bot, 7, "hello", None, None, None) is None
    assert api.sends == 1


async def test_start_up_tries_an_unreachable_bot_api_again_then_fails_in_one_line(
    tmp_path: Path, mongo_uri: str, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = FlakyBotApi([200], me_statuses=(502, 502, 502))
    settings = PlatformSettings(
        _env_file=None, telegram_token=SecretStr(TOKEN), telegram_webhook_url=None
    )
    async with (
        serving(api) as base_url,
        open_test_app(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir) as app,
    ):
        adapter = TelegramAdapter(settings, base_url=base_url, poll_timeout=1, stop_grace=2)
        with (
            caplog.at_level(logging.WARNING, logger="bot.adapters.telegram.adapter"),
            pytest.raises(PlatformStartupError) as raised,
        ):
            await adapter.start(app.adapter_services)
    assert str(raised.value).startswith("telegram: cannot reach the Bot API")
    assert TOKEN not in str(raised.value)
    assert api.logins == 3
    retried = [r for r in caplog.records if "Bot API unreachable" in r.getMessage()]
    assert len(retried) == 2  # before the second and the third attempt

"""Sending one part to Telegram through trouble: a part that failed for network reasons (a 502
from a proxy in front of the Bot API) is sent again, with a growing pause, a few times; a
refusal is not tried again, and a part is never sent twice when it may have arrived."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from telegram import Bot

from bot.adapters.telegram.send import send_part
from tests.servers.chroma import free_port

TOKEN = "123:send-test"
ME = {"id": 123, "is_bot": True, "first_name": "Mnemo", "username": "mnemo_bot"}


class FlakyBotApi:
    """A Bot API whose sendMessage answers `statuses` in turn (200 for a sent message)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.sends = 0

    async def handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if method == "getMe":
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
async def bot_against(api: FlakyBotApi) -> AsyncIterator[Bot]:
    app = web.Application()
    app.router.add_post("/bot{token}/{method}", api.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with Bot(TOKEN, base_url=f"http://127.0.0.1:{port}/bot") as bot:
            yield bot
    finally:
        await runner.cleanup()


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

"""`mnemo bench scale`, end to end through the Telegram adapter: replies per second when the
messages come in as Telegram updates (the real python-telegram-bot code, polling and webhook)
and the replies go out through the Bot API, against the local fake Bot API (tests/fakes).

The in-process scale figures call `runtime.handle()` directly; an outside audit measured about
7 times fewer replies per second end to end through Telegram polling. This measures that path:
every message is an update (fetched by getUpdates, or POSTed to the webhook with its secret),
kept first (its job written before Telegram is told), handled in its chat's lane, and answered
with sendMessage. The model is scripted (no model time), the database and Chroma are real. The
fake Bot API shares the event loop with the bot, so its own work is counted in the figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

Mode = Literal["polling", "webhook"]
WEBHOOK_PATH = "/mnemo-bench"
REPLY = '{"text": "Got it."}'
# Webhook POSTs in flight at once (Telegram itself sends up to 40 per bot by default).
WEBHOOK_CONNECTIONS = 40


async def run_adapter_scale(
    *, rooms: int, messages: int, model_dir: Path, mongodb_uri: str | None = None
) -> dict[str, Any]:
    """Both ways of receiving, one after the other, each on a fresh database."""
    return {
        mode: await _one(mode, rooms=rooms, messages=messages, model_dir=model_dir, uri=mongodb_uri)
        for mode in ("polling", "webhook")
    }


async def _one(
    mode: Mode, *, rooms: int, messages: int, model_dir: Path, uri: str | None
) -> dict[str, Any]:
    from bot.testing.harness import open_test_app
    from bot.testing.scripted import ScriptedModel
    from tests.fakes.telegram_server import FakeTelegramServer

    total = rooms * messages
    with tempfile.TemporaryDirectory(prefix=f"mnemo-bench-adapter-{mode}-") as folder:
        async with (
            _database(Path(folder), uri) as mongodb_uri,
            open_test_app(
                Path(folder),
                model=ScriptedModel(lambda *_: REPLY),
                mongodb_uri=mongodb_uri,
                model_dir=model_dir,
                rate_limit_per_minute=0,
            ) as app,
            FakeTelegramServer() as telegram,
        ):
            people = [telegram.user(f"Person {n}") for n in range(rooms)]
            chats = [telegram.private_chat(person) for person in people]
            port = _free_port() if mode == "webhook" else None
            adapter = _adapter(telegram, port)
            await adapter.start(app.adapter_services)
            try:
                started = time.perf_counter()
                refused = 0
                if mode == "polling":
                    for number in range(messages):
                        for person, chat in zip(people, chats, strict=True):
                            telegram.push_message(chat, person, f"message {number}")
                else:
                    assert port is not None
                    refused = await _post_all(telegram, port, people, chats, messages)
                with contextlib.suppress(AssertionError):
                    await telegram.wait_for_sent(total, timeout=60 + total / 5)
                seconds = time.perf_counter() - started
                answered = len(telegram.sent)
            finally:
                await adapter.stop()
    return {
        "rooms": rooms,
        "messages": total,
        "answered": answered,
        "lost": max(0, total - answered),
        "refused_posts": refused,
        "seconds": round(seconds, 2),
        "replies_per_second": round(answered / seconds, 1) if seconds else 0.0,
    }


def _adapter(telegram: Any, port: int | None) -> Any:
    from pydantic import SecretStr

    from bot.adapters.telegram import TelegramAdapter
    from bot.config.settings import PlatformSettings

    settings = PlatformSettings(
        _env_file=None,
        telegram_token=SecretStr(telegram.token),
        telegram_webhook_url=None if port is None else f"https://example.invalid{WEBHOOK_PATH}",
        telegram_webhook_port=port or 8443,
        telegram_webhook_listen="127.0.0.1",
    )
    return TelegramAdapter(settings, base_url=telegram.base_url, poll_timeout=1)


async def _post_all(
    telegram: Any, port: int, people: list[Any], chats: list[Any], messages: int
) -> int:
    """POST every update as Telegram does, a bounded number at once; returns how many were
    not answered 200 (each is POSTed again until it is, as Telegram retries)."""
    import aiohttp

    from bot.adapters.telegram import webhook_secret

    headers = {"X-Telegram-Bot-Api-Secret-Token": webhook_secret(telegram.token)}
    endpoint = f"http://127.0.0.1:{port}{WEBHOOK_PATH}"
    updates = [
        {"update_id": 10_000 + n, "message": telegram.push_message(chat, person, f"message {m}")}
        for n, (m, person, chat) in enumerate(
            (m, p, c) for m in range(messages) for p, c in zip(people, chats, strict=True)
        )
    ]
    slots = asyncio.Semaphore(WEBHOOK_CONNECTIONS)
    refused = 0

    async def post(http: aiohttp.ClientSession, update: dict[str, Any]) -> None:
        nonlocal refused
        async with slots:
            while True:
                async with http.post(endpoint, json=update, headers=headers) as response:
                    if response.status == 200:
                        return
                refused += 1
                await asyncio.sleep(0.5)

    connector = aiohttp.TCPConnector(limit=WEBHOOK_CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector) as http:
        await asyncio.gather(*(post(http, update) for update in updates))
    return refused


@contextlib.asynccontextmanager
async def _database(folder: Path, uri: str | None) -> AsyncIterator[str]:
    if uri:
        yield uri
        return
    from bot.storage.bundled.server import EmbeddedMongo

    async with EmbeddedMongo(folder / "mongo-server") as server:
        yield server.uri


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

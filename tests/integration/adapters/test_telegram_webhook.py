"""Webhook mode: Telegram pushes updates to the adapter's own HTTP endpoint.

A real app with a scripted model, a real Telegram adapter (python-telegram-bot's webhook server)
and the local fake Bot API server; updates are POSTed to the webhook as Telegram would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from pydantic import SecretStr

from bot.adapters.telegram import TelegramAdapter, webhook_secret
from bot.app.composition import App
from bot.config.settings import PlatformSettings
from bot.domain.state import State
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.processes import free_port
from tests.helpers.telegram_bot import WEBHOOK_URL


def echo(prompt: str, task: str, state: State | None) -> str:
    assert state is not None
    return f"You said: {state.message.content.text}"


@pytest.fixture
async def app(tmp_path: Path, mongo_uri: str, model_dir: Path) -> AsyncIterator[App]:
    async with open_test_app(
        tmp_path, model=ScriptedModel(echo), mongodb_uri=mongo_uri, model_dir=model_dir
    ) as running:
        yield running


async def test_updates_posted_to_the_webhook_are_answered_and_forgeries_refused(
    app: App,
) -> None:
    async with FakeTelegramServer() as server:
        port = free_port()
        settings = PlatformSettings(
            _env_file=None,
            telegram_token=SecretStr(server.token),
            telegram_webhook_url=WEBHOOK_URL,
            telegram_webhook_port=port,
            telegram_webhook_listen="127.0.0.1",
        )
        adapter = TelegramAdapter(settings, base_url=server.base_url, stop_grace=2)
        secret = webhook_secret(server.token)
        endpoint = f"http://127.0.0.1:{port}{urlsplit(WEBHOOK_URL).path}"
        person = server.user("Sarah")
        chat = server.private_chat(person)

        def update(update_id: int, text: str) -> dict[str, Any]:
            # Built as the fake server builds it; it also queues it for getUpdates, which
            # webhook mode must never call (asserted below).
            return {"update_id": update_id, "message": server.push_message(chat, person, text)}

        await adapter.start(app.adapter_services)
        try:
            (registered,) = server.calls_to("setWebhook")
            assert registered.params["url"] == WEBHOOK_URL
            assert registered.params["secret_token"] == secret

            async with aiohttp.ClientSession() as http:
                for headers in ({"X-Telegram-Bot-Api-Secret-Token": "forged"}, {}):
                    async with http.post(
                        endpoint, json=update(900, "forged hello"), headers=headers
                    ) as refused:
                        assert refused.status == 403
                async with http.post(
                    endpoint,
                    json=update(901, "hello over the webhook"),
                    headers={"X-Telegram-Bot-Api-Secret-Token": secret},
                ) as accepted:
                    assert accepted.status == 200

            (reply,) = await server.wait_for_sent(1)
            assert reply.chat_id == chat.id
            assert reply.text == "You said: hello over the webhook"
            await adapter.wait_idle()
            # The forged updates would have been answered first (same chat, same lane).
            assert [sent.text for sent in server.sent] == ["You said: hello over the webhook"]
            assert not server.calls_to("getUpdates")
        finally:
            await asyncio.wait_for(adapter.stop(), 15)

        # Stopped cleanly: the webhook server no longer accepts connections.
        with pytest.raises(aiohttp.ClientConnectionError):
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    endpoint,
                    json=update(902, "too late"),
                    headers={"X-Telegram-Bot-Api-Secret-Token": secret},
                ),
            ):
                pass
        assert len(server.sent) == 1


async def test_a_configured_secret_replaces_the_derived_one(app: App) -> None:
    """MNEMO_TELEGRAM_WEBHOOK_SECRET: what Telegram is told to send, and the only one taken."""
    async with FakeTelegramServer() as server:
        port = free_port()
        settings = PlatformSettings(
            _env_file=None,
            telegram_token=SecretStr(server.token),
            telegram_webhook_url=WEBHOOK_URL,
            telegram_webhook_port=port,
            telegram_webhook_listen="127.0.0.1",
            telegram_webhook_secret=SecretStr("rotated_secret-2"),
        )
        adapter = TelegramAdapter(settings, base_url=server.base_url, stop_grace=2)
        endpoint = f"http://127.0.0.1:{port}{urlsplit(WEBHOOK_URL).path}"
        person = server.user("Sarah")
        chat = server.private_chat(person)
        await adapter.start(app.adapter_services)
        try:
            (registered,) = server.calls_to("setWebhook")
            assert registered.params["secret_token"] == "rotated_secret-2"
            async with aiohttp.ClientSession() as http:
                derived = webhook_secret(server.token)
                for secret, status in ((derived, 403), ("rotated_secret-2", 200)):
                    update = {"update_id": 910, "message": server.push_message(chat, person, "hi")}
                    async with http.post(
                        endpoint, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret}
                    ) as response:
                        assert response.status == status
            (reply,) = await server.wait_for_sent(1)
            assert reply.text == "You said: hi"
        finally:
            await asyncio.wait_for(adapter.stop(), 15)

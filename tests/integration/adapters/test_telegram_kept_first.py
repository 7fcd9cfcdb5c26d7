"""Telegram never sends an acknowledged update again, so nothing is acknowledged before its
message is kept (its evaluation job written, or journaled while MongoDB is away).

Real apps, the real Telegram adapter (python-telegram-bot) against the local fake Bot API:
updates are POSTed to the webhook as Telegram would, or fetched by PTB's polling loop; the
outage cases kill the bundled MongoDB for real."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from pydantic import SecretStr

from bot.adapters.telegram import TelegramAdapter, webhook_secret
from bot.app.composition import App
from bot.config.settings import PlatformSettings
from bot.domain.records import room_id
from bot.domain.state import State
from bot.runtime.intake.outage import FULL_REPLY, TROUBLE_REPLY
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.telegram_server import FakeChat, FakeTelegramServer, FakeUser
from tests.helpers.outage import bring_database_back, journal_drained, kill_database
from tests.helpers.processes import free_port
from tests.helpers.telegram_bot import WEBHOOK_URL

needs_bundled = pytest.mark.skipif(
    bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="kills the bundled server"
)


def said(state: State | None) -> str:
    assert state is not None
    return state.message.content.text


class Webhook:
    """Telegram's side of the webhook: POSTs an update, returns the HTTP status."""

    def __init__(self, server: FakeTelegramServer, port: int) -> None:
        self.server = server
        self.endpoint = f"http://127.0.0.1:{port}{urlsplit(WEBHOOK_URL).path}"
        self.person = server.user("Sarah")
        self.chat = server.private_chat(self.person)
        self.updates: dict[int, dict[str, Any]] = {}
        self._next = 1000

    def update(self, text: str) -> dict[str, Any]:
        self._next += 1
        update = {
            "update_id": self._next,
            "message": self.server.push_message(self.chat, self.person, text),
        }
        self.updates[self._next] = update
        return update

    async def post(self, update: dict[str, Any]) -> int:
        headers = {"X-Telegram-Bot-Api-Secret-Token": webhook_secret(self.server.token)}
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.endpoint, json=update, headers=headers) as response,
        ):
            return response.status


@asynccontextmanager
async def webhook_bot(app: App) -> AsyncIterator[tuple[TelegramAdapter, Webhook]]:
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
        await adapter.start(app.adapter_services)
        try:
            yield adapter, Webhook(server, port)
        finally:
            await asyncio.wait_for(adapter.stop(), 15)


async def test_the_webhook_acknowledges_a_message_once_its_job_is_written(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """The chat is busy (the first message's reply is being written): the second message is
    acknowledged only once it is kept, not left in memory behind the first."""
    answering, go_on = asyncio.Event(), asyncio.Event()

    async def reply(prompt: str, task: str, state: State | None) -> str:
        if said(state) == "first":
            answering.set()
            await go_on.wait()
        return f"You said: {said(state)}"

    async with (
        open_test_app(
            tmp_path, model=ScriptedModel(reply), mongodb_uri=mongo_uri, model_dir=model_dir
        ) as app,
        webhook_bot(app) as (adapter, telegram),
    ):
        assert await telegram.post(telegram.update("first")) == 200
        await asyncio.wait_for(answering.wait(), 30)
        second = telegram.update("second")
        assert await telegram.post(second) == 200
        # Acknowledged: a kill -9 now must not lose it. Its job holds it, for start-up to answer.
        waiting = await app.store.jobs.in_intake()
        assert "second" in [job.message.content.text for job in waiting if job.message]

        go_on.set()
        sent = await telegram.server.wait_for_sent(2, timeout=30)
        assert [m.text for m in sent] == ["You said: first", "You said: second"]
        await adapter.wait_idle()
        # Telegram sends an update again when unsure: the same message is not answered twice.
        assert await telegram.post(second) == 200
        await adapter.wait_idle()
        assert [m.text for m in telegram.server.sent] == ["You said: first", "You said: second"]


async def test_a_message_kept_before_an_optout_ahead_of_it_ran_is_not_kept_after_it(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """The chat is busy; /optout then a message arrive. The message is kept as it arrives,
    before the /optout ahead of it has run: once it has, nothing of the message stays (no
    job a restart would learn from)."""
    answering, go_on = asyncio.Event(), asyncio.Event()

    async def reply(prompt: str, task: str, state: State | None) -> str:
        if said(state) == "first":
            answering.set()
            await go_on.wait()
        return f"You said: {said(state)}"

    async with (
        open_test_app(
            tmp_path, model=ScriptedModel(reply), mongodb_uri=mongo_uri, model_dir=model_dir
        ) as app,
        webhook_bot(app) as (adapter, telegram),
    ):
        assert await telegram.post(telegram.update("first")) == 200
        await asyncio.wait_for(answering.wait(), 30)
        assert await telegram.post(telegram.update("/optout")) == 200
        assert await telegram.post(telegram.update("my secret is that I hate Mondays")) == 200
        kept = [job.message.content.text for job in await app.store.jobs.in_intake() if job.message]
        assert "my secret is that I hate Mondays" in kept  # kept first, as it arrived

        go_on.set()
        await telegram.server.wait_for_sent(2, timeout=30)
        await adapter.wait_idle()
        waiting = await app.store.jobs.in_intake()
        assert [job.message.content.text for job in waiting if job.message] == []
        room = room_id("telegram", telegram.chat.id)
        stored = [m.content.text for m in await app.store.memories.recent(room, 20)]
        assert "my secret is that I hate Mondays" not in stored
        assert "first" in stored


@needs_bundled
async def test_the_webhook_refuses_what_it_cannot_keep_and_takes_it_when_sent_again(
    tmp_path: Path, model_dir: Path
) -> None:
    """MongoDB down and the journal full: Telegram hears 503 (so it keeps the update and sends
    it again), not 200; journaled messages are acknowledged once fsynced."""

    def reply(prompt: str, task: str, state: State | None) -> str:
        return f"You said: {said(state)[:20]}"

    async with (
        open_test_app(
            tmp_path,
            model=ScriptedModel(reply),
            model_dir=model_dir,
            mongodb_timeout_seconds=1.0,
            journal_max_mb=0.003,
        ) as app,
        webhook_bot(app) as (adapter, telegram),
    ):
        await kill_database(app)
        assert await telegram.post(telegram.update("kept in the journal")) == 200
        too_long = telegram.update("no room for this " + "x" * 3000)
        assert await telegram.post(too_long) == 503
        assert [m.text for m in telegram.server.sent] == [TROUBLE_REPLY]  # no FULL_REPLY

        await bring_database_back(app)
        await journal_drained(app)
        assert await telegram.post(too_long) == 200  # Telegram's retry
        await adapter.wait_idle()
        sent = await telegram.server.wait_for_sent(3, timeout=30)
        assert [m.text for m in sent] == [
            TROUBLE_REPLY,
            "You said: kept in the journal",
            "You said: no room for this xxx",
        ]
        assert FULL_REPLY not in [m.text for m in telegram.server.sent]


@needs_bundled
async def test_polling_confirms_an_update_only_once_its_message_is_kept(
    tmp_path: Path, model_dir: Path
) -> None:
    """Each getUpdates call confirms every update below its offset. While the first message of
    an outage waits for the database (then goes to the journal), nothing confirms it."""

    def reply(prompt: str, task: str, state: State | None) -> str:
        return f"You said: {said(state)}"

    async with (
        open_test_app(
            tmp_path, model=ScriptedModel(reply), model_dir=model_dir, mongodb_timeout_seconds=3
        ) as app,
        FakeTelegramServer() as server,
    ):
        settings = PlatformSettings(_env_file=None, telegram_token=SecretStr(server.token))
        adapter = TelegramAdapter(settings, base_url=server.base_url, stop_grace=2)
        person: FakeUser = server.user("Sarah")
        chat: FakeChat = server.private_chat(person)
        await adapter.start(app.adapter_services)
        try:
            await kill_database(app)
            server.push_message(chat, person, "hello as the database dies")
            update_id = 1  # the fake server's first update

            def confirmed() -> bool:
                offsets = [int(c.params.get("offset") or 0) for c in server.calls_to("getUpdates")]
                return any(offset > update_id for offset in offsets)

            # Fetched at once (a long poll was waiting); the first message of an outage then
            # waits 3 s for the database before it is journaled. Meanwhile: not confirmed.
            await asyncio.sleep(1.5)
            assert not confirmed() and app.runtime.intake.outage is not None
            assert len(app.runtime.intake.outage.journal) == 0
            for _ in range(200):
                if confirmed():
                    break
                await asyncio.sleep(0.05)
            # Confirmed once it was in the journal, where the replay finds it.
            assert confirmed() and len(app.runtime.intake.outage.journal) == 1

            await bring_database_back(app)
            await journal_drained(app)
            sent = await server.wait_for_sent(2, timeout=30)
            assert [m.text for m in sent] == [TROUBLE_REPLY, "You said: hello as the database dies"]
        finally:
            await asyncio.wait_for(adapter.stop(), 15)

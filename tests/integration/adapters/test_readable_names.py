"""Names are what people can read (issue 30, finding 5), on Telegram's real code path with the
facts plugin learning names through the offline model.

The audit: Zed, displayed `Zed\\u202eevil\\u200b`, said "call me Tobrin"; `/facts` listed
"Zed\\u202eevil\\u200b's name is Tobrin — about Tobrin" and the prompts called him Tobrin beside
the real Tobrin. Now his display name is kept as it reads, "Zedevil", and the name he told is
kept told apart from the other member's, "Tobrin (Zedevil)": in /facts, /me and every prompt.
"""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.config.settings import PlatformSettings
from bot.domain.records import account_id, room_id
from bot.llm.base import ModelRequest
from bot.testing.harness import open_test_app
from plugins.facts import plugin as facts
from tests.fakes.telegram_server import FakeChat, FakeTelegramServer, FakeUser

ZED_SHOWN = "Zed\u202eevil\u200b"  # a right-to-left override and a zero-width space


def invisible(text: str) -> list[str]:
    """The format and control characters in `text` (newlines between lines aside)."""
    return [c for c in text if unicodedata.category(c) in ("Cf", "Cc") and c != "\n"]


@dataclass
class Bot:
    app: App
    adapter: TelegramAdapter
    server: FakeTelegramServer
    prompts: list[str]

    async def said(self, chat: FakeChat, user: FakeUser, text: str) -> str:
        """`user` writes in `chat`; the bot's answer, once everything is learned."""
        before = len([m for m in self.server.sent if m.chat_id == chat.id])
        self.server.push_message(chat, user, text)
        sent = await self.server.wait_for_sent(before + 1, chat_id=chat.id)
        await self.server.drained()
        await self.adapter.wait_idle()
        assert await self.app.runtime.evaluations.join(room_id("telegram", chat.id), 30)
        return sent[before].text


@asynccontextmanager
async def mnemo_on_telegram(
    tmp_path: Path, model_dir: Path, mongo_uri: str, server: FakeTelegramServer, admin: FakeUser
) -> AsyncIterator[Bot]:
    async with open_test_app(
        tmp_path,
        plugins=[facts],
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        prompts: list[str] = []
        model = app.runtime.model
        generate = model.generate

        async def recording(request: ModelRequest) -> str:
            if request.task == "reply":
                prompts.append(request.shown_text)
            return await generate(request)

        model.generate = recording  # type: ignore[method-assign]
        settings = PlatformSettings(
            _env_file=None,  # type: ignore[call-arg]
            telegram_token=SecretStr(server.token),
            telegram_webhook_url=None,
            admin_ids=[f"telegram:{admin.id}"],  # /facts in a group is for admins
        )
        adapter = TelegramAdapter(settings, base_url=server.base_url, poll_timeout=1)
        await adapter.start(app.adapter_services)
        try:
            yield Bot(app, adapter, server, prompts)
        finally:
            await adapter.stop()


async def test_a_told_name_copying_another_members_is_told_apart_and_names_hide_nothing(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with FakeTelegramServer() as server:
        tobrin = server.user("Tobrin", username="tobrin")
        zed = server.user(ZED_SHOWN, username="zed")
        group = server.group("Guild hall")
        async with mnemo_on_telegram(tmp_path, model_dir, mongo_uri, server, zed) as bot:
            await bot.said(group, tobrin, "@mnemo_bot hello everyone, I run the forge here.")
            await bot.said(group, zed, "@mnemo_bot my name is Tobrin.")
            listed = await bot.said(group, zed, "/facts")
            me = await bot.said(group, zed, "/me")
            await bot.said(group, zed, "@mnemo_bot who runs the forge?")
            accounts = await bot.app.store.accounts.get_many(
                [account_id("telegram", zed.id), account_id("telegram", tobrin.id)]
            )

    stored = accounts[account_id("telegram", zed.id)]
    assert stored.name == "Zedevil"  # kept as it reads
    world = next(iter(stored.told_names))
    assert stored.told_names == {world: "Tobrin (Zedevil)"}
    assert accounts[account_id("telegram", tobrin.id)].name == "Tobrin"
    # /facts and /me say which account is which.
    assert "Zedevil's name is Tobrin — about Tobrin (Zedevil)" in listed, listed
    assert "Tobrin (Zedevil)" in me
    # The prompt calls them apart: the real Tobrin by his name, Zed by the name told apart.
    prompt = bot.prompts[-1]
    assert "\nTobrin: @mnemo_bot hello everyone, I run the forge here." in prompt, prompt
    assert "\nTobrin (Zedevil): @mnemo_bot who runs the forge?" in prompt, prompt
    for text in (listed, me, *bot.prompts):
        assert invisible(text) == [], text

"""Mnemo on Telegram in a test: a real python-telegram-bot adapter polling the local fake Bot API,
a real runtime and a scripted model (the `server` and `open_bot` fixtures), and the tiny
REMEMBER plugin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot import Claim, Context, Evaluator, Plugin
from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.config.settings import PlatformSettings
from bot.domain.records import room_id
from bot.domain.state import State
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.telegram_server import FakeChat, FakeTelegramServer, FakeUser, SentMessage

# The public webhook URL the webhook tests configure.
WEBHOOK_URL = "https://example.invalid/mnemo"


def echo(prompt: str, task: str, state: State | None) -> str:
    """Replies say which message they answer, so a test can tell replies apart."""
    assert state is not None
    return f"You said: {state.message.content.text}"


async def remember(ctx: Context, found: object) -> None:
    """A tiny evaluator: every message becomes a fact about its sender, in its world."""
    message = ctx.message
    text = message.content.text
    # Proposed as any plugin does: the memory keeps it with the message as its evidence.
    claim = Claim(text=f"said {text}", about=message.user_id, quote=text, message_id=message.id)
    await ctx.memory.propose([claim], messages=[message])


REMEMBER = Plugin(
    name="remember",
    evaluators=[
        Evaluator(
            name="REMEMBER", description="store what was said", handler=remember, always_run=True
        )
    ],
)


@dataclass
class Bot:
    app: App
    adapter: TelegramAdapter
    server: FakeTelegramServer
    model: ScriptedModel

    async def said(
        self, chat: FakeChat, user: FakeUser, text: str, **options: object
    ) -> SentMessage:
        """Push a message and return the bot's next message in that chat."""
        before = len([m for m in self.server.sent if m.chat_id == chat.id])
        self.server.push_message(chat, user, text, **options)  # type: ignore[arg-type]
        sent = await self.server.wait_for_sent(before + 1, chat_id=chat.id)
        return sent[before]

    async def settle(self, chat: FakeChat) -> None:
        """Wait until the bot fetched every update and learned from every message in `chat`."""
        await self.server.drained()
        await self.adapter.wait_idle()
        assert await self.app.runtime.evaluations.join(room_id("telegram", chat.id), 30)


# Starts the bot with options (plugins, admin ids, ...) for the length of an `async with`.
OpenBot = Callable[..., AbstractAsyncContextManager[Bot]]


def settings_for(
    server: FakeTelegramServer,
    *,
    token: str | None = None,
    admin_ids: Sequence[str] = (),
    group_admins: bool = False,
) -> PlatformSettings:
    return PlatformSettings(
        _env_file=None,
        telegram_token=SecretStr(token or server.token),
        telegram_webhook_url=None,
        admin_ids=list(admin_ids),
        telegram_group_admins=group_admins,
    )


@pytest.fixture
async def server() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as fake:
        yield fake


@pytest.fixture
def open_bot(
    tmp_path: Path, mongo_uri: str, model_dir: Path, server: FakeTelegramServer
) -> OpenBot:
    @asynccontextmanager
    async def start(
        *,
        plugins: Sequence[Plugin] = (),
        admin_ids: Sequence[str] = (),
        group_admins: bool = False,
        rate_limit: int = 0,
        model: ScriptedModel | None = None,
    ) -> AsyncIterator[Bot]:
        model = model or ScriptedModel(echo)
        async with open_test_app(
            tmp_path,
            plugins=plugins,
            model=model,
            mongodb_uri=mongo_uri,
            model_dir=model_dir,
            evaluator_selection="all",
            rate_limit_per_minute=rate_limit,
        ) as app:
            adapter = TelegramAdapter(
                settings_for(server, admin_ids=admin_ids, group_admins=group_admins),
                base_url=server.base_url,
                poll_timeout=1,
                typing_interval=0.2,
            )
            await adapter.start(app.adapter_services)
            try:
                yield Bot(app, adapter, server, model)
            finally:
                await adapter.stop()

    return start

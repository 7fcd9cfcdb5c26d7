"""Discord and Telegram in one process and one event loop, each against its local fake."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import SecretStr

from bot.adapters.discord import DiscordAdapter
from bot.adapters.telegram import TelegramAdapter
from bot.app.platforms import run_platforms
from bot.config.settings import PlatformSettings
from bot.domain.state import State
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.discord_fakes import FakeDiscordServer, Person, pointed_at
from tests.fakes.telegram_server import FakeTelegramServer


def echo(prompt: str, task: str, state: State | None) -> str:
    assert state is not None
    return f"You said: {state.message.content.text}"


async def test_both_platforms_answer_from_one_process(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeDiscordServer(token="discord-good") as discord_api,
        FakeTelegramServer() as telegram_api,
        open_test_app(
            tmp_path, model=ScriptedModel(echo), model_dir=model_dir, mongodb_uri=mongo_uri
        ) as app,
    ):
        guild = discord_api.add_guild("Book Club")
        discord_adapter = DiscordAdapter(
            PlatformSettings(_env_file=None, discord_token=SecretStr("discord-good")),
            ready_timeout=20,
        )
        telegram_adapter = TelegramAdapter(
            PlatformSettings(_env_file=None, telegram_token=SecretStr(telegram_api.token)),
            base_url=telegram_api.base_url,
            poll_timeout=1,
            stop_grace=2,
        )
        stop = asyncio.Event()
        with pointed_at(discord_api):
            running = asyncio.create_task(
                run_platforms(
                    app,
                    adapters=[discord_adapter, telegram_adapter],
                    stop=stop,
                    handle_signals=False,
                )
            )
            try:
                await discord_api.until(lambda: guild.id in discord_api.commands)
                sarah = Person(discord_api.snowflakes(), "Sarah")
                await discord_api.push(
                    "MESSAGE_CREATE",
                    discord_api.message(guild, sarah, f"<@{discord_api.bot.id}> hi from Discord"),
                )
                sam = telegram_api.user("Sam")
                telegram_api.push_message(telegram_api.private_chat(sam), sam, "hi from Telegram")
                [telegram_reply] = await telegram_api.wait_for_sent(1)
                await asyncio.wait_for(discord_api.message_arrived.wait(), 10)
            finally:
                stop.set()
                await asyncio.wait_for(running, 30)
    [(_, discord_reply)] = discord_api.sent
    assert discord_reply["content"].startswith("You said:")
    assert "hi from Discord" in discord_reply["content"]
    assert telegram_reply.text == "You said: hi from Telegram"
    assert discord_adapter.client.is_closed()

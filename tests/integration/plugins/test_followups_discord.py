"""A follow-up on Discord: said in a server's channel, asked in that channel on Saturday
morning, once, through discord.py against the local fake of Discord's API and gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import SecretStr

from bot.adapters.discord import DiscordAdapter
from bot.app.composition import App
from bot.app.platforms import run_platforms
from bot.commands.command_set import Commands
from bot.commands.types import Request
from bot.config.settings import PlatformSettings
from bot.domain.records import room_id, world_id
from bot.testing.harness import open_test_app
from plugins.followups import make_plugin
from tests.fakes.discord_fakes import FakeDiscordServer, Person, pointed_at
from tests.helpers.followups import Clock, at


async def planned(app: App) -> None:
    """Until the message was read and its follow-up planned."""
    store = app.store.db["plugin_followups_followups"]
    for _ in range(400):
        if await store.count_documents({"status": "pending"}):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the message was not read within 20 s")


async def test_a_follow_up_is_asked_in_the_discord_channel_it_was_mentioned_in(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with (
        FakeDiscordServer(token="discord-good") as discord_api,
        open_test_app(
            tmp_path, plugins=[make_plugin(clock=clock)], model_dir=model_dir, mongodb_uri=mongo_uri
        ) as app,
    ):
        guild = discord_api.add_guild("Study group")
        channel = int(guild.payload["channels"][0]["id"])
        adapter = DiscordAdapter(
            PlatformSettings(_env_file=None, discord_token=SecretStr("discord-good")),
            ready_timeout=20,
        )
        stop = asyncio.Event()
        with pointed_at(discord_api):
            running = asyncio.create_task(
                run_platforms(app, adapters=[adapter], stop=stop, handle_signals=False)
            )
            try:
                await discord_api.until(lambda: guild.id in discord_api.commands)
                sarah = Person(discord_api.snowflakes(), "Sarah")
                switched_on = await Commands(app.commands).run(
                    "followups",
                    Request(
                        platform="discord",
                        account_id="an admin",
                        world_id=world_id("discord", guild.id),
                        room_id=room_id("discord", channel),
                        is_admin=True,
                        args="on",
                    ),
                )
                # Overheard in the channel, not addressed to the bot.
                await discord_api.push(
                    "MESSAGE_CREATE", discord_api.message(guild, sarah, "My exam is on Friday")
                )
                await planned(app)
                before = len(discord_api.sent)
                clock.ms = at(2026, 11, 28, 10, 0)
                await app.runtime.plugins.run_tasks()
                await app.runtime.plugins.run_tasks()
                asked = discord_api.sent[before:]
            finally:
                stop.set()
                await asyncio.wait_for(running, 30)
    assert switched_on.text.startswith("Follow-ups are on here")
    [(to, payload)] = asked
    assert to == channel
    assert "Sarah" in payload["content"] and "exam" in payload["content"]

"""Discord shards: `MNEMO_DISCORD_SHARDS` (in all) and `MNEMO_DISCORD_SHARD_IDS` (this
process's) split the gateway traffic across processes; `auto` runs the shards Discord
recommends in one process. Real discord.py (`AutoShardedClient`) against the local fake
Discord gateway, which serves each guild on its shard ((guild_id >> 22) % shards) as Discord
does; two adapters stand for two processes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import discord
import pytest

from bot.adapters.discord import DiscordAdapter
from bot.app.composition import App
from bot.config.settings import ConfigError, PlatformSettings, load_settings
from bot.llm.base import Task
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.discord_fakes import FakeDiscordServer, Person, ServerGuild, pointed_at, shard_for

TOKEN = "good"


def shard_settings(**options: object) -> PlatformSettings:
    return PlatformSettings(_env_file=None, discord_token=TOKEN, **options)  # type: ignore[call-arg]


@pytest.fixture
async def app(tmp_path: Path, model_dir: Path, mongo_uri: str) -> AsyncIterator[App]:
    model = ScriptedModel(answers={Task.REPLY: ['{"text": "Hello there!"}']})
    async with open_test_app(
        tmp_path, model=model, model_dir=model_dir, mongodb_uri=mongo_uri
    ) as running:
        yield running


async def guilds_on_both_shards(server: FakeDiscordServer) -> dict[int, ServerGuild]:
    """Guilds until each of two shards serves one (a guild's shard is in its id's time bits:
    the millisecond it was created)."""
    found: dict[int, ServerGuild] = {}
    for number in range(50):
        await asyncio.sleep(0.003)
        guild = server.add_guild(f"Guild {number}")
        found.setdefault(shard_for(guild.id, 2), guild)
        if len(found) == 2:
            return found
    raise AssertionError("no guild landed on one of the shards")


@contextlib.asynccontextmanager
async def started(*adapters: DiscordAdapter, app: App) -> AsyncIterator[None]:
    try:
        for adapter in adapters:
            await adapter.start(app.adapter_services)
        yield
    finally:
        for adapter in adapters:
            await adapter.stop()


async def test_two_processes_each_run_their_shard_and_answer_only_its_guilds(app: App) -> None:
    async with FakeDiscordServer(token=TOKEN) as server:
        guilds = await guilds_on_both_shards(server)
        first = DiscordAdapter(shard_settings(discord_shards=2, discord_shard_ids=[0]))
        second = DiscordAdapter(shard_settings(discord_shards=2, discord_shard_ids=[1]))
        with pointed_at(server):
            async with started(first, second, app=app):
                # Each identified as its shard of two.
                assert sorted(i["shard"] for i in server.identified) == [[0, 2], [1, 2]]
                assert isinstance(first.client, discord.AutoShardedClient)
                assert set(first.client.shards) == {0} and set(second.client.shards) == {1}
                # Each knows only its shard's guilds.
                assert {g.id for g in first.client.guilds} == {
                    g.id for g in server.guilds_of((0, 2))
                }
                assert {g.id for g in second.client.guilds} == {
                    g.id for g in server.guilds_of((1, 2))
                }
                sarah = Person(server.snowflakes(), "Sarah")
                for guild in guilds.values():
                    await server.push(
                        "MESSAGE_CREATE", server.message(guild, sarah, f"<@{server.bot.id}> hi!")
                    )
                await server.until(lambda: len(server.sent) == 2)
                await first.lanes.join()
                await second.lanes.join()
        # Every guild's message answered once, in its own channel.
        channels = sorted(int(g.payload["channels"][0]["id"]) for g in guilds.values())
        assert sorted(channel for channel, _ in server.sent) == channels
        assert {sent["content"] for _, sent in server.sent} == {"Hello there!"}


async def test_auto_runs_the_recommended_shards_in_one_process(app: App) -> None:
    async with FakeDiscordServer(token=TOKEN, recommended_shards=2) as server:
        guilds = await guilds_on_both_shards(server)
        adapter = DiscordAdapter(shard_settings(discord_shards="auto"))
        with pointed_at(server):
            async with started(adapter, app=app):
                assert sorted(i["shard"] for i in server.identified) == [[0, 2], [1, 2]]
                assert adapter.client.shard_count == 2
                assert {g.id for g in adapter.client.guilds} == {g.id for g in server.guilds}
                sarah = Person(server.snowflakes(), "Sarah")
                for guild in guilds.values():
                    await server.push(
                        "MESSAGE_CREATE", server.message(guild, sarah, f"<@{server.bot.id}> hi!")
                    )
                await server.until(lambda: len(server.sent) == 2)
        assert "GET /api/v10/gateway/bot" in server.requests


def test_without_shards_one_connection_and_bad_shard_settings_are_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert type(DiscordAdapter(shard_settings()).client) is discord.Client
    for variable in ("MNEMO_DISCORD_SHARDS", "MNEMO_DISCORD_SHARD_IDS"):
        monkeypatch.delenv(variable, raising=False)
    cases = {
        ("", "1"): "MNEMO_DISCORD_SHARD_IDS: needs MNEMO_DISCORD_SHARDS set",
        ("2", "2"): "MNEMO_DISCORD_SHARD_IDS: shard ids run from 0 to 1; got 2",
        ("0", ""): "MNEMO_DISCORD_SHARDS: expected a number of shards (1 or more) or auto",
        ("many", ""): "MNEMO_DISCORD_SHARDS: expected a number of shards (1 or more) or auto",
    }
    for (shards, ids), expected in cases.items():
        monkeypatch.setenv("MNEMO_DISCORD_SHARDS", shards)
        monkeypatch.setenv("MNEMO_DISCORD_SHARD_IDS", ids)
        with pytest.raises(ConfigError) as raised:
            load_settings(env_file=None)
        assert expected in str(raised.value) and "\n" not in str(raised.value)
    monkeypatch.setenv("MNEMO_DISCORD_SHARDS", "4")
    monkeypatch.setenv("MNEMO_DISCORD_SHARD_IDS", "3, 1")
    platforms = load_settings(env_file=None).platforms
    assert (platforms.discord_shards, platforms.discord_shard_ids) == (4, [1, 3])


async def test_a_shard_process_is_ready_once_its_shards_are(app: App) -> None:
    """Start-up returns when this process's shards are connected, not the others'."""
    async with FakeDiscordServer(token=TOKEN) as server:
        await guilds_on_both_shards(server)
        adapter = DiscordAdapter(
            shard_settings(discord_shards=4, discord_shard_ids=[2]), ready_timeout=20
        )
        with pointed_at(server):
            async with started(adapter, app=app):
                await asyncio.sleep(0)
                assert [i["shard"] for i in server.identified] == [[2, 4]]
                assert adapter.client.is_ready()

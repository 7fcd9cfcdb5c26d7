"""Mnemo on Discord in a test: discord.py's own objects, parsed from gateway payloads by the
local fakes, over a real runtime with a scripted model (`mnemo_on_discord`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord

from bot import Claim, Plugin
from bot.adapters.discord import DiscordAdapter, to_memory
from bot.app.composition import App
from bot.config.settings import PlatformSettings
from bot.domain.records import Fact, account_id
from bot.llm.base import Task
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.discord_fakes import FakeDiscord, FakeInteraction, Person

HELLO = '{"text": "Hello there!", "action": "NONE"}'


def replying(*answers: str) -> ScriptedModel:
    return ScriptedModel(answers={Task.REPLY: list(answers or [HELLO])})


@dataclass
class Bot:
    app: App
    adapter: DiscordAdapter
    discord: FakeDiscord
    model: ScriptedModel

    async def hear(self, message: discord.Message) -> None:
        await self.adapter.on_message(message)
        await self.app.runtime.evaluations.join(None, 30)

    def command(self, name: str) -> Any:
        command = self.adapter.tree.get_command(name)
        assert command is not None, name
        return command.callback

    async def run(self, command: str, interaction: FakeInteraction, /, **options: Any) -> str:
        await self.command(command)(interaction, **options)
        assert interaction.shown, f"/{command} answered nothing"
        assert all(s.ephemeral for s in interaction.shown), f"/{command} answered in public"
        return interaction.text

    async def learn(
        self, person: Person, text: str, *, guild: discord.Guild | None, said: str | None = None
    ) -> Fact:
        """A fact as the facts plugin would learn it in this guild (or DM): the person says
        `said` (default: `text`) there, and a claim resting on those words is proposed to that
        world's memory, which keeps it with its evidence."""
        words = said or text
        incoming = to_memory(
            self.discord.message(person, words, guild=guild),
            self.discord.client.user,  # type: ignore[arg-type]
            agent_id=self.app.runtime.agent_id,
        )
        assert incoming is not None
        message = incoming.memory
        await self.app.store.accounts.upsert(incoming.account)
        await self.app.store.rooms.upsert(incoming.room)
        await self.app.store.memories.insert(message)
        claim = Claim(
            text=text, about=account_id("discord", person.id), quote=words, message_id=message.id
        )
        memory = self.app.runtime.plugins.memory(message.world_id)
        learned = await memory.propose([claim], messages=[message])
        [fact] = learned.stored
        return fact


def settings(*, admin_ids: str = "", global_sync: bool = False, token: str | None = None):
    return PlatformSettings(
        _env_file=None,
        discord_token=token,
        admin_ids=admin_ids,
        discord_global_sync=global_sync,
    )


@asynccontextmanager
async def mnemo_on_discord(
    tmp_path: Path,
    model_dir: Path,
    mongo_uri: str,
    *,
    model: ScriptedModel | None = None,
    admin_ids: str = "",
    rate_limit: int = 0,
    plugins: Sequence[Plugin] = (),
) -> AsyncIterator[Bot]:
    model = model or replying()
    async with open_test_app(
        tmp_path,
        model=model,
        plugins=plugins,
        model_dir=model_dir,
        mongodb_uri=mongo_uri,
        rate_limit_per_minute=rate_limit,
        evaluator_selection="all",
    ) as app:
        adapter = DiscordAdapter(settings(admin_ids=admin_ids), learn_wait=10)
        adapter.bind(app.adapter_services)
        yield Bot(app, adapter, FakeDiscord(adapter.client, tree=adapter.tree), model)

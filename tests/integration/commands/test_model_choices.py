"""The operator decides what models cost (issue 30.1): `/model` chooses only among the names
in MNEMO_MODEL_CHOICES, whatever an admin types (another model, a look-alike, invisible or
full-width characters, a name thousands of characters long); with the list empty it changes
nothing; a stored choice the operator no longer allows is never used. Through the command
layer and discord.py's and python-telegram-bot's real code paths, with the real `openai`
client against the fake OpenAI server, which counts every model a request named (the console:
tests/e2e/test_world_choice.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.adapters.discord import DiscordAdapter
from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.commands.command_set import Commands, Request
from bot.commands.world_choice import NO_MODEL_CHOICES
from bot.config.settings import ModelSettings, PlatformSettings, Settings
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer
from tests.fakes.discord_fakes import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.telegram_bot import settings_for

HELLO = json.dumps({"text": "Hello there", "action": "NONE"})
ALLOWED = ["gpt-x", "tiny-x"]
MAY_CHOOSE = "Models you may choose: gpt-x, tiny-x."

# What an admin might type to reach a model the operator did not list.
PROBES = [
    "o1-pro",
    "gpt-x\u200b",  # an allowed name and a zero-width space
    "\u200bgpt-x",
    "gpt-\u0445",  # Cyrillic kha for the x
    "\uff47\uff50\uff54\uff0d\uff58",  # full-width g p t - x
    "gpt-x\u0301",  # a combining accent on the x
    "gpt-x/../../etc/passwd",
    "gpt-x" + "0" * 5000,
    "gpt-x:latest",
    "@everyone",
]


def respond(request: dict[str, Any]) -> str:
    return HELLO


def endpoint(settings: Settings, base_url: str, choices: list[str]) -> Settings:
    model = ModelSettings.model_construct(
        openai_api_key=SecretStr("test-key"),
        openai_base_url=base_url,
        small_model="fake-small",
        large_model="fake-large",
        model_choices=choices,
        timeout_seconds=5.0,
        max_retries=0,
    )
    return dataclasses.replace(settings, model=model)


def models_asked(server: FakeOpenAIServer) -> list[str]:
    """The model each chat request named, in order; a name's check (one token) marked."""
    return [
        str(request.json.get("model")) + (" (check)" if request.json.get("max_tokens") == 1 else "")
        for request in server.chat_requests
    ]


def ask(chat: TestChat, args: str = "") -> Request:
    return Request(
        platform=chat.platform,
        account_id=chat.account.id,
        world_id=chat.room.world_id,
        room_id=chat.room.id,
        is_admin=True,
        args=args,
    )


async def stored_model(app: App, chat: TestChat) -> str | None:
    settings = await app.store.worlds.get(chat.room.world_id)
    return None if settings is None else settings.large_model


async def test_a_name_outside_the_operator_s_list_changes_nothing_whatever_its_spelling(
    tmp_path: Path, model_dir: Path
) -> None:
    async with FakeOpenAIServer(responder=respond) as server:
        settings = endpoint(test_settings(tmp_path), server.base_url, ALLOWED)
        async with open_test_app(tmp_path, settings=settings) as app:
            commands = Commands(app.commands, learn_wait=5)
            chat = TestChat(app.runtime, world="server-a")
            refused = [(await commands.run("model", ask(chat, f"large {p}"))).text for p in PROBES]
            two_words = await commands.run("model", ask(chat, "large gpt x"))
            untouched = await stored_model(app, chat)
            await chat.say("hello")
            shown = await commands.run("model", ask(chat))
            # The operator's name in another case is that name, kept as the operator spelt it.
            chosen = await commands.run("model", ask(chat, "LARGE   GPT-X "))
            kept = await stored_model(app, chat)
            await chat.say("hello again")

    for probe, answer in zip(PROBES, refused, strict=True):
        assert "is not one of the models allowed here." in answer, probe
        assert answer.endswith(f"{MAY_CHOOSE} Nothing changed."), probe
        assert len(answer) < 200, "a long name is not echoed whole"
    assert "@everyone" not in refused[-1]  # shown back as plain words, never a ping
    assert two_words.text.startswith("Usage: /model small|large")
    assert untouched is None
    assert shown.text.startswith("Models here: small: fake-small (the default), large: fake-large")
    assert MAY_CHOOSE in shown.text
    assert chosen.text == "Here the large model is now gpt-x."
    assert kept == "gpt-x"
    # No request ever named a refused name: the reply before the choice used the operator's
    # model, the check and the reply after it the operator's spelling of the chosen one.
    assert models_asked(server) == ["fake-large", "gpt-x (check)", "gpt-x"]


async def test_with_no_choices_model_shows_the_models_and_changes_nothing(
    tmp_path: Path, model_dir: Path
) -> None:
    async with FakeOpenAIServer(responder=respond) as server:
        settings = endpoint(test_settings(tmp_path), server.base_url, [])
        async with open_test_app(tmp_path, settings=settings) as app:
            commands = Commands(app.commands, learn_wait=5)
            chat = TestChat(app.runtime, world="server-a")
            shown = await commands.run("model", ask(chat))
            refused = await commands.run("model", ask(chat, "large fake-small"))
            back = await commands.run("model", ask(chat, "small default"))
            await chat.say("hello")
            stored = await app.store.worlds.get(chat.room.world_id)

    assert shown.text == (
        "Models here: small: fake-small (the default), large: fake-large (the default).\n"
        + NO_MODEL_CHOICES
    )
    assert refused.text == f"{NO_MODEL_CHOICES} Nothing changed."
    # Going back to the operator's own setting is always allowed: it can only cost less.
    assert back.text == "Here the small model is the bot's setting again (fake-small)."
    assert stored is not None and stored.large_model is None and stored.small_model is None
    assert models_asked(server) == ["fake-large"]


async def test_a_stored_choice_the_operator_no_longer_allows_is_not_used(
    tmp_path: Path, model_dir: Path
) -> None:
    async with FakeOpenAIServer(responder=respond) as server:
        allowed = endpoint(test_settings(tmp_path), server.base_url, ALLOWED)
        async with open_test_app(tmp_path, settings=allowed, keep_database=True) as app:
            commands = Commands(app.commands, learn_wait=5)
            chat = TestChat(app.runtime, world="server-a")
            await commands.run("model", ask(chat, "large gpt-x"))
            # Written past /model (a database edited by hand, an older version's choice).
            other = TestChat(app.runtime, chat="dm-b", world="server-b")
            await app.store.worlds.change(other.room.world_id, small_model="../../etc/passwd")
            await chat.say("hello")
        # The operator takes gpt-x off the list and restarts.
        removed = endpoint(test_settings(tmp_path), server.base_url, ["tiny-x"])
        async with open_test_app(tmp_path, settings=removed) as app:
            commands = Commands(app.commands, learn_wait=5)
            chat = TestChat(app.runtime, world="server-a")
            other = TestChat(app.runtime, chat="dm-b", world="server-b")
            await chat.say("hello again", number=2)  # the first app's was number 1
            shown = await commands.run("model", ask(chat))
            stats = await commands.run("stats", ask(chat))
            shown_other = await commands.run("model", ask(other))

    assert models_asked(server) == ["gpt-x (check)", "gpt-x", "fake-large"]
    refused = "large: fake-large (the default; “gpt-x”, chosen here, is not allowed now)"
    assert refused in shown.text and refused in stats.text
    assert "Models you may choose: tiny-x." in shown.text
    hand_written = "small: fake-small (the default; “../../etc/passwd”, chosen here, is not allowed"
    assert hand_written in shown_other.text


# --------------------------------------------------------------------------- the platforms
@asynccontextmanager
async def server_and_app(tmp_path: Path, choices: list[str]) -> AsyncIterator[tuple[Any, App]]:
    async with FakeOpenAIServer(responder=respond) as server:
        settings = endpoint(test_settings(tmp_path), server.base_url, choices)
        async with open_test_app(tmp_path, settings=settings) as app:
            yield server, app


async def test_on_discord_a_server_owner_s_model_outside_the_list_changes_nothing(
    tmp_path: Path, model_dir: Path
) -> None:
    async with server_and_app(tmp_path, ALLOWED) as (server, app):
        adapter = DiscordAdapter(PlatformSettings(_env_file=None), learn_wait=10)
        adapter.bind(app.adapter_services)
        fake = FakeDiscord(adapter.client, tree=adapter.tree)
        guild = fake.guild("Owner's Server")
        owner = fake.person("Owner")
        command = adapter.tree.get_command("model")
        assert command is not None

        async def model(args: str) -> str:
            interaction = fake.interaction(owner, guild=guild, manage_server=True)
            await command.callback(interaction, args=args)  # type: ignore[call-arg]
            assert all(shown.ephemeral for shown in interaction.shown)
            return interaction.text

        refused = [await model(f"large {probe}") for probe in PROBES[:4]]
        await adapter.on_message(fake.message(owner, f"{fake.mention(fake.bot)} hi", guild=guild))
        chosen = await model("large Gpt-X")
        await adapter.on_message(fake.message(owner, f"{fake.mention(fake.bot)} hi", guild=guild))
        await app.runtime.evaluations.join(None, 30)

    assert all(answer.endswith(f"{MAY_CHOOSE} Nothing changed.") for answer in refused)
    assert chosen == "Here the large model is now gpt-x."
    assert models_asked(server) == ["fake-large", "gpt-x (check)", "gpt-x"]
    assert fake.http.texts == ["Hello there", "Hello there"]


async def test_on_telegram_a_group_admin_s_model_outside_the_list_changes_nothing(
    tmp_path: Path, model_dir: Path
) -> None:
    async with FakeTelegramServer() as telegram, server_and_app(tmp_path, []) as (server, app):
        boss = telegram.user("Boss")
        group = telegram.group("Book club")
        adapter = TelegramAdapter(
            settings_for(telegram, admin_ids=[str(boss.id)]),
            base_url=telegram.base_url,
            poll_timeout=1,
        )
        await adapter.start(app.adapter_services)
        try:

            async def said(text: str) -> str:
                before = len([m for m in telegram.sent if m.chat_id == group.id])
                telegram.push_message(group, boss, text)
                sent = await telegram.wait_for_sent(before + 1, chat_id=group.id)
                return sent[before].text

            refused = await said("/model large o1-pro")
            shown = await said("/model")
            answered = await said("@mnemo_bot hello")
        finally:
            await adapter.stop()

    assert refused == f"{NO_MODEL_CHOICES} Nothing changed."
    assert shown.startswith("Models here: small: fake-small (the default), large: fake-large")
    assert answered == "Hello there"
    assert models_asked(server) == ["fake-large"]

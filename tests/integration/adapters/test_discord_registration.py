"""Discord's slash commands where people look for them, registered only when they change.

Against a loopback Discord (tests/fakes/discord_fakes.py): discord.py logs in, registers the
commands over REST, and a person's command use arrives as INTERACTION_CREATE on the gateway,
dispatched by discord.py's own CommandTree; the fake offers a command only where Discord
would (a server's own commands, or global ones whose `contexts` allow a DM)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot import Plugin
from bot.adapters.discord import DiscordAdapter, world_of
from bot.adapters.discord.registration import FILE_NAME
from bot.app.composition import App
from bot.config.settings import PlatformSettings
from bot.domain.records import Fact, account_id, room_id
from bot.llm.base import Task
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.goals import plugin as GOALS
from tests.fakes.discord_fakes import (
    EDIT,
    FakeDiscord,
    FakeDiscordServer,
    InteractionAnswer,
    Person,
    pointed_at,
)
from tests.helpers.notes_plugin import NOTES

TOKEN = "good"
# Everyone's commands (/forget: one's own facts; a member's, admins only, is checked per call).
PERSONAL = {
    *("help", "privacy", "me", "forgetme", "export", "mydata", "optout", "optin", "facts"),
    *("reset", "new", "forget"),
}


def app_of(tmp_path: Path, model_dir: Path, mongo_uri: str, plugins: Sequence[Plugin] = ()):
    model = ScriptedModel(answers={Task.REPLY: ['{"text": "Hello there!"}']})
    return open_test_app(
        tmp_path, model=model, model_dir=model_dir, mongodb_uri=mongo_uri, plugins=plugins
    )


@asynccontextmanager
async def running(
    server: FakeDiscordServer, app: App, state_dir: Path | None
) -> AsyncIterator[DiscordAdapter]:
    adapter = DiscordAdapter(
        PlatformSettings(_env_file=None, discord_token=TOKEN),
        state_dir=state_dir,
        ready_timeout=20,
        learn_wait=5,
    )
    with pointed_at(server):
        await adapter.start(app.adapter_services)
        try:
            yield adapter
            # Registration runs in the background once Discord says ready.
            await asyncio.gather(*adapter._background)
        finally:
            await adapter.stop()


def registrations(server: FakeDiscordServer) -> list[str]:
    return [r for r in server.requests if r.startswith("PUT")]


async def answers(
    server: FakeDiscordServer, interaction_id: int, count: int
) -> list[InteractionAnswer]:
    await server.until(lambda: len(server.answered(interaction_id)) >= count)
    return server.answered(interaction_id)


async def test_personal_commands_answer_in_a_dm_and_admin_ones_stay_in_servers(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeDiscordServer(token=TOKEN) as server,
        app_of(tmp_path, model_dir, mongo_uri, plugins=[GOALS]) as app,
    ):
        guild = server.add_guild("Book Club")
        sarah = Person(server.snowflakes(), "Sarah")
        async with running(server, app, tmp_path / "state"):
            await server.until(lambda: None in server.commands and guild.id in server.commands)
            # In the DM with the bot: what a person asks about themselves.
            privacy = await answers(server, await server.use_command(sarah, "privacy"), 1)
            me = await answers(server, await server.use_command(sarah, "me"), 2)
            help_in_dm = await answers(server, await server.use_command(sarah, "help"), 1)
            optout = await answers(server, await server.use_command(sarah, "optout"), 1)
            # The same commands in the server.
            in_server = await answers(server, await server.use_command(sarah, "me", guild=guild), 2)
            # Admin commands: not offered in DMs; offered in the server, where Mnemo checks.
            with pytest.raises(LookupError):
                await server.use_command(sarah, "stats")
            refused = await answers(
                server, await server.use_command(sarah, "stats", guild=guild), 1
            )
    assert privacy[0].kind == 4 and privacy[0].ephemeral and "/forgetme" in privacy[0].text
    assert [a.kind for a in me] == [5, 0] and all(a.ephemeral for a in me)
    assert "haven't learned anything about you" in me[1].text
    assert "/me" in help_in_dm[0].text and "/stats" not in help_in_dm[0].text
    assert optout[0].ephemeral and "/optin" in optout[0].text
    assert "haven't learned anything about you" in in_server[1].text
    assert "Manage Server" in refused[0].text


async def test_forgetme_in_a_dm_asks_with_buttons_and_forgets_what_was_learned_there(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeDiscordServer(token=TOKEN) as server,
        app_of(tmp_path, model_dir, mongo_uri) as app,
    ):
        sarah = Person(server.snowflakes(), "Sarah")
        dm = server.dm_channel_id(sarah)
        fact = Fact(
            text="Sarah keeps bees",
            subject_id=account_id("discord", sarah.id),
            room_id=room_id("discord", dm),
            world_id=world_of(None, dm),
            agent_id=app.runtime.agent_id,
        )
        await app.knowledge.add_facts([fact], near_duplicate_distance=0.0)
        async with running(server, app, None):
            await server.until(lambda: None in server.commands)
            [asked] = await answers(server, await server.use_command(sarah, "forgetme"), 1)
            pressed = await server.press(sarah, asked, "Forget me")
            shown = await answers(server, pressed, 2)
        left = await app.store.facts.get_many([fact.id])
    assert asked.ephemeral and "cannot be undone" in asked.text
    assert [a.kind for a in shown] == [7, EDIT]  # buttons gone, then the outcome
    assert shown[-1].text.startswith("Done: I forgot") and not left


async def test_commands_are_registered_again_only_when_they_change(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    state = tmp_path / "state"
    async with FakeDiscordServer(token=TOKEN) as server:
        first_guild = server.add_guild("Book Club")
        async with app_of(tmp_path / "a", model_dir, mongo_uri) as app:
            async with running(server, app, state):
                pass
            first = registrations(server)
            assert (state / FILE_NAME).exists()
            # A restart with the same commands: no call at all, for any server.
            async with running(server, app, state):
                pass
            restart = registrations(server)[len(first) :]
            # A server joined while stopped: only it is registered.
            second_guild = server.add_guild("Chess")
            async with running(server, app, state):
                pass
            joined = registrations(server)[len(first) + len(restart) :]
        # A plugin with a command for everyone: the global set changed, the servers' did not.
        async with app_of(tmp_path / "b", model_dir, mongo_uri, plugins=[NOTES]) as app:
            done = len(registrations(server))
            async with running(server, app, state):
                pass
            changed = registrations(server)[done:]
    app_id = server.bot.id
    everywhere = f"PUT /api/v10/applications/{app_id}/commands"
    server_of = f"PUT /api/v10/applications/{app_id}/guilds/{{}}/commands".format
    assert sorted(first) == sorted([everywhere, server_of(first_guild.id)])
    assert restart == []
    assert joined == [server_of(second_guild.id)]
    # NOTES adds /note (everyone's, global) and /notes (admins', each server).
    assert sorted(changed) == sorted(
        [everywhere, server_of(first_guild.id), server_of(second_guild.id)]
    )
    assert {c["name"] for c in server.commands[None]} == PERSONAL | {"note"}


async def test_switching_to_global_registration_removes_the_servers_copies_once(
    tmp_path: Path,
) -> None:
    def adapter(global_sync: bool) -> tuple[DiscordAdapter, FakeDiscord]:
        made = DiscordAdapter(
            PlatformSettings(_env_file=None, discord_global_sync=global_sync), state_dir=tmp_path
        )
        return made, FakeDiscord(made.client, tree=made.tree)

    per_server, fake = adapter(global_sync=False)
    guilds = [fake.guild("Book Club"), fake.guild("Chess")]
    await per_server.sync_commands(guilds)
    assert sorted(fake.http.registrations, key=str) == sorted(
        [None, *[g.id for g in guilds]], key=str
    )
    # The same commands, now all global: one global call, and each server's own copies
    # removed (else members would see the admin commands twice).
    everything_global, fake = adapter(global_sync=True)
    await everything_global.sync_commands(guilds)
    assert sorted(fake.http.registrations, key=str) == sorted(
        [None, *[g.id for g in guilds]], key=str
    )
    assert all(fake.http.commands[g.id] == [] for g in guilds)
    assert {"stats", "me"} <= {c["name"] for c in fake.http.commands[None]}
    # Next start: nothing changed, nothing registered.
    again, fake = adapter(global_sync=True)
    await again.sync_commands(guilds)
    assert fake.http.registrations == []


async def test_a_spanish_client_reads_the_command_descriptions_in_spanish(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    """Discord shows a command's description in the client's language when the registered
    command carries it: every language with a catalog (bot/i18n), its Discord locales all
    (Spain's and Latin America's Spanish); the names stay as they are typed."""
    async with (
        FakeDiscordServer(token=TOKEN) as server,
        app_of(tmp_path, model_dir, mongo_uri) as app,
    ):
        async with running(server, app, None):
            await server.until(lambda: None in server.commands)
        registered = {command["name"]: command for command in server.commands[None]}
    me, facts = registered["me"], registered["facts"]
    assert me["description"] == "What I have learned about you here"
    assert me["description_localizations"] == {
        "es-ES": "Lo que he aprendido de ti aquí",
        "es-419": "Lo que he aprendido de ti aquí",
    }
    [member] = [option for option in facts["options"] if option["name"] == "member"]
    assert member["description_localizations"]["es-ES"] == "Solo datos sobre esta persona"
    assert not any(command.get("name_localizations") for command in registered.values())

"""The command layer: one command set on every surface. A plugin written only against `bot`
adds a command, and it is there on the console, on Telegram and as a Discord slash command,
with the same answer and the same admin rule; the one argument parser."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.adapters.console import ConsoleChat
from bot.adapters.discord import REFUSED, DiscordAdapter
from bot.adapters.telegram import TelegramAdapter
from bot.commands.command_set import Commands, Request, parse_person_search_page
from bot.config.settings import PlatformSettings
from bot.domain.records import world_id
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from tests.fakes.discord_fakes import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.notes_plugin import NOTES
from tests.helpers.telegram_bot import REMEMBER


async def test_a_plugin_command_works_on_the_console_telegram_and_discord(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        open_test_app(
            tmp_path,
            plugins=[NOTES],
            model=ScriptedModel(lambda prompt, task, state: "{}"),
            model_dir=model_dir,
            mongodb_uri=mongo_uri,
        ) as app,
        FakeTelegramServer() as telegram,
    ):
        # The console: the person at this machine is its admin.
        out = io.StringIO()
        console = ConsoleChat(
            user_name="sam",
            stdin=io.StringIO("/note milk\n/notes\n/help\n"),
            stdout=out,
        )
        await console.run(app.adapter_services)
        assert "Noted: milk" in out.getvalue() and "1 notes" in out.getvalue()
        assert "/note <text> - Keep a note" in out.getvalue()

        # Telegram: in the command menu, answered in the chat, refused to non-admins.
        adapter = TelegramAdapter(
            PlatformSettings(_env_file=None, telegram_token=SecretStr(telegram.token)),
            base_url=telegram.base_url,
            poll_timeout=1,
        )
        await adapter.start(app.adapter_services)
        try:
            sarah = telegram.user("Sarah")
            dm = telegram.private_chat(sarah)
            telegram.push_message(dm, sarah, "/note eggs")
            telegram.push_message(dm, sarah, "/notes")
            noted, refused = await telegram.wait_for_sent(2, chat_id=dm.id)
            menu = [c["command"] for c in telegram.calls_to("setMyCommands")[0].params["commands"]]
        finally:
            await adapter.stop()
        assert noted.text == "Noted: eggs"
        assert refused.text == "Sorry, /notes is only for admins."
        assert "note" in menu and "notes" not in menu  # admins' commands are in admins' menus

        # Discord: a slash command whose text option carries the arguments.
        discord_adapter = DiscordAdapter(PlatformSettings(_env_file=None))
        discord_adapter.bind(app.adapter_services)
        fake = FakeDiscord(discord_adapter.client, tree=discord_adapter.tree)
        tom = fake.person("Tom")
        note = discord_adapter.tree.get_command("note")
        notes = discord_adapter.tree.get_command("notes")
        assert note is not None and notes is not None
        await note.callback(used := fake.interaction(tom), args="bread")  # type: ignore[call-arg]
        await notes.callback(asked := fake.interaction(tom))  # type: ignore[call-arg]
        assert used.text == "Noted: bread"
        assert asked.text == REFUSED


@pytest.mark.parametrize(
    ("args", "parsed"),
    [
        ("", (None, None, 1)),
        ("@sarah", ("@sarah", None, 1)),
        ("@sarah green tea 2", ("@sarah", "green tea", 2)),
        ("123456789 tea", ("123456789", "tea", 1)),
        ("chapter 12", (None, "chapter", 12)),
        ("room 12 1", (None, "room 12", 1)),
        ("page 0", (None, "page", 1)),
        ("born 1987654", (None, "born 1987654", 1)),  # a long number is no page
    ],
)
def test_one_parser_reads_person_search_and_page(
    args: str, parsed: tuple[str | None, str | None, int]
) -> None:
    assert parse_person_search_page(args) == parsed


async def test_the_console_has_the_platforms_commands_with_their_meanings(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    model = ScriptedModel(lambda prompt, task, state: '{"text": "Noted."}')
    async with open_test_app(
        tmp_path,
        plugins=[REMEMBER],
        model=model,
        model_dir=model_dir,
        mongodb_uri=mongo_uri,
        evaluator_selection="all",
    ) as app:
        first = io.StringIO()
        # Third person: a first-person line copied is no fact about anyone (grounding.py).
        said = "Sam lives in Lisbon\nSam keeps bees\n/me\n"
        await ConsoleChat(user_name="sam", stdin=io.StringIO(said), stdout=first).run(
            app.adapter_services
        )
        lisbon, bees = (await app.store.facts.page(world_id("console", "sam")))[0][::-1]
        out = io.StringIO()
        forget = f"/forget {lisbon.id[:8]}"
        script = f"/forget\n{forget}\n{forget} yes\n/stats\n/forgetme\n/me\n/forgetme yes\n/me\n"
        await ConsoleChat(user_name="sam", stdin=io.StringIO(script), stdout=out).run(
            app.adapter_services
        )
    shown = out.getvalue()
    assert "said Sam lives in Lisbon" in first.getvalue()
    # /forget means one fact by id (or a person), never "everything about me".
    assert "Usage: /forget <fact id from /me or /facts> [yes], or admins: /forget @user" in shown
    # One fact asks first too: it goes with "yes".
    assert f"Forgot: {lisbon.text}" in shown
    asked_one = shown.split(f"Forgot: {lisbon.text}")[0]
    assert f'This forgets "{lisbon.text}"' in asked_one
    assert f"Send /forget {lisbon.id[:8]} yes if you are sure." in asked_one
    assert "Facts: 1" in shown and "Messages: 4" in shown  # the console's admin sees /stats
    # /forgetme asks first (bees still known), then forgets.
    asked, after = shown.split("Done: I forgot")
    assert "It cannot be undone." in asked and bees.text in asked
    assert "I haven't learned anything about you here yet." in after


async def test_stats_count_only_the_world_they_are_used_in_and_echoes_are_bounded(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    model = ScriptedModel(lambda prompt, task, state: '{"text": "Noted."}')
    async with open_test_app(
        tmp_path,
        plugins=[REMEMBER],
        model=model,
        model_dir=model_dir,
        mongodb_uri=mongo_uri,
        evaluator_selection="all",
    ) as app:
        here = TestChat(app.runtime, name="Sam", chat="here")
        there = TestChat(app.runtime, name="Ann", chat="there")
        for text in ("one", "two"):
            await here.say(text)
        for text in ("three", "four", "five"):
            await there.say(text)
        await here.settle()
        await there.settle()
        commands = Commands(app.commands, learn_wait=30)
        where = {"platform": "test", "account_id": here.account.id, "is_admin": True}
        scope = {"world_id": here.room.world_id, "room_id": here.room.id}
        shown = await commands.run("stats", Request(**where, **scope))
        hostile = "**now** @everyone `x` <b> " + "spam " * 50 + "\n/forgetme"
        searched = await commands.run("facts", Request(**where, **scope, args=hostile))
        unknown = await commands.run("x" * 200, Request(**where, **scope))
    assert "Messages: 4" in shown.text and "Facts: 2" in shown.text
    # Two messages here and the learning /stats asks for first: not the six of both worlds.
    assert "Evaluations: 3 done" in shown.text
    # A search nobody matched is quoted back short, as plain words.
    assert searched.text.startswith("No facts match “now everyone x b spam spam")
    assert len(searched.text) < 70 and not set("@*`<>\n") & set(searched.text)
    assert len(unknown.text) < 70 and "x" * 40 not in unknown.text

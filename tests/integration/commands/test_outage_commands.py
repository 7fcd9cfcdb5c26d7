"""Commands while MongoDB is unreachable: /forgetme, /forget, /optout and /learning off never
say "done" when nothing changed, and a /forgetme waits for the messages kept during the outage,
so none of them is stored after it. The bundled server is killed for real
(tests/integration/runtime/test_outage.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.commands.command_set import DATABASE_AWAY, FORGOTTEN, Commands, Request
from bot.domain.state import State
from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from tests.helpers.outage import (
    KILLS_THE_BUNDLED_SERVER,
    REPLY,
    bring_database_back,
    journal_drained,
    kill_database,
    texts_in,
)

pytestmark = KILLS_THE_BUNDLED_SERVER  # skipped against an external MongoDB, as test_outage


def request_of(chat: TestChat, args: str = "") -> Request:
    return Request(
        platform=chat.platform,
        account_id=chat.account.id,
        world_id=chat.room.world_id,
        room_id=chat.room.id,
        is_admin=True,
        args=args,
    )


@pytest.mark.slow
async def test_privacy_commands_during_an_outage_change_nothing_and_say_so(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY] * 20})
    async with open_test_app(tmp_path, model=model, mongodb_timeout_seconds=1.0) as app:
        chat = TestChat(app.runtime)
        other = TestChat(app.runtime, name="Omar", chat="dm-omar")
        await chat.say("hello")
        await other.say("hi there")
        await chat.settle()
        commands = Commands(app.commands, learn_wait=5, outage_wait=0.5)
        await kill_database(app)
        assert (await chat.say("my secret is that I hate Mondays")).journaled

        asked = {
            "forgetme": "yes",
            "forget": "@Omar yes",
            "optout": "",
            "learning": "off",
            "facts": "",
        }
        for name, args in asked.items():
            answer = await commands.run(name, request_of(chat, args))
            assert answer.text == DATABASE_AWAY, (name, answer.text)
        # The confirmation button of Discord and Telegram calls these directly.
        assert await commands.forget_me(request_of(chat)) == DATABASE_AWAY
        assert await commands.forget_person(other.account.id, request_of(chat)) == DATABASE_AWAY
        assert "/forgetme" in (await commands.run("help", request_of(chat))).text

        await bring_database_back(app)
        await journal_drained(app)
        await chat.settle()
        # Nothing was changed: every message is kept, and learning goes on for everyone.
        assert await texts_in(app, chat) == ["hello", "my secret is that I hate Mondays"]
        assert await texts_in(app, other) == ["hi there"]
        assert (await app.runtime.privacy.admit(chat.message("still learning?"))).learn


async def test_forgetme_while_kept_messages_are_replayed_forgets_them_too(
    tmp_path: Path, model_dir: Path
) -> None:
    """The database is back and the journal is being replayed (the first kept message is
    being answered): a /forgetme then must not run before the rest is stored."""
    answering = asyncio.Event()
    go_on = asyncio.Event()

    async def reply(prompt: str, task: str, state: State | None) -> str:
        if state is not None and state.message.content.text == "first kept":
            answering.set()
            await go_on.wait()
        return REPLY

    async with open_test_app(
        tmp_path, model=ScriptedModel(reply), mongodb_timeout_seconds=1.0
    ) as app:
        chat = TestChat(app.runtime)
        await chat.say("hello")
        await chat.settle()
        await kill_database(app)
        for text in ("first kept", "my secret is that I hate Mondays"):
            assert (await chat.say(text)).journaled
        await bring_database_back(app)
        await asyncio.wait_for(answering.wait(), 30)

        commands = Commands(app.commands, learn_wait=5, outage_wait=30)
        forgetting = asyncio.create_task(commands.run("forgetme", request_of(chat, "yes")))
        await asyncio.sleep(0.5)
        go_on.set()
        answer = await asyncio.wait_for(forgetting, 60)
        await journal_drained(app)
        await chat.settle()
        assert answer.text.startswith(FORGOTTEN), answer.text
        assert await texts_in(app, chat) == []

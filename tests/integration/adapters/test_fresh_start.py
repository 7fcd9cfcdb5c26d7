"""A fresh start (`/reset`, `/new`): after it, the reply model is shown nothing said in the
room before it (neither in the conversation nor recalled), while the messages stay stored and
what was learned stays known. Through the real python-telegram-bot and discord.py paths
against the local fakes, and the console's own loop."""

from __future__ import annotations

import io
from pathlib import Path

from bot.adapters.console import ConsoleChat
from bot.commands.command_set import FRESH_START_DONE
from bot.domain.records import room_id
from bot.llm.base import Task
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.recall import plugin as RECALL
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.discord_bot import mnemo_on_discord
from tests.helpers.telegram_bot import OpenBot, open_bot, server  # noqa: F401 (fixtures)


def conversation(model: ScriptedModel) -> list[str]:
    """What the last reply request showed as the conversation, oldest first."""
    state = model.calls_for(Task.REPLY)[-1].state
    assert state is not None
    return [m.content.text for m in state.recent_messages]


async def test_telegram_reset_leaves_the_earlier_conversation_out_of_replies_not_out_of_memory(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah = server.user("Sarah")
    dm = server.private_chat(sarah)
    model = ScriptedModel(answers={Task.REPLY: ["Nice."]})
    async with open_bot(plugins=[RECALL], model=model) as bot:
        await bot.said(dm, sarah, "My cat is called Pixel and she is grey")
        await bot.said(dm, sarah, "What colour is my cat Pixel?")
        before = model.calls_for(Task.REPLY)[-1].shown_text
        answer = await bot.said(dm, sarah, "/reset")
        await bot.said(dm, sarah, "Tell me about my cat Pixel")
        after = model.calls_for(Task.REPLY)[-1].shown_text
        shown = conversation(model)
        again = await bot.said(dm, sarah, "/new")
        stored = await bot.app.store.memories.recent(room_id("telegram", dm.id), 20)
    assert "grey" in before
    assert answer.text == FRESH_START_DONE and again.text == FRESH_START_DONE
    assert "What I learned stays" in answer.text
    assert shown == ["Tell me about my cat Pixel"]
    # Neither the recent conversation nor the recall plugin brings the earlier lines back.
    assert "grey" not in after and "What colour" not in after
    # Nothing was deleted: the earlier messages (and the bot's replies) are all still kept.
    assert [m.content.text for m in stored if m.user_id != bot.app.runtime.agent_id] == [
        "My cat is called Pixel and she is grey",
        "What colour is my cat Pixel?",
        "Tell me about my cat Pixel",
    ]


async def test_discord_reset_keeps_the_facts_and_drops_the_conversation(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        sarah = fake.person("Sarah")
        mention = fake.mention(fake.bot)
        await bot.learn(sarah, "Sarah is reading Piranesi", guild=guild)
        await bot.hear(fake.message(sarah, f"{mention} I finished chapter three", guild=guild))
        answered = await bot.run("reset", fake.interaction(sarah, guild=guild))
        await bot.hear(fake.message(sarah, f"{mention} what should I read next?", guild=guild))
        shown = conversation(bot.model)
        prompt = bot.model.calls_for(Task.REPLY)[-1].shown_text
        renewed = await bot.run("new", fake.interaction(sarah, guild=guild))
    assert answered == FRESH_START_DONE and renewed == FRESH_START_DONE
    assert shown == ["@Mnemo what should I read next?"]
    assert "chapter three" not in prompt
    assert "Sarah is reading Piranesi" in prompt  # what was learned is still known


async def test_console_new_starts_the_conversation_afresh(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    model = ScriptedModel(answers={Task.REPLY: ["Noted."]})
    async with open_test_app(
        tmp_path, model=model, model_dir=model_dir, mongodb_uri=mongo_uri
    ) as app:
        said = "I keep bees on my roof\n/new\nWhat should I cook tonight?\n"
        out = io.StringIO()
        await ConsoleChat(user_name="sam", stdin=io.StringIO(said), stdout=out).run(
            app.adapter_services
        )
    assert FRESH_START_DONE in out.getvalue()
    assert conversation(model) == ["What should I cook tonight?"]
    assert "bees" not in model.calls_for(Task.REPLY)[-1].shown_text

"""A follow-up speaks as the bot of its world: where an admin chose `/character archivist` and
`/model large gpt-x`, the question is written as Archivist by gpt-x; in another server the
same plugin asks as Mnemo with the process's LARGE model. The real `openai` client against
the local fake OpenAI server; real MongoDB and Chroma; the clock is injected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.commands.command_set import Commands
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer, last_user_message
from plugins.followups import make_plugin
from tests.helpers.followups import Clock, Room_, at, command
from tests.helpers.world_choice import HELLO, ask, with_endpoint

# What the follow-up template asks of the model (plugins/followups/prompts.py).
FOLLOW_UP_ASK = "Write one short, warm message"


def respond(request: dict[str, Any]) -> str:
    prompt = last_user_message(request)
    if FOLLOW_UP_ASK in prompt:
        name = "Sarah" if "Sarah" in prompt else "Tom"
        return f"{name}, how did your exam go?"
    return HELLO


async def test_a_follow_up_is_written_as_the_world_s_character_by_the_world_s_large_model(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with FakeOpenAIServer(responder=respond) as server:
        settings = with_endpoint(
            test_settings(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir), server.base_url
        )
        async with open_test_app(
            tmp_path, plugins=[make_plugin(clock=clock)], settings=settings
        ) as app:
            commands = Commands(app.commands, learn_wait=5)
            here = TestChat(app.runtime, name="Sarah", chat="general-a", world="server-a")
            there = TestChat(app.runtime, name="Tom", chat="general-b", world="server-b")
            assert (await commands.run("character", ask(here, "archivist"))).text.endswith(
                "Archivist."
            )
            assert (await commands.run("model", ask(here, "large gpt-x"))).text.endswith("gpt-x.")
            for chat in (here, there):
                await command(app, chat, "/followups on")
                await chat.say("My exam is on Friday")
                await chat.settle()
            room = Room_()
            app.runtime.plugins.rooms.connect("test", room.sender)
            clock.ms = at(2026, 11, 28, 10, 0)  # Saturday morning
            await app.runtime.plugins.run_tasks()

    asked = {
        ("Sarah" if "Sarah" in last_user_message(r.json) else "Tom"): r
        for r in server.chat_requests
        if FOLLOW_UP_ASK in last_user_message(r.json)
    }
    assert set(asked) == {"Sarah", "Tom"}
    archivist, mnemo = last_user_message(asked["Sarah"].json), last_user_message(asked["Tom"].json)
    # In server A: Archivist, by the model chosen there.
    assert archivist.startswith("You are Archivist.") and "Mnemo" not in archivist
    assert asked["Sarah"].json["model"] == "gpt-x"
    # In server B: the process's character and LARGE model.
    assert mnemo.startswith("You are Mnemo.") and "Archivist" not in mnemo
    assert asked["Tom"].json["model"] == "fake-large"
    assert room.said[here.room.id] == ["Sarah, how did your exam go?"]
    assert room.said[there.room.id] == ["Tom, how did your exam go?"]

"""Leaving the console (Ctrl-C, SIGTERM) while the bot is answering: the answer is shown and
kept with the message, not cut off halfway."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

from bot.adapters.console import ConsoleChat
from bot.domain.records import reply_id
from bot.domain.state import State
from bot.llm.base import Task
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = "Nice to meet you, Ana."


async def test_a_message_being_answered_when_the_person_leaves_is_answered_and_kept(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    thinking = asyncio.Event()

    async def slow(prompt: str, task: str, state: State | None) -> str:
        if task == Task.REPLY:
            thinking.set()
            await asyncio.sleep(0.5)  # the model is still thinking when the person leaves
            return f'{{"text": "{REPLY}"}}'
        return "[]"

    async with open_test_app(
        tmp_path, model=ScriptedModel(slow), model_dir=model_dir, mongodb_uri=mongo_uri
    ) as app:
        # stdin stays open, as a person at the prompt: the chat waits for more.
        read_end, write_end = os.pipe()
        out = io.StringIO()
        console = ConsoleChat(user_name="ana", stdin=os.fdopen(read_end), stdout=out)
        try:
            await console.start(app.adapter_services)
            os.write(write_end, b"Hi, I'm Ana.\n")
            await asyncio.wait_for(thinking.wait(), 30)
            await console.stop()  # Ctrl-C
        finally:
            os.close(write_end)
        assert f"Mnemo: {REPLY}" in out.getvalue()
        said = await app.store.memories.recent(console.room.id, 10)
        assert [m.content.text for m in said] == ["Hi, I'm Ana.", REPLY]
        assert said[1].id == reply_id(said[0].id, app.runtime.agent_id, 0)

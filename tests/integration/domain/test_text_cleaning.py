"""Clean text at the door: bad platform text is stored (and answered), never lost."""

from __future__ import annotations

from pathlib import Path

from bot.domain.records import Account, Content
from bot.domain.text import MAX_MESSAGE_CHARS
from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = '{"text": "Got it.", "action": "NONE"}'


async def test_a_lone_surrogate_or_nul_does_not_lose_the_message(
    tmp_path: Path, model_dir: Path
) -> None:
    async with open_test_app(tmp_path, model=ScriptedModel(answers={Task.REPLY: [REPLY]})) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("broken \ud83d emoji and a \x00 NUL, fine 😀")
        stored = await app.store.memories.recent(chat.room.id, 10)
    assert result.stored and result.responded
    assert stored[0].content.text == "broken \ufffd emoji and a  NUL, fine 😀"


async def test_a_surrogate_pair_is_joined_not_replaced() -> None:
    assert Content(text="\ud83d\ude00").text == "😀"
    name = Account(id="a", platform="test", platform_id="1", name="Bo\udc80b").name
    assert name == "Bo\ufffdb"


async def test_a_too_long_message_is_stored_cut_with_a_note(
    tmp_path: Path, model_dir: Path
) -> None:
    async with open_test_app(tmp_path, model=ScriptedModel(answers={Task.REPLY: [REPLY]})) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("word " * 10_000)
        [message, _] = await app.store.memories.recent(chat.room.id, 10)
    assert result.stored and result.responded
    kept, note = message.content.text.rsplit("\n", 1)
    assert kept == ("word " * 10_000)[:MAX_MESSAGE_CHARS]
    assert note == "[cut: the message had 50,000 characters; the first 16,000 are kept]"

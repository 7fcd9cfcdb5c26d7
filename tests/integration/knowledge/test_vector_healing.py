"""Vectors heal themselves: a wiped or corrupted Chroma folder is rebuilt from MongoDB."""

from __future__ import annotations

import io
import logging
import shutil
from pathlib import Path

import pytest

from bot.app.composition import App
from bot.domain.records import Fact
from bot.knowledge.reindex import reindex
from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = '{"text": "Noted.", "action": "NONE"}'
SAID = ["I live in Porto", "I have two cats", "I work as a nurse", "I play the cello"]


async def learn_some(app: App) -> TestChat:
    chat = TestChat(app.runtime)
    for text in SAID:
        await chat.say(text)
    await chat.settle()
    facts = [
        Fact(
            text=text.replace("I ", "Sarah ", 1),
            subject_id=chat.account.id,
            room_id=chat.room.id,
            world_id=chat.room.world_id,
            agent_id=app.runtime.agent_id,
        )
        for text in SAID
    ]
    await app.knowledge.add_facts(facts, near_duplicate_distance=0.01)
    return chat


async def counts(app: App) -> tuple[int, int]:
    vectors = app.knowledge.vectors
    return await vectors.count("facts"), await vectors.count("messages")


def model() -> ScriptedModel:
    return ScriptedModel(answers={Task.REPLY: [REPLY]})


@pytest.mark.parametrize("damage", ["wiped", "corrupted"])
async def test_a_damaged_chroma_folder_is_rebuilt_from_mongodb(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    async with open_test_app(tmp_path, model=model(), keep_database=True) as app:
        chat = await learn_some(app)
        before = await counts(app)
    chroma = tmp_path / "chroma"
    if damage == "wiped":
        shutil.rmtree(chroma)
    else:
        (chroma / "chroma.sqlite3").write_bytes(b"not a database" * 1000)
    with caplog.at_level(logging.INFO):
        async with open_test_app(tmp_path, model=model()) as app:
            assert app.vector_healing is not None
            await app.vector_healing
            after = await counts(app)
            found = await app.knowledge.search_facts(
                "cello", subject_ids=[chat.account.id], world_id=chat.room.world_id, limit=1
            )
    assert before == (len(SAID), len(SAID))
    assert after == before
    assert [fact.text for fact in found] == ["Sarah play the cello"]
    assert "rebuilt 4 facts and 4 messages" in caplog.text
    if damage == "corrupted":
        [aside] = list(tmp_path.glob("chroma.broken-*"))  # noqa: ASYNC240
        assert (aside / "chroma.sqlite3").exists()  # moved aside, never deleted
        assert "cannot be opened" in caplog.text


async def test_reindex_all_rebuilds_every_vector_with_a_progress_bar(
    tmp_path: Path, model_dir: Path
) -> None:
    async with open_test_app(tmp_path, model=model()) as app:
        await learn_some(app)
        assert app.vector_healing is not None
        await app.vector_healing
        vectors = app.knowledge.vectors
        [first, *_] = await app.store.memories.recent(TestChat(app.runtime).room.id, 10)
        await vectors.delete("messages", ids=[first.id])
        missing_only = io.StringIO()
        some = await reindex(
            app.store,
            vectors,
            app.embedder,
            agent_id=app.runtime.agent_id,
            everything=False,
            stream=missing_only,
        )
        everything = io.StringIO()
        every = await reindex(
            app.store,
            vectors,
            app.embedder,
            agent_id=app.runtime.agent_id,
            everything=True,
            stream=everything,
        )
        after = await counts(app)
    assert (len(some.facts), len(some.messages)) == (0, 1)
    assert (len(every.facts), len(every.messages)) == (len(SAID), len(SAID))
    assert after == (len(SAID), len(SAID))
    assert "messages: 100%" in missing_only.getvalue()
    assert "facts: 100%" in everything.getvalue() and "4/4" in everything.getvalue()

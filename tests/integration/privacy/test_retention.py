"""Retention: messages older than MNEMO_RETENTION_DAYS go from MongoDB and Chroma; facts and
young messages stay. Old messages are written with old times (integer ms in MongoDB)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

from bot.commands.command_set import Commands, Request
from bot.config.privacy import PrivacySettings
from bot.domain.records import Content, Fact, Memory, stable_id, utcnow
from bot.knowledge.messages import MessageIndex
from bot.llm.base import Task
from bot.memory.store import Knowledge
from bot.privacy.retention import Retention, delete_expired
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.scripted import ScriptedModel

SAM, BOT, WORLD, ROOM = (stable_id(x) for x in ("sam", "bot", "world", "room"))


def said(text: str, *, days_ago: float, by: str = SAM) -> Memory:
    return Memory(
        id=stable_id("message", text),
        user_id=by,
        agent_id=BOT,
        room_id=ROOM,
        world_id=WORLD,
        content=Content(text=text),
        created_at=utcnow() - timedelta(days=days_ago),
    )


async def test_old_messages_and_their_vectors_go_facts_and_young_messages_stay(
    knowledge: Knowledge,
) -> None:
    store = knowledge.store
    old = [
        said("My old flat was on Elm Street", days_ago=100),
        said("Noted, Elm Street.", days_ago=99.9, by=BOT),  # the bot's reply goes too
    ]
    young = [said("I moved to Harbour Road last week", days_ago=3)]
    for message in (*old, *young):
        await store.memories.insert(message)
    await asyncio.gather(
        *(
            MessageIndex(knowledge.vectors, knowledge.embedder).index_message(m)
            for m in (*old, *young)
        )
    )
    fact = Fact(
        text="Sam lived on Elm Street",
        subject_id=SAM,
        room_id=ROOM,
        world_id=WORLD,
        agent_id=BOT,
        created_at=utcnow() - timedelta(days=100),
        source_message_ids=[old[0].id],
    )
    await knowledge.add_facts([fact], near_duplicate_distance=0.02)

    deleted = await delete_expired(store, knowledge.vectors, Retention(days=90))

    assert deleted == 2
    assert [m.id for m in await store.memories.in_world(WORLD)] == [young[0].id]
    assert await store.memories.count_in_room(ROOM) == 1
    ids = [m.id for m in (*old, *young)]
    assert await knowledge.vectors.existing_ids("messages", ids) == {young[0].id}
    assert [f.text for f in await store.facts.about([SAM], WORLD)] == ["Sam lived on Elm Street"]
    assert await knowledge.vectors.existing_ids("facts", [fact.id]) == {fact.id}
    # A second run finds nothing more; retention off deletes nothing at all.
    assert await delete_expired(store, knowledge.vectors, Retention(days=90)) == 0
    assert await delete_expired(store, knowledge.vectors, Retention(days=0)) == 0
    assert await store.memories.count_in_world(WORLD) == 1


async def test_a_vector_left_by_a_failed_delete_goes_on_the_next_run(
    knowledge: Knowledge,
) -> None:
    message = said("I used to work at the mill", days_ago=40)
    await MessageIndex(knowledge.vectors, knowledge.embedder).index_message(
        message
    )  # its MongoDB document is already gone

    assert await delete_expired(knowledge.store, knowledge.vectors, Retention(days=30)) == 0
    assert await knowledge.vectors.existing_ids("messages", [message.id]) == set()


def test_retention_is_described_as_people_read_it() -> None:
    assert Retention(0).describe() == "forever"
    assert Retention(1).describe() == "1 day"
    assert Retention(90).describe() == "90 days"


async def test_the_running_app_deletes_expired_messages_at_start_up_and_says_so_in_stats(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    settings = test_settings(
        tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir, evaluator_selection="all"
    )
    model = ScriptedModel(answers={Task.REPLY: ['{"text": "Noted.", "action": "NONE"}']})
    async with open_test_app(tmp_path, settings=settings, model=model, keep_database=True) as app:
        chat = TestChat(app.runtime)
        old = chat.message("I lived in Lisbon back then")
        await chat.send(old.model_copy(update={"created_at": utcnow() - timedelta(days=40)}))
        young = await chat.say("I live in Porto now")
        await chat.settle()
        fact = Fact(
            text="Sarah lives in Porto",
            subject_id=chat.account.id,
            room_id=chat.room.id,
            world_id=chat.room.world_id,
            agent_id=app.runtime.agent_id,
        )
        await app.knowledge.add_facts([fact], near_duplicate_distance=0.02)
        assert await app.knowledge.vectors.existing_ids("messages", [old.id]) == {old.id}

    kept_30_days = dataclasses.replace(
        settings,
        privacy=PrivacySettings.model_construct(
            retention_days=30, privacy_text=None, privacy_file=None
        ),
    )
    async with open_test_app(tmp_path, settings=kept_30_days, model=model) as app:
        chat = TestChat(app.runtime)
        for _ in range(100):  # the retention job's start-up run
            if await app.store.memories.get(old.id) is None:
                break
            await asyncio.sleep(0.1)
        texts = [m.content.text for m in await app.store.memories.in_world(chat.room.world_id)]
        vectors = await app.knowledge.vectors.existing_ids(
            "messages", [old.id, young.job.message_id]
        )
        facts = await app.store.facts.about([chat.account.id], chat.room.world_id)
        stats = (
            await Commands(app.commands).run(
                "stats",
                Request(
                    platform="test",
                    account_id=chat.account.id,
                    world_id=chat.room.world_id,
                    room_id=chat.room.id,
                    is_admin=True,
                ),
            )
        ).text

    assert "I lived in Lisbon back then" not in texts and "I live in Porto now" in texts
    assert vectors == {young.job.message_id}
    assert [f.text for f in facts] == ["Sarah lives in Porto"]
    assert "(kept 30 days)" in stats

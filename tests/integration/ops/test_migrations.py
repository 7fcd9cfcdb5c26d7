"""Schema versions: a database written by today's code (before versions were recorded) is
upgraded at start-up, once, under a lock that a second process waits on and a dead one loses."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import Fact
from bot.ops.migrations import (
    LOCK_ID,
    META_COLLECTION,
    MIGRATIONS,
    SCHEMA_ID,
    Migration,
    MigrationError,
    latest_version,
    migrate,
    schema_version,
)
from bot.storage.mongo import MongoStore
from bot.testing.harness import TestChat, open_test_app


async def dump(db: AsyncDatabase) -> dict[str, list[dict[str, Any]]]:
    """Every document of every collection but the schema bookkeeping, in id order."""
    return {
        name: await db[name].find().sort("_id", 1).to_list()
        for name in sorted(await db.list_collection_names())
        if name != META_COLLECTION
    }


async def test_a_database_written_by_todays_code_is_upgraded_and_still_works(
    tmp_path: Path, model_dir: Path
) -> None:
    async with open_test_app(tmp_path) as app:
        db = app.store.db
        assert await schema_version(db) == latest_version()  # a new database starts current
        chat = TestChat(app.runtime)
        for text in ("Hi, I'm Sarah.", "I live in Seattle.", "I have a dog named Biscuit."):
            await chat.say(text)
        await chat.settle()
        fact = Fact(
            id=str(uuid.uuid4()),
            subject_id=chat.account.id,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            agent_id=app.runtime.agent_id,
            text="Sarah lives in Seattle",
        )
        await app.knowledge.add_facts([fact], near_duplicate_distance=0.1)
        # What the previous release left: the same data and no version.
        await db[META_COLLECTION].delete_many({})
        assert await schema_version(db) == 0
        before = await dump(db)

        assert await migrate(db) == [m.version for m in MIGRATIONS]
        assert await schema_version(db) == latest_version()
        assert await dump(db) == before  # nothing lost or changed on the way
        assert await migrate(db) == []  # once: the next start-up does nothing
        assert await db[META_COLLECTION].find_one({"_id": LOCK_ID}) is None

        # The upgraded database serves the running bot as before.
        found = await app.knowledge.search_facts(
            "where does she live", subject_ids=[chat.account.id], world_id=chat.room.world_id
        )
        assert [f.text for f in found] == ["Sarah lives in Seattle"]
        await chat.say("And I run marathons.")
        assert len(chat.replies) == 4


async def test_two_processes_starting_together_migrate_once(
    mongo_uri: str, store: MongoStore
) -> None:
    runs: list[str] = []

    async def add_text_length(db: AsyncDatabase) -> None:
        runs.append("v2")
        await asyncio.sleep(0.3)  # long enough for the other process to arrive and wait
        async for fact in db["facts"].find({"text_length": {"$exists": False}}):
            await db["facts"].update_one(
                {"_id": fact["_id"]}, {"$set": {"text_length": len(fact["text"])}}
            )

    await store.db["facts"].insert_one({"_id": "f1", "text": "Sarah has a dog"})
    next_version = latest_version() + 1
    migrations = (
        *MIGRATIONS,
        Migration(next_version, "facts carry their text length", add_text_length),
    )
    other = MongoStore.from_uri(mongo_uri, store.db.name)  # the second process's own client
    try:
        first, second = await asyncio.gather(
            migrate(store.db, migrations), migrate(other.db, migrations)
        )
    finally:
        await other.close()
    assert runs == ["v2"]
    assert sorted(first + second) == [*range(1, next_version + 1)]
    assert await schema_version(store.db) == next_version
    assert (await store.db["facts"].find_one({"_id": "f1"}))["text_length"] == 15


async def test_a_lock_left_by_a_dead_process_is_taken_over(
    store: MongoStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.db[META_COLLECTION].insert_one(
        {"_id": LOCK_ID, "owner": "dead-process", "expires_ms": 1_000}
    )
    with caplog.at_level(logging.WARNING, logger="bot.ops.migrations"):
        assert await migrate(store.db) == [m.version for m in MIGRATIONS]
    assert await store.db[META_COLLECTION].find_one({"_id": LOCK_ID}) is None
    assert "took over the migration lock" in caplog.text


async def test_a_free_lock_is_taken_without_a_take_over_warning(
    store: MongoStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.ops.migrations"):
        assert await migrate(store.db) == [m.version for m in MIGRATIONS]
    assert "took over" not in caplog.text


async def test_a_live_lock_makes_a_start_up_wait_then_give_up_with_one_line(
    store: MongoStore,
) -> None:
    far_future = 10**13
    await store.db[META_COLLECTION].insert_one(
        {"_id": LOCK_ID, "owner": "busy-process", "expires_ms": far_future}
    )
    with pytest.raises(MigrationError, match="another process has held the migration lock"):
        await migrate(store.db, wait_seconds=0.5)
    assert await schema_version(store.db) == 0


async def test_a_database_from_a_newer_mnemo_stops_start_up(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    database = f"mnemo_newer_{uuid.uuid4().hex[:8]}"
    writer = MongoStore.from_uri(mongo_uri, database)
    await writer.db[META_COLLECTION].insert_one({"_id": SCHEMA_ID, "version": 99})
    await writer.db["facts"].insert_one({"_id": "kept", "text": "untouched"})
    try:
        with pytest.raises(MigrationError, match="schema version 99 is newer than this Mnemo"):
            await migrate(writer.db)
        assert await writer.db["facts"].count_documents({}) == 1
    finally:
        await writer.client.drop_database(database)
        await writer.close()

"""`mnemo backup` / `mnemo restore`: every collection (a plugin's too) survives the round trip
into an empty database, the vectors are rebuilt so search works, and a damaged backup or an
occupied database is refused before anything is written."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.cli import main
from bot.domain.records import Content, Fact, Memory
from bot.knowledge.embeddings import CachedEmbedder
from bot.knowledge.messages import MessageIndex
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.vectors import VectorIndex
from bot.memory.store import Knowledge
from bot.ops.backup import BackupError, backup, read_manifest, restore
from bot.ops.migrations import latest_version, migrate
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.mongo import MongoStore
from bot.testing.harness import TestChat, open_test_app

PLUGIN_COLLECTION = "questions"


async def everything(store: MongoStore) -> dict[str, list[dict[str, Any]]]:
    """Every document by collection; `indexed_at` is when this Chroma got the vector."""
    db = store.db
    return {
        name: [
            {k: v for k, v in doc.items() if k != "indexed_at"}
            for doc in await db[name].find().sort("_id", 1).to_list()
        ]
        for name in sorted(await db.list_collection_names())
    }


@pytest.fixture
async def empty_target(
    mongo_uri: str, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> AsyncIterator[Knowledge]:
    """A second deployment: its own empty database and its own empty Chroma."""
    store = MongoStore.from_uri(mongo_uri, f"mnemo_restore_{uuid.uuid4().hex[:10]}")
    vectors = VectorIndex.persistent(tmp_path / "restored-chroma")
    try:
        yield Knowledge(store, vectors, CachedEmbedder(onnx_embedder))
    finally:
        await vectors.close()
        await store.client.drop_database(store.db.name)
        await store.close()


async def test_round_trip_into_an_empty_database_rebuilds_search(
    tmp_path: Path, model_dir: Path, empty_target: Knowledge
) -> None:
    folder = tmp_path / "backup"
    async with open_test_app(tmp_path / "source") as app:
        chat = TestChat(app.runtime)
        for text in ("Hi, I'm Sarah.", "I live in Seattle.", "I have a dog named Biscuit."):
            await chat.say(text)
        await chat.settle()
        fact = Fact(
            subject_id=chat.account.id,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            agent_id=app.runtime.agent_id,
            text="Sarah has a dog named Biscuit",
        )
        await app.knowledge.add_facts([fact], near_duplicate_distance=0.1)
        # A plugin's own collection, with its own index.
        plugin = app.store.db[PLUGIN_COLLECTION]
        await plugin.insert_one({"_id": chat.account.id, "n": 2})
        await plugin.create_index("n", name="by_n")
        made = await backup(app.store, folder, bundled=False)
        source = await everything(app.store)

    manifest = read_manifest(folder)
    assert manifest == made.manifest
    assert manifest.schema_version == latest_version()
    assert manifest.consistency == "none"  # the bundled server over a URI: no snapshots
    assert manifest.collections[PLUGIN_COLLECTION].documents == 1
    assert [
        [pair[0] for pair in index["key"]]
        for index in manifest.collections[PLUGIN_COLLECTION].indexes
    ] == [["n"]]

    result = await restore(
        empty_target.store,
        empty_target,
        MessageIndex(empty_target.vectors, empty_target.embedder),
        folder,
    )
    assert result.documents == sum(len(docs) for docs in source.values())
    assert await everything(empty_target.store) == source
    assert result.facts_indexed == 1
    assert result.messages_indexed == 3  # what Sarah said; the bot's replies are not indexed
    assert await empty_target.vectors.count("facts") == 1
    assert await empty_target.vectors.count("messages") == 3
    found = await empty_target.search_facts(
        "does she have pets", subject_ids=[chat.account.id], world_id=chat.room.world_id
    )
    assert [f.text for f in found] == ["Sarah has a dog named Biscuit"]
    restored_indexes = await empty_target.store.db[PLUGIN_COLLECTION].list_indexes()
    assert ["n"] in [list(index["key"]) async for index in restored_indexes]


async def test_restore_refuses_an_occupied_database_and_a_damaged_backup(
    tmp_path: Path, store: MongoStore, empty_target: Knowledge
) -> None:
    await store.db["facts"].insert_one({"_id": "f1", "text": "Sarah lives in Seattle"})
    await store.db[PLUGIN_COLLECTION].insert_one({"_id": "q1", "n": 1})
    folder = tmp_path / "backup"
    await backup(store, folder, bundled=False)

    with pytest.raises(BackupError, match="is not empty: choose a new one"):
        await backup(store, folder, bundled=False)

    await empty_target.store.db["memories"].insert_one({"_id": "already-here"})
    with pytest.raises(BackupError, match=r"is not empty \(memories\): restore only into an empty"):
        await restore(
            empty_target.store,
            empty_target,
            MessageIndex(empty_target.vectors, empty_target.embedder),
            folder,
        )
    assert await empty_target.store.db["facts"].count_documents({}) == 0
    await empty_target.store.db["memories"].delete_many({})

    damaged = folder / "facts.jsonl"
    damaged.write_bytes(damaged.read_bytes().replace(b"Seattle", b"Boston!"))
    with pytest.raises(BackupError, match=r"facts\.jsonl does not match its checksum"):
        await restore(
            empty_target.store,
            empty_target,
            MessageIndex(empty_target.vectors, empty_target.embedder),
            folder,
        )
    (folder / "manifest.json").unlink()
    with pytest.raises(BackupError, match=r"no manifest\.json: not a Mnemo backup"):
        await restore(
            empty_target.store,
            empty_target,
            MessageIndex(empty_target.vectors, empty_target.embedder),
            folder,
        )
    assert await everything(empty_target.store) == {
        name: [] for name in await empty_target.store.db.list_collection_names()
    }


def test_mnemo_backup_and_restore_commands(
    tmp_path: Path,
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The commands as an operator runs them, each starting the bundled server itself."""
    asyncio.run(_written_by_a_bot(tmp_path / "old"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MNEMO_EMBEDDING_MODEL_DIR", str(model_dir))
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path / "old"))
    assert main(["backup", str(tmp_path / "bk")]) == 0
    out = capsys.readouterr().out
    assert "backed up 2 documents" in out and "consistency: exclusive" in out

    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path / "new"))
    assert main(["restore", str(tmp_path / "bk")]) == 0
    out = capsys.readouterr().out
    assert "restored 2 documents" in out and "vectors rebuilt for 0 facts and 1 messages" in out
    assert main(["restore", str(tmp_path / "bk")]) == 2
    assert capsys.readouterr().err.strip().startswith("mnemo: database mnemo is not empty")


async def _written_by_a_bot(data_dir: Path) -> None:
    async with EmbeddedMongo(data_dir) as server:
        store = MongoStore.from_uri(server.uri, "mnemo")
        try:
            await migrate(store.db)
            await store.memories.insert(
                Memory(
                    id=str(uuid.uuid4()),
                    user_id="sarah",
                    agent_id="mnemo",
                    room_id="room",
                    world_id="world",
                    content=Content(text="I live in Seattle."),
                )
            )
        finally:
            await store.close()

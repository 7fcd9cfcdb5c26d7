"""Writes across MongoDB (truth) and Chroma (index): consistent when the second write fails."""

from __future__ import annotations

import socket
from pathlib import Path

from bot.models import Fact, stable_id
from bot.storage.embeddings import OnnxEmbedder
from bot.storage.knowledge import Knowledge
from bot.storage.mongo import MongoStore
from bot.storage.vectors import VectorIndex

SAM, WORLD, ROOM, AGENT = (stable_id(x) for x in ("sam", "world", "room", "agent"))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fact(text: str) -> Fact:
    return Fact(text=text, subject_id=SAM, room_id=ROOM, world_id=WORLD, agent_id=AGENT)


async def test_a_failed_vector_write_loses_nothing_and_is_rebuilt(
    store: MongoStore, model_dir: Path, tmp_path: Path
) -> None:
    embedder = OnnxEmbedder(model_dir)
    # Chroma is down: nothing listens on this port.
    down = Knowledge(store, VectorIndex.remote("127.0.0.1", closed_port()), embedder)
    writes = await down.add_facts([fact("Sam lives in Lisbon")], near_duplicate_distance=0.04)
    assert [w.stored for w in writes] == [True]
    [saved] = await store.facts_about([SAM], WORLD)
    assert saved.text == "Sam lives in Lisbon" and saved.indexed_at is None
    # Reads still work, from MongoDB, while the index is down.
    found = await down.search_facts("where does Sam live?", subject_ids=[SAM], world_id=WORLD)
    assert [f.text for f in found] == ["Sam lives in Lisbon"]
    # The same claim offered again during the outage is still caught (exact text).
    again = await down.add_facts([fact("sam lives in Lisbon.")], near_duplicate_distance=0.04)
    assert [w.stored for w in again] == [False]

    # Chroma is back: the missing vector is rebuilt from MongoDB and similarity search works.
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    up = Knowledge(store, vectors, embedder)
    assert await up.reindex_missing() == 1
    assert await vectors.existing_ids("facts", [saved.id]) == {saved.id}
    [reindexed] = await store.facts_about([SAM], WORLD)
    assert reindexed.indexed_at is not None
    hits = await up.search_facts("Which city is Sam's home?", subject_ids=[SAM], world_id=WORLD)
    assert [f.text for f in hits] == ["Sam lives in Lisbon"]
    await vectors.close()


async def test_a_vector_whose_document_is_gone_is_never_shown(
    store: MongoStore, model_dir: Path, tmp_path: Path
) -> None:
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    knowledge = Knowledge(store, vectors, OnnxEmbedder(model_dir))
    [write] = await knowledge.add_facts([fact("Sam plays the cello")], near_duplicate_distance=0.04)
    # The document is deleted but the vector delete never happens (a crash in between).
    await store.delete_fact(write.fact.id, world_id=WORLD)
    assert await vectors.existing_ids("facts", [write.fact.id]) == {write.fact.id}
    found = await knowledge.search_facts("music Sam plays", subject_ids=[SAM], world_id=WORLD)
    assert found == []
    # And the orphan does not block storing the fact again.
    [again] = await knowledge.add_facts([fact("Sam plays the cello")], near_duplicate_distance=0.04)
    assert again.stored
    await vectors.close()

"""Writes across MongoDB (truth) and Chroma (index): consistent when the second write fails."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from bot.domain.records import Content, Fact, Memory, stable_id
from bot.knowledge.messages import MessageIndex
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.vectors import CollectionName, VectorHit, VectorIndex
from bot.memory.store import Knowledge
from bot.storage.mongo import MongoStore

SAM, WORLD, ROOM, AGENT = (stable_id(x) for x in ("sam", "world", "room", "agent"))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fact(text: str) -> Fact:
    return Fact(text=text, subject_id=SAM, room_id=ROOM, world_id=WORLD, agent_id=AGENT)


async def test_a_failed_vector_write_loses_nothing_and_is_rebuilt(
    store: MongoStore, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    embedder = onnx_embedder
    # Chroma is down: nothing listens on this port.
    down = Knowledge(store, VectorIndex.remote("127.0.0.1", closed_port()), embedder)
    writes = await down.add_facts([fact("Sam lives in Lisbon")], near_duplicate_distance=0.04)
    assert [w.stored for w in writes] == [True]
    [saved] = await store.facts.about([SAM], WORLD)
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
    [reindexed] = await store.facts.about([SAM], WORLD)
    assert reindexed.indexed_at is not None
    hits = await up.search_facts("Which city is Sam's home?", subject_ids=[SAM], world_id=WORLD)
    assert [f.text for f in hits] == ["Sam lives in Lisbon"]
    await vectors.close()


async def test_a_vector_whose_document_is_gone_is_never_shown(
    store: MongoStore, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    knowledge = Knowledge(store, vectors, onnx_embedder)
    [write] = await knowledge.add_facts([fact("Sam plays the cello")], near_duplicate_distance=0.04)
    # The document is deleted but the vector delete never happens (a crash in between).
    await store.facts.delete(write.fact.id, world_id=WORLD)
    assert await vectors.existing_ids("facts", [write.fact.id]) == {write.fact.id}
    found = await knowledge.search_facts("music Sam plays", subject_ids=[SAM], world_id=WORLD)
    assert found == []
    # And the orphan does not block storing the fact again.
    [again] = await knowledge.add_facts([fact("Sam plays the cello")], near_duplicate_distance=0.04)
    assert again.stored
    await vectors.close()


ALEX, ELSEWHERE = stable_id("alex"), stable_id("another world")


def fact_about(text: str, *, subject_id: str = SAM, world_id: str = WORLD) -> Fact:
    return Fact(text=text, subject_id=subject_id, room_id=ROOM, world_id=world_id, agent_id=AGENT)


async def test_fact_search_ranks_a_persons_facts_exactly_and_stays_in_scope(
    store: MongoStore, onnx_embedder: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    knowledge = Knowledge(store, vectors, onnx_embedder)
    # The facts path ranks exactly; HNSW (`query`) is for messages only.
    hnsw: list[dict[str, Any]] = []
    real_query = vectors.query

    async def spy(*args: Any, **kwargs: Any) -> list[VectorHit]:
        hnsw.append(kwargs)
        return await real_query(*args, **kwargs)

    monkeypatch.setattr(vectors, "query", spy)
    writes = await knowledge.add_facts(
        [
            fact_about("Sam lives in Lisbon"),
            fact_about("Sam plays the cello"),  # newer: first if MongoDB's recency answered
            fact_about("Alex lives in Berlin", subject_id=ALEX),
            fact_about("Sam lives in Porto", world_id=ELSEWHERE),
        ],
        near_duplicate_distance=0.04,
    )
    assert all(w.stored for w in writes)

    found = await knowledge.search_facts(
        "Which city does Sam live in?", subject_ids=[SAM], world_id=WORLD
    )
    assert found[0].text == "Sam lives in Lisbon"
    assert all((f.subject_id, f.world_id) == (SAM, WORLD) for f in found)
    both = await knowledge.search_facts(
        "Which city do they live in?", subject_ids=[SAM, ALEX], world_id=WORLD
    )
    assert {f.text for f in both[:2]} == {"Sam lives in Lisbon", "Alex lives in Berlin"}
    assert all(f.world_id == WORLD for f in both)

    # Near duplicates are found the same way: only among the same person's facts in the world.
    paraphrase = "Sam's home is in Lisbon"
    [lisbon, paraphrase_vector] = await knowledge.embedder.embed(
        ["Sam lives in Lisbon", paraphrase]
    )
    threshold = 1.0 - sum(a * b for a, b in zip(lisbon, paraphrase_vector, strict=True)) + 0.01
    again = await knowledge.add_facts([fact_about(paraphrase)], near_duplicate_distance=threshold)
    assert [(w.stored, w.duplicate_of) for w in again] == [(False, writes[0].fact.id)]
    elsewhere = await knowledge.add_facts(
        [fact_about(paraphrase, world_id=ELSEWHERE), fact_about(paraphrase, subject_id=ALEX)],
        near_duplicate_distance=threshold,
    )
    assert [w.stored for w in elsewhere] == [True, True]
    assert hnsw == []
    await vectors.close()


class CountingIndex(VectorIndex):
    """The real Chroma index, counting its upserts."""

    upserts = 0

    async def upsert(self, collection: CollectionName, **kwargs: Any) -> None:
        self.upserts += 1
        await super().upsert(collection, **kwargs)


async def test_messages_indexed_at_once_share_writes_and_all_land(
    store: MongoStore, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    index = CountingIndex.persistent(tmp_path / "chroma")
    index_of_messages = MessageIndex(index, onnx_embedder)
    messages = [
        Memory(
            id=stable_id("message", str(n)),
            user_id=SAM,
            agent_id=AGENT,
            room_id=ROOM,
            world_id=WORLD,
            content=Content(text=f"Message number {n} about the weekend"),
        )
        for n in range(20)
    ]
    await asyncio.gather(*(index_of_messages.index_message(m) for m in messages))
    assert await index.existing_ids("messages", [m.id for m in messages]) == {
        m.id for m in messages
    }
    assert index.upserts < len(messages)  # rooms arriving together share a write
    await index.close()

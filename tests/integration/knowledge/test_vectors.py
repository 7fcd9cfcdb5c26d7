"""A real Chroma PersistentClient in a temporary folder; hand-made vectors keep distances exact."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromadb.api.types import DefaultEmbeddingFunction
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

import bot.knowledge.vectors as vectors_module
from bot.knowledge.vectors import VectorHit, VectorIndex, VectorIndexError, clean_metadata


def unit(*components: float) -> list[float]:
    norm = sum(c * c for c in components) ** 0.5
    return [c / norm for c in components]


@pytest.fixture(autouse=True)
def forbid_chromas_embedding_function(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fail loudly if Chroma ever reaches for its default model (it would download one)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Chroma's default embedding function was used")

    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", refuse)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "_download_model_if_not_exists", refuse)
    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", refuse)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[VectorIndex]:
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    yield vectors
    await vectors.close()


async def seed_two_worlds(index: VectorIndex) -> None:
    await index.upsert(
        "facts",
        ids=["f-tea", "f-coffee", "f-other-world"],
        embeddings=[unit(1, 0, 0), unit(0.8, 0.6, 0), unit(1, 0.01, 0)],
        metadatas=[
            {"world_id": "w1", "subject": "alice"},
            {"world_id": "w1", "subject": "bob"},
            {"world_id": "w2", "subject": "alice"},
        ],
        documents=["likes tea", "likes coffee", "secret from another server"],
    )


async def test_query_returns_nearest_first(index: VectorIndex) -> None:
    await seed_two_worlds(index)
    hits = await index.query("facts", unit(1, 0.1, 0), where={"world_id": "w1"}, limit=5)
    assert [hit.id for hit in hits] == ["f-tea", "f-coffee"]
    assert hits[0].distance < hits[1].distance
    assert hits[0].metadata == {"world_id": "w1", "subject": "alice"}
    assert isinstance(hits[0], VectorHit)


async def test_distance_is_cosine(index: VectorIndex) -> None:
    await index.upsert(
        "facts", ids=["x"], embeddings=[[3.0, 0.0, 0.0]], metadatas=[{"world_id": "w"}]
    )
    (same,) = await index.query("facts", [1.0, 0.0, 0.0], where={"world_id": "w"}, limit=1)
    (orthogonal,) = await index.query("facts", [0.0, 2.0, 0.0], where={"world_id": "w"}, limit=1)
    assert same.distance == pytest.approx(0.0, abs=1e-5)
    assert orthogonal.distance == pytest.approx(1.0, abs=1e-5)


async def test_where_filter_never_leaks_another_world(index: VectorIndex) -> None:
    await seed_two_worlds(index)
    # The other world's vector is the closest one of all, and still never comes back.
    for limit in (1, 2, 10):
        hits = await index.query("facts", unit(1, 0.01, 0), where={"world_id": "w1"}, limit=limit)
        assert hits
        assert all(hit.metadata["world_id"] == "w1" for hit in hits)
    scoped = await index.query(
        "facts",
        unit(1, 0, 0),
        where={"$and": [{"world_id": "w2"}, {"subject": "alice"}]},
        limit=10,
    )
    assert [hit.id for hit in scoped] == ["f-other-world"]


async def test_empty_collection_and_small_limits(index: VectorIndex) -> None:
    assert await index.query("messages", unit(1, 0, 0), where={"room_id": "r"}, limit=5) == []
    assert await index.count("messages") == 0
    await seed_two_worlds(index)
    assert await index.query("facts", unit(1, 0, 0), where={"world_id": "w9"}, limit=5) == []
    assert await index.query("facts", unit(1, 0, 0), where={"world_id": "w1"}, limit=0) == []


async def test_delete_by_ids_and_by_where(index: VectorIndex) -> None:
    await seed_two_worlds(index)
    await index.delete("facts", ids=["f-tea"])
    assert await index.existing_ids("facts", ["f-tea", "f-coffee"]) == {"f-coffee"}

    await index.delete("facts", where={"world_id": "w2"})
    assert await index.existing_ids("facts", ["f-other-world", "f-coffee"]) == {"f-coffee"}
    assert await index.count("facts") == 1

    await index.delete("facts", ids=[])  # nothing to do, and no error
    with pytest.raises(ValueError, match="ids or a where"):
        await index.delete("facts")
    assert await index.count("facts") == 1


async def test_upsert_replaces_by_id(index: VectorIndex) -> None:
    await seed_two_worlds(index)
    await index.upsert(
        "facts",
        ids=["f-tea"],
        embeddings=[unit(0, 0, 1)],
        metadatas=[{"world_id": "w1", "subject": "alice", "status": "retracted"}],
    )
    assert await index.count("facts") == 3
    (hit,) = await index.query("facts", unit(0, 0, 1), where={"world_id": "w1"}, limit=1)
    assert (hit.id, hit.metadata["status"]) == ("f-tea", "retracted")


async def test_collections_are_separate(index: VectorIndex) -> None:
    await seed_two_worlds(index)
    await index.upsert(
        "messages", ids=["m1"], embeddings=[unit(1, 0, 0)], metadatas=[{"world_id": "w1"}]
    )
    assert (await index.count("facts"), await index.count("messages")) == (3, 1)


async def test_data_survives_reopening(tmp_path: Path) -> None:
    first = VectorIndex.persistent(tmp_path / "chroma")
    await seed_two_worlds(first)
    await first.close()

    reopened = VectorIndex.persistent(tmp_path / "chroma")
    try:
        assert await reopened.count("facts") == 3
        hits = await reopened.query("facts", unit(1, 0, 0), where={"world_id": "w1"}, limit=1)
        assert [hit.id for hit in hits] == ["f-tea"]
        # Still cosine after reopening (the configuration is stored with the collection).
        assert hits[0].distance == pytest.approx(0.0, abs=1e-5)
    finally:
        await reopened.close()


async def test_none_metadata_values_are_dropped(index: VectorIndex) -> None:
    await index.upsert(
        "facts",
        ids=["a", "b"],
        embeddings=[unit(1, 0, 0), unit(0, 1, 0)],
        metadatas=[
            {"world_id": "w1", "room_id": None, "confidence": 0.5, "current": True},
            {"room_id": None},  # nothing left: stored without metadata
        ],
    )
    (hit,) = await index.query("facts", unit(1, 0, 0), where={"world_id": "w1"}, limit=5)
    assert hit.metadata == {"world_id": "w1", "confidence": 0.5, "current": True}
    assert await index.existing_ids("facts", ["a", "b", "c"]) == {"a", "b"}


def test_clean_metadata_rejects_values_chroma_cannot_filter() -> None:
    assert clean_metadata({"a": None}) is None
    assert clean_metadata({"a": 1, "b": None}) == {"a": 1}
    with pytest.raises(TypeError, match="'tags'"):
        clean_metadata({"tags": {"nested": 1}})


async def test_upsert_checks_lengths(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="one embedding and one metadata per id"):
        await index.upsert("facts", ids=["a", "b"], embeddings=[unit(1, 0)], metadatas=[{}, {}])
    await index.upsert("facts", ids=[], embeddings=[], metadatas=[])
    assert await index.count("facts") == 0


async def test_remote_client_is_built_on_first_use() -> None:
    # Nothing listens there; building the index must not connect, using it must fail cleanly.
    remote = VectorIndex.remote("127.0.0.1", 9)
    with pytest.raises(VectorIndexError, match=r"http://127\.0\.0\.1:9") as raised:
        await remote.count("facts")
    assert "\n" not in str(raised.value)


# Exact search within a filter ------------------------------------------------------------------


def scoped(subject: str, world: str) -> dict[str, Any]:
    return {"$and": [{"subject": {"$in": [subject]}}, {"world_id": world}]}


async def test_nearest_within_agrees_with_query(index: VectorIndex) -> None:
    # Unnormalised vectors too: both must be cosine, whatever the length.
    await index.upsert(
        "facts",
        ids=["a", "b", "c", "d"],
        embeddings=[[3.0, 0.0, 0.0], unit(0.8, 0.6, 0), [0.0, 0.5, 0.0], unit(-1, 0.2, 0)],
        metadatas=[{"world_id": "w"}] * 4,
    )
    for probe in (unit(1, 0.1, 0), [0.0, 2.0, 0.0], unit(-1, -1, 1)):
        approximate = await index.query("facts", probe, where={"world_id": "w"}, limit=4)
        exact = await index.nearest_within("facts", probe, where={"world_id": "w"}, limit=4)
        assert [hit.id for hit in exact] == [hit.id for hit in approximate]
        for mine, chromas in zip(exact, approximate, strict=True):
            assert mine.distance == pytest.approx(chromas.distance, abs=1e-5)
            assert mine.metadata == chromas.metadata == {"world_id": "w"}
    (same,) = await index.nearest_within("facts", [1.0, 0, 0], where={"world_id": "w"}, limit=1)
    assert (same.id, same.distance) == ("a", pytest.approx(0.0, abs=1e-6))


async def test_nearest_within_is_exact_and_never_crosses_the_filter(index: VectorIndex) -> None:
    rng = np.random.default_rng(5)
    dimensions = 16
    query = rng.standard_normal(dimensions)
    query /= np.linalg.norm(query)
    ids: list[str] = []
    vectors: list[list[float]] = []
    metadatas: list[dict[str, Any]] = []
    for subject in ("alice", "bob"):
        for world in ("w1", "w2"):
            for n in range(30):
                vector = rng.standard_normal(dimensions)
                ids.append(f"{subject}-{world}-{n}")
                vectors.append((vector / np.linalg.norm(vector)).tolist())
                metadatas.append({"subject": subject, "world_id": world})
    # Decoys outside alice's w1 facts that are the query itself: the nearest of all, never hits.
    for subject, world in (("alice", "w2"), ("bob", "w1")):
        ids.append(f"decoy-{subject}-{world}")
        vectors.append(query.tolist())
        metadatas.append({"subject": subject, "world_id": world})
    await index.upsert("facts", ids=ids, embeddings=vectors, metadatas=metadatas)

    inside = [i for i, m in enumerate(metadatas) if m == {"subject": "alice", "world_id": "w1"}]
    reference = sorted(inside, key=lambda i: 1.0 - float(np.dot(vectors[i], query)))
    for limit in (1, 8, 30, 100):
        hits = await index.nearest_within(
            "facts", query.tolist(), where=scoped("alice", "w1"), limit=limit
        )
        assert [hit.id for hit in hits] == [ids[i] for i in reference[:limit]]
        expected = [1.0 - float(np.dot(vectors[i], query)) for i in reference[:limit]]
        assert [hit.distance for hit in hits] == pytest.approx(expected, abs=1e-5)
        assert all(hit.metadata == {"subject": "alice", "world_id": "w1"} for hit in hits)


async def test_nearest_within_falls_back_to_hnsw_above_max_candidates(
    index: VectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    hnsw_calls: list[dict[str, Any]] = []
    real = vectors_module._hnsw_query

    def counted(target: Any, embedding: list[float], *, where: dict[str, Any], limit: int) -> Any:
        hnsw_calls.append(where)
        return real(target, embedding, where=where, limit=limit)

    monkeypatch.setattr(vectors_module, "_hnsw_query", counted)
    await seed_two_worlds(index)
    await index.upsert(
        "facts",
        ids=["f-juice"],
        embeddings=[unit(0, 1, 0)],
        metadatas=[{"world_id": "w1", "subject": "carol"}],
    )
    probe = unit(1, 0.2, 0)
    expected = await index.query("facts", probe, where={"world_id": "w1"}, limit=2)
    hnsw_calls.clear()

    # Three vectors in w1: at a cap of 3 they are ranked here, at 2 HNSW ranks them.
    exact = await index.nearest_within(
        "facts", probe, where={"world_id": "w1"}, limit=2, max_candidates=3
    )
    assert hnsw_calls == []
    fallback = await index.nearest_within(
        "facts", probe, where={"world_id": "w1"}, limit=2, max_candidates=2
    )
    assert hnsw_calls == [{"world_id": "w1"}]
    assert [h.id for h in fallback] == [h.id for h in exact] == [h.id for h in expected]
    assert [h.distance for h in fallback] == pytest.approx([h.distance for h in exact], abs=1e-5)
    assert all(hit.metadata["world_id"] == "w1" for hit in fallback)
    # The fallback keeps the filter: the other world's vector stays out.
    everything = await index.nearest_within(
        "facts", unit(1, 0.01, 0), where={"world_id": "w1"}, limit=10, max_candidates=0
    )
    assert {hit.id for hit in everything} == {"f-tea", "f-coffee", "f-juice"}


async def test_nearest_within_small_limits_and_empty_matches(index: VectorIndex) -> None:
    assert await index.nearest_within("facts", unit(1, 0, 0), where={}, limit=3) == []
    await seed_two_worlds(index)
    assert (
        await index.nearest_within("facts", unit(1, 0, 0), where={"world_id": "w9"}, limit=3) == []
    )
    assert (
        await index.nearest_within("facts", unit(1, 0, 0), where={"world_id": "w1"}, limit=0) == []
    )
    # No filter is every vector, like `query`.
    hits = await index.nearest_within("facts", unit(1, 0, 0), where={}, limit=10)
    assert [hit.id for hit in hits] == ["f-tea", "f-other-world", "f-coffee"]
    with pytest.raises(ValueError, match="max_candidates"):
        await index.nearest_within("facts", unit(1, 0, 0), where={}, limit=1, max_candidates=-1)

"""Shared fixtures. Real parts only: the bundled MongoDB server over the wire, a real Chroma,
the real ONNX embedding model (from ../shared in CI, or MNEMO_TEST_MODEL_DIR).

`model_dir` and `mongo_uri` come from Mnemo's pytest plugin (bot/testing/pytest_plugin.py,
registered by the `pytest11` entry point), the same fixtures plugin authors get; the ones
here are Mnemo's own (its stores and embedder)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.knowledge.embeddings import CachedEmbedder
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.vectors import VectorIndex
from bot.memory.store import Knowledge
from bot.storage.mongo import MongoStore
from bot.testing.harness import local_model
from tests.paths import SHARED, TESTS

# The model's usual place beside the checkout (CI's ../shared), unless told otherwise: the
# plugin's `model_dir` reads MNEMO_TEST_MODEL_DIR, as does the harness.
SHARED_MODEL = SHARED / "models" / "all-MiniLM-L6-v2" / "onnx"
if (SHARED_MODEL / "model.onnx").exists():
    os.environ.setdefault("MNEMO_TEST_MODEL_DIR", str(SHARED_MODEL))


def pytest_addoption(parser: pytest.Parser) -> None:
    # Scale tests run small in `make test`; `--large` runs them at the sizes.
    parser.addoption("--large", action="store_true", help="run scale tests at full size")


# The tiers are the top folders (docs/testing.md): a test's place says what it needs, so its
# marker comes from there rather than from a decorator each file must remember.
TIERS = ("unit", "integration", "e2e")
# pyproject's `timeout` (300 s) is per test; an end-to-end test runs several subprocesses, each
# with its own time-out up to 300 s (a pip install, a `make run`), so its own limit is higher.
E2E_TIMEOUT_SECONDS = 900


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        if not parts or parts[0] not in TIERS:
            continue
        item.add_marker(parts[0])
        if parts[0] == "e2e" and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_SECONDS))
    # Longest first: `make test` hands whole files to its workers in collection order
    # (`--dist loadfile --no-loadscope-reorder`), so the files of long tests start at once and
    # the many short ones fill the workers' ends; in folder order the Dockerfile's steps
    # (minutes) could start last while the other worker sat idle. A file keeps its tests
    # together and in their order (the sort is stable), so its module fixtures are made once.
    file_rank: dict[Path, int] = {}
    for item in items:
        file_rank[item.path] = min(file_rank.get(item.path, _LAST), _start_rank(item))
    items.sort(key=lambda item: file_rank[item.path])


_LAST = len(TIERS) + 1


def _start_rank(item: pytest.Item) -> int:
    """0 for a slow test, then the end-to-end, integration and unit tiers."""
    if item.get_closest_marker("slow") is not None:
        return 0
    for rank, tier in enumerate(TIERS[::-1], start=1):
        if item.get_closest_marker(tier) is not None:
            return rank
    return _LAST


@pytest.fixture
async def store(mongo_uri: str) -> AsyncIterator[MongoStore]:
    """A MongoStore on a fresh database (indexes ensured), dropped afterwards.

    The client is created per test, inside the test's own event loop (an AsyncMongoClient
    belongs to the loop that first uses it)."""
    mongo = MongoStore.from_uri(mongo_uri, f"mnemo_test_{uuid.uuid4().hex[:12]}")
    await mongo.ensure_indexes()
    try:
        yield mongo
    finally:
        await mongo.client.drop_database(mongo.db.name)
        await mongo.close()


@pytest.fixture(scope="session")
def onnx_embedder(model_dir: Path) -> OnnxEmbedder:
    """One ONNX session for the whole run, the one every `open_test_app` shares: loading it is
    the slow part, and it holds no event-loop state (unlike CachedEmbedder's batcher, which is
    made per test)."""
    return local_model(model_dir.resolve())


@pytest.fixture
async def knowledge(
    store: MongoStore, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> AsyncIterator[Knowledge]:
    """Knowledge on the test's database, a fresh Chroma folder and the shared model."""
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    try:
        yield Knowledge(store, vectors, CachedEmbedder(onnx_embedder))
    finally:
        await vectors.close()

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
from tests.paths import SHARED

# The model's usual place beside the checkout (CI's ../shared), unless told otherwise: the
# plugin's `model_dir` reads MNEMO_TEST_MODEL_DIR, as does the harness.
SHARED_MODEL = SHARED / "models" / "all-MiniLM-L6-v2" / "onnx"
if (SHARED_MODEL / "model.onnx").exists():
    os.environ.setdefault("MNEMO_TEST_MODEL_DIR", str(SHARED_MODEL))


def pytest_addoption(parser: pytest.Parser) -> None:
    # Scale tests run small in `make test`; `--large` runs them at the sizes.
    parser.addoption("--large", action="store_true", help="run scale tests at full size")


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

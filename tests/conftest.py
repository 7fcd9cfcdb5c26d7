"""Shared fixtures. Real parts only: the bundled MongoDB server over the wire, a real Chroma,
the real ONNX embedding model (from ../shared in CI, or MNEMO_TEST_MODEL_DIR)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.knowledge.embeddings import CachedEmbedder
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.store import Knowledge
from bot.knowledge.vectors import VectorIndex
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.mongo import MongoStore

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    # Scale tests run small in `make test`; `--large` runs them at the sizes.
    parser.addoption("--large", action="store_true", help="run scale tests at full size")


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The all-MiniLM-L6-v2 ONNX folder; tests that need it skip with a reason when absent."""
    configured = os.environ.get("MNEMO_TEST_MODEL_DIR")
    candidates = [Path(configured)] if configured else []
    candidates.append(REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2" / "onnx")
    for candidate in candidates:
        if (candidate / "model.onnx").exists():
            # The harness (bot.testing.harness) reads the same variable.
            os.environ["MNEMO_TEST_MODEL_DIR"] = str(candidate)
            return candidate
    pytest.skip("embedding model not found: set MNEMO_TEST_MODEL_DIR to the ONNX folder")


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A MongoDB for the whole session: MNEMO_TEST_MONGODB_URI if set, else one bundled
    nx-27017 server in a temporary folder.

    Started synchronously (asyncio.run) rather than as a session-loop fixture: tests run in
    function-scoped loops, and the server is a plain child process that outlives any loop.
    """
    configured = os.environ.get("MNEMO_TEST_MONGODB_URI")
    if configured:
        yield configured
        return
    server = EmbeddedMongo(tmp_path_factory.mktemp("mongo"))
    asyncio.run(server.start())
    try:
        yield server.uri
    finally:
        asyncio.run(server.stop())


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
    """One ONNX session for the whole run: loading it is the slow part, and it holds no
    event-loop state (unlike CachedEmbedder's batcher, which is made per test)."""
    return OnnxEmbedder(model_dir)


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

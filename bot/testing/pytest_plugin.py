"""Mnemo's pytest plugin: the fixtures a plugin's tests need, shipped with the package.

Registered through the `pytest11` entry point (pyproject.toml), so `pip install mnemo-bot`
and `pytest` give every test these fixtures, with no conftest to copy:

- `model_dir` (session): the all-MiniLM-L6-v2 ONNX folder named by MNEMO_TEST_MODEL_DIR; a
  test asking for it is skipped, with the reason, when the folder has no `model.onnx`.
- `mongo_uri` (session): one MongoDB for the run: MNEMO_TEST_MONGODB_URI when set, else the
  bundled nx-27017 server, started once in a temporary folder and stopped at the end.

    async def test_questions_are_counted(tmp_path, model_dir, mongo_uri):
        async with open_test_app(tmp_path, plugins=[plugin], mongodb_uri=mongo_uri,
                                 model=ScriptedModel(...)) as app:
            ...

Mnemo's own suite uses the same fixtures (tests/conftest.py adds its own on top).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

MODEL_DIR_VARIABLE = "MNEMO_TEST_MODEL_DIR"
MONGODB_URI_VARIABLE = "MNEMO_TEST_MONGODB_URI"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The all-MiniLM-L6-v2 ONNX folder (MNEMO_TEST_MODEL_DIR); skips the test when absent,
    so a checkout without the model still runs everything that does not embed."""
    configured = os.environ.get(MODEL_DIR_VARIABLE)
    if not configured:
        pytest.skip(f"embedding model not found: set {MODEL_DIR_VARIABLE} to the ONNX folder")
    folder = Path(configured).expanduser()
    if not (folder / "model.onnx").exists():
        pytest.skip(f"embedding model not found: {MODEL_DIR_VARIABLE}={folder} has no model.onnx")
    return folder


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A MongoDB for the whole session: MNEMO_TEST_MONGODB_URI if set, else one bundled
    nx-27017 server in a temporary folder.

    Started synchronously (asyncio.run) rather than as a session-loop fixture: tests run in
    function-scoped loops, and the server is a plain child process that outlives any loop.
    """
    configured = os.environ.get(MONGODB_URI_VARIABLE)
    if configured:
        yield configured
        return
    # Imported here: the plugin loads in every pytest run of the environment, and most never
    # ask for a database.
    from bot.storage.bundled.server import EmbeddedMongo

    server = EmbeddedMongo(tmp_path_factory.mktemp("mongo"))
    asyncio.run(server.start())
    try:
        yield server.uri
    finally:
        asyncio.run(server.stop())

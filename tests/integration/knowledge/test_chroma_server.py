"""`CHROMA_HOST`: Mnemo against a real `chroma run` server (the installed chromadb's), not only
the embedded PersistentClient: the index's calls over HTTP, the whole app learning and
recalling through it, and the health endpoint noticing when it goes away."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from bot.config.settings import OpsSettings
from bot.domain.records import Fact
from bot.knowledge.vector_metadata import scope_filter
from bot.knowledge.vectors import VectorIndex
from bot.testing.harness import TestChat, open_test_app, test_settings
from tests.servers.chroma import ChromaServer


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[ChromaServer]:
    with ChromaServer(tmp_path / "chroma-server") as server:
        yield server


def unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


async def test_the_vector_index_over_http(chroma_server: ChromaServer) -> None:
    vectors = VectorIndex.remote(chroma_server.host, chroma_server.port)
    try:
        await vectors.upsert(
            "facts",
            ids=["near", "far", "other-world"],
            embeddings=[unit(1, 0.1, 0), unit(0, 1, 0), unit(1, 0, 0)],
            metadatas=[
                {"subject_id": "sarah", "world_id": "w1"},
                {"subject_id": "sarah", "world_id": "w1"},
                {"subject_id": "sarah", "world_id": "w2"},
            ],
        )
        where = scope_filter(subject_id=["sarah"], world_id="w1")
        hits = await vectors.nearest_within("facts", unit(1, 0, 0), where=where, limit=2)
        assert [hit.id for hit in hits] == ["near", "far"]
        assert hits[0].distance < 0.01 < hits[1].distance
        assert [
            h.id for h in await vectors.query("facts", unit(0, 1, 0), where=where, limit=1)
        ] == ["far"]
        assert await vectors.existing_ids("facts", ["near", "gone"]) == {"near"}
        await vectors.delete("facts", where=scope_filter(world_id="w2"))
        assert await vectors.count("facts") == 2
    finally:
        await vectors.close()
    # The vectors are the server's: a new client sees them.
    again = VectorIndex.remote(chroma_server.host, chroma_server.port)
    try:
        assert await again.count("facts") == 2
    finally:
        await again.close()


async def test_the_app_learns_and_recalls_through_the_server_and_health_sees_it_go(
    tmp_path: Path, model_dir: Path, chroma_server: ChromaServer
) -> None:
    settings = test_settings(tmp_path)
    settings = dataclasses.replace(
        settings,
        storage=settings.storage.model_copy(
            update={"chroma_host": chroma_server.host, "chroma_port": chroma_server.port}
        ),
        ops=OpsSettings(_env_file=None, metrics_port=0),  # type: ignore[call-arg]
    )
    async with open_test_app(tmp_path, settings=settings) as app:
        chat = TestChat(app.runtime)
        await chat.say("I live in Seattle.")
        await chat.say("I have a dog named Biscuit.")
        await chat.settle()
        fact = Fact(
            subject_id=chat.account.id,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            agent_id=app.runtime.agent_id,
            text="Sarah has a dog named Biscuit",
        )
        await app.knowledge.add_facts([fact], near_duplicate_distance=0.1)

        server = VectorIndex.remote(chroma_server.host, chroma_server.port)
        try:  # what the app wrote is on the server, not in a local folder
            assert await server.count("messages") == 2
            assert await server.count("facts") == 1
        finally:
            await server.close()
        assert not (tmp_path / "chroma").exists()
        found = await app.knowledge.search_facts(
            "does she have pets", subject_ids=[chat.account.id], world_id=chat.room.world_id
        )
        assert [f.text for f in found] == ["Sarah has a dog named Biscuit"]

        assert app.metrics_server is not None
        health = f"{app.metrics_server.url}/healthz"
        async with aiohttp.ClientSession() as session:
            async with session.get(health) as response:
                assert response.status == 200
            chroma_server.stop()
            async with session.get(health) as response:
                assert response.status == 503
                assert await response.json() == {
                    "status": "unavailable",
                    "mongodb": True,
                    "chroma": False,
                    "journal": True,
                }

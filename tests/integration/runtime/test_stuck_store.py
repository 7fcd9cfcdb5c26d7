"""No single stuck call stops the intake (issue 30, finding 3).

The audit filled a disk under a running bot: after space came back every Chroma call stayed
blocked inside chromadb's compiled code, nothing was answered for minutes and SIGINT was
ignored. Here a real embedded Chroma is made to block the same way at its boundary (every
collection call waits, in the calling thread, until the test lets it go), under a running app
with the recall plugin, which searches Chroma for every reply, and the message index, which
writes to it for every message learned from.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from chromadb.api.models.Collection import Collection

from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.recall import plugin as recall

REPLY = '{"text": "Noted.", "action": "NONE"}'
BLOCKED = ("add", "upsert", "query", "get", "count", "delete")


@pytest.fixture
def chroma_gate() -> Iterator[Callable[[], threading.Event]]:
    """`block()` makes every Chroma collection call wait until the event it returns is set
    (set at the end of the test, so nothing stays blocked after it)."""
    originals = {name: getattr(Collection, name) for name in BLOCKED}
    release = threading.Event()

    def block() -> threading.Event:
        for name, original in originals.items():

            def waiting(self: Collection, *args: Any, _original: Any = original, **kw: Any) -> Any:
                release.wait()
                return _original(self, *args, **kw)

            setattr(Collection, name, waiting)
        return release

    try:
        yield block
    finally:
        release.set()
        for name, original in originals.items():
            setattr(Collection, name, original)


async def health(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/healthz") as response:
        return response.status, json.loads(await response.text())


async def test_a_chroma_that_blocks_stops_no_room_and_healthz_reports_it(
    tmp_path: Path, model_dir: Path, chroma_gate: Callable[[], threading.Event]
) -> None:
    async with open_test_app(
        tmp_path,
        plugins=[recall],
        model=ScriptedModel(default=REPLY),
        evaluator_selection="all",
        store_call_seconds=0.5,
        metrics_port=0,
    ) as app:
        assert app.metrics_server is not None
        url = app.metrics_server.url
        rooms = [TestChat(app.runtime, name=name, chat=name) for name in ("ana", "ben")]
        for chat in rooms:
            await chat.say("I keep bees on my roof.")
            await chat.settle()
        assert (await health(url))[0] == 200

        release = chroma_gate()  # from here on no Chroma call returns
        for number in range(3):
            for chat in rooms:
                result = await chat.say(f"The bees swarmed again, time {number}.")
                assert result.responded and result.stored
        for chat in rooms:
            await chat.settle()  # learned from, their vector writes given up on
        status, body = await health(url)

        release.set()  # the disk has room again: the stuck calls return
        for _ in range(100):
            healed, after = await health(url)
            if healed == 200:
                break
        jobs = await app.store.jobs.counts()
    assert [chat.replies for chat in rooms] == [["Noted."] * 4] * 2
    assert status == 503 and body["chroma"] is False and body["mongodb"] is True
    assert body["stuck_seconds"]["chroma"] > 0
    assert healed == 200 and "stuck_seconds" not in after
    assert jobs.get("done") == 8 and not jobs.get("dead")

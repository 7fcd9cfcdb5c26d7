"""The bundled zero-set-up MongoDB: nx-27017 as a child process under the data folder."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient

from bot.storage.bundled.server import EmbeddedMongo, EmbeddedMongoError
from tests.helpers.processes import alive
from tests.paths import REPO


async def test_starts_answers_and_persists_across_restarts(tmp_path: Path) -> None:
    async with EmbeddedMongo(tmp_path) as server:
        assert server.uri.startswith("mongodb://127.0.0.1:")
        assert server.uri.endswith("/?directConnection=true")
        client: AsyncMongoClient = AsyncMongoClient(server.uri)
        try:
            assert (await client.admin.command("ping"))["ok"] == 1
            await client.mnemo.notes.insert_one({"_id": "n1", "text": "remember me"})
        finally:
            await client.close()
        first_port = server.port

    assert (tmp_path / "mongo" / "mnemo.db").exists()
    assert (tmp_path / "mongo" / "nx-27017.log").stat().st_size > 0

    async with EmbeddedMongo(tmp_path) as server:
        client = AsyncMongoClient(server.uri)
        try:
            assert await client.mnemo.notes.find_one({"_id": "n1"}) == {
                "_id": "n1",
                "text": "remember me",
            }
        finally:
            await client.close()
    assert isinstance(first_port, int)


async def test_starts_with_a_relative_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make run` on a fresh clone: MNEMO_DATA_DIR unset means the relative `data`. The child
    # runs inside its folder, so relative paths handed to it used to point nowhere.
    monkeypatch.chdir(tmp_path)
    async with EmbeddedMongo(Path("data")) as server:
        client: AsyncMongoClient = AsyncMongoClient(server.uri)
        try:
            await client.mnemo.notes.insert_one({"_id": "n1"})
        finally:
            await client.close()
        assert (tmp_path / "data" / "mongo" / "nx-27017.pid").is_file()
    assert (tmp_path / "data" / "mongo" / "mnemo.db").is_file()


async def test_stop_ends_the_process(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path)
    await server.start()
    pid = server.pid
    assert pid is not None and alive(pid) and server.running
    await server.stop()
    assert not alive(pid)
    assert not server.running
    with pytest.raises(EmbeddedMongoError):
        _ = server.uri
    await server.stop()  # stopping twice is harmless


async def test_port_clash_is_an_error(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(EmbeddedMongoError, match="in use"):
            await EmbeddedMongo(tmp_path, port=port).start()


async def test_broken_command_is_an_error_with_the_log_tail(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path, module="nx_27017.no_such_module", startup_timeout=5)
    with pytest.raises(EmbeddedMongoError, match="No module named") as caught:
        await server.start()
    assert "exited with code" in str(caught.value)
    assert not server.running


async def test_missing_interpreter_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedMongoError, match="cannot run"):
        await EmbeddedMongo(tmp_path, python=str(tmp_path / "no-python")).start()


@pytest.mark.skipif(sys.platform != "linux", reason="relies on Linux's parent-death signal")
async def test_server_dies_with_a_killed_parent(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys, time\n"
        "from pathlib import Path\n"
        "from bot.storage.bundled.server import EmbeddedMongo\n"
        "server = EmbeddedMongo(Path(sys.argv[1]))\n"
        "asyncio.run(server.start())\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(tmp_path), stdout=asyncio.subprocess.PIPE, cwd=REPO
    )
    assert parent.stdout is not None
    line = await asyncio.wait_for(parent.stdout.readline(), timeout=20)
    child = int(line)
    assert alive(child)
    parent.kill()  # SIGKILL: no atexit, no cleanup of any kind in the parent
    await parent.wait()
    for _ in range(100):
        if not alive(child):
            break
        await asyncio.sleep(0.05)
    assert not alive(child)

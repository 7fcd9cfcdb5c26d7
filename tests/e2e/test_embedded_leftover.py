"""The bundled database never outlives Mnemo and never blocks a start (issue 19, finding 1).

A kill -9 of Mnemo could leave nx-27017 running with its pid file (it swallowed the SIGTERM
Linux sent it), and every later start then failed with "NX-27017 is already running". Real
processes throughout: a parent Python process owning the server, SIGKILLed by the test, and the
real nx-27017.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient

from bot.storage.bundled.server import EmbeddedMongo, EmbeddedMongoError
from tests.helpers.processes import alive
from tests.paths import REPO

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux /proc and prctl")

# A Mnemo-like owner: starts the server, writes a document through it, prints the server's pid
# and waits to be killed. `deaf` runs the nx-27017 that ignores SIGTERM; `no_death_signal`
# leaves the server without any parent-death signal (an older Mnemo, another OS).
OWNER = """
import asyncio, sys, time
from pathlib import Path
from pymongo import MongoClient
import bot.storage.bundled.server as embedded
folder, mode = Path(sys.argv[1]), sys.argv[2]
if mode == "no_death_signal":
    embedded._parent_death_signal = lambda: None
module = "tests.servers.nx_deaf_to_sigterm" if mode == "deaf" else embedded._MODULE
server = embedded.EmbeddedMongo(folder, module=module)
asyncio.run(server.start())
client = MongoClient(server.uri)
client.mnemo.notes.insert_one({"_id": "kept", "text": "written before the kill"})
client.close()
print(server.pid, flush=True)
time.sleep(120)
"""


async def start_owner(folder: Path, mode: str) -> tuple[asyncio.subprocess.Process, int]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    owner = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        OWNER,
        str(folder),
        mode,
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    assert owner.stdout is not None
    line = await asyncio.wait_for(owner.stdout.readline(), timeout=30)
    assert line.strip(), "the owner process did not start its server"
    return owner, int(line)


async def gone_within(pid: int, seconds: float) -> bool:
    for _ in range(int(seconds / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not alive(pid)


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


async def test_a_server_that_swallows_sigterm_still_dies_with_a_killed_mnemo(
    tmp_path: Path,
) -> None:
    owner, server_pid = await start_owner(tmp_path, "deaf")
    try:
        owner.kill()  # SIGKILL: no atexit, no cleanup of any kind in the owner
        await owner.wait()
        assert await gone_within(server_pid, 5), "the bundled database outlived Mnemo"
    finally:
        kill_quietly(server_pid)


async def test_a_server_left_running_by_a_dead_mnemo_is_replaced_at_start(tmp_path: Path) -> None:
    owner, leftover = await start_owner(tmp_path, "no_death_signal")
    try:
        owner.kill()
        await owner.wait()
        await asyncio.sleep(0.2)
        assert alive(leftover)  # the orphan the audit found: running, pid file and all
        assert (tmp_path / "mongo" / "nx-27017.pid").read_text().strip() == str(leftover)

        async with EmbeddedMongo(tmp_path) as server:
            assert not alive(leftover)
            assert server.pid != leftover
            client: AsyncMongoClient = AsyncMongoClient(server.uri)
            try:
                kept = await client.mnemo.notes.find_one({"_id": "kept"})
            finally:
                await client.close()
            assert kept is not None and kept["text"] == "written before the kill"
    finally:
        kill_quietly(leftover)


async def test_a_server_of_a_live_mnemo_is_not_taken_over(tmp_path: Path) -> None:
    owner, server_pid = await start_owner(tmp_path, "normal")
    try:
        with pytest.raises(EmbeddedMongoError, match="in use by another Mnemo"):
            await EmbeddedMongo(tmp_path).start()
        assert alive(server_pid)  # the running Mnemo keeps its database
    finally:
        owner.kill()
        await owner.wait()
        assert await gone_within(server_pid, 5)


async def test_a_pid_file_naming_an_unrelated_process_does_not_block(tmp_path: Path) -> None:
    (tmp_path / "mongo").mkdir()
    sleeper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)"
    )
    try:
        (tmp_path / "mongo" / "nx-27017.pid").write_text(f"{sleeper.pid}\n")
        async with EmbeddedMongo(tmp_path) as server:
            assert server.running
        assert sleeper.returncode is None and alive(sleeper.pid)  # not ours: left alone
    finally:
        sleeper.kill()
        await sleeper.wait()


def test_bench_server_kills_small(tmp_path: Path) -> None:
    """`mnemo bench faults`' kill loop at a small size: the owner of the bundled server is
    SIGKILLed under writes; no server outlives it, every next start works, no write is lost."""
    from benchmarks.faults import run_server_kills

    report = run_server_kills(tmp_path, kills=3, seed=2)
    assert report.kills == 3
    assert (report.orphans, report.failed_starts, report.lost_writes) == (0, 0, 0)

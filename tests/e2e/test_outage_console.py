"""The database goes away under a real `mnemo chat`, and the process is killed (-9) in the middle
of replaying its journal: after a restart every message is stored exactly once, in order, and
learned from; the person heard about the outage once."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pymongo import MongoClient

from bot.queue.worker import job_id_for
from bot.runtime.intake.outage import DATABASE_AWAY, TROUBLE_REPLY
from bot.storage.bundled.server import EmbeddedMongo
from tests.paths import REPO

DATABASE = "mnemo_outage"


class Console:
    """`mnemo chat` in a child process, fed line by line, its output read as it comes."""

    def __init__(self, data_dir: Path, model_dir: Path, uri: str, **env: str) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMO_", "OPENAI_"))}
        for name in ("MONGODB_URI", "DISCORD_TOKEN", "TELEGRAM_TOKEN", "CHROMA_HOST"):
            clean.pop(name, None)
        clean.update(
            MNEMO_DATA_DIR=str(data_dir),
            MNEMO_EMBEDDING_MODEL_DIR=str(model_dir),
            MONGODB_URI=uri,
            MNEMO_MONGODB_DATABASE=DATABASE,
            MNEMO_MONGODB_TIMEOUT_SECONDS="1",
            # An evaluation the outage made fail is retried at once, not 5 s later (after the
            # second run has left): then "every message learned from" is checkable at the end.
            MNEMO_EVALUATION_RETRY_SECONDS="0.05",
            **env,
        )
        env_file = data_dir / "empty.env"  # a `.env` in the checkout must not leak in
        env_file.touch()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "--env-file", str(env_file), "chat", "--name", "Ann"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
            env=clean,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def say(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def wait_for(self, fragment: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            self.output.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"{fragment!r} never came; output:\n" + "\n".join(self.output))

    def finish(self, timeout: float = 120.0) -> int:
        code = self.process.wait(timeout=timeout)
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return code


async def released(uri: str, timeout: float = 30.0) -> None:
    """Wait until every evaluation job has left intake (its message answered and stored)."""
    client: MongoClient = MongoClient(uri)
    try:
        jobs = client[DATABASE].evaluations
        for _ in range(int(timeout / 0.05)):
            if jobs.count_documents({}) and not jobs.count_documents({"status": "intake"}):
                return
            await asyncio.sleep(0.05)
    finally:
        client.close()
    raise AssertionError("the first message was never released")


@pytest.mark.skipif(
    bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="kills its own MongoDB server"
)
@pytest.mark.slow
async def test_a_kill_9_mid_replay_loses_and_duplicates_nothing(
    tmp_path: Path, model_dir: Path
) -> None:
    server = EmbeddedMongo(tmp_path / "db")
    await server.start()
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    try:
        # The first run dies (kill -9, through the fault hook) once it has replayed two
        # messages, before it could drop them from the journal.
        first = Console(data_dir, model_dir, server.uri, MNEMO_TEST_FAULT="journal:replayed@2")
        first.say("Hello, I live in Oslo.")
        first.wait_for("Mnemo:")
        await released(server.uri)  # the first message is settled before the database dies
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        for _ in range(250):
            if server.exit_code() is not None:
                break
            await asyncio.sleep(0.02)
        for text in ("I have a dog called Rex.", "I work as a nurse.", "I like green tea."):
            first.say(text)
        first.wait_for(TROUBLE_REPLY)
        first.say("/facts")  # needs the database: one line saying so, and the chat goes on
        first.wait_for(DATABASE_AWAY)
        # All three are in the journal before the database comes back.
        journal = data_dir / "journal.jsonl"
        for _ in range(200):
            if journal.exists() and len(journal.read_text().splitlines()) == 3:
                break
            await asyncio.sleep(0.05)
        await server.restart()
        assert first.finish() == -signal.SIGKILL
        assert sum(TROUBLE_REPLY in line for line in first.output) == 1
        assert len(journal.read_text().splitlines()) == 3  # nothing dropped before the kill

        # The second run replays the journal at start-up (old messages by now: learned from,
        # not answered) and learns from everything before the person leaves.
        second = Console(data_dir, model_dir, server.uri, MNEMO_ANSWER_WINDOW_MINUTES="0")
        second.say("/quit")
        assert second.finish() == 0, "\n".join(second.output)
        assert not journal.exists()

        client: MongoClient = MongoClient(server.uri)
        try:
            db = client[DATABASE]
            stored = list(db.memories.find().sort("created_ms", 1))
            people = [m for m in stored if not m["content"].get("in_reply_to")]
            texts = [m["content"]["text"] for m in people]
            assert texts == [
                "Hello, I live in Oslo.",
                "I have a dog called Rex.",
                "I work as a nurse.",
                "I like green tea.",
            ]
            for message in people:
                job = db.evaluations.find_one({"_id": job_id_for("message", message["_id"])})
                assert job is not None, message
                assert job["status"] == "done", (message["content"]["text"], job)
                replies = [m for m in stored if m["content"].get("in_reply_to") == message["_id"]]
                assert len(replies) <= 1
        finally:
            client.close()
    finally:
        await server.stop()

"""A real `mnemo run` whose Chroma stops answering for good keeps answering, says so on
/healthz, and still stops on SIGINT (issue 30, finding 3).

The audit's full disk left every Chroma call blocked inside chromadb's compiled code; the
intake wedged and SIGINT was ignored for 60 s. Here the process's own, real Chroma is made to
block at its boundary: a `sitecustomize` on the process's PYTHONPATH wraps chromadb's
collection calls so that each waits while a file exists, which this test creates and never
removes before the process has ended. The local fake Bot API and a fake OpenAI server;
nothing reaches the internet.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.testing.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.mnemo_run import REPLY, polling, start_bot
from tests.paths import REPO

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process signals")

# Wraps the real chromadb at its boundary; only where MNEMO_TEST_CHROMA_GATE names a file.
SITECUSTOMIZE = """
import os, time
from pathlib import Path

_gate = os.environ.get("MNEMO_TEST_CHROMA_GATE")
if _gate:
    from chromadb.api.models.Collection import Collection

    def _blocking(original):
        def call(self, *args, **kwargs):
            while Path(_gate).exists():  # stuck, as in compiled code: nothing returns
                time.sleep(0.05)
            return original(self, *args, **kwargs)
        return call

    for _name in ("add", "upsert", "query", "get", "count", "delete"):
        setattr(Collection, _name, _blocking(getattr(Collection, _name)))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def health(port: int) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/healthz"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, json.loads(await response.text())


async def test_mnemo_run_answers_reports_and_stops_with_its_chroma_stuck(
    tmp_path: Path, model_dir: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    gate = tmp_path / "chroma-stuck"
    port = free_port()
    extra = {
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "MNEMO_TEST_CHROMA_GATE": str(gate),
        "MNEMO_STORE_CALL_SECONDS": "1",
        "MNEMO_METRICS_PORT": str(port),
    }
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=lambda _: REPLY) as ai:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        folder = tmp_path / "bot"
        bot = start_bot(folder, telegram, ai.base_url, extra)
        try:
            await polling(telegram, bot, folder)
            telegram.push_message(chat, person, "before Chroma got stuck")
            await telegram.wait_for_sent(1, timeout=60, chat_id=chat.id)
            assert (await health(port))[0] == 200

            gate.touch()  # from here on, no Chroma call of the process returns
            for number in range(3):
                telegram.push_message(chat, person, f"while Chroma is stuck {number}")
            sent = await telegram.wait_for_sent(4, timeout=90, chat_id=chat.id)
            reported: tuple[int, dict[str, Any]] = (0, {})
            for _ in range(60):  # the message vectors' writes pass their deadline
                reported = await health(port)
                if reported[0] == 503:
                    break
                await asyncio.sleep(0.5)

            bot.send_signal(signal.SIGINT)
            code = await asyncio.to_thread(bot.wait, 120)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
            gate.unlink(missing_ok=True)
    log = (folder / "process.log").read_text(errors="replace")
    assert [m.text for m in sent] == ["Got it."] * 4
    status, body = reported
    assert status == 503 and body["chroma"] is False and body["stuck_seconds"]["chroma"] > 0
    # Stopped gracefully: the stuck calls' threads did not keep the process alive.
    assert code == 0, log[-3000:]


# A process held by a thread that never ends (a call stuck where no deadline reaches), with
# the stop signal handled as `mnemo run` handles it.
HELD_FOR_EVER = """
import signal, sys, threading
from bot.app.platforms import ExitDeadline

held = threading.Thread(target=threading.Event().wait)  # not a daemon: exit waits for it
held.start()
deadline = ExitDeadline(seconds=float(sys.argv[1]))
signal.signal(signal.SIGTERM, lambda signum, frame: deadline.signalled(signum))
print("ready", flush=True)
held.join()
"""


@pytest.mark.parametrize("signals", [1, 2])
async def test_a_stop_signal_ends_a_process_that_something_holds(signals: int) -> None:
    """One signal: ended once the exit deadline passes; a second one: ended at once (the
    deadline here is longer than the test waits)."""
    seconds = "1" if signals == 1 else "600"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HELD_FOR_EVER,
        seconds,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert await asyncio.wait_for(process.stdout.readline(), 60) == b"ready\n"
        for _ in range(signals):
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
        code = await asyncio.wait_for(process.wait(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 128 + signal.SIGTERM

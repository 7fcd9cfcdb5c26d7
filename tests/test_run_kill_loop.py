"""kill -9 a real `mnemo run` on its bundled database, again and again, under traffic: every
next start works, and every message Telegram was told had arrived is answered (issue 19).

`mnemo run` with no MONGODB_URI runs nx-27017 as its child. Each round sends messages by
Telegram polling (the default), SIGKILLs the process while they are being handled, and checks
the bundled server went with it. The audit saw about 1 kill in 60 leave the server running with
its pid file, after which every start failed; tests/test_embedded_leftover.py forces that case.
The local fake Bot API and fake OpenAI server; nothing reaches the internet.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.testing.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.test_embedded import alive

REPO = Path(__file__).resolve().parent.parent
REPLY = '{"text": "Got it.", "action": "NONE"}'
KILLS = 3
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux parent-death signal")


def start_bot(
    folder: Path, telegram: FakeTelegramServer, model_url: str
) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    env_file = folder / "empty.env"  # a `.env` in the checkout must not leak in
    env_file.touch()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(folder),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "MNEMO_DATA_DIR": str(folder / "data"),
        "MNEMO_EMBEDDING_MODEL_DIR": os.environ["MNEMO_TEST_MODEL_DIR"],
        "MNEMO_DISABLED_PLUGINS": "facts,goals,recall,sentiment",
        "MNEMO_RATE_LIMIT_PER_MINUTE": "0",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": model_url,
        "TELEGRAM_TOKEN": telegram.token,
        "MNEMO_TELEGRAM_API_URL": telegram.base_url,
    }
    with (folder / "process.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "--env-file", str(env_file), "run"],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def server_pid(folder: Path) -> int | None:
    try:
        return int((folder / "data" / "mongo" / "nx-27017.pid").read_text().strip())
    except (OSError, ValueError):
        return None


async def polling(telegram: FakeTelegramServer, bot: subprocess.Popen[bytes], folder: Path) -> None:
    """Start-up is done once the bot asks Telegram for updates."""
    seen = len(telegram.calls_to("getUpdates"))
    deadline = time.monotonic() + 90
    while len(telegram.calls_to("getUpdates")) <= seen:
        if bot.poll() is not None or time.monotonic() > deadline:
            log = (folder / "process.log").read_text(errors="replace")[-3000:]
            pytest.fail(f"the bot did not start (exit code {bot.poll()}):\n{log}")
        await asyncio.sleep(0.1)


async def test_kill_9_of_mnemo_run_in_a_loop_never_blocks_the_next_start(
    tmp_path: Path, model_dir: Path
) -> None:
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=lambda _: REPLY) as ai:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        folder = tmp_path / "bot"
        sent = 0
        bot = start_bot(folder, telegram, ai.base_url)
        try:
            for round_ in range(KILLS):
                await polling(telegram, bot, folder)
                database = server_pid(folder)
                assert database is not None and alive(database)
                telegram.push_message(chat, person, f"round {round_}: answered")
                sent += 1
                await telegram.wait_for_sent(sent, timeout=60, chat_id=chat.id)
                for extra in range(3):  # traffic the kill lands in
                    telegram.push_message(chat, person, f"round {round_}: in flight {extra}")
                    sent += 1
                await asyncio.sleep(0.05 * round_)
                bot.send_signal(signal.SIGKILL)
                bot.wait(timeout=30)
                for _ in range(100):
                    if not alive(database):
                        break
                    await asyncio.sleep(0.05)
                assert not alive(database), f"round {round_}: the bundled database outlived Mnemo"
                bot = start_bot(folder, telegram, ai.base_url)

            await polling(telegram, bot, folder)
            telegram.push_message(chat, person, "after the last kill")
            sent += 1
            # Polling confirms an update only once it was kept: nothing sent is lost.
            replies = await telegram.wait_for_sent(sent, timeout=120, chat_id=chat.id)
            assert {r.text for r in replies} == {"Got it."}
            bot.send_signal(signal.SIGINT)
            assert await asyncio.to_thread(bot.wait, 30) == 0
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()

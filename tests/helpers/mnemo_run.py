"""A real `mnemo run` on Telegram polling, as its own process on its bundled database, against
the local fake Bot API and a fake OpenAI server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.fakes.telegram_server import FakeTelegramServer
from tests.paths import REPO

REPLY = '{"text": "Got it.", "action": "NONE"}'


def start_bot(
    folder: Path,
    telegram: FakeTelegramServer,
    model_url: str,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`extra_env`: more settings, or ones replacing these (PYTHONPATH: keep REPO on it)."""
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
        **(extra_env or {}),
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

"""Helpers for tests that run Mnemo as a process: `mnemo ...` with a clean environment, whether
a pid is alive, a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def mnemo(
    args: list[str], stdin: str, data_dir: Path, model_dir: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMO_", "OPENAI_"))}
    for name in ("MONGODB_URI", "DISCORD_TOKEN", "TELEGRAM_TOKEN", "CHROMA_HOST"):
        clean.pop(name, None)
    clean.update(
        MNEMO_DATA_DIR=str(data_dir),
        MNEMO_EMBEDDING_MODEL_DIR=str(model_dir),
        **env,
    )
    # An empty settings file: a `.env` in the checkout must not leak into the test.
    env_file = data_dir / "empty.env"
    env_file.touch()
    return subprocess.run(
        [sys.executable, "-m", "bot", "--env-file", str(env_file), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean,
        timeout=240,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; /proc tells it apart where there is one.
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]
    except OSError:
        return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port

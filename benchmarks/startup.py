"""`mnemo bench startup`: how long `mnemo chat` takes to greet, and its idle memory.

Each run launches `mnemo chat` as a child with zero set-up: an empty data folder, no
`MONGODB_URI` (so the bundled server starts), no model key (the offline model), no `.env`.
Standard input is a pipe. The clock runs from launch to the banner's last line; resident
memory is read from /proc once the banner is out and the process sits idle, before `/quit`.
One message is then sent to time the first reply (it loads the ONNX model), and `/quit`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from benchmarks.stats import REPO_ROOT, BenchError, child_pids, mib, rss_bytes

log = logging.getLogger(__name__)

BANNER_END = "Type /help"
REPLY_PREFIX = "Mnemo:"
IDLE_SECONDS = 1.0
# Settings a zero-set-up start must not inherit from the shell that runs the benchmark.
_SERVICE_VARIABLES = (
    "MONGODB_URI",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CHROMA_HOST",
    "CHROMA_PORT",
    "DISCORD_TOKEN",
    "DISCORD_API_TOKEN",
    "TELEGRAM_TOKEN",
    "TELEGRAM_BOT_TOKEN",
)


def mnemo_command() -> list[str]:
    """The `mnemo` console script next to this Python, else `python -m bot`."""
    script = Path(sys.executable).with_name("mnemo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "bot"]


def child_environment(data_dir: Path, model_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _SERVICE_VARIABLES and not key.startswith("MNEMO_")
    }
    env["MNEMO_DATA_DIR"] = str(data_dir)
    # The one thing zero set-up cannot find offline: where the embedding model is.
    env["MNEMO_EMBEDDING_MODEL_DIR"] = str(model_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _pump(stream: IO[str], lines: queue.Queue[tuple[float, str | None]]) -> None:
    for line in stream:
        lines.put((time.perf_counter(), line.rstrip("\n")))
    lines.put((time.perf_counter(), None))


def _wait_for(
    lines: queue.Queue[tuple[float, str | None]], marker: str, deadline: float, seen: list[str]
) -> float | None:
    """The time the first line containing `marker` arrived, or None (exit or deadline)."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        try:
            at, line = lines.get(timeout=remaining)
        except queue.Empty:
            return None
        if line is None:
            return None
        seen.append(line)
        if marker in line:
            return at


def _memory(pid: int) -> dict[str, Any]:
    children = child_pids(pid)
    return {
        "rss_mib": mib(rss_bytes(pid)),
        "bundled_mongodb_rss_mib": mib(sum(rss_bytes(c) or 0 for c in children))
        if children
        else None,
    }


def measure_once(model_dir: Path, *, timeout: float = 120.0) -> dict[str, Any]:
    """One launch of `mnemo chat`: banner time, idle memory, first reply, clean exit."""
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-startup-") as folder:
        # An empty settings file (a named one must exist): no `.env` around leaks in.
        empty_settings = Path(folder) / "empty.env"
        empty_settings.touch()
        command = [*mnemo_command(), "--env-file", str(empty_settings), "chat"]
        env = child_environment(Path(folder) / "data", model_dir)
        # A file, not a pipe: a chatty child must never block on a full stderr pipe.
        errors = Path(folder) / "stderr.txt"
        with errors.open("w") as stderr:
            started = time.perf_counter()
            process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
        assert process.stdout is not None and process.stdin is not None
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
        seen: list[str] = []
        try:
            banner = _wait_for(lines, BANNER_END, started + timeout, seen)
            if banner is None:
                raise BenchError(f"`mnemo chat` showed no banner: {_why(process, seen, errors)}")
            time.sleep(IDLE_SECONDS)
            idle = _memory(process.pid)
            sent = time.perf_counter()
            process.stdin.write("Hi, I'm Sam and I live in Oslo.\n")
            process.stdin.flush()
            replied = _wait_for(lines, REPLY_PREFIX, sent + timeout, seen)
            after_reply = _memory(process.pid)
            process.stdin.write("/quit\n")
            process.stdin.close()
            quitting = time.perf_counter()
            code = process.wait(timeout=timeout)
            stopped = time.perf_counter()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return {
        "banner_seconds": round(banner - started, 2),
        "idle": idle,
        "first_reply_seconds": None if replied is None else round(replied - sent, 2),
        "after_first_reply": after_reply,
        "quit_seconds": round(stopped - quitting, 2),
        "exit_code": code,
    }


def _why(process: subprocess.Popen[str], seen: Sequence[str], errors: Path) -> str:
    if process.poll() is None:
        return "timed out"
    error = ""
    with contextlib.suppress(OSError):
        error = errors.read_text().strip()
    last = (error.splitlines() or list(seen) or ["no output"])[-1]
    return f"exit code {process.returncode}: {last}"


def run_startup(model_dir: Path, *, runs: int = 3) -> dict[str, Any]:
    """Launch `mnemo chat` `runs` times; medians and every run."""
    results = []
    for number in range(1, runs + 1):
        log.info("startup: run %d of %d", number, runs)
        results.append(measure_once(model_dir))

    def median(values: Sequence[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return round(statistics.median(present), 2) if present else None

    return {
        "command": "mnemo chat",
        "runs": results,
        "banner_seconds": median([r["banner_seconds"] for r in results]),
        "idle_rss_mib": median([r["idle"]["rss_mib"] for r in results]),
        "idle_bundled_mongodb_rss_mib": median(
            [r["idle"]["bundled_mongodb_rss_mib"] for r in results]
        ),
        "first_reply_seconds": median([r["first_reply_seconds"] for r in results]),
        "rss_after_first_reply_mib": median([r["after_first_reply"]["rss_mib"] for r in results]),
    }

"""Logs a service can live with: the file rotates by size, and containers get JSON lines on
stdout; secrets are redacted either way."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app.logs import REDACTED, configure_logging

SECRET = "sk-very-secret-key"


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def host_in_another_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A host clock set to another zone: a log line must still say the true moment in UTC."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_log_file_rotates_at_its_size_and_keeps_its_count(tmp_path: Path) -> None:
    log_file = tmp_path / "mnemo.log"
    configure_logging("INFO", [SECRET], log_file=log_file, quiet=True, max_bytes=2000, backups=2)
    for number in range(200):
        logging.getLogger("bot.test").info("message %d with key %s", number, SECRET)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["mnemo.log", "mnemo.log.1", "mnemo.log.2"]
    assert all((tmp_path / name).stat().st_size <= 2000 for name in files)
    newest = log_file.read_text(encoding="utf-8")
    assert "message 199" in newest and SECRET not in newest and REDACTED in newest


def test_json_lines_on_stdout_and_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host_in_another_zone: None
) -> None:
    log_file = tmp_path / "mnemo.log"
    configure_logging("INFO", [SECRET], log_file=log_file, log_format="json")
    logger = logging.getLogger("bot.test")
    logger.info("connected with %s", SECRET)
    try:
        raise RuntimeError(f"refused key {SECRET}")
    except RuntimeError:
        logger.exception("call failed")
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["level"], r["logger"], r["message"]) for r in records] == [
        ("INFO", "bot.test", f"connected with {REDACTED}"),
        ("ERROR", "bot.test", "call failed"),
    ]
    # ISO 8601 with a zone, as log shippers expect; the moment is the record's own.
    stamp = datetime.fromisoformat(records[0]["time"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", records[0]["time"])
    assert stamp.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=5)
    assert "RuntimeError" in records[1]["exc_info"]
    assert SECRET not in "\n".join(lines)
    assert not log_file.exists()

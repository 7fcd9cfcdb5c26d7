"""Secrets never reach a log, at any level, and the data folder is owner-only (issue 19,
finding 5).

The audit found the Telegram webhook secret logged in plain text at DEBUG: the redaction list
was written by hand and missed it. Now the secrets come from the settings model itself (every
SecretStr field, whatever its name). And the database file, Chroma, the log and backups were
0644: `mnemo` now creates everything owner-only.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.adapters.telegram import webhook_secret
from bot.app import cli
from bot.app.logs import configure_logging, secrets_of
from bot.config.settings import _groups, env_names, load_settings
from tests.paths import REPO


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def secret_fields() -> list[tuple[str, str]]:
    """(environment variable, value) for every SecretStr field of every settings group."""
    found = []
    for cls in _groups().values():
        for name, info in cls.model_fields.items():
            annotation = info.annotation
            if annotation is SecretStr or SecretStr in typing.get_args(annotation):
                variable = env_names(cls, name)[0]
                value = f"{name.replace('_', '-')}-Zq8vXw31"
                if "mongodb" in name:
                    value = "mongodb://mnemo:Pw-Zq8vXw31-db@127.0.0.1:27017/"
                found.append((variable, value))
    return found


def test_every_secret_of_the_settings_is_redacted_at_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fields = secret_fields()
    assert "MNEMO_TELEGRAM_WEBHOOK_SECRET" in [variable for variable, _ in fields]
    for variable, value in fields:
        monkeypatch.setenv(variable, value)
    settings = load_settings(None)
    token = settings.platforms.telegram_token
    assert token is not None
    leaks = [value for _, value in fields] + [
        "Pw-Zq8vXw31-db",  # the database password alone, as a driver may log it
        webhook_secret(token.get_secret_value()),  # derived when no secret is set
    ]

    log_file = tmp_path / "mnemo.log"
    configure_logging("DEBUG", cli._secrets(settings), log_file=log_file, quiet=True)
    logger = logging.getLogger("telegram.ext.test")
    for leak in leaks:
        logger.debug("setWebhook secret_token=%s", leak)
        logger.debug(f"in the message itself: {leak}")
    text = log_file.read_text(encoding="utf-8")
    assert text.count("[redacted]") == 2 * len(leaks)
    assert not [leak for leak in leaks if leak in text]
    assert set(secrets_of(settings)) >= set(leaks)


def mnemo(tmp_path: Path, model_dir: Path, data: Path, *args: str, said: str = "") -> None:
    env_file = tmp_path / "empty.env"
    env_file.touch()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO),
        "MNEMO_DATA_DIR": str(data),
        "MNEMO_EMBEDDING_MODEL_DIR": str(model_dir),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bot", "--env-file", str(env_file), *args],
        env=env,
        cwd=tmp_path,
        input=said,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_mnemo_creates_its_data_folder_owner_only(tmp_path: Path, model_dir: Path) -> None:
    backup = tmp_path / "backup"
    mnemo(tmp_path, model_dir, tmp_path / "data", "chat", said="I live in Oslo.\n/export\n")
    mnemo(tmp_path, model_dir, tmp_path / "data", "backup", str(backup))
    mnemo(tmp_path, model_dir, tmp_path / "restored", "restore", str(backup))
    created = [path for top in ("data", "restored", "backup") for path in
               (tmp_path / top, *(tmp_path / top).rglob("*"))]  # fmt: skip
    names = {path.relative_to(tmp_path).as_posix() for path in created}
    assert {"data/mnemo.log", "data/mongo/mnemo.db", "backup/manifest.json"} <= names
    assert any(name.startswith("data/chroma/") for name in names), names
    assert any(name.startswith("restored/chroma/") for name in names), names
    assert any(name.startswith("data/exports/") for name in names), names
    wrong = {
        path.relative_to(tmp_path).as_posix(): oct(stat.S_IMODE(path.stat().st_mode))
        for path in created
        if stat.S_IMODE(path.stat().st_mode) & 0o077
    }
    assert wrong == {}

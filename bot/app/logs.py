"""Logging set-up with secret redaction, file rotation, and JSON lines for containers.

Libraries log request URLs (httpx logs Telegram's `.../bot<TOKEN>/getUpdates` at INFO), so every
record passes through a filter that replaces the configured secrets before any handler sees it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, SecretStr
from pythonjsonlogger.json import JsonFormatter

REDACTED = "[redacted]"


def secrets_of(settings: object) -> list[str]:
    """Every secret the settings hold, found from the model itself: each `SecretStr` value of
    every group, whatever its name (a field added later is covered without a list to keep),
    plus what is derived from one: a MongoDB URI's password alone, and the Telegram webhook
    secret derived from the token when none is set."""
    found: list[str] = []
    for value in _walk(settings):
        secret = value.get_secret_value()
        found.append(secret)
        with contextlib.suppress(ValueError):
            password = urlsplit(secret).password
            if password:
                found.append(unquote(password))
    platforms = getattr(settings, "platforms", None)
    token = getattr(platforms, "telegram_token", None)
    if isinstance(token, SecretStr):
        with contextlib.suppress(ImportError):  # the Telegram extra may not be installed
            from bot.adapters.telegram.updates import webhook_secret

            found.append(webhook_secret(token.get_secret_value()))
    return found


def _walk(value: object, depth: int = 0) -> Iterator[SecretStr]:
    """The SecretStr values in a settings object: dataclass fields and pydantic models,
    nested, and the values of mappings and sequences they hold."""
    if depth > 6:
        return
    if isinstance(value, SecretStr):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name, None), depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk(getattr(value, field.name, None), depth + 1)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk(item, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _walk(item, depth + 1)


class RedactSecrets(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        clean = self.redact(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class _JsonLines(JsonFormatter):
    """One JSON object per line. The whole line is redacted too: the formatter renders a
    traceback from the exception itself, past the filter's redacted copy."""

    def __init__(self, redact: RedactSecrets) -> None:
        super().__init__(
            "{asctime}{levelname}{name}{message}",
            style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self._redact.redact(super().format(record))

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """ISO 8601 in UTC with milliseconds and the zone (`2026-12-01T19:12:23.479+00:00`):
        what log shippers parse without a pattern, unlike logging's `2026-12-01 19:12:23,479`,
        which has no zone and a comma."""
        return datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")


def configure_logging(
    level: str,
    secrets: Iterable[str],
    *,
    log_file: Path | None = None,
    quiet: bool = False,
    log_format: Literal["text", "json"] = "text",
    max_bytes: int = 10 * 1024 * 1024,
    backups: int = 5,
) -> None:
    """`text`: stderr (WARNING only when `quiet`, e.g. in the console chat) and a file that
    rotates at `max_bytes`, keeping `backups` old ones. `json`: JSON lines on stdout only, for
    containers whose platform collects and rotates stdout itself."""
    redact = RedactSecrets(secrets)
    handlers: list[logging.Handler] = []
    if log_format == "json":
        stdout = logging.StreamHandler(sys.stdout)
        stdout.setLevel(logging.WARNING if quiet else level)
        stdout.setFormatter(_JsonLines(redact))
        handlers.append(stdout)
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        stderr = logging.StreamHandler(sys.stderr)
        stderr.setLevel(logging.WARNING if quiet else level)
        handlers.append(stderr)
        if log_file is not None:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            file_handler = RotatingFileHandler(
                log_file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
            )
            file_handler.setLevel(level)
            handlers.append(file_handler)
        for handler in handlers:
            handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in root.handlers:
        old.close()
    root.handlers.clear()
    root.setLevel(level)
    for handler in handlers:
        handler.addFilter(redact)
        root.addHandler(handler)
    # Chatty libraries: their INFO is noise for an operator.
    for name in ("httpx", "httpcore", "chromadb", "discord.gateway", "apscheduler", "pymongo"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))

"""Logging set-up with secret redaction.

Libraries log request URLs (httpx logs Telegram's `.../bot<TOKEN>/getUpdates` at INFO), so every
record passes through a filter that replaces the configured secrets before any handler sees it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from pathlib import Path

REDACTED = "[redacted]"


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


def configure_logging(
    level: str, secrets: Iterable[str], *, log_file: Path | None = None, quiet: bool = False
) -> None:
    """Log to stderr (WARNING only when `quiet`, e.g. in the console chat) and to a file."""
    redact = RedactSecrets(secrets)
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = []
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING if quiet else level)
    handlers.append(stderr)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_file, encoding="utf-8")
        file_handler.setLevel(level)
        handlers.append(file_handler)
    root = logging.getLogger()
    root.handlers.clear()
    root.setLevel(level)
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(redact)
        root.addHandler(handler)
    # Chatty libraries: their INFO is noise for an operator.
    for name in ("httpx", "httpcore", "chromadb", "discord.gateway", "apscheduler", "pymongo"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))

"""Retention: messages (people's and the bot's replies) older than MNEMO_RETENTION_DAYS are
deleted from MongoDB and their vectors from Chroma, by a scheduled job (bot/app/scheduler.py:
daily, and once at start-up). Facts are not messages: they stay until forgotten.

MongoDB goes first, as everywhere (it is the truth; a vector without its message is never
shown). Vectors are deleted by id and then by age, so a vector whose delete failed on an
earlier run goes on the next one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.domain.records import utcnow
from bot.i18n import SOURCE_TEXTS, Texts
from bot.knowledge.vectors import VectorIndex
from bot.privacy.forgetting import DatabaseFiles
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# Deleted in batches: one huge delete would hold the (single-threaded) bundled server.
BATCH = 1000


@dataclass(frozen=True)
class Retention:
    """How long messages are kept: `days` 0 means until forgotten."""

    days: int = 0

    @property
    def enabled(self) -> bool:
        return self.days > 0

    def describe(self, texts: Texts = SOURCE_TEXTS) -> str:
        """For /stats, /privacy and the log: "90 days" or "forever"."""
        if not self.enabled:
            return texts.gettext("forever")
        return texts.ngettext("{count} day", "{count} days", self.days).format(count=self.days)

    def cutoff(self, now: datetime | None = None) -> datetime:
        return (now or utcnow()) - timedelta(days=self.days)


async def delete_expired(
    store: MongoStore,
    vectors: VectorIndex,
    retention: Retention,
    *,
    now: datetime | None = None,
    database_files: DatabaseFiles | None = None,
) -> int:
    """Delete every message older than the retention period, with its vector, and scrub the
    bundled database's files of them (`database_files`, as forgetting does); returns how
    many messages were deleted (0 when retention is off)."""
    if not retention.enabled:
        return 0
    cutoff = retention.cutoff(now)
    deleted = 0
    while ids := await store.memories.delete_created_before(cutoff, limit=BATCH):
        deleted += len(ids)
        await _delete_vectors(vectors, ids=ids)
    # Stragglers: vectors of messages deleted by an earlier run whose vector delete failed.
    await _delete_vectors(vectors, where={"created_at": {"$lt": cutoff.timestamp()}})
    if deleted:
        log.info("retention: deleted %d message(s) older than %s", deleted, retention.describe())
        if database_files is not None:
            await database_files.scrub()
    return deleted


async def _delete_vectors(
    vectors: VectorIndex, *, ids: list[str] | None = None, where: dict | None = None
) -> None:
    try:
        await vectors.delete("messages", ids=ids, where=where)
    except Exception:
        # Harmless until the next run: message hits are always read through MongoDB.
        log.warning("retention: deleting message vectors failed", exc_info=True)

"""The `sentiment` collection: one running tally per person and room.

Documents: `_id` (a stable id of user and room), user_id, room_id, world_id, count, sum,
last_score, last_label, last_message_id, created_at, updated_at. The mean is sum / count,
computed on read, so an update is a single atomic `$inc` and concurrent workers never lose a
score.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator
from pymongo import ASCENDING, IndexModel
from pymongo.errors import DuplicateKeyError

from bot import Memory, stable_id, utcnow

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

    from bot import Conversations

log = logging.getLogger(__name__)

# The plugin's own collection, `plugin_sentiment_scores` (ctx.collections["scores"]).
COLLECTION = "scores"
# Where the tallies lived before plugins had namespaced collections; moved over once.
LEGACY_COLLECTION = "sentiment"

_INDEXES = [
    # The summary lists a world, optionally one person of it.
    IndexModel([("world_id", ASCENDING), ("user_id", ASCENDING)], name="world_user"),
]


def sentiment_id(user_id: str, room_id: str) -> str:
    return stable_id("sentiment", user_id, room_id)


async def ensure_indexes(scores: AsyncCollection) -> None:
    await scores.create_indexes(_INDEXES)


async def record_score(scores: AsyncCollection, message: Memory, score: float, label: str) -> bool:
    """Add one message's score to its author's tally in its room; False if it was counted
    already (a job re-run after a crash must not count the same message twice)."""
    try:
        await scores.update_one(
            # Matches only if this message is not the last one counted; otherwise the upsert
            # tries to insert a second document with the same _id and fails, counting nothing.
            {
                "_id": sentiment_id(message.user_id, message.room_id),
                "last_message_id": {"$ne": message.id},
            },
            {
                "$inc": {"count": 1, "sum": score},
                "$set": {
                    "last_score": score,
                    "last_label": label,
                    "last_message_id": message.id,
                    "updated_at": utcnow(),
                },
                # Fields set once; the bundled server ignores updates to missing fields in
                # some operators, so everything a document needs exists from its first write.
                "$setOnInsert": {
                    "user_id": message.user_id,
                    "room_id": message.room_id,
                    "world_id": message.world_id,
                    "created_at": utcnow(),
                },
            },
            upsert=True,
        )
    except DuplicateKeyError:
        log.debug("sentiment of message %s was counted already", message.id)
        return False
    return True


class SentimentDocument(BaseModel):
    """A stored tally as read back; tolerant of the bundled server's stand-ins."""

    model_config = ConfigDict(extra="ignore")

    user_id: str
    room_id: str
    world_id: str
    count: int = 0
    sum: float = 0.0
    last_score: float = 0.0
    last_label: str = "neutral"
    updated_at: datetime | None = None

    @field_validator("updated_at", mode="after")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        # nx-27017 stores a `$set` datetime as a naive ISO string; MongoDB stores UTC.
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class SentimentRow:
    """One person's running sentiment in one room, ready to show."""

    user_id: str
    user_name: str
    room_id: str
    room_name: str
    world_id: str
    count: int
    mean: float
    last_score: float
    last_label: str
    updated_at: datetime | None


async def sentiment_summary(
    scores: AsyncCollection,
    conversations: Conversations,
    *,
    world_id: str,
    user_id: str | None = None,
    limit: int = 100,
) -> list[SentimentRow]:
    """Everyone's (or one person's) sentiment in the rooms of one world, by name then room.

    Scoped like everything Mnemo learns: rows from other worlds are never returned."""
    query: dict[str, Any] = {"world_id": world_id}
    if user_id is not None:
        query["user_id"] = user_id
    cursor = scores.find(query).sort("updated_at", -1).limit(max(limit, 0))
    documents = [_read(document) for document in await cursor.to_list()]
    tallies = [d for d in documents if d is not None and d.count > 0]
    people = await conversations.accounts(sorted({t.user_id for t in tallies}))
    room_ids = sorted({t.room_id for t in tallies})
    rooms = dict(
        zip(room_ids, await asyncio.gather(*map(conversations.room, room_ids)), strict=True)
    )
    rows = [
        SentimentRow(
            user_id=t.user_id,
            user_name=people[t.user_id].name if t.user_id in people else "someone",
            room_id=t.room_id,
            room_name=_room_name(rooms.get(t.room_id), t.room_id),
            world_id=t.world_id,
            count=t.count,
            mean=max(-1.0, min(1.0, t.sum / t.count)),
            last_score=t.last_score,
            last_label=t.last_label,
            updated_at=t.updated_at,
        )
        for t in tallies
    ]
    return sorted(rows, key=lambda r: (r.user_name.casefold(), r.room_name.casefold(), r.room_id))


def _read(document: dict[str, Any]) -> SentimentDocument | None:
    try:
        return SentimentDocument.model_validate(document)
    except ValueError:
        # One damaged document must not hide everyone else's rows.
        log.warning("skipping unreadable sentiment document %s", document.get("_id"))
        return None


def _room_name(room: Any, room_id: str) -> str:
    if room is not None and getattr(room, "name", None):
        return str(room.name)
    return room_id[:8]


def format_summary(rows: list[SentimentRow]) -> str:
    """Plain text for the admin commands: one line per person and room."""
    if not rows:
        return "No sentiment recorded here yet."
    lines = [
        f"• {r.user_name} in {r.room_name}: {r.mean:+.2f} over {r.count} "
        f"message{'s' if r.count != 1 else ''} (last {r.last_score:+.2f}, {r.last_label})"
        for r in rows
    ]
    return "Sentiment (mean from -1 to +1):\n" + "\n".join(lines)


__all__ = [
    "COLLECTION",
    "LEGACY_COLLECTION",
    "SentimentDocument",
    "SentimentRow",
    "ensure_indexes",
    "format_summary",
    "record_score",
    "sentiment_id",
    "sentiment_summary",
]

"""The `world_settings` collection: what a world's admins chose for it (`/character`, `/model`,
`/language`).

One document per world, its id the world's id (a UUID string): the character's key, the
SMALL and LARGE model names and the language of the bot's own words, None where the world
keeps the process's setting. `version`
grows with every change, and `updated_ms` is when (integer milliseconds: nx-27017 stores a
`$set` datetime as a string). Nothing about a person is kept here (not who made the change:
that would be data `/forgetme` must reach), so privacy hooks have nothing to do with it; a
backup copies it like every collection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pymongo import IndexModel, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import utcnow
from bot.storage.documents import millis

COLLECTION = "world_settings"


class WorldSettings(BaseModel):
    """A world's choices, as stored."""

    model_config = ConfigDict(populate_by_name=True)

    world_id: str = Field(alias="_id")
    character: str | None = None
    small_model: str | None = None
    large_model: str | None = None
    language: str | None = None
    version: int = 0
    updated_ms: int = 0

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> WorldSettings:
        return cls.model_validate(dict(document))


# The fields `/character`, `/model` and `/language` set (None clears one).
CHOICES = ("character", "small_model", "large_model", "language")


class WorldSettingsStore:
    """Read and change a world's choices; each change is one round trip."""

    # Documents are found by `_id` only: no other index.
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {}

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db[COLLECTION]

    async def get(self, world_id: str) -> WorldSettings | None:
        document = await self._collection.find_one({"_id": world_id})
        return None if document is None else WorldSettings.from_document(document)

    async def change(self, world_id: str, **choices: str | None) -> WorldSettings:
        """Set the given choices (None: back to the process's setting); returns the world's
        settings after the change."""
        unknown = set(choices) - set(CHOICES)
        if unknown:
            raise ValueError(f"not a world choice: {sorted(unknown)}")
        document = await self._collection.find_one_and_update(
            {"_id": world_id},
            {"$set": {**choices, "updated_ms": millis(utcnow())}, "$inc": {"version": 1}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        if document is None:  # an upsert always returns the document; a server bug otherwise
            raise RuntimeError(f"world {world_id}: the settings were not written")
        return WorldSettings.from_document(document)

    async def count(self) -> int:
        return int(await self._collection.count_documents({}))

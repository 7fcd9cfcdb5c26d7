"""The `facts` collection: what Mnemo learned, each fact with its lifetime.

Reads for the prompt, /me and /facts see only current facts (see Fact); the history is read
through `history`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import Fact
from bot.storage.documents import (
    by_ids,
    dump,
    load_all,
    load_one,
)
from bot.storage.window_reads import Read

# The filter for facts that still hold. `$in: [None]`, not `None`: nx-27017 counts
# (`count_documents`, an aggregation) miss documents on a plain None, and both servers match
# a fact stored before lifetimes existed (no field at all) this way.
_CURRENT: dict[str, Any] = {"valid_until": {"$in": [None]}}


def fact_text_key(text: str) -> str:
    """The form two facts share when they say the same thing up to case, spacing and the
    final full stop: the exact-duplicate key stored as `text_key`."""
    key = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    end = len(key)
    while end and (unicodedata.category(key[end - 1]).startswith("P") or key[end - 1].isspace()):
        end -= 1
    return key[:end]


def attribute_key(attribute: str) -> str:
    """The form two attributes share when they name the same slot up to case, accents,
    spacing and punctuation ("Home city", "home-city", "home city:"), stored as
    `attribute_key`."""
    key = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", attribute).casefold())
    key = "".join(c for c in key if not unicodedata.combining(c))
    return " ".join(re.sub(r"[\W_]+", " ", key).split())


class Facts:
    """Facts: inserted, closed when they stop holding, read current or in full."""

    # The indexes its queries need (names fixed: a second start-up asks for the same).
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {
        "facts": [
            IndexModel(
                [("subject_id", ASCENDING), ("world_id", ASCENDING), ("created_at", DESCENDING)],
                name="subject_world_created",
            ),
            IndexModel([("world_id", ASCENDING), ("created_at", DESCENDING)], name="world_created"),
            IndexModel([("indexed_at", ASCENDING)], name="indexed_at"),
            IndexModel(
                [("subject_id", ASCENDING), ("world_id", ASCENDING), ("attribute_key", ASCENDING)],
                name="subject_world_attribute",
            ),
        ]
    }

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db.facts

    # Reads for the prompt, /me and /facts see only current facts (see Fact); the history
    # is read through `history`.
    async def insert(self, fact: Fact) -> None:
        """Store a new fact (a DuplicateKeyError if its id exists: ids are never reused)."""
        document = {**dump(fact), "text_key": fact_text_key(fact.text)}
        document["attribute_key"] = attribute_key(fact.attribute) if fact.attribute else None
        await self._collection.insert_one(document)

    async def mark_indexed(self, fact_id: str, when: datetime) -> None:
        await self._collection.update_one({"_id": fact_id}, {"$set": {"indexed_at": when}})

    async def unindexed(self, limit: int = 500) -> list[Fact]:
        """Facts whose vector write has not been confirmed (indexed_at is None)."""
        if limit <= 0:
            return []
        # Facts are inserted with an explicit indexed_at: None, which both servers match
        # (nx does not match a missing field against None).
        cursor = self._collection.find({"indexed_at": None}).sort("created_at", ASCENDING)
        return load_all(Fact, await cursor.limit(limit).to_list())

    async def get_many(self, ids: list[str]) -> list[Fact]:
        """The facts with these ids that exist, in the order of `ids`."""
        return await by_ids(self._collection, Fact, ids)

    async def find_by_text(self, *, subject_id: str, world_id: str, text: str) -> Fact | None:
        """Exact duplicate check: same subject, same world, same normalised text, current
        (a value that held before and holds again is stored again: "moved back to Seattle")."""
        document = await self._collection.find_one(
            {
                "subject_id": subject_id,
                "world_id": world_id,
                "text_key": fact_text_key(text),
                **_CURRENT,
            }
        )
        return load_one(Fact, document)

    async def in_slot(self, *, subject_id: str, world_id: str, attribute: str) -> list[Fact]:
        """The current facts about a subject whose attribute names the same slot, newest
        first: what a new value of that attribute replaces, or a take-back closes."""
        cursor = self._collection.find(
            {
                "subject_id": subject_id,
                "world_id": world_id,
                "attribute_key": attribute_key(attribute),
                **_CURRENT,
            }
        ).sort("created_at", DESCENDING)
        return load_all(Fact, await cursor.to_list())

    async def about(self, subject_ids: list[str], world_id: str, *, limit: int = 10) -> list[Fact]:
        """Most recent current facts about these subjects in this world, newest first."""
        if not subject_ids or limit <= 0:
            return []
        read = self.about_read(subject_ids, world_id, limit=limit)
        cursor = self._collection.find(dict(read.match)).sort(list((read.sort or {}).items()))
        return load_all(Fact, await cursor.limit(limit).to_list())

    @staticmethod
    def about_read(subject_ids: Sequence[str], world_id: str, *, limit: int) -> Read:
        """`about` as a read to do with a room's window (bot/storage/window_reads.py)."""
        return Read(
            "facts",
            {
                "subject_id": {"$in": list(dict.fromkeys(subject_ids))},
                "world_id": world_id,
                **_CURRENT,
            },
            # Facts learned together share a time: the id orders them the same on every read.
            sort={"created_at": DESCENDING, "_id": DESCENDING},
            limit=limit,
        )

    async def page(
        self,
        world_id: str,
        *,
        subject_id: str | None = None,
        search: str | None = None,
        skip: int = 0,
        limit: int = 20,
    ) -> tuple[list[Fact], int]:
        """A page of a world's current facts (newest first), optionally for one subject and
        containing `search` (case-insensitive substring), with the total count."""
        query: dict[str, Any] = {"world_id": world_id, **_CURRENT}
        if subject_id is not None:
            query["subject_id"] = subject_id
        if search and search.strip():
            query["text"] = {"$regex": re.escape(search.strip()), "$options": "i"}
        total = await self._collection.count_documents(query)
        if limit <= 0 or skip >= total:
            return [], total
        # Facts learned in one reading share their time: the id breaks the tie, so a page
        # lists them in the same order every time and two pages never overlap.
        cursor = self._collection.find(query).sort([("created_at", DESCENDING), ("_id", ASCENDING)])
        cursor = cursor.skip(max(skip, 0)).limit(limit)
        return load_all(Fact, await cursor.to_list()), total

    async def subjects(self, world_id: str) -> list[str]:
        """The ids of everyone a fact was ever learned about in a world."""
        return [
            str(i) for i in await self._collection.distinct("subject_id", {"world_id": world_id})
        ]

    async def history(self, subject_id: str, world_id: str, *, limit: int = 500) -> list[Fact]:
        """Every fact about a subject in a world, current and closed, oldest first."""
        cursor = self._collection.find({"subject_id": subject_id, "world_id": world_id})
        facts = load_all(Fact, await cursor.limit(limit).to_list())
        return sorted(facts, key=lambda fact: (fact.valid_from, fact.created_at))

    async def close(
        self, fact_id: str, *, world_id: str, until: int, superseded_by: str | None
    ) -> bool:
        """End a current fact's lifetime. Only a current fact is closed, so a redelivered or
        re-run extraction never closes one twice (nor moves its end or successor)."""
        result = await self._collection.update_one(
            {"_id": fact_id, "world_id": world_id, **_CURRENT},
            {"$set": {"valid_until": until, "superseded_by": superseded_by}},
        )
        return result.modified_count == 1

    async def from_message(self, message_id: str, *, world_id: str) -> list[Fact]:
        """Every fact of a world (current or closed) resting on this message: its evidence's
        message, or its only source when it kept no evidence."""
        cursor = self._collection.find({"world_id": world_id, "source_message_ids": message_id})
        return [
            fact
            for fact in load_all(Fact, await cursor.to_list())
            if (fact.evidence.message_id if fact.evidence else message_id) == message_id
        ]

    async def closed_by(self, fact_ids: list[str], *, world_id: str) -> list[Fact]:
        """The facts of a world that these facts replaced (their successor is one of them)."""
        if not fact_ids:
            return []
        cursor = self._collection.find({"world_id": world_id, "superseded_by": {"$in": fact_ids}})
        return load_all(Fact, await cursor.to_list())

    async def reopen(self, fact_id: str, *, world_id: str, successor: str) -> bool:
        """Make a fact current again that `successor` had replaced (the successor is being
        withdrawn: its words were taken back); its vector is to be written again."""
        result = await self._collection.update_one(
            {"_id": fact_id, "world_id": world_id, "superseded_by": successor},
            {"$set": {"valid_until": None, "superseded_by": None, "indexed_at": None}},
        )
        return result.modified_count == 1

    async def with_id_prefix(self, world_id: str, prefix: str, *, limit: int = 5) -> list[Fact]:
        """Facts of a world whose id starts with `prefix` (the short ids listings show)."""
        if not re.fullmatch(r"[0-9a-fA-F-]{1,36}", prefix):
            return []
        query = {"world_id": world_id, "_id": {"$regex": f"^{re.escape(prefix.lower())}"}}
        return load_all(Fact, await self._collection.find(query).limit(limit).to_list())

    async def delete(self, fact_id: str, *, world_id: str) -> bool:
        # The world in the filter: an admin of one server cannot delete another's facts by id.
        result = await self._collection.delete_one({"_id": fact_id, "world_id": world_id})
        return result.deleted_count == 1

    async def delete_about(self, *, subject_id: str, world_id: str) -> list[str]:
        """Delete every fact about a subject in a world; returns the deleted ids."""
        query = {"subject_id": subject_id, "world_id": world_id}
        ids = [doc["_id"] async for doc in self._collection.find(query, {"_id": 1})]
        if ids:
            # By id, so a fact learned meanwhile is neither deleted nor missing from the answer.
            await self._collection.delete_many({**query, "_id": {"$in": ids}})
        return ids

    async def count_about(self, subject_id: str) -> int:
        """How many facts (current or closed) are about a person, in every world."""
        return await self._collection.count_documents({"subject_id": subject_id})

    async def mention(self, subject_id: str, text: str) -> bool:
        """Whether a fact about a person (in any world) contains `text`, ignoring case."""
        pattern = {"$regex": re.escape(text), "$options": "i"}
        found = await self._collection.find_one({"subject_id": subject_id, "text": pattern})
        return found is not None

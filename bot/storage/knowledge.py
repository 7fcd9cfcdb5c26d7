"""What Mnemo knows: writes and reads that span MongoDB (truth) and Chroma (vectors).

Consistency rule: MongoDB is written first and is the source of truth. A vector write that
fails leaves the document marked unindexed (`indexed_at is None`) for `reindex_missing()` to
rebuild; every vector hit is hydrated through MongoDB, so a vector whose document is gone
(a failed delete) is never shown and is swept later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.models import Fact, Memory, utcnow
from bot.storage.embeddings import Embedder
from bot.storage.mongo import MongoStore
from bot.storage.vectors import VectorHit, VectorIndex

log = logging.getLogger(__name__)

MESSAGE_WRITE_BATCH = 256


def scope_filter(**conditions: Any) -> dict[str, Any]:
    """A Chroma `where` for all the given equalities (lists become `$in`); None is ignored."""
    clauses = [
        {key: {"$in": list(value)} if isinstance(value, list | tuple | set) else value}
        for key, value in conditions.items()
        if value is not None
    ]
    if not clauses:
        return {}
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


async def nearest_facts(
    vectors: VectorIndex,
    vector: list[float],
    *,
    subject_ids: Sequence[str],
    world_id: str,
    limit: int,
) -> list[VectorHit]:
    """The facts about these people in this world nearest to `vector`, nearest first.

    Ranked exactly (`VectorIndex.nearest_within`): a person has tens of facts, and HNSW is
    slowest with exactly this kind of narrow filter. `mnemo bench vectors` times this call.
    """
    return await vectors.nearest_within(
        "facts",
        vector,
        where=scope_filter(subject_id=list(subject_ids), world_id=world_id),
        limit=limit,
    )


@dataclass(frozen=True)
class FactWrite:
    """The outcome of offering one fact: stored, or a duplicate of an existing one."""

    fact: Fact
    stored: bool
    duplicate_of: str | None = None


class Knowledge:
    def __init__(self, store: MongoStore, vectors: VectorIndex, embedder: Embedder) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        # Message vectors waiting for the next batched write, with who waits for each.
        self._unwritten: dict[str, tuple[list[float], dict[str, Any], asyncio.Future[None]]] = {}
        self._writer: asyncio.Task[None] | None = None

    # messages -----------------------------------------------------------------------------
    async def index_message(self, memory: Memory) -> None:
        """Put a message's vector in Chroma for relevant-past-message retrieval."""
        if not memory.content.text.strip():
            return
        # The exact text, as the recall provider queries with: one cached embedding serves both.
        [vector] = await self.embedder.embed([memory.content.text])
        written = asyncio.get_running_loop().create_future()
        self._unwritten[memory.id] = (vector, _message_metadata(memory), written)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_messages())
        await asyncio.shield(written)

    async def _write_messages(self) -> None:
        """One Chroma upsert for every message vector queued meanwhile: under load, rooms
        share a write instead of queueing one write each behind Chroma's lock."""
        while self._unwritten:
            batch = dict(list(self._unwritten.items())[:MESSAGE_WRITE_BATCH])
            for message_id in batch:
                del self._unwritten[message_id]
            try:
                await self.vectors.upsert(
                    "messages",
                    ids=list(batch),
                    embeddings=[vector for vector, _, _ in batch.values()],
                    metadatas=[metadata for _, metadata, _ in batch.values()],
                )
            except asyncio.CancelledError:
                for _, _, written in (*batch.values(), *self._unwritten.values()):
                    written.cancel()
                self._unwritten.clear()
                raise
            except Exception:
                # Messages are safe in MongoDB; retrieval falls back to keywords for them.
                log.warning("vector write failed for %d messages", len(batch), exc_info=True)
            for _, _, written in batch.values():
                if not written.done():
                    written.set_result(None)

    # facts --------------------------------------------------------------------------------
    async def add_facts(
        self, facts: Sequence[Fact], *, near_duplicate_distance: float
    ) -> list[FactWrite]:
        """Store new facts, skipping exact and near duplicates of the subject's known facts
        (and of each other). One embedding call for the whole batch."""
        if not facts:
            return []
        vectors = await self.embedder.embed([f.text for f in facts])
        results: list[FactWrite] = []
        accepted: list[tuple[Fact, list[float]]] = []
        for fact, vector in zip(facts, vectors, strict=True):
            duplicate = await self._duplicate_of(fact, vector, accepted, near_duplicate_distance)
            if duplicate is not None:
                results.append(FactWrite(fact, stored=False, duplicate_of=duplicate))
                continue
            await self.store.insert_fact(fact)
            accepted.append((fact, vector))
            results.append(FactWrite(fact, stored=True))
        if accepted:
            await self._index_facts(accepted)
        return results

    async def _duplicate_of(
        self,
        fact: Fact,
        vector: list[float],
        accepted: list[tuple[Fact, list[float]]],
        threshold: float,
    ) -> str | None:
        for other, other_vector in accepted:
            if (
                other.subject_id == fact.subject_id
                and _cosine_distance(vector, other_vector) <= threshold
            ):
                return other.id
        same = await self.store.find_fact_by_text(
            subject_id=fact.subject_id, world_id=fact.world_id, text=fact.text
        )
        if same is not None:
            return same.id
        hits = await self._nearest_facts_or_nothing(
            vector, subject_ids=[fact.subject_id], world_id=fact.world_id, limit=1
        )
        if hits and hits[0].distance <= threshold:
            # Only trust the vector if its document still exists.
            existing = await self.store.get_facts([hits[0].id])
            if existing:
                return existing[0].id
        return None

    async def _index_facts(self, pairs: list[tuple[Fact, list[float]]]) -> None:
        try:
            await self.vectors.upsert(
                "facts",
                ids=[f.id for f, _ in pairs],
                embeddings=[v for _, v in pairs],
                metadatas=[_fact_metadata(f) for f, _ in pairs],
            )
        except Exception:
            log.warning("vector write failed for %d facts; will reindex", len(pairs), exc_info=True)
            return
        now = utcnow()
        for fact, _ in pairs:
            await self.store.mark_fact_indexed(fact.id, now)

    async def search_facts(
        self,
        query: str,
        *,
        subject_ids: Sequence[str],
        world_id: str,
        limit: int = 10,
        max_distance: float = 0.8,
    ) -> list[Fact]:
        """Facts about these people most relevant to `query`; recent facts when none is."""
        if not subject_ids:
            return []
        found: list[Fact] = []
        if query.strip():
            [vector] = await self.embedder.embed([query])
            hits = await self._nearest_facts_or_nothing(
                vector, subject_ids=subject_ids, world_id=world_id, limit=limit
            )
            relevant = [hit.id for hit in hits if hit.distance <= max_distance]
            found = await self.store.get_facts(relevant)
        if not found:
            found = await self.store.facts_about(list(subject_ids), world_id, limit=limit)
        return found

    async def _nearest_facts_or_nothing(
        self, vector: list[float], *, subject_ids: Sequence[str], world_id: str, limit: int
    ) -> list[VectorHit]:
        """Vectors are an index, not the truth: while Chroma is down, answer from MongoDB."""
        try:
            return await nearest_facts(
                self.vectors, vector, subject_ids=subject_ids, world_id=world_id, limit=limit
            )
        except Exception:
            log.warning("vector query failed in facts; falling back to MongoDB", exc_info=True)
            return []

    async def delete_fact(self, fact_id: str, *, world_id: str) -> bool:
        deleted = await self.store.delete_fact(fact_id, world_id=world_id)
        if deleted:
            await self._delete_vectors("facts", ids=[fact_id])
        return deleted

    async def forget_person(self, *, user_id: str, world_id: str) -> tuple[int, int]:
        """Delete everything learned about or said by a person in a world, in both stores.
        Returns (facts deleted, messages deleted)."""
        fact_ids = await self.store.delete_facts(subject_id=user_id, world_id=world_id)
        messages = await self.store.delete_memories(user_id=user_id, world_id=world_id)
        if fact_ids:
            await self._delete_vectors("facts", ids=fact_ids)
        await self._delete_vectors(
            "messages", where=scope_filter(user_id=user_id, world_id=world_id)
        )
        return len(fact_ids), messages

    async def _delete_vectors(self, collection: str, **selector: Any) -> None:
        try:
            await self.vectors.delete(collection, **selector)  # type: ignore[arg-type]
        except Exception:
            # Harmless until swept: hits are always hydrated through MongoDB.
            log.warning("vector delete failed in %s", collection, exc_info=True)

    async def reindex_missing(self, *, batch: int = 256) -> int:
        """Rebuild vectors for facts whose vector write never succeeded."""
        total = 0
        while facts := await self.store.unindexed_facts(limit=batch):
            vectors = await self.embedder.embed([f.text for f in facts])
            await self.vectors.upsert(
                "facts",
                ids=[f.id for f in facts],
                embeddings=vectors,
                metadatas=[_fact_metadata(f) for f in facts],
            )
            now = utcnow()
            for fact in facts:
                await self.store.mark_fact_indexed(fact.id, now)
            total += len(facts)
        return total


def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    # Embeddings are unit length, so the dot product is the cosine similarity.
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True))


def _fact_metadata(fact: Fact) -> dict[str, Any]:
    return {
        "subject_id": fact.subject_id,
        "world_id": fact.world_id,
        "room_id": fact.room_id,
        "type": fact.type,
        "created_at": fact.created_at.timestamp(),
    }


def _message_metadata(memory: Memory) -> dict[str, Any]:
    return {
        "user_id": memory.user_id,
        "room_id": memory.room_id,
        "world_id": memory.world_id,
        "created_at": memory.created_at.timestamp(),
    }

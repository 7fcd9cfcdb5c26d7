"""The vectors of people's messages in Chroma `messages`, for relevant-past-message retrieval
(retrieval.py). MongoDB holds the messages; these vectors are an index that can always be
rebuilt from it (reindex.py), so a failed write is logged, not raised."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from bot.domain.records import Memory
from bot.knowledge.embeddings import Embedder
from bot.knowledge.vector_metadata import message_metadata, scope_filter
from bot.knowledge.vectors import VectorIndex

log = logging.getLogger(__name__)

MESSAGE_WRITE_BATCH = 256


class MessageIndex:
    def __init__(self, vectors: VectorIndex, embedder: Embedder) -> None:
        self.vectors = vectors
        self.embedder = embedder
        # Message vectors waiting for the next batched write, with who waits for each.
        self._unwritten: dict[str, tuple[list[float], dict[str, Any], asyncio.Future[None]]] = {}
        self._writer: asyncio.Task[None] | None = None

    async def index_message(self, memory: Memory) -> None:
        """Put a message's vector in Chroma for relevant-past-message retrieval."""
        if not memory.content.text.strip():
            return
        # The exact text, as message retrieval queries with: one cached embedding serves both.
        [vector] = await self.embedder.embed([memory.content.text])
        written = asyncio.get_running_loop().create_future()
        self._unwritten[memory.id] = (vector, message_metadata(memory), written)
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

    async def forget(self, *, message_ids: Sequence[str], user_id: str, world_id: str) -> None:
        """Delete the vectors of these messages, and every message vector of the person in
        the world (also those whose documents went in an earlier attempt). Raises when Chroma
        fails: forgetting must not report success with vectors left."""
        if message_ids:
            await self.vectors.delete("messages", ids=list(message_ids))
        await self.vectors.delete(
            "messages", where=scope_filter(user_id=user_id, world_id=world_id)
        )

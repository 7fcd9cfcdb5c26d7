"""Chroma vectors for facts and messages: same ids as MongoDB, metadata for scoping.

Embeddings are always computed by Mnemo's embedder and passed in; Chroma's default embedding
function is never used (it would download a model and pad every text to 256 tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

CollectionName = Literal["facts", "messages"]


@dataclass(frozen=True)
class VectorHit:
    id: str
    distance: float  # cosine distance: 0 is identical, 2 is opposite
    metadata: dict[str, Any]


class VectorIndex:
    """A thin async wrapper over a Chroma client (PersistentClient or HttpClient).

    Chroma's client is synchronous; calls run in a worker thread so the event loop never blocks.
    """

    @classmethod
    def persistent(cls, path: str) -> VectorIndex:
        raise NotImplementedError

    @classmethod
    def remote(cls, host: str, port: int) -> VectorIndex:
        raise NotImplementedError

    async def upsert(
        self, collection: CollectionName, *, ids: list[str], embeddings: list[list[float]],
        metadatas: list[dict[str, Any]], documents: list[str] | None = None,
    ) -> None:
        raise NotImplementedError

    async def query(
        self, collection: CollectionName, embedding: list[float], *, where: dict[str, Any],
        limit: int,
    ) -> list[VectorHit]:
        """Nearest first. `where` is a Chroma filter, e.g. {"world_id": w} or an $and of them."""
        raise NotImplementedError

    async def delete(
        self, collection: CollectionName, *, ids: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> None:
        raise NotImplementedError

    async def count(self, collection: CollectionName) -> int:
        raise NotImplementedError

    async def existing_ids(self, collection: CollectionName, ids: list[str]) -> set[str]:
        raise NotImplementedError

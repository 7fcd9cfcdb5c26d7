"""Chroma vectors for facts and messages: same ids as MongoDB, metadata for scoping.

Embeddings are always computed by Mnemo's embedder and passed in; Chroma's default embedding
function is never used (it would download a model and pad every text to 256 tokens).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

logger = logging.getLogger(__name__)

CollectionName = Literal["facts", "messages"]
MetadataValue = str | int | float | bool
_T = TypeVar("_T")


class VectorIndexError(Exception):
    """Chroma cannot be reached or opened; the message is one line meant for the operator."""


@dataclass(frozen=True)
class VectorHit:
    id: str
    distance: float  # cosine distance: 0 is identical, 2 is opposite
    metadata: dict[str, Any]


def clean_metadata(metadata: Mapping[str, Any]) -> dict[str, MetadataValue] | None:
    """Drop None values (Chroma has no null); None when nothing is left, because Chroma rejects
    an empty dict but accepts a missing one. Other non-scalar values are a caller's bug."""
    cleaned: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if value is None:
            continue
        if not isinstance(value, str | int | float | bool):
            raise TypeError(
                f"metadata {key!r} must be str, int, float or bool, not {type(value).__name__}"
            )
        cleaned[key] = value
    return cleaned or None


class VectorIndex:
    """A thin async wrapper over a Chroma client (PersistentClient or HttpClient).

    Chroma's client is synchronous; calls run in a worker thread so the event loop never blocks.
    The client is built on first use (an HttpClient contacts its server when built), and each
    collection is fetched or created once, with cosine distance and no embedding function.
    """

    def __init__(self, connect: Callable[[], ClientAPI], *, describe: str = "Chroma") -> None:
        self._connect = connect
        self._describe = describe  # where the data lives, for error messages
        self._client: ClientAPI | None = None
        self._collections: dict[str, Collection] = {}
        self._lock = threading.Lock()

    @classmethod
    def persistent(cls, path: str | Path) -> VectorIndex:
        def connect() -> ClientAPI:
            import chromadb
            from chromadb.config import Settings

            return chromadb.PersistentClient(
                path=str(path), settings=Settings(anonymized_telemetry=False)
            )

        return cls(connect, describe=f"the Chroma folder {path}")

    @classmethod
    def remote(
        cls, host: str, port: int, *, ssl: bool = False, headers: dict[str, str] | None = None
    ) -> VectorIndex:
        def connect() -> ClientAPI:
            import chromadb
            from chromadb.config import Settings

            return chromadb.HttpClient(
                host=host,
                port=port,
                ssl=ssl,
                headers=headers,
                settings=Settings(anonymized_telemetry=False),
            )

        scheme = "https" if ssl else "http"
        return cls(connect, describe=f"the Chroma server {scheme}://{host}:{port}")

    async def upsert(
        self,
        collection: CollectionName,
        *,
        ids: list[str],
        embeddings: list[list[float]],
        metadatas: list[dict[str, Any]],
        documents: list[str] | None = None,
    ) -> None:
        if len(embeddings) != len(ids) or len(metadatas) != len(ids):
            raise ValueError(
                f"upsert needs one embedding and one metadata per id: {len(ids)} ids, "
                f"{len(embeddings)} embeddings, {len(metadatas)} metadatas"
            )
        if documents is not None and len(documents) != len(ids):
            raise ValueError(f"upsert got {len(documents)} documents for {len(ids)} ids")
        if not ids:
            return
        cleaned = [clean_metadata(metadata) for metadata in metadatas]

        def run(target: Collection) -> None:
            target.upsert(
                ids=ids,
                embeddings=embeddings,  # type: ignore[arg-type]
                metadatas=cleaned,  # type: ignore[arg-type]
                documents=documents,
            )

        await self._call(collection, run)

    async def query(
        self,
        collection: CollectionName,
        embedding: list[float],
        *,
        where: dict[str, Any],
        limit: int,
    ) -> list[VectorHit]:
        """Nearest first. `where` is a Chroma filter, e.g. {"world_id": w} or an $and of them;
        an empty dict means no filter. Fewer hits than `limit` (or none) is not an error."""
        if limit < 1:
            return []

        def run(target: Collection) -> list[VectorHit]:
            result = target.query(
                query_embeddings=[embedding],
                n_results=limit,
                where=where or None,
                include=["distances", "metadatas"],  # type: ignore[list-item]
            )
            ids = result["ids"][0]
            distances = (result["distances"] or [[]])[0]
            metadatas = (result["metadatas"] or [[]])[0]
            hits = [
                VectorHit(id=i, distance=float(d), metadata=dict(m or {}))
                for i, d, m in zip(ids, distances, metadatas, strict=True)
            ]
            # Chroma returns nearest first already; sorting makes it a guarantee, not a habit.
            return sorted(hits, key=lambda hit: hit.distance)

        return await self._call(collection, run)

    async def delete(
        self,
        collection: CollectionName,
        *,
        ids: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> None:
        """Delete by ids, by a `where` filter, or by both (entries matching both)."""
        if ids is None and not where:
            # Refuse rather than guess: "no filter" must never mean "delete everything".
            raise ValueError("delete needs ids or a where filter")
        if ids is not None and not ids:
            return

        def run(target: Collection) -> None:
            target.delete(ids=ids, where=where or None)

        await self._call(collection, run)

    async def count(self, collection: CollectionName) -> int:
        return await self._call(collection, lambda target: target.count())

    async def existing_ids(self, collection: CollectionName, ids: list[str]) -> set[str]:
        if not ids:
            return set()

        def run(target: Collection) -> set[str]:
            return set(target.get(ids=ids, include=[])["ids"])

        return await self._call(collection, run)

    async def close(self) -> None:
        """Release the client (a PersistentClient holds SQLite files open). Reusable after."""
        await asyncio.to_thread(self._close_sync)

    # -----------------------------------------------------------------------------------------

    async def _call(self, collection: CollectionName, run: Callable[[Collection], _T]) -> _T:
        def work() -> _T:
            return run(self._collection(collection))

        return await asyncio.to_thread(work)

    def _collection(self, name: CollectionName) -> Collection:
        with self._lock:
            found = self._collections.get(name)
            if found is None:
                found = self._open_collection(name)
                self._collections[name] = found
            return found

    def _open_collection(self, name: CollectionName) -> Collection:
        if self._client is None:
            self._client = self._open_client()
        # embedding_function=None: the default would be Chroma's ONNX model, which downloads
        # itself on first use; we always pass embeddings, so none is ever needed.
        return self._client.get_or_create_collection(
            name=name,
            configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )

    def _open_client(self) -> ClientAPI:
        try:
            return self._connect()
        except Exception as error:  # chromadb reports a dead server as ValueError, others vary
            reason = (str(error).splitlines() or [type(error).__name__])[0]
            raise VectorIndexError(f"cannot open {self._describe}: {reason}") from error

    def _close_sync(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            self._collections.clear()
        if client is not None:
            close = getattr(client, "close", None)
            if callable(close):
                close()

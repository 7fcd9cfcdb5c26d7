"""Chroma vectors for facts and messages: same ids as MongoDB, metadata for scoping.

Embeddings are always computed by Mnemo's embedder and passed in; Chroma's default embedding
function is never used (it would download a model and pad every text to 256 tokens).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from bot.cancelling import BlockingCalls, Stuck

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import PyEmbeddings

logger = logging.getLogger(__name__)

CollectionName = Literal["facts", "messages"]
MetadataValue = str | int | float | bool
_T = TypeVar("_T")

# Above this many vectors matching a filter, `nearest_within` leaves the ranking to HNSW.
# Measured at 100,000 facts (embedded Chroma 1.5): fetching and ranking the matches costs
# 13 ms for 10, 39 ms for 500, 60 ms for 1,000, 99 ms for 2,000 and 236 ms for 5,000, while a
# filtered HNSW search costs 70-115 ms whatever the filter's size; the two meet near 1,000.
# People have tens of facts, rarely more, so the exact path is the usual one.
DEFAULT_MAX_CANDIDATES = 1000


# Seconds one Chroma call may take before it is given up on (the audit saw calls stay blocked
# inside chromadb's compiled code for minutes after a full disk had room again).
CALL_DEADLINE = 15.0
# Opening the client reads a persistent folder's index files (large ones take a while): the
# call that opens it gets at least this long.
OPEN_DEADLINE = 120.0


class VectorIndexError(Exception):
    """Chroma cannot be reached or opened; the message is one line meant for the operator."""


class VectorIndexStuck(VectorIndexError):
    """A Chroma call did not return within its deadline (or earlier ones are still stuck)."""


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

    Chroma's client is synchronous; calls run in threads of the index's own, each with a
    deadline (bot/cancelling.py's `BlockingCalls`), so the event loop never blocks and a stuck
    call holds up neither the loop, nor a room, nor the process's exit: it raises
    `VectorIndexStuck`, and `stuck` says so (for /healthz). Chroma is never the truth (MongoDB
    is): a vector write given up on is one the start-up healing writes again.
    The client is built on first use (an HttpClient contacts its server when built), and each
    collection is fetched or created once, with cosine distance and no embedding function.
    """

    def __init__(
        self,
        connect: Callable[[], ClientAPI],
        *,
        describe: str = "Chroma",
        deadline: float = CALL_DEADLINE,
    ) -> None:
        self._connect = connect
        self._describe = describe  # where the data lives, for error messages
        self._calls = BlockingCalls("chroma", deadline=deadline)
        self._client: ClientAPI | None = None
        self._collections: dict[str, Collection] = {}
        self._lock = threading.Lock()

    @classmethod
    def persistent(cls, path: str | Path, *, deadline: float = CALL_DEADLINE) -> VectorIndex:
        """Chroma in a local folder. A folder Chroma cannot open (a corrupted file) is moved
        aside, never deleted, and a fresh one is started: MongoDB is the truth, and start-up
        healing (bot.knowledge.reindex) rebuilds the vectors from it."""
        folder = Path(path)

        def connect() -> ClientAPI:
            try:
                return _open_persistent(folder)
            except Exception as error:
                if not folder.exists():
                    raise
                _forget_failed_system(folder)
                aside = move_aside(folder)
                reason = (str(error).splitlines() or [type(error).__name__])[0]
                logger.error(
                    "the Chroma folder %s cannot be opened (%s): moved it to %s and starting "
                    "a fresh one; vectors are rebuilt from MongoDB in the background",
                    folder,
                    reason,
                    aside,
                )
                return _open_persistent(folder)

        return cls(connect, describe=f"the Chroma folder {path}", deadline=deadline)

    @classmethod
    def remote(
        cls,
        host: str,
        port: int,
        *,
        ssl: bool = False,
        headers: dict[str, str] | None = None,
        deadline: float = CALL_DEADLINE,
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
        return cls(
            connect, describe=f"the Chroma server {scheme}://{host}:{port}", deadline=deadline
        )

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
        """Nearest first, by Chroma's HNSW index (approximate). `where` is a Chroma filter,
        e.g. {"world_id": w} or an $and of them; an empty dict means no filter. Fewer hits
        than `limit` (or none) is not an error."""
        if limit < 1:
            return []
        return await self._call(
            collection, lambda target: _hnsw_query(target, embedding, where=where, limit=limit)
        )

    async def nearest_within(
        self,
        collection: CollectionName,
        embedding: list[float],
        *,
        where: dict[str, Any],
        limit: int,
        max_candidates: int = DEFAULT_MAX_CANDIDATES,
    ) -> list[VectorHit]:
        """Like `query` (same hits, same cosine distances, nearest first), but exact: every
        vector matching `where` is fetched and ranked here, when there are at most
        `max_candidates` of them; `where` as in `query`.

        For narrow filters (one person's facts in one world). HNSW walks its graph and skips
        what the filter excludes, so the more selective the filter, the more of the graph it
        visits before finding `limit` allowed vectors: 100+ ms at 100,000 facts for a
        ten-fact person, against 3 ms unfiltered. Fetching the person's vectors instead costs
        one filtered read, which embedded Chroma answers by scanning the metadata (about 9-13
        ms at 100,000 facts, growing with the collection; chroma-core/chroma#4089), and
        ranking them is negligible. A filter matching more than `max_candidates` vectors goes
        to HNSW instead: the fetch grows with the matches, while HNSW gets faster as the
        filter widens (see DEFAULT_MAX_CANDIDATES).
        """
        if limit < 1:
            return []
        if max_candidates < 0:
            raise ValueError(f"max_candidates must be at least 0, not {max_candidates}")

        def run(target: Collection) -> list[VectorHit]:
            # One read, vectors included, with one more than the cap: finding that one is how
            # we know the cap was passed. Asking for ids first would cost every search a
            # second read; only the rare person past the cap pays for a wasted fetch.
            found = target.get(
                where=where or None,
                limit=max_candidates + 1,
                include=["embeddings", "metadatas"],
            )
            ids = found["ids"]
            if len(ids) > max_candidates:
                logger.debug(
                    "more than %d vectors match %s in %s; using the HNSW index",
                    max_candidates,
                    where,
                    collection,
                )
                return _hnsw_query(target, embedding, where=where, limit=limit)
            if not ids:
                return []
            metadatas: Sequence[Mapping[str, Any] | None] = found["metadatas"] or [None] * len(ids)
            distances = cosine_distances(embedding, found["embeddings"])  # type: ignore[arg-type]
            # Stable, so ties keep Chroma's order and the result is the same every time.
            order = np.argsort(distances, kind="stable")[:limit]
            return [
                VectorHit(
                    id=ids[i], distance=float(distances[i]), metadata=dict(metadatas[i] or {})
                )
                for i in order
            ]

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

    @property
    def stuck(self) -> float:
        """Seconds a Chroma call has been stuck past its deadline (0: none is)."""
        return self._calls.stuck_for

    async def close(self) -> None:
        """Release the client (a PersistentClient holds SQLite files open). Reusable after.
        A client held by a stuck call is left as it is: the process can still end."""
        try:
            await self._calls.run(self._close_sync)
        except Stuck:
            logger.error("closing %s: a call is stuck; leaving it", self._describe)

    # -----------------------------------------------------------------------------------------

    async def _call(self, collection: CollectionName, run: Callable[[Collection], _T]) -> _T:
        def work() -> _T:
            return run(self._collection(collection))

        opening = self._client is None or collection not in self._collections
        deadline = max(self._calls.deadline, OPEN_DEADLINE) if opening else None
        try:
            return await self._calls.run(work, deadline=deadline)
        except Stuck as stuck:
            raise VectorIndexStuck(f"{self._describe}: {stuck}") from None

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


def _open_persistent(folder: Path) -> ClientAPI:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )
    # Touching the collections reads the folder's files: a damaged one fails here, not later.
    for name in ("facts", "messages"):
        client.get_or_create_collection(
            name=name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
    return client


def _forget_failed_system(folder: Path) -> None:
    """Chroma caches one System per folder for the whole process, a failed one included, so
    the fresh folder would be opened through the broken System; drop it from the cache."""
    from chromadb.api.shared_system_client import SharedSystemClient

    for key in {str(folder), str(folder.resolve())}:
        system = SharedSystemClient._identifier_to_system.pop(key, None)
        SharedSystemClient._identifier_to_refcount.pop(key, None)
        if system is not None:
            with contextlib.suppress(Exception):  # it is broken already; stopping is courtesy
                system.stop()


def move_aside(folder: Path) -> Path:
    """Rename `folder` to `<name>.broken-<UTC time>` beside it; returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = folder.with_name(f"{folder.name}.broken-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = folder.with_name(f"{folder.name}.broken-{stamp}-{counter}")
    folder.rename(target)
    return target


def cosine_distances(
    embedding: Sequence[float], candidates: np.ndarray | Sequence[Sequence[float]]
) -> np.ndarray:
    """1 - cosine similarity of `embedding` to each row of `candidates`: Chroma's "cosine"
    space, which normalises vectors itself, so unnormalised input gets the same distances."""
    matrix = np.asarray(candidates, dtype=np.float32).reshape(-1, len(embedding))
    query = np.asarray(embedding, dtype=np.float32)
    # A zero vector has no direction: similarity 0, distance 1, as Chroma answers for one.
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
    similarity = (matrix @ query) / np.where(norms == 0.0, 1.0, norms)
    return 1.0 - similarity


def _hnsw_query(
    target: Collection, embedding: list[float], *, where: dict[str, Any], limit: int
) -> list[VectorHit]:
    queries: PyEmbeddings = [embedding]
    result = target.query(
        query_embeddings=queries,
        n_results=limit,
        where=where or None,
        include=["distances", "metadatas"],
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

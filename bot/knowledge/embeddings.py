"""Embedders: the interface, the OpenAI-compatible one and the cache every embedder sits behind.

The local all-MiniLM-L6-v2 embedder is `bot.knowledge.onnx_embedder`; `make_embedder(settings...)`
in `bot.knowledge.embedder_factory` picks one from the settings and wraps it in the cache.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from cachetools import LRUCache

if TYPE_CHECKING:
    import openai

    from bot.llm.accounting import UsageLedger

logger = logging.getLogger(__name__)

# Published output sizes, so `dimensions` is right before the first call.
_OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class EmbedderError(Exception):
    """The embedder cannot be set up; the message is one line meant for the operator."""


class Embedder(Protocol):
    """Read-only `name` and `dimensions`, so plain attributes and properties both satisfy it."""

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order. Never blocks the event loop."""
        ...


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible embeddings


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/embeddings` endpoint, `batch_size` texts a request.

    `dimensions` is the published size for known models, the requested size when given, and
    otherwise learnt from the first response (0 until then).
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        ledger: UsageLedger | None = None,
        *,
        batch_size: int = 256,
        dimensions: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.name = model
        self.dimensions = dimensions or _OPENAI_DIMENSIONS.get(model, 0)
        self._client = client
        self._ledger = ledger
        self._batch_size = batch_size
        # Only ask for a size when the caller chose one: older models reject the parameter.
        self._requested_dimensions = dimensions

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(await self._embed_batch(texts[start : start + self._batch_size]))
        if vectors and not self.dimensions:
            self.dimensions = len(vectors[0])
        if self._ledger is not None:
            self._ledger.record_embedding(len(texts))
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        # The API rejects empty strings; a lone space embeds as "nothing" just as well.
        inputs = [text if text.strip() else " " for text in batch]
        extra: dict[str, Any] = {}
        if self._requested_dimensions is not None:
            extra["dimensions"] = self._requested_dimensions
        response = await self._client.embeddings.create(
            model=self.name, input=inputs, encoding_format="float", **extra
        )
        if len(response.data) != len(batch):
            raise EmbedderError(
                f"{self.name}: asked for {len(batch)} embeddings, got {len(response.data)}"
            )
        # The API documents `index`; sorting by it keeps the order even if a server shuffles.
        ordered = sorted(response.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]


# ---------------------------------------------------------------------------------------------
# Cache


class CachedEmbedder:
    """An LRU cache by exact text in front of another embedder.

    A message is embedded when stored and again when the state is recomposed; the second time
    costs nothing. Misses (deduplicated) go to `inner` in a single call.
    """

    def __init__(self, inner: Embedder, max_entries: int = 4096, max_batch: int = 64) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.inner = inner
        self.max_entries = max_entries
        self.max_batch = max_batch
        self._queued: dict[str, asyncio.Future[tuple[float, ...]]] = {}
        self._batcher: asyncio.Task[None] | None = None
        # Tuples, so a caller mutating a returned list cannot corrupt the cache.
        self._entries: LRUCache[str, tuple[float, ...]] = LRUCache(maxsize=max_entries)
        self._in_flight: dict[str, asyncio.Future[tuple[float, ...]]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed(self, texts: list[str]) -> list[list[float]]:
        found: dict[str, tuple[float, ...]] = {}
        waiting: dict[str, asyncio.Future[tuple[float, ...]]] = {}
        for text in texts:
            vector = self._entries.get(text)  # a hit makes it the most recently used
            if vector is not None:
                found[text] = vector
            elif text in self._in_flight:
                # Another caller is embedding this text right now (the providers run
                # concurrently and query with the same message): share its result.
                waiting[text] = self._in_flight[text]
        missing = list(dict.fromkeys(t for t in texts if t not in found and t not in waiting))
        self.hits += sum(1 for text in texts if text in found or text in waiting)
        self.misses += len(missing)
        if missing:
            await self._embed_missing(missing, found)
        for text, future in waiting.items():
            found[text] = await asyncio.shield(future)
        return [list(found[text]) for text in texts]

    async def _embed_missing(self, missing: list[str], found: dict[str, tuple[float, ...]]) -> None:
        """Queue the misses for the next model call and wait for their vectors.

        While a call runs, new misses wait and then go together in one batch (dynamic
        batching): under load, a thousand messages cost a few dozen batched calls instead of
        a thousand single-text ones, and a quiet bot still embeds each message at once.
        """
        loop = asyncio.get_running_loop()
        futures = {text: loop.create_future() for text in missing}
        self._in_flight.update(futures)
        self._queued.update(futures)
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._run_batches())
        for text, future in futures.items():
            found[text] = await asyncio.shield(future)

    async def _run_batches(self) -> None:
        while self._queued:
            batch = dict(list(self._queued.items())[: self.max_batch])
            for text in batch:
                del self._queued[text]
            try:
                fresh = await self.inner.embed(list(batch))
            except asyncio.CancelledError:
                # Shutting down: release every waiter rather than leave it hanging.
                for future in (*batch.values(), *self._queued.values()):
                    future.cancel()
                self._queued.clear()
                self._in_flight.clear()
                raise
            except Exception as error:
                for future in batch.values():
                    if not future.done():
                        future.set_exception(error)
                continue
            finally:
                for text in batch:
                    self._in_flight.pop(text, None)
            for (text, future), vector in zip(batch.items(), fresh, strict=True):
                self._entries[text] = tuple(vector)
                if not future.done():
                    future.set_result(tuple(vector))

    def clear(self) -> None:
        self._entries.clear()

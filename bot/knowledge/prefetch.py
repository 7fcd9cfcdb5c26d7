"""Work the runtime starts and does not wait for: embedding an incoming message ahead of need,
and start-up recovery's late give-up. Each task is kept referenced until it is done (asyncio
holds only weak references to tasks)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from bot.domain.records import Memory
from bot.knowledge.embeddings import Embedder

log = logging.getLogger(__name__)


class HasEmbedder(Protocol):
    @property
    def embedder(self) -> Embedder: ...


class Background:
    def __init__(self, knowledge: HasEmbedder) -> None:
        self._knowledge = knowledge  # its embedder is looked up at each use
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def prefetch_embedding(self, memory: Memory) -> None:
        """Start embedding the message now, in the embedder's thread, so it overlaps the
        database round trips; the providers and the indexing then share the cached result."""
        if not memory.content.text.strip():
            return
        task = asyncio.ensure_future(self._knowledge.embedder.embed([memory.content.text]))
        self._tasks.add(task)
        task.add_done_callback(self._prefetch_done)

    def _prefetch_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Whoever needs the vector embeds again and handles the error where it matters.
            log.debug("embedding prefetch failed: %s", task.exception())

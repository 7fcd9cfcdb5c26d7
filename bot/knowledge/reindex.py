"""Vectors heal themselves: MongoDB is the truth, Chroma an index rebuilt from it.

`find_missing()` compares what MongoDB says should have a vector with what Chroma holds: the
counts per collection first (cheap), then, only when they disagree (or for `everything`), the
ids page by page. `rebuild()` embeds and writes what is missing in batches, reporting progress.
At start-up `heal_in_background()` runs both without holding anything up; `mnemo reindex`
runs them in the foreground with a progress bar.

Which documents have vectors: every current fact, and every message from a person with text
(the agent's own replies are never indexed; see `EvaluationRunner.run_job`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

from bot.domain.records import Fact, Memory, utcnow
from bot.knowledge.embeddings import Embedder
from bot.knowledge.vector_metadata import fact_metadata, message_metadata
from bot.knowledge.vectors import CollectionName, VectorIndex
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

PAGE = 500
# Only current facts have vectors (a closed fact's is deleted; its history is read from MongoDB).
# `$in: [None]`, as bot.storage.mongo's own filter: nx-27017's counts miss a plain None.
CURRENT_FACTS = {"valid_until": {"$in": [None]}}
BATCH = 128
# (collection, rebuilt so far, to rebuild in all)
Progress = Callable[[CollectionName, int, int], None]


@dataclass
class Missing:
    facts: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.facts) + len(self.messages)


async def find_missing(
    store: MongoStore, vectors: VectorIndex, *, agent_id: str, everything: bool = False
) -> Missing:
    """Ids of the facts and messages whose vector Chroma lacks (all of them if `everything`)."""
    missing = Missing()
    facts_expected = await store.db.facts.count_documents(CURRENT_FACTS)
    if everything or await vectors.count("facts") < facts_expected:
        missing.facts = await _absent(vectors, "facts", _fact_ids(store), everything)
    else:  # counts agree; facts whose vector write failed are marked in MongoDB
        missing.facts = [fact.id for fact in await store.facts.unindexed(limit=10_000)]
    said_by_agent = await store.db.memories.count_documents({"user_id": agent_id})
    messages_expected = await store.db.memories.count_documents({}) - said_by_agent
    if everything or await vectors.count("messages") < messages_expected:
        ids = _message_ids(store, agent_id)
        missing.messages = await _absent(vectors, "messages", ids, everything)
    return missing


async def rebuild(
    store: MongoStore,
    vectors: VectorIndex,
    embedder: Embedder,
    missing: Missing,
    *,
    progress: Progress | None = None,
    before: datetime | None = None,
) -> Missing:
    """Embed and write the missing vectors; returns what was rebuilt (gone ids are skipped,
    and messages from `before` on: taken in since, their own evaluation indexes them)."""
    done = Missing()
    for start in range(0, len(missing.facts), BATCH):
        facts = await store.facts.get_many(missing.facts[start : start + BATCH])
        facts = [fact for fact in facts if fact.valid_until is None]
        await _write_facts(store, vectors, embedder, facts)
        done.facts += [fact.id for fact in facts]
        if progress:
            progress("facts", min(start + BATCH, len(missing.facts)), len(missing.facts))
    for start in range(0, len(missing.messages), BATCH):
        messages = await store.memories.get_many(missing.messages[start : start + BATCH])
        messages = [
            m
            for m in messages
            if m.content.text.strip() and (before is None or m.created_at < before)
        ]
        await _write_messages(vectors, embedder, messages)
        done.messages += [m.id for m in messages]
        if progress:
            progress("messages", min(start + BATCH, len(missing.messages)), len(missing.messages))
    return done


async def heal(
    store: MongoStore,
    vectors: VectorIndex,
    embedder: Embedder,
    *,
    agent_id: str,
    since: datetime | None = None,
) -> Missing:
    """Find and rebuild missing vectors, with progress in the log (start-up healing).
    Messages from `since` on (taken in after start-up) are left to their evaluation, which
    indexes them: writing them here too raced the replies' queries, and embedded Chroma can
    fail a query that meets the first write to its collection."""
    started = time.monotonic()
    missing = await find_missing(store, vectors, agent_id=agent_id)
    if not missing:
        log.debug("vectors: Chroma holds every fact and message MongoDB has")
        return missing
    # INFO, not a warning: messages still waiting for their evaluation have no vector yet.
    log.info(
        "vectors: %d facts and %d messages are missing from Chroma; rebuilding them",
        len(missing.facts),
        len(missing.messages),
    )
    last_logged = [time.monotonic()]

    def report(collection: CollectionName, done: int, total: int) -> None:
        if done == total or time.monotonic() - last_logged[0] >= 5:
            last_logged[0] = time.monotonic()
            log.info("vectors: %s %d/%d rebuilt", collection, done, total)

    done = await rebuild(store, vectors, embedder, missing, progress=report, before=since)
    log.info(
        "vectors: rebuilt %d facts and %d messages in %.1fs",
        len(done.facts),
        len(done.messages),
        time.monotonic() - started,
    )
    return done


def heal_in_background(
    store: MongoStore, vectors: VectorIndex, embedder: Embedder, *, agent_id: str
) -> asyncio.Task[Missing | None]:
    """Start healing without holding start-up; a failure is logged, never raised."""
    since = utcnow()  # before any message is taken in

    async def run() -> Missing | None:
        try:
            return await heal(store, vectors, embedder, agent_id=agent_id, since=since)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("vectors: healing failed; `mnemo reindex` retries it")
            return None

    return asyncio.create_task(run(), name="vector-healing")


# ---------------------------------------------------------------------------------------------
async def _fact_ids(store: MongoStore) -> AsyncIterator[str]:
    async for document in store.db.facts.find(CURRENT_FACTS, {"_id": 1}):
        yield str(document["_id"])


async def _message_ids(store: MongoStore, agent_id: str) -> AsyncIterator[str]:
    # Filtered here, not on the server: nx-27017 projects and matches nested fields unreliably.
    query = {"user_id": {"$ne": agent_id}}
    async for document in store.db.memories.find(query, {"_id": 1, "content": 1}):
        if str((document.get("content") or {}).get("text") or "").strip():
            yield str(document["_id"])


async def _absent(
    vectors: VectorIndex, collection: CollectionName, ids: AsyncIterator[str], everything: bool
) -> list[str]:
    absent: list[str] = []
    page: list[str] = []

    async def check() -> None:
        present = set() if everything else await vectors.existing_ids(collection, page)
        absent.extend(i for i in page if i not in present)
        page.clear()

    async for identifier in ids:
        page.append(identifier)
        if len(page) >= PAGE:
            await check()
    if page:
        await check()
    return absent


async def _write_facts(
    store: MongoStore, vectors: VectorIndex, embedder: Embedder, facts: list[Fact]
) -> None:
    if not facts:
        return
    embeddings = await embedder.embed([fact.text for fact in facts])
    await vectors.upsert(
        "facts",
        ids=[fact.id for fact in facts],
        embeddings=embeddings,
        metadatas=[fact_metadata(fact) for fact in facts],
    )
    now = utcnow()
    for fact in facts:
        await store.facts.mark_indexed(fact.id, now)


async def _write_messages(vectors: VectorIndex, embedder: Embedder, messages: list[Memory]) -> None:
    if not messages:
        return
    embeddings = await embedder.embed([m.content.text for m in messages])
    await vectors.upsert(
        "messages",
        ids=[m.id for m in messages],
        embeddings=embeddings,
        metadatas=[message_metadata(m) for m in messages],
    )


async def reindex(
    store: MongoStore,
    vectors: VectorIndex,
    embedder: Embedder,
    *,
    agent_id: str,
    everything: bool,
    stream: TextIO,
) -> Missing:
    """`mnemo reindex [--all]`: rebuild what is missing (or every vector) with progress bars."""
    from tqdm import tqdm

    missing = await find_missing(store, vectors, agent_id=agent_id, everything=everything)
    print(f"{len(missing.facts)} facts and {len(missing.messages)} messages to index", file=stream)
    bars: dict[CollectionName, tqdm] = {}

    def progress(collection: CollectionName, done: int, total: int) -> None:
        bar = bars.get(collection)
        if bar is None:
            bar = bars[collection] = tqdm(total=total, desc=collection, unit="doc", file=stream)
        bar.update(done - bar.n)

    try:
        return await rebuild(store, vectors, embedder, missing, progress=progress)
    finally:
        for bar in bars.values():
            bar.close()

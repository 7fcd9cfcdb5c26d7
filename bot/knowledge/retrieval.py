"""Relevant past messages: vector similarity and BM25 keywords, fused by reciprocal rank.

Two rankers look at the same scope (one room, or every room of one world):

- vectors: the query's embedding against the Chroma `messages` collection, filtered by the
  scope's metadata (vectors are written by `Knowledge.index_message` from the message text);
- keywords: BM25 (the `bm25s` library) over the scope's messages as MongoDB holds them,
  each indexed with its speaker's name, its date and its attachments' titles.

Both rankers let a message borrow from its neighbours in the conversation: the answer to
"what did you paint?" is the turn after the one that matches the question's words. A
message's keyword document holds its own words twice and those of the `keyword_context`
messages on each side once; its vector similarity gains `vector_context` times its direct
neighbours' similarities. The two rankings are then fused with weighted reciprocal-rank
fusion (Cormack et al., 2009): score(m) = sum over rankers of weight / (k + rank(m)).
Every default was chosen by measuring on LoCoMo (`benchmarks.recall`, table in its docstring).

The keyword index is cached per scope and rebuilt lazily when the scope's newest message
changed (tokens are cached per message, so a rebuild only tokenises what is new). MongoDB is
the source of truth: every result is hydrated from it, so a deleted message (whose vector may
linger until swept) is never returned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from cachetools import LRUCache

from bot.domain.records import Memory
from bot.knowledge.embeddings import Embedder
from bot.knowledge.ranking import (
    KeywordField,
    Scope,
    ScopeIndex,
    ScopeMessages,
    build_bm25,
    keyword_document,
    keyword_ranking,
    ranks,
    reciprocal_rank_fusion,
    tokenize,
    vector_ranking,
)
from bot.knowledge.vectors import VectorHit, VectorIndex
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)


class Indexes(Protocol):
    """The stores a retriever reads: MongoDB, the vectors and the embedder."""

    @property
    def store(self) -> MongoStore: ...
    @property
    def vectors(self) -> VectorIndex: ...
    @property
    def embedder(self) -> Embedder: ...


@dataclass(frozen=True)
class RetrieverOptions:
    """Tuning knobs; the defaults are the best measured on LoCoMo (see `benchmarks.recall`)."""

    # Reciprocal-rank fusion. A small k lets a ranker's first places count for more; the
    # keyword ranker is trusted more because it sees speakers, dates and captions.
    rrf_k: int = 20
    vector_weight: float = 0.5
    keyword_weight: float = 1.0
    # Places each ranker contributes to the fusion.
    depth: int = 50
    # Nearest vectors fetched; their neighbours' similarities come from the same list.
    vector_depth: int = 100
    # Vector hits farther than this (cosine distance) are not candidates; None keeps all.
    # 0.65 suits all-MiniLM-L6-v2 (unrelated chat lines sit at 0.75-1.0, a message about the
    # same thing at 0.3-0.6) and costs LoCoMo nothing measurable; other embedding models
    # spread distances differently.
    max_distance: float | None = 0.65
    # Share of each direct neighbour's similarity a message's vector score gains. At 1.0
    # LoCoMo gains 0.01 more, but a message between two close matches would then outrank a
    # direct match; at 0.5 a message's own similarity still leads.
    vector_context: float = 0.5
    # BM25 (bm25s' Lucene variant) and its tokens: NLTK's English stop words ("en_plus")
    # drop question words such as "what" and "did" that the shorter list keeps.
    k1: float = 1.2
    b: float = 0.75
    stopwords: str = "en_plus"
    keyword_fields: frozenset[KeywordField] = frozenset({"speaker", "date", "attachments"})
    # Neighbouring messages (on each side, same room) whose words join a keyword document.
    keyword_context: int = 2
    # Scopes whose keyword index stays in memory (least recently used are dropped).
    cached_scopes: int = 256


@dataclass(frozen=True)
class RetrievedMessage:
    memory: Memory
    score: float
    # 1-based place in each ranker's list; None when that ranker did not propose it.
    vector_rank: int | None = None
    keyword_rank: int | None = None


# --------------------------------------------------------------------------------------------


class _RecentScopes(LRUCache[Scope, ScopeIndex]):
    """The indexes of the scopes searched most recently; a scope dropped from it takes its
    lock along (a lock per scope ever searched would grow without end)."""

    def __init__(self, maxsize: int, locks: dict[Scope, asyncio.Lock]) -> None:
        super().__init__(maxsize=maxsize)
        self._locks = locks

    def popitem(self) -> tuple[Scope, ScopeIndex]:
        scope, index = super().popitem()
        self._locks.pop(scope, None)
        return scope, index


class MessageRetriever:
    """Earlier messages of a room (or world) relevant to a query, best first."""

    def __init__(
        self,
        store: MongoStore,
        vectors: VectorIndex,
        embedder: Embedder,
        *,
        options: RetrieverOptions | None = None,
    ) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        self.options = options or RetrieverOptions()
        self._messages = ScopeMessages(store)
        self._locks: dict[Scope, asyncio.Lock] = {}
        self._indexes = _RecentScopes(self.options.cached_scopes, self._locks)

    @classmethod
    def over(
        cls, knowledge: Indexes, *, options: RetrieverOptions | None = None
    ) -> MessageRetriever:
        """A retriever over the stores a plugin's `ctx.knowledge` reads."""
        return cls(knowledge.store, knowledge.vectors, knowledge.embedder, options=options)

    def with_options(self, **changes: Any) -> MessageRetriever:
        """A retriever with other options over the same stores (the benchmark's variants),
        starting with an empty cache: its keyword documents may be built differently."""
        return MessageRetriever(
            self.store, self.vectors, self.embedder, options=replace(self.options, **changes)
        )

    async def search(
        self,
        query: str,
        *,
        room_id: str | None = None,
        world_id: str | None = None,
        exclude_ids: Iterable[str] = (),
        before: datetime | None = None,
        limit: int = 5,
    ) -> list[RetrievedMessage]:
        """The `limit` messages of the scope most relevant to `query`, best first.

        Give exactly one of `room_id` and `world_id`. `exclude_ids` (e.g. the recent window
        already in the prompt) are never returned, nor messages created at or after `before`.
        The query is embedded exactly as given: embedding a message's own text again is then
        a hit in the caching embedder.
        """
        if (room_id is None) == (world_id is None):
            raise ValueError("give exactly one of room_id and world_id")
        scope = Scope("room", room_id) if room_id is not None else Scope("world", world_id or "")
        if limit < 1 or not query.strip():
            return []
        excluded = set(exclude_ids)
        options = self.options
        hits, index = await asyncio.gather(
            self._vector_hits(query, scope, len(excluded)), self._index(scope)
        )
        by_vector = vector_ranking(
            hits,
            index,
            context=options.vector_context,
            depth=options.depth + len(excluded),
            max_distance=options.max_distance,
        )
        by_keyword: list[str] = []
        if options.keyword_weight > 0:
            tokens = tokenize([query], stopwords=options.stopwords)[0]
            by_keyword = keyword_ranking(index, tokens, options.depth + len(excluded))
        # Excluded ids leave the lists before fusion, so they take no one's place.
        by_vector = [i for i in by_vector if i not in excluded][: options.depth]
        by_keyword = [i for i in by_keyword if i not in excluded][: options.depth]
        scores = reciprocal_rank_fusion(
            [(by_vector, options.vector_weight), (by_keyword, options.keyword_weight)],
            k=options.rrf_k,
        )
        ranked = sorted(scores, key=lambda i: -scores[i])
        return await self._hydrate(
            ranked, scores, scope, before, limit, ranks(by_vector), ranks(by_keyword)
        )

    async def _vector_hits(self, query: str, scope: Scope, excluded: int) -> list[VectorHit]:
        if self.options.vector_weight <= 0:  # a ranker that counts for nothing is not asked
            return []
        try:
            [vector] = await self.embedder.embed([query])
            hits = await self.vectors.query(
                "messages",
                vector,
                where={scope.key: scope.id},
                limit=self.options.vector_depth + excluded,
            )
        except Exception:
            # Keywords still work without vectors (Chroma down, embedder failing).
            log.warning("vector search failed for %s %s", scope.kind, scope.id, exc_info=True)
            return []
        return hits

    async def _hydrate(
        self,
        ranked: list[str],
        scores: dict[str, float],
        scope: Scope,
        before: datetime | None,
        limit: int,
        vector_ranks: dict[str, int],
        keyword_ranks: dict[str, int],
    ) -> list[RetrievedMessage]:
        found: list[RetrievedMessage] = []
        # In batches: a few deleted or too recent messages cost one more query, not many.
        batch = max(limit * 2, 20)
        for start in range(0, len(ranked), batch):
            for memory in await self.store.memories.get_many(ranked[start : start + batch]):
                # The scope is checked again: vector metadata must never widen it.
                if not scope.contains(memory):
                    continue
                if before is not None and memory.created_at >= before:
                    continue
                found.append(
                    RetrievedMessage(
                        memory=memory,
                        score=scores[memory.id],
                        vector_rank=vector_ranks.get(memory.id),
                        keyword_rank=keyword_ranks.get(memory.id),
                    )
                )
                if len(found) == limit:
                    return found
        return found

    # ------------------------------------------------------------------ the per-scope cache
    async def _index(self, scope: Scope) -> ScopeIndex:
        lock = self._locks.setdefault(scope, asyncio.Lock())
        async with lock:
            cached = self._indexes.get(scope)  # a hit makes it the most recently used
            # The newest message is the version: one index probe per search. Counting (slow
            # on the bundled server) only happens once something changed.
            if cached is None or cached.newest != await self._messages.newest(scope):
                cached = await self._refreshed(scope, cached)
                self._indexes[scope] = cached
            return cached

    async def _refreshed(self, scope: Scope, cached: ScopeIndex | None) -> ScopeIndex:
        """Append what is new when only new messages arrived; otherwise read the scope again.

        A deletion, or a message stored with an older time, shows up as a count that does
        not add up and forces the full read. (Until then a deleted message is harmless:
        every result is hydrated from MongoDB.)
        """
        if cached is not None and cached.last_created_at is not None:
            count, fresh = await asyncio.gather(
                self._messages.count(scope), self._messages.since(scope, cached.last_created_at)
            )
            fresh = [m for m in fresh if m.id not in cached.position]
            if fresh and len(cached.ids) + len(fresh) == count:
                grown = cached.copy()
                grown.extend(fresh, await self._tokens(fresh))
                return await self._indexed(grown)
        memories = await self._messages.all(scope)
        # Tokens of messages seen before are reused: only new text is tokenised.
        known = dict(zip(cached.ids, cached.tokens, strict=True)) if cached else {}
        unseen = [m for m in memories if m.id not in known]
        known.update(zip((m.id for m in unseen), await self._tokens(unseen), strict=True))
        index = ScopeIndex()
        index.extend(memories, [known[m.id] for m in memories])
        log.debug("keyword index for %s %s: %d messages", scope.kind, scope.id, len(memories))
        return await self._indexed(index)

    async def _tokens(self, memories: Sequence[Memory]) -> list[list[str]]:
        if not memories:
            return []
        fields = self.options.keyword_fields
        names = await self._speaker_names(memories) if "speaker" in fields else {}
        texts = [keyword_document(m, speaker=names.get(m.user_id), fields=fields) for m in memories]
        return await asyncio.to_thread(tokenize, texts, stopwords=self.options.stopwords)

    async def _speaker_names(self, memories: Sequence[Memory]) -> dict[str, str]:
        accounts = await self.store.accounts.get_many(sorted({m.user_id for m in memories}))
        return {user: account.name for user, account in accounts.items()}

    async def _indexed(self, index: ScopeIndex) -> ScopeIndex:
        options = self.options
        documents = index.documents(options.keyword_context)
        index.bm25 = await asyncio.to_thread(build_bm25, documents, k1=options.k1, b=options.b)
        return index

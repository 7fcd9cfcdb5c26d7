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
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import bm25s
import numpy as np

from bot.models import Memory
from bot.storage.embeddings import Embedder
from bot.storage.mongo import MongoStore
from bot.storage.vectors import VectorHit, VectorIndex

log = logging.getLogger(__name__)

ScopeKind = Literal["room", "world"]
KeywordField = Literal["speaker", "date", "attachments"]


@dataclass(frozen=True)
class Scope:
    """Where to look: one room, or every room of one world (knowledge never leaves a world)."""

    kind: ScopeKind
    id: str

    @property
    def key(self) -> str:
        """The Memory field (and Chroma metadata key) that holds this scope's id."""
        return f"{self.kind}_id"

    def contains(self, memory: Memory) -> bool:
        return getattr(memory, self.key) == self.id


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


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[Sequence[str], float]], *, k: int = 60
) -> dict[str, float]:
    """Weighted RRF: each (ids best first, weight) adds weight / (k + rank) to its ids."""
    scores: dict[str, float] = {}
    for ids, weight in rankings:
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return scores


def tokenize(texts: list[str], *, stopwords: str = "en_plus") -> list[list[str]]:
    """Lower-cased word tokens without stop words, as bm25s tokenises (one list per text)."""
    if not texts:
        return []
    tokens = bm25s.tokenize(
        texts, lower=True, stopwords=stopwords, return_ids=False, show_progress=False
    )
    return [list(doc) for doc in tokens]


def keyword_document(
    memory: Memory, *, speaker: str | None, fields: Collection[KeywordField]
) -> str:
    """The text BM25 indexes for one message: its words, and optionally who said it, when,
    and what it attached (an image's caption or a file's title carries searchable words)."""
    parts: list[str] = []
    if "date" in fields:
        parts.append(f"({memory.created_at:%d %B %Y})")
    if "speaker" in fields and speaker:
        parts.append(f"{speaker}:")
    parts.append(memory.content.text)
    if "attachments" in fields:
        parts.extend(f"[shares {a.title}]" for a in memory.content.attachments if a.title)
    return " ".join(parts)


# --------------------------------------------------------------------------------------------
# The scope's messages, from MongoDB


class _ScopeMessages:
    """Reads a scope's messages, oldest first, through MongoStore."""

    # "All of them": MongoStore reads a limit of 0 as "none".
    _ALL = 2**31 - 1

    def __init__(self, store: MongoStore) -> None:
        self.store = store

    async def newest(self, scope: Scope) -> str | None:
        """The id of the scope's newest message: one index probe."""
        if scope.kind == "room":
            last = await self.store.recent_memories(scope.id, 1)
            return last[-1].id if last else None
        return await self.store.newest_memory_id(scope.id)

    async def count(self, scope: Scope) -> int:
        if scope.kind == "room":
            return await self.store.count_memories(scope.id)
        return await self.store.count_memories_in_world(scope.id)

    async def all(self, scope: Scope) -> list[Memory]:
        if scope.kind == "room":
            return await self.store.recent_memories(scope.id, self._ALL)
        return await self.store.world_memories(scope.id)

    async def since(self, scope: Scope, after: datetime) -> list[Memory]:
        """Messages created after `after` (equal times excluded), oldest first."""
        if scope.kind == "room":
            return await self.store.memories_since(scope.id, after, limit=self._ALL)
        return await self.store.world_memories(scope.id, after=after)


# --------------------------------------------------------------------------------------------
# One scope's messages in order, with their keyword index


@dataclass
class _ScopeIndex:
    ids: list[str] = field(default_factory=list)
    tokens: list[list[str]] = field(default_factory=list)  # each message's own tokens
    position: dict[str, int] = field(default_factory=dict)
    last_created_at: datetime | None = None
    # Neighbours are taken within a room: in a world scope, rooms interleave.
    room_positions: dict[str, list[int]] = field(default_factory=dict)
    place_in_room: list[int] = field(default_factory=list)
    rooms: list[str] = field(default_factory=list)
    bm25: bm25s.BM25 | None = None

    @property
    def newest(self) -> str | None:
        return self.ids[-1] if self.ids else None

    def copy(self) -> _ScopeIndex:
        return _ScopeIndex(
            ids=list(self.ids),
            tokens=list(self.tokens),
            position=dict(self.position),
            last_created_at=self.last_created_at,
            room_positions={room: list(p) for room, p in self.room_positions.items()},
            place_in_room=list(self.place_in_room),
            rooms=list(self.rooms),
        )

    def extend(self, memories: Sequence[Memory], tokens: Sequence[list[str]]) -> None:
        for memory, doc in zip(memories, tokens, strict=True):
            at = len(self.ids)
            self.position[memory.id] = at
            self.ids.append(memory.id)
            self.tokens.append(doc)
            chain = self.room_positions.setdefault(memory.room_id, [])
            self.place_in_room.append(len(chain))
            chain.append(at)
            self.rooms.append(memory.room_id)
        if memories:
            self.last_created_at = memories[-1].created_at

    def neighbours(self, at: int, reach: int) -> list[int]:
        """Positions of up to `reach` messages before and after `at` in the same room."""
        chain = self.room_positions[self.rooms[at]]
        place = self.place_in_room[at]
        return chain[max(0, place - reach) : place] + chain[place + 1 : place + 1 + reach]

    def documents(self, context: int) -> list[list[str]]:
        """Each message's tokens twice plus its neighbours' once (just its own at 0)."""
        if context <= 0:
            return self.tokens
        return [
            own + own + [t for near in self.neighbours(at, context) for t in self.tokens[near]]
            for at, own in enumerate(self.tokens)
        ]


def _build_bm25(documents: list[list[str]], *, k1: float, b: float) -> bm25s.BM25 | None:
    if not any(documents):
        return None
    index = bm25s.BM25(k1=k1, b=b)
    # An empty document would shift bm25s' positions: give it a token no query contains.
    index.index([doc or ["\x00"] for doc in documents], show_progress=False)
    return index


def keyword_ranking(index: _ScopeIndex, query: list[str], depth: int) -> list[str]:
    """Ids of the scope's messages matching the query tokens, best BM25 score first."""
    if index.bm25 is None:
        return []
    known = [token for token in query if token in index.bm25.vocab_dict]
    if not known:
        return []
    scores = index.bm25.get_scores(known)
    hits = np.flatnonzero(scores > 0)
    if hits.size > depth:
        hits = hits[np.argpartition(-scores[hits], depth - 1)[:depth]]
    # Ties go to the later message: of two equal matches, the newer is more likely current.
    order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), -i))
    return [index.ids[i] for i in order]


def vector_ranking(
    hits: Sequence[VectorHit],
    index: _ScopeIndex,
    *,
    context: float,
    depth: int,
    max_distance: float | None = None,
) -> list[str]:
    """Ids by similarity plus `context` times their direct neighbours' similarities.

    Only hits within `max_distance` (and their neighbours) are ranked. A message outside the
    fetched hits (or without a vector, like the bot's own replies) counts as the farthest
    hit's similarity, as does a missing neighbour at a room's edge.
    """
    if not hits:
        return []
    similarity = {hit.id: 1.0 - hit.distance for hit in hits}
    floor = min(similarity.values())
    seeds = [hit.id for hit in hits if max_distance is None or hit.distance <= max_distance]
    if context <= 0:
        return sorted(seeds, key=lambda i: -similarity[i])[:depth]

    def own(at: int) -> float:
        return similarity.get(index.ids[at], floor)

    scores: dict[str, float] = {}
    order: dict[str, int] = {}
    for seed in seeds:
        at = index.position.get(seed)
        if at is None:  # a vector MongoDB no longer holds: hydration drops it anyway
            scores[seed] = similarity[seed] + 2 * context * floor
            order[seed] = -1
            continue
        for place in (at, *index.neighbours(at, 1)):
            item = index.ids[place]
            if item in scores:
                continue
            near = index.neighbours(place, 1)
            borrowed = sum(own(n) for n in near) + floor * (2 - len(near))
            scores[item] = own(place) + context * borrowed
            order[item] = place
    ranked = sorted(scores, key=lambda i: (-scores[i], -order[i]))
    return ranked[:depth]


def _ranks(ids: Sequence[str]) -> dict[str, int]:
    return {item: rank for rank, item in enumerate(ids, start=1)}


# --------------------------------------------------------------------------------------------


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
        self._messages = _ScopeMessages(store)
        self._indexes: OrderedDict[Scope, _ScopeIndex] = OrderedDict()
        self._locks: dict[Scope, asyncio.Lock] = {}

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
            ranked, scores, scope, before, limit, _ranks(by_vector), _ranks(by_keyword)
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
            for memory in await self.store.get_memories(ranked[start : start + batch]):
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
    async def _index(self, scope: Scope) -> _ScopeIndex:
        lock = self._locks.setdefault(scope, asyncio.Lock())
        async with lock:
            cached = self._indexes.get(scope)
            # The newest message is the version: one index probe per search. Counting (slow
            # on the bundled server) only happens once something changed.
            if cached is None or cached.newest != await self._messages.newest(scope):
                cached = await self._refreshed(scope, cached)
                self._indexes[scope] = cached
            self._indexes.move_to_end(scope)
            while len(self._indexes) > self.options.cached_scopes:
                dropped, _ = self._indexes.popitem(last=False)
                self._locks.pop(dropped, None)
            return cached

    async def _refreshed(self, scope: Scope, cached: _ScopeIndex | None) -> _ScopeIndex:
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
        index = _ScopeIndex()
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
        accounts = await self.store.get_accounts(sorted({m.user_id for m in memories}))
        return {user: account.name for user, account in accounts.items()}

    async def _indexed(self, index: _ScopeIndex) -> _ScopeIndex:
        options = self.options
        documents = index.documents(options.keyword_context)
        index.bm25 = await asyncio.to_thread(_build_bm25, documents, k1=options.k1, b=options.b)
        return index

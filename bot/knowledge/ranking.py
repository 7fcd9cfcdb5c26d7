"""The two rankers of message retrieval and their fusion, over one scope's message index.

A scope (one room, or every room of one world) has an index: its messages in order, each
one's keyword tokens, who its neighbours in its room are, and a BM25 index over documents
that borrow the neighbours' words. `keyword_ranking` and `vector_ranking` rank within it;
`reciprocal_rank_fusion` joins them. `bot.knowledge.retrieval.MessageRetriever` keeps the indexes
fresh and hydrates the winners.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import bm25s
import numpy as np

from bot.domain.records import Memory
from bot.knowledge.vectors import VectorHit
from bot.storage.mongo import MongoStore

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
        scope_id: str | None = getattr(memory, self.key)
        return scope_id == self.id


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


class ScopeMessages:
    """Reads a scope's messages, oldest first, through MongoStore."""

    # "All of them": MongoStore reads a limit of 0 as "none".
    _ALL = 2**31 - 1

    def __init__(self, store: MongoStore) -> None:
        self.store = store

    async def newest(self, scope: Scope) -> str | None:
        """The id of the scope's newest message: one index probe."""
        if scope.kind == "room":
            last = await self.store.memories.recent(scope.id, 1)
            return last[-1].id if last else None
        return await self.store.memories.newest_id(scope.id)

    async def count(self, scope: Scope) -> int:
        if scope.kind == "room":
            return await self.store.memories.count_in_room(scope.id)
        return await self.store.memories.count_in_world(scope.id)

    async def all(self, scope: Scope) -> list[Memory]:
        if scope.kind == "room":
            return await self.store.memories.recent(scope.id, self._ALL)
        return await self.store.memories.in_world(scope.id)

    async def since(self, scope: Scope, after: datetime) -> list[Memory]:
        """Messages created after `after` (equal times excluded), oldest first."""
        if scope.kind == "room":
            return await self.store.memories.since(scope.id, after, limit=self._ALL)
        return await self.store.memories.in_world(scope.id, after=after)


# --------------------------------------------------------------------------------------------
# One scope's messages in order, with their keyword index


@dataclass
class ScopeIndex:
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

    def copy(self) -> ScopeIndex:
        return ScopeIndex(
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


def build_bm25(documents: list[list[str]], *, k1: float, b: float) -> bm25s.BM25 | None:
    if not any(documents):
        return None
    index = bm25s.BM25(k1=k1, b=b)
    # An empty document would shift bm25s' positions: give it a token no query contains.
    index.index([doc or ["\x00"] for doc in documents], show_progress=False)
    return index


def keyword_ranking(index: ScopeIndex, query: list[str], depth: int) -> list[str]:
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
    index: ScopeIndex,
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


def ranks(ids: Sequence[str]) -> dict[str, int]:
    return {item: rank for rank, item in enumerate(ids, start=1)}

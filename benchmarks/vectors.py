"""`mnemo bench vectors`: fact search latency at 10,000 and 100,000 stored facts.

Facts are synthetic but varied sentences ("Priya moved to Porto last spring", ...) stored the
way `Knowledge` stores them: our embedder's vectors, cosine space, and the scope metadata
(subject, world, room, type, time). Each query embeds a fresh sentence (no cache) and asks for
one person's facts in their world through `nearest_facts`, the call `Knowledge.search_facts`
makes for the facts provider (same filter, same exact ranking), so the latency is what a reply
pays before MongoDB hydrates the hits.

Embedding 100,000 texts takes minutes on a small machine, so by default only the first
`embed_texts` (10,000) are embedded; every further vector is one of those plus a small random
perturbation, renormalised (cosine similarity about 0.98 to its source). The report says so;
`--embed-all` embeds every text instead.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats import mib, peak_rss_bytes, rate, reset_peak_rss, rss_bytes, summary
from bot.domain.records import stable_id
from bot.knowledge.embeddings import Embedder
from bot.knowledge.vectors import VectorIndex
from bot.memory.store import nearest_facts

log = logging.getLogger(__name__)

FACTS_PER_PERSON = 10
PEOPLE_PER_WORLD = 20
# Chroma caps one write at a few thousand records; 1,000 is well inside on every backend.
INSERT_BATCH = 1000
# Standard deviation per dimension of the perturbation of derived vectors: the noise has a
# norm of about 0.2 against unit vectors, so a derived vector stays near its source.
PERTURBATION = 0.01
WARM_UP_QUERIES = 5
# Relevant facts the provider asks for (FactsSettings.relevant_facts).
QUERY_LIMIT = 8


def _words(text: str, separator: str | None = None) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(separator))


_NAMES = _words(
    "Sarah Alex Priya Jordan Sam Mike Eva Ana Tom Lena Omar Chen Yuki Ravi Nina Marco Ines "
    "Kofi Aisha Lucas Maya Ivan Zoe Hugo Leila Noah Emma Diego Sofia Kenji Amara Felix Rosa "
    "Tariq Hana Oscar Mila Sven Lucia Dev Farah Jonas Clara Idris Greta Mateo Ada Bruno Nadia"
)
_CITIES = _words(
    "Lisbon Porto Toronto Berlin Nairobi Osaka Lima Oslo Dublin Austin Lyon Seoul Accra "
    "Melbourne Krakow Bogota Cairo Vancouver Glasgow Naples Denver Hanoi Tallinn Quito"
)
_JOBS = _words(
    "nurse|teacher|software engineer|carpenter|pharmacist|architect|chef|bus driver|"
    "accountant|vet|journalist|electrician|translator|physiotherapist|data analyst|baker|"
    "librarian|firefighter|graphic designer|lab technician",
    "|",
)
_HOBBIES = _words(
    "rock climbing|knitting|bird watching|chess|sourdough baking|trail running|pottery|"
    "salsa dancing|photography|gardening|surfing|board games|calligraphy|cycling|"
    "woodworking|painting watercolours|playing the cello|learning Japanese|fishing|yoga",
    "|",
)
_FOODS = _words(
    "ramen|tacos|dark chocolate|lentil soup|sushi|pierogi|pho|falafel|paella|jollof rice|"
    "mango sticky rice|goulash|dumplings|pasta carbonara|green curry",
    "|",
)
_PETS = _words("cat dog parrot rabbit tortoise hamster ferret goldfish")
_PET_NAMES = _words("Miso Biscuit Pepper Luna Mochi Ziggy Olive Rocket Noodle Pixel")
_RELATIVES = _words("sister brother cousin mother father aunt uncle grandmother son daughter")
_MONTHS = _words(
    "January February March April May June July August September October November December"
)
_TEMPLATES = (
    "{name} lives in {city}.",
    "{name} moved to {city} last {month}.",
    "{name} works as a {job} in {city}.",
    "{name} has been a {job} for {number} years.",
    "{name} spends weekends {hobby}.",
    "{name} took up {hobby} in {month}.",
    "{name}'s favourite food is {food}.",
    "{name} cannot stand {food}.",
    "{name} has a {pet} called {pet_name}.",
    "{name}'s {pet} {pet_name} is {number} years old.",
    "{name}'s {relative} lives in {city}.",
    "{name} visits their {relative} in {city} every {month}.",
    "{name}'s birthday is on {month} {day}.",
    "{name} is training for a race in {city} in {month}.",
    "{name} wants to learn {hobby} this year.",
    "{name} is allergic to {food}.",
    "{name} studied to become a {job} in {city}.",
    "{name} is saving up for a trip to {city}.",
    "{name} grew up in {city} with a {pet}.",
    "{name} and their {relative} cook {food} every Sunday.",
    "{name} is nervous about a job interview as a {job}.",
    "{name} finished {number} books about {hobby} this year.",
)
_QUERIES = (
    "What does {name} do for work?",
    "Where does {name} live these days?",
    "Does {name} have any pets?",
    "What food does {name} like?",
    "Any plans for {month}, {name}?",
    "how is your {relative} doing?",
    "I went {hobby} yesterday",
    "thinking about a trip to {city}",
)


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        name=rng.choice(_NAMES),
        city=rng.choice(_CITIES),
        job=rng.choice(_JOBS),
        hobby=rng.choice(_HOBBIES),
        food=rng.choice(_FOODS),
        pet=rng.choice(_PETS),
        pet_name=rng.choice(_PET_NAMES),
        relative=rng.choice(_RELATIVES),
        month=rng.choice(_MONTHS),
        day=rng.randint(1, 28),
        number=rng.randint(2, 30),
    )


def synthetic_sentences(count: int, *, seed: int = 7) -> list[str]:
    """`count` varied fact-like sentences, the same for the same seed."""
    rng = random.Random(seed)
    return [_fill(rng.choice(_TEMPLATES), rng) for _ in range(count)]


def synthetic_queries(count: int, *, seed: int = 11) -> list[str]:
    """Message-like texts to search with, distinct from the stored sentences' seed."""
    rng = random.Random(seed)
    return [f"{_fill(rng.choice(_QUERIES), rng)} (#{i})" for i in range(count)]


@dataclass(frozen=True)
class FactScope:
    """Where synthetic fact `index` belongs: ten facts per person, twenty people per world."""

    subject_id: str
    world_id: str
    room_id: str

    @classmethod
    def of(cls, index: int) -> FactScope:
        person = index // FACTS_PER_PERSON
        world = person // PEOPLE_PER_WORLD
        return cls(
            subject_id=stable_id("bench", "person", str(person)),
            world_id=stable_id("bench", "world", str(world)),
            room_id=stable_id("bench", "room", str(world)),
        )


def fact_metadata(index: int) -> dict[str, Any]:
    """The metadata `Knowledge` writes for a fact (bot.knowledge.vector_metadata)."""
    scope = FactScope.of(index)
    return {
        "subject_id": scope.subject_id,
        "world_id": scope.world_id,
        "room_id": scope.room_id,
        "type": "fact",
        "created_at": 1_700_000_000.0 + index,
    }


def derived_vectors(base: np.ndarray, count: int, *, offset: int = 0, seed: int = 3) -> np.ndarray:
    """`count` unit vectors, perturbed copies of `base`'s rows `offset`, `offset + 1`, ...
    (wrapping round); the same for the same arguments."""
    rng = np.random.default_rng([seed, offset])
    rows = base[(offset + np.arange(count)) % len(base)]
    noisy = rows + rng.normal(0.0, PERTURBATION, size=rows.shape).astype(np.float32)
    unit: np.ndarray = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    return unit


def fact_vectors(base: np.ndarray, first: int, last: int) -> np.ndarray:
    """The vectors of facts first..last-1: embedded ones as they are, the rest derived.
    Made a batch at a time, so memory holds one batch of derived vectors, not all."""
    parts = []
    if first < len(base):
        parts.append(base[first : min(last, len(base))])
        first = len(base)
    if first < last:
        parts.append(derived_vectors(base, last - first, offset=first))
    return np.vstack(parts)


async def _embed_all(embedder: Embedder, texts: Sequence[str]) -> tuple[np.ndarray, float]:
    started = time.perf_counter()
    vectors = np.asarray(await embedder.embed(list(texts)), dtype=np.float32)
    return vectors, time.perf_counter() - started


async def _insert(
    index: VectorIndex, base: np.ndarray, start: int, stop: int, *, batch: int = INSERT_BATCH
) -> float:
    """Write facts start..stop-1 in batches; returns the seconds it took."""
    started = time.perf_counter()
    for first in range(start, stop, batch):
        last = min(first + batch, stop)
        await index.upsert(
            "facts",
            ids=[stable_id("bench", "fact", str(i)) for i in range(first, last)],
            embeddings=fact_vectors(base, first, last).tolist(),
            metadatas=[fact_metadata(i) for i in range(first, last)],
        )
    return time.perf_counter() - started


async def _query_latency(
    index: VectorIndex, embedder: Embedder, stored: int, queries: Sequence[str], *, seed: int
) -> dict[str, Any]:
    """Embed each query and ask for one stored person's facts in their world, as the facts
    provider does for a message with no mentions."""
    rng = random.Random(seed)
    people = max(1, stored // FACTS_PER_PERSON)
    embed_ms: list[float] = []
    query_ms: list[float] = []
    total_ms: list[float] = []
    hits: list[int] = []
    for number, text in enumerate(queries):
        scope = FactScope.of(rng.randrange(people) * FACTS_PER_PERSON)
        started = time.perf_counter()
        [vector] = await embedder.embed([text])
        embedded = time.perf_counter()
        found = await nearest_facts(
            index,
            vector,
            subject_ids=[scope.subject_id],
            world_id=scope.world_id,
            limit=QUERY_LIMIT,
        )
        finished = time.perf_counter()
        if number < WARM_UP_QUERIES:
            continue  # the first queries after a write load the index
        embed_ms.append((embedded - started) * 1000)
        query_ms.append((finished - embedded) * 1000)
        total_ms.append((finished - started) * 1000)
        hits.append(len(found))
        if any(
            (h.metadata.get("subject_id"), h.metadata.get("world_id"))
            != (scope.subject_id, scope.world_id)
            for h in found
        ):
            raise AssertionError("the scope filter let another person's or world's fact through")
    return {
        "queries": len(total_ms),
        "total_ms": summary(total_ms),
        "embedding_ms": summary(embed_ms),
        # The search alone: Chroma's filtered fetch plus the exact ranking.
        "chroma_ms": summary(query_ms),
        "hits_per_query": round(float(np.mean(hits)), 1) if hits else 0.0,
    }


async def run_vectors(
    index: VectorIndex,
    embedder: Embedder,
    *,
    sizes: Sequence[int] = (10_000, 100_000),
    embed_texts: int = 10_000,
    queries: int = 200,
) -> dict[str, Any]:
    """Fill `index` up to each size in turn and measure queries at each; plain results.

    `embedder` should not cache (or not have seen the query texts): query latency includes
    embedding the query, as a new message's would.
    """
    peak_is_ours = reset_peak_rss()
    rss_before = rss_bytes()
    sizes = sorted(set(sizes))
    if not sizes or sizes[0] < 1:
        raise ValueError("sizes must be positive")
    largest = sizes[-1]
    embedded = min(embed_texts, largest) if embed_texts > 0 else largest
    texts = synthetic_sentences(embedded)
    log.info("vectors: embedding %d synthetic facts", embedded)
    base, embed_seconds = await _embed_all(embedder, texts)
    stages = []
    stored = 0
    for size in sizes:
        log.info("vectors: inserting facts %d..%d", stored, size)
        seconds = await _insert(index, base, stored, size)
        inserted = size - stored
        stored = size
        latency = await _query_latency(
            index, embedder, stored, synthetic_queries(queries + WARM_UP_QUERIES), seed=size
        )
        stages.append(
            {
                "facts": size,
                "inserted": inserted,
                "insert_seconds": round(seconds, 2),
                "insert_per_second": rate(inserted, seconds),
                **latency,
                "rss_mib": mib(rss_bytes()),
                "peak_rss_mib": mib(peak_rss_bytes()),
            }
        )
    return {
        "embedded_texts": embedded,
        "derived_vectors": largest - embedded,
        "derivation": (
            None
            if embedded == largest
            else f"{largest - embedded:,} vectors are perturbed copies of the {embedded:,} "
            f"embedded ones (noise sigma {PERTURBATION} per dimension, renormalised)"
        ),
        "embedding_per_second": rate(embedded, embed_seconds),
        "rss_before_mib": mib(rss_before),
        # False: the peak is the whole process's, earlier benchmarks in it included.
        "peak_is_this_benchmarks": peak_is_ours,
        "facts_per_person": FACTS_PER_PERSON,
        "people_per_world": PEOPLE_PER_WORLD,
        "query_limit": QUERY_LIMIT,
        "search": "exact: the person's vectors fetched by filter and ranked by cosine "
        "(VectorIndex.nearest_within), as Knowledge.search_facts does",
        "stages": stages,
        "goals": [vectors_goal(stages)],
    }


def vectors_goal(stages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Goal: query p95 (embedding included) under 20 ms at 100,000 facts."""
    at = next((s for s in stages if s["facts"] >= 100_000), stages[-1] if stages else None)
    measured = at["total_ms"]["p95"] if at else None
    return {
        "goal": "vector query p95 at 100,000 facts (embedding included)",
        "target": "< 20 ms",
        "measured": (
            None
            if at is None or measured is None
            else f"{measured:.1f} ms at {at['facts']:,} facts"
        ),
        "met": bool(at and at["facts"] >= 100_000 and measured is not None and measured < 20),
    }


async def open_index(folder: Path) -> VectorIndex:
    index = VectorIndex.persistent(folder / "chroma")
    await index.count("facts")  # open it now, outside any measurement
    return index

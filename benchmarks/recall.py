"""LoCoMo recall: how often Mnemo's retrieval finds the turns that answer a question.

Each conversation is loaded the way the bot stores a chat: one room and world per
conversation, each speaker an account, each turn a `Memory` (dated by its session) in
MongoDB with its vector written by `MessageIndex.index_message`. Every question of categories
1-4 is then asked of the same `MessageRetriever` the `relevantMessages` provider uses, and
scored by turn-level evidence recall@k = |evidence ∩ top-k turns| / |evidence| (questions
without evidence are left out and counted). The facts variant stores each conversation's
`observation` facts as `Fact`s whose sources are their turns' memories, retrieves facts with
`Knowledge.search_facts`, and scores the turns the top-k facts came from.

A shared image is stored as an attachment whose title is its BLIP caption, as an adapter
would store a file: the caption is searchable by keywords but not part of the message's
embedded text.

Measured on locomo-dev.json (5 conversations, 2,760 turns, 760 questions with evidence),
all-MiniLM-L6-v2, through this module and `MessageRetriever` with the options shown; latency
is one search with the query's embedding cached (as the provider's is), on a busy 2-core VM
with the bundled MongoDB. Each row adds to the one above it unless it says otherwise.

| retrieval                                         | R@1   | R@5   | R@10  | R@20  |
|---------------------------------------------------|-------|-------|-------|-------|
| dense only (the message text, as the bot embeds)  | 0.075 | 0.211 | 0.291 | 0.384 |
| BM25 only (k1 1.2, b 0.75), message text          | 0.237 | 0.419 | 0.505 | 0.564 |
| + speaker name and image caption in the document  | 0.243 | 0.458 | 0.534 | 0.608 |
| + the date                                        | 0.264 | 0.483 | 0.551 | 0.628 |
| + NLTK stop words ("what", "did" ... dropped)     | 0.312 | 0.533 | 0.598 | 0.658 |
| + words of the 2 turns either side (own twice)    | 0.332 | 0.634 | 0.717 | 0.780 |
| RRF k 60, equal weights, BM25 of row 3            | 0.158 | 0.379 | 0.483 | 0.609 |
| RRF k 60, equal weights, BM25 of row 6            | 0.175 | 0.456 | 0.596 | 0.747 |
| RRF k 20, vector weight 0.5                       | 0.236 | 0.601 | 0.723 | 0.779 |
| + vector score + 0.5 x neighbours' similarity     | 0.286 | 0.654 | 0.738 | 0.789 |
| (the same with 1.0 x neighbours')                 | 0.306 | 0.653 | 0.745 | 0.794 |
| + vector candidates within distance 0.65 (default)| 0.276 | 0.655 | 0.735 | 0.790 |
| facts: `Knowledge.search_facts` over observations | 0.360 | 0.541 | 0.594 | 0.655 |

Default search latency: p50 21 ms, p95 36 ms. Tried and left out (measured offline on the
same embeddings and the same bm25s code): adding a share of the neighbours' *fused* scores
(BM25 alone 0.598 -> 0.592 / 0.482 / 0.405 at 0.25 / 0.5 / 1; flat RRF scores let the
neighbours tie the match), adding neighbours' BM25 *scores* instead of their words (0.719
fused), a convex mix of normalised scores instead of RRF (0.725, the same as RRF at that
stage), k1/b between 0.9-2.0 / 0.4-0.9 (within 0.005 once neighbours' words are in), and the
caption or the speaker's name in the embedded text (0.740 / 0.743 fused: within noise of
0.738, and it would cost the provider its free cached query embedding).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo import (
    CATEGORY_NAMES,
    RETRIEVAL_CATEGORIES,
    Conversation,
    LocomoError,
    Question,
    Turn,
    load_locomo,
)
from bot.domain.records import Account, Attachment, Content, Fact, Memory, Room, stable_id
from bot.knowledge.retrieval import MessageRetriever
from bot.knowledge.vector_metadata import message_metadata  # see _index
from bot.memory.store import Knowledge
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

KS: tuple[int, ...] = (1, 5, 10, 20)
PLATFORM = "locomo"
AGENT_ID = stable_id("agent", "locomo-bench")
# Messages embedded per call while loading: one ONNX call per chunk instead of per turn.
_EMBED_CHUNK = 256


@dataclass
class LoadedConversation:
    conversation: Conversation
    room_id: str
    world_id: str
    speaker_ids: dict[str, str]
    memory_of: dict[str, str] = field(default_factory=dict)  # dia id -> memory id
    dia_of: dict[str, str] = field(default_factory=dict)  # memory id -> dia id
    facts: int = 0


@dataclass(frozen=True)
class QuestionResult:
    sample_id: str
    category: int
    evidence: tuple[str, ...]
    # Best first; each item is the turns one result stands for (a message: itself; a fact:
    # the turns it was learned from), so recall@k counts results, not turns.
    retrieved: tuple[frozenset[str], ...]
    seconds: float

    def recall(self, k: int) -> float:
        found = set().union(*self.retrieved[:k])
        return sum(1 for e in self.evidence if e in found) / len(self.evidence)


# --------------------------------------------------------------------------------------------
# Loading


def conversation_scope(sample_id: str) -> tuple[str, str]:
    """The room and world ids a conversation is stored under."""
    return stable_id(PLATFORM, "room", sample_id), stable_id(PLATFORM, "world", sample_id)


async def load_conversation(
    conversation: Conversation,
    *,
    store: MongoStore,
    knowledge: Knowledge,
) -> LoadedConversation:
    """Store the conversation's turns as memories and index their vectors (idempotent)."""
    room_id, world_id = conversation_scope(conversation.sample_id)
    speakers = {
        name: stable_id(PLATFORM, "account", conversation.sample_id, name)
        for name in conversation.speakers
    }
    loaded = LoadedConversation(conversation, room_id, world_id, speakers)
    await store.rooms.upsert(
        Room(
            id=room_id,
            world_id=world_id,
            platform=PLATFORM,
            kind="group",
            name=conversation.sample_id,
        )
    )
    for name, user_id in speakers.items():
        await store.accounts.upsert(
            Account(id=user_id, platform=PLATFORM, platform_id=name, name=name)
        )
    memories = [_memory(loaded, turn_at) for turn_at in _dated_turns(conversation)]
    for memory in memories:
        await store.memories.insert(memory)
    await _index(knowledge, memories)
    return loaded


def _dated_turns(conversation: Conversation) -> list[tuple[Turn, datetime]]:
    # A second apart within a session: the order in the room is the order of the dialogue.
    return [
        (turn, session.started_at + timedelta(seconds=turn.index))
        for session in conversation.sessions
        for turn in session.turns
    ]


def _memory(loaded: LoadedConversation, turn_at: tuple[Turn, datetime]) -> Memory:
    turn, created_at = turn_at
    sample = loaded.conversation.sample_id
    memory_id = stable_id(PLATFORM, "message", sample, turn.dia_id)
    attachments = []
    if turn.caption or turn.image_url:
        attachments.append(
            Attachment(
                id=stable_id(PLATFORM, "image", sample, turn.dia_id),
                url=turn.image_url,
                title=turn.caption,
                content_type="image/jpeg",
            )
        )
    loaded.memory_of[turn.dia_id] = memory_id
    loaded.dia_of[memory_id] = turn.dia_id
    return Memory(
        id=memory_id,
        user_id=loaded.speaker_ids[turn.speaker],
        agent_id=AGENT_ID,
        room_id=loaded.room_id,
        world_id=loaded.world_id,
        content=Content(text=turn.text, source=PLATFORM, attachments=attachments),
        created_at=created_at,
    )


async def _index(knowledge: Knowledge, memories: Sequence[Memory]) -> None:
    """What `MessageIndex.index_message` does, a chunk at a time: the same text embedded, the
    same metadata, but one embedding call and one Chroma write per chunk instead of per
    message (a Chroma write costs tens of milliseconds on a busy machine)."""
    with_text = [m for m in memories if m.content.text.strip()]
    for start in range(0, len(with_text), _EMBED_CHUNK):
        chunk = with_text[start : start + _EMBED_CHUNK]
        vectors = await knowledge.embedder.embed([m.content.text.strip() for m in chunk])
        await knowledge.vectors.upsert(
            "messages",
            ids=[m.id for m in chunk],
            embeddings=vectors,
            metadatas=[message_metadata(m) for m in chunk],
        )


async def load_facts(loaded: LoadedConversation, *, knowledge: Knowledge) -> int:
    """Store the conversation's observations as facts about their speakers, with vectors."""
    conversation = loaded.conversation
    started = {s.number: s.started_at for s in conversation.sessions}
    facts = []
    for number, observation in enumerate(conversation.observations):
        subject = loaded.speaker_ids.get(observation.speaker)
        if subject is None:
            continue
        sources = [loaded.memory_of[e] for e in observation.evidence if e in loaded.memory_of]
        facts.append(
            Fact(
                id=stable_id(PLATFORM, "fact", conversation.sample_id, str(number)),
                text=observation.text,
                subject_id=subject,
                room_id=loaded.room_id,
                world_id=loaded.world_id,
                agent_id=AGENT_ID,
                source_message_ids=sources,
                created_at=started.get(observation.session, started[min(started)]),
            )
        )
    # A negative distance switches near-duplicate merging off: every observation is kept
    # (exact repeats of a text still collapse, as they would in the bot).
    # The dataset's own observations (written by people, not a model): `given`, so grounding
    # checks them for everything but support in the exact words of the dialogue.
    written = await knowledge.add_facts(facts, near_duplicate_distance=-1.0, given=True)
    loaded.facts = sum(1 for w in written if w.stored)
    return loaded.facts


# --------------------------------------------------------------------------------------------
# Asking


def retrieval_questions(conversation: Conversation) -> tuple[list[Question], int]:
    """Questions of categories 1-4 with evidence, and how many were left out for lack of it."""
    asked = [q for q in conversation.questions if q.category in RETRIEVAL_CATEGORIES]
    with_evidence = [q for q in asked if q.evidence]
    return with_evidence, len(asked) - len(with_evidence)


async def ask_messages(
    loaded: LoadedConversation, retriever: MessageRetriever, *, depth: int = max(KS)
) -> list[QuestionResult]:
    questions, _ = retrieval_questions(loaded.conversation)
    # Query vectors first, in one call: the provider's query (the message text) is a cache
    # hit in the bot too, so latency is measured the way the bot pays it.
    await retriever.embedder.embed([q.question for q in questions])
    results = []
    for question in questions:
        started = time.perf_counter()
        found = await retriever.search(question.question, room_id=loaded.room_id, limit=depth)
        seconds = time.perf_counter() - started
        retrieved = tuple(frozenset({loaded.dia_of[r.memory.id]}) for r in found)
        results.append(_result(loaded, question, retrieved, seconds))
    return results


async def ask_facts(
    loaded: LoadedConversation, knowledge: Knowledge, *, depth: int = max(KS)
) -> list[QuestionResult]:
    questions, _ = retrieval_questions(loaded.conversation)
    await knowledge.embedder.embed([q.question for q in questions])
    subjects = list(loaded.speaker_ids.values())
    results = []
    for question in questions:
        started = time.perf_counter()
        facts = await knowledge.search_facts(
            question.question,
            subject_ids=subjects,
            world_id=loaded.world_id,
            limit=depth,
            max_distance=2.0,  # rank every fact; recall@k judges the order
        )
        seconds = time.perf_counter() - started
        retrieved = tuple(
            frozenset(loaded.dia_of[s] for s in fact.source_message_ids if s in loaded.dia_of)
            for fact in facts[:depth]
        )
        results.append(_result(loaded, question, retrieved, seconds))
    return results


def _result(
    loaded: LoadedConversation,
    question: Question,
    retrieved: tuple[frozenset[str], ...],
    seconds: float,
) -> QuestionResult:
    return QuestionResult(
        sample_id=loaded.conversation.sample_id,
        category=question.category,
        evidence=question.evidence,
        retrieved=retrieved,
        seconds=seconds,
    )


# --------------------------------------------------------------------------------------------
# Scoring


def recall_at(results: Sequence[QuestionResult], ks: Sequence[int] = KS) -> dict[str, float]:
    if not results:
        return {str(k): 0.0 for k in ks}
    return {str(k): round(float(np.mean([r.recall(k) for r in results])), 4) for k in ks}


def summarise(results: Sequence[QuestionResult], ks: Sequence[int] = KS) -> dict[str, Any]:
    latencies = np.array([r.seconds for r in results]) * 1000 if results else np.zeros(1)
    categories = sorted({r.category for r in results})
    return {
        "questions": len(results),
        "recall_at": recall_at(results, ks),
        "by_category": {
            CATEGORY_NAMES[c]: {
                "questions": sum(1 for r in results if r.category == c),
                "recall_at": recall_at([r for r in results if r.category == c], ks),
            }
            for c in categories
        },
        "latency_ms": {
            "p50": round(float(np.percentile(latencies, 50)), 2),
            "p95": round(float(np.percentile(latencies, 95)), 2),
        },
    }


async def run_recall(
    data: Path,
    *,
    store: MongoStore,
    knowledge: Knowledge,
    retriever: MessageRetriever,
    limit_conversations: int | None = None,
    facts: bool = True,
) -> dict[str, Any]:
    """Load LoCoMo into the stores, ask every retrievable question, return plain results."""
    conversations = load_locomo(data)[:limit_conversations]
    messages: list[QuestionResult] = []
    by_facts: list[QuestionResult] = []
    skipped = turns = stored_facts = 0
    for conversation in conversations:
        started = time.perf_counter()
        loaded = await load_conversation(conversation, store=store, knowledge=knowledge)
        turns += len(conversation.turns)
        skipped += retrieval_questions(conversation)[1]
        messages.extend(await ask_messages(loaded, retriever))
        if facts:
            stored_facts += await load_facts(loaded, knowledge=knowledge)
            by_facts.extend(await ask_facts(loaded, knowledge))
        log.info(
            "%s: %d turns in %.1fs",
            conversation.sample_id,
            len(conversation.turns),
            time.perf_counter() - started,
        )
    result: dict[str, Any] = {
        "data": str(data),
        "conversations": [c.sample_id for c in conversations],
        "turns": turns,
        "skipped_without_evidence": skipped,
        "messages": summarise(messages),
        "retriever": _options(retriever),
    }
    if facts:
        result["facts"] = {"facts": stored_facts, **summarise(by_facts)}
    return result


def _options(retriever: MessageRetriever) -> dict[str, Any]:
    options = asdict(retriever.options)
    return {k: sorted(v) if isinstance(v, frozenset | set) else v for k, v in options.items()}


def format_table(result: dict[str, Any]) -> str:
    ks = list(result["messages"]["recall_at"])
    head = "| retrieval | " + " | ".join(f"R@{k}" for k in ks) + " | p50 ms | p95 ms |"
    lines = [head, "|" + "---|" * (len(ks) + 3)]
    for label, key in (("messages (hybrid)", "messages"), ("facts", "facts")):
        part = result.get(key)
        if part is None:
            continue
        recall = " | ".join(f"{part['recall_at'][k]:.3f}" for k in ks)
        latency = part["latency_ms"]
        lines.append(f"| {label} | {recall} | {latency['p50']:.1f} | {latency['p95']:.1f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line: `mnemo bench recall --data FILE`


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemo bench recall",
        description="LoCoMo turn-level evidence recall of Mnemo's message retrieval.",
    )
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--no-facts", action="store_true", help="skip the facts variant")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="all-MiniLM-L6-v2 ONNX folder (default: MNEMO_EMBEDDING_MODEL_DIR, "
        "MNEMO_TEST_MODEL_DIR, then Chroma's cache)",
    )
    parser.add_argument(
        "--mongodb-uri",
        default=None,
        help="a MongoDB to use (a throwaway database is created and dropped); "
        "default: a bundled server in a temporary folder",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.conversations is not None and args.conversations < 1:
        print("mnemo bench recall: --conversations must be at least 1", file=sys.stderr)
        return 2
    try:
        # Read once up front: a wrong file fails before any server starts.
        load_locomo(args.data)
        result = asyncio.run(_bench(args))
    except (LocomoError, OSError) as error:
        print(f"mnemo bench recall: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        from bot.knowledge.embeddings import EmbedderError
        from bot.storage.mongo import StorageUnavailable

        if isinstance(error, EmbedderError | StorageUnavailable):
            print(f"mnemo bench recall: {error}", file=sys.stderr)
            return 2
        raise
    print(format_table(result))
    print(
        f"{len(result['conversations'])} conversations, {result['turns']} turns, "
        f"{result['messages']['questions']} questions "
        f"({result['skipped_without_evidence']} without evidence left out)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from bot.knowledge.vectors import VectorIndex
    from bot.storage.bundled.server import EmbeddedMongo

    embedder = _embedder(args.model_dir)
    # Everything lives in a temporary folder: a benchmark never writes into the bot's data.
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as folder:
        server = None if args.mongodb_uri else EmbeddedMongo(Path(folder))
        if server is not None:
            await server.start()
        store = MongoStore.from_uri(
            args.mongodb_uri or server.uri,  # type: ignore[union-attr]
            f"mnemo_bench_{uuid.uuid4().hex[:12]}",
        )
        vectors = VectorIndex.persistent(Path(folder) / "chroma")
        try:
            await store.ping()
            await store.ensure_indexes()
            knowledge = Knowledge(store, vectors, embedder)
            retriever = MessageRetriever(store, vectors, embedder)
            return await run_recall(
                args.data,
                store=store,
                knowledge=knowledge,
                retriever=retriever,
                limit_conversations=args.conversations,
                facts=not args.no_facts,
            )
        finally:
            await store.client.drop_database(store.db.name)
            await store.close()
            await vectors.close()
            if server is not None:
                await server.stop()


def _embedder(model_dir: Path | None) -> Any:
    from bot.config.settings import EmbeddingSettings, ModelSettings
    from bot.knowledge.embedder_factory import make_embedder
    from bot.knowledge.embeddings import CachedEmbedder
    from bot.knowledge.onnx_embedder import OnnxEmbedder, locate_model_dir

    settings = EmbeddingSettings()
    if settings.model != "local":
        return make_embedder(settings, ModelSettings(), None)
    configured = model_dir or settings.model_dir
    if configured is None and os.environ.get("MNEMO_TEST_MODEL_DIR"):
        configured = Path(os.environ["MNEMO_TEST_MODEL_DIR"])
    # Never download during a benchmark: a missing model is a one-line error.
    folder = locate_model_dir(configured, download=False)
    return CachedEmbedder(OnnxEmbedder(folder, batch_size=settings.batch_size), max_entries=8192)

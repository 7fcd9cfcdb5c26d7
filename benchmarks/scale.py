"""`mnemo bench scale`: many rooms at once through the runtime, with an instant model.

N rooms each send M messages (one after another within a room, as a person types and as
Telegram delivers them; the rooms all at once) through `AgentRuntime.handle()` with the real
stores and the real facts and goals plugins. The model answers instantly, so what is measured
is Mnemo itself: messages per second, reply latency, and whether anything went wrong: every
message must get exactly one reply (callback and stored reply), replies and evaluations must
run in each room's message order (a probe evaluator records the order), and the evaluation
queue must drain with no job left pending.

Where the time goes is measured without a profiler: CPU seconds of the event-loop thread (the
runtime, pydantic, PyMongo), of the other threads (ONNX inference and Chroma run in worker
threads), and of the bundled nx-27017 server process. Variants show what the local embedder
costs: `full` (ONNX embedder + Chroma) and `hash-embedder` (the OpenAI embedder client against
the fake OpenAI server, which answers hash vectors at once, + Chroma). The model is the test
harness's `ScriptedModel` answering at once; nothing of Mnemo's own is replaced.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import openai

from benchmarks.cost import CHARACTER, memory_plugins
from benchmarks.embedder import local_embedder
from benchmarks.round_trips import RoundTrips
from benchmarks.stats import BenchError, cpu_seconds, rate, summary
from bot import Context, Evaluator, Plugin
from bot.app.composition import agent_id_for
from bot.domain.characters import load_character
from bot.domain.records import Content, Memory
from bot.domain.state import State
from bot.knowledge.embeddings import CachedEmbedder, Embedder, OpenAIEmbedder
from bot.knowledge.messages import MessageIndex
from bot.knowledge.vectors import VectorIndex
from bot.llm.accounting import UsageLedger
from bot.llm.base import Task
from bot.memory.store import Knowledge
from bot.plugin.loading import Registry
from bot.runtime.agent import AgentRuntime, RuntimeOptions
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.mongo import MongoStore
from bot.testing.harness import TestChat
from bot.testing.openai_server import FakeOpenAIServer
from bot.testing.scripted import ScriptedModel

log = logging.getLogger(__name__)

Variant = Literal["full", "hash-embedder"]
VARIANTS: tuple[Variant, ...] = ("full", "hash-embedder")
THROUGHPUT_GOAL = 100.0  # messages per second at 1,000 rooms
GOAL_ROOMS = 1000
REPLY = '{"text": "ok", "action": "NONE"}'
PROBE = "BENCH_ORDER"


# ---------------------------------------------------------------------------------------------
# The instant model and the probe


def instant_answers(prompt: str, task: str, state: State | None) -> str:
    """The model's answers: a fixed reply, every candidate evaluator, and "[]" (nothing
    learned, no goal change) for everything else, at once."""
    if task == Task.REPLY:
        return REPLY
    if task == Task.EVALUATOR_SELECTION and state is not None:
        return json.dumps(state.data.get("evaluator_names", []))
    return "[]"


@dataclass
class OrderProbe:
    """An evaluator that records, per room, the messages it was run for, in order."""

    seen: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def plugin(self) -> Plugin:
        async def record(ctx: Context, found: object) -> None:
            self.seen[ctx.message.room_id].append(ctx.message.id)

        return Plugin(
            name="bench_order",
            description="Benchmark probe: records the order evaluations run in.",
            evaluators=[
                Evaluator(
                    name=PROBE,
                    description="Records which message was evaluated (benchmark probe).",
                    handler=record,
                    always_run=True,
                )
            ],
        )


# ---------------------------------------------------------------------------------------------
# Stores


@dataclass
class BenchStores:
    store: MongoStore
    vectors: VectorIndex
    server: EmbeddedMongo | None  # the bundled server, when no URI was given
    commands: RoundTrips


def _store(uri: str, commands: RoundTrips) -> MongoStore:
    return MongoStore.from_uri(
        uri,
        f"mnemo_bench_{uuid.uuid4().hex[:12]}",
        app_name="mnemo-bench",
        event_listeners=[commands],
    )


@asynccontextmanager
async def bench_stores(
    folder: Path, *, mongodb_uri: str | None = None
) -> AsyncIterator[BenchStores]:
    """MongoDB (a bundled server in `folder`, or a throwaway database at the URI) and Chroma
    in `folder`; everything is closed, and a database at a URI dropped, afterwards."""
    server = None if mongodb_uri else EmbeddedMongo(folder)
    if server is not None:
        await server.start()
    uri = mongodb_uri or server.uri  # type: ignore[union-attr]
    commands = RoundTrips()
    store = _store(uri, commands)
    vectors = VectorIndex.persistent(folder / "chroma")
    try:
        await store.ping()
        await store.ensure_indexes()
        yield BenchStores(store, vectors, server, commands)
    finally:
        if mongodb_uri:
            await store.client.drop_database(store.db.name)
        await store.close()
        await vectors.close()
        if server is not None:
            await server.stop()


# ---------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True)
class ScaleOptions:
    rooms: int
    messages: int = 5
    variant: Variant = "full"
    timeout: float = 900.0
    # Also report every reply's latency, the messages sent and those evaluated here, by room
    # (a topology run pools its processes': a room's evaluation may run in another process).
    keep_raw: bool = False


@dataclass
class _Tally:
    """What the rooms saw, filled in by the reply callbacks."""

    latencies: list[float] = field(default_factory=list)
    replies: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    reply_order: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    sent: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))


def _embedder(variant: Variant, model_dir: Path | None, server: FakeOpenAIServer) -> Embedder:
    if variant == "full":
        if model_dir is None:
            raise BenchError("the full variant needs the embedding model (--model-dir)")
        return CachedEmbedder(local_embedder(model_dir))
    client = openai.AsyncOpenAI(api_key="sk-bench-fake", base_url=server.base_url, max_retries=0)
    return CachedEmbedder(OpenAIEmbedder(client, "text-embedding-3-small"))


def _registry(probe: OrderProbe, plugins_dir: Path | None) -> Registry:
    registry = memory_plugins(plugins_dir)
    registry.add(probe.plugin(), "benchmarks.scale")
    return registry


async def _room(runtime: AgentRuntime, chat: TestChat, messages: int, tally: _Tally) -> None:
    for number in range(1, messages + 1):
        memory = chat.message(f"Message {number} from {chat.name}: the weather is nice today.")
        tally.sent[chat.room.id].append(memory.id)

        async def send(content: Content, memory: Memory = memory) -> None:
            tally.replies[memory.id] += 1
            tally.reply_order[memory.room_id].append(memory.id)

        started = time.perf_counter()
        await runtime.handle(memory, send, account=chat.account, room=chat.room)
        tally.latencies.append(time.perf_counter() - started)


def order_violations(expected: dict[str, list[str]], seen: dict[str, list[str]]) -> int:
    """Rooms whose observed sequence is not the sent order (missing or repeated items are
    counted separately, so here only the order of what was seen is judged)."""
    violations = 0
    for room, sent in expected.items():
        position = {message: index for index, message in enumerate(sent)}
        observed = [position[m] for m in seen.get(room, []) if m in position]
        if any(a > b for a, b in itertools.pairwise(observed)):
            violations += 1
    return violations


async def _stored_replies(
    store: MongoStore, agent_id: str, rooms: Sequence[str], messages: int
) -> dict[str, list[Memory]]:
    """The agent's stored replies in each room, oldest first."""
    gate = asyncio.Semaphore(16)
    # Every message and its reply, with room to spare for anything unexpected.
    limit = 4 * messages + 4

    async def one(room: str) -> tuple[str, list[Memory]]:
        async with gate:
            found = await store.memories.recent(room, limit)
        return room, [m for m in found if m.user_id == agent_id]

    return dict(await asyncio.gather(*(one(room) for room in rooms)))


def lost_and_duplicated(
    sent: dict[str, list[str]], answered: Mapping[str, int] | Mapping[str | None, int]
) -> tuple[int, int]:
    every = [m for messages in sent.values() for m in messages]
    lost = sum(1 for m in every if answered.get(m, 0) == 0)
    duplicated = sum(1 for m in every if answered.get(m, 0) > 1)
    return lost, duplicated


class _Cpu:
    """CPU seconds used since creation by this process's event-loop thread, its other
    threads, and the bundled MongoDB server."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.start = self._read()

    def _read(self) -> dict[str, float | None]:
        main = cpu_seconds(f"self/task/{os.getpid()}")
        total = cpu_seconds("self")
        return {
            "event_loop": main,
            "process": total,
            "mongodb_server": cpu_seconds(self.server_pid) if self.server_pid else None,
        }

    def used(self) -> dict[str, float | None]:
        now = self._read()
        out: dict[str, float | None] = {}
        for key, value in now.items():
            before = self.start[key]
            out[key] = None if value is None or before is None else round(value - before, 2)
        if out["process"] is not None and out["event_loop"] is not None:
            out["worker_threads"] = round(out["process"] - out["event_loop"], 2)
        return out


async def run_scale(
    options: ScaleOptions,
    stores: BenchStores,
    *,
    model_dir: Path | None,
    plugins_dir: Path | None = None,
) -> dict[str, Any]:
    """One run of `options.rooms` rooms × `options.messages` messages; plain results."""
    async with FakeOpenAIServer() as server:
        # The server answers the `hash-embedder` variant's embeddings; `full` leaves it idle.
        embedder = _embedder(options.variant, model_dir, server)
        return await _run_scale(options, stores, embedder, plugins_dir)


async def _run_scale(
    options: ScaleOptions, stores: BenchStores, embedder: Embedder, plugins_dir: Path | None
) -> dict[str, Any]:
    probe = OrderProbe()
    registry = _registry(probe, plugins_dir)
    await embedder.embed(["warm-up"])  # loads the ONNX model outside the measurement
    character = load_character(CHARACTER)
    runtime = AgentRuntime(
        agent_id=agent_id_for(character),
        character=character,
        store=stores.store,
        knowledge=Knowledge(stores.store, stores.vectors, embedder),
        messages=MessageIndex(stores.vectors, embedder),
        model=ScriptedModel(instant_answers),
        registry=registry,
        ledger=UsageLedger(),
        options=RuntimeOptions(evaluator_selection="llm"),
        rate_limiter=None,
    )
    await runtime.start()
    tally = _Tally()
    # Unique per run, so runs sharing the stores never see each other's rooms.
    tag = uuid.uuid4().hex[:8]
    chats = [
        TestChat(runtime, name=f"user-{tag}-{i}", chat=f"room-{tag}-{i}", kind="dm")
        for i in range(options.rooms)
    ]
    server_pid = stores.server.pid if stores.server is not None else None
    cpu = _Cpu(server_pid)
    commands_before = stores.commands.snapshot()
    started = time.perf_counter()
    timed_out = False
    try:
        try:
            await asyncio.wait_for(
                asyncio.gather(*(_room(runtime, c, options.messages, tally) for c in chats)),
                options.timeout,
            )
        except TimeoutError:
            timed_out = True
        replied = time.perf_counter()
        drained = await runtime.evaluations.join(timeout=options.timeout)
        finished = time.perf_counter()
        used = cpu.used()
        commands_after = stores.commands.snapshot()
    finally:
        await runtime.stop()
    return await _results(
        options,
        runtime,
        stores,
        tally,
        probe,
        reply_seconds=replied - started,
        drain_seconds=finished - replied,
        drained=drained and not timed_out,
        cpu=used,
        commands=(
            commands_after[0] - commands_before[0],
            commands_after[1] - commands_before[1],
        ),
    )


async def _results(
    options: ScaleOptions,
    runtime: AgentRuntime,
    stores: BenchStores,
    tally: _Tally,
    probe: OrderProbe,
    *,
    reply_seconds: float,
    drain_seconds: float,
    drained: bool,
    cpu: dict[str, float | None],
    commands: tuple[int, float],
) -> dict[str, Any]:
    store = stores.store
    messages = sum(len(m) for m in tally.sent.values())
    lost, duplicated = lost_and_duplicated(tally.sent, tally.replies)
    ours = await _stored_replies(store, runtime.agent_id, list(tally.sent), options.messages)
    stored_count = Counter(m.content.in_reply_to for rs in ours.values() for m in rs)
    stored_lost, stored_duplicated = lost_and_duplicated(tally.sent, stored_count)
    evaluated = Counter(m for ms in probe.seen.values() for m in ms)
    not_evaluated, eval_duplicated = lost_and_duplicated(tally.sent, evaluated)
    pending = await store.jobs.count(status="pending") + await store.jobs.count(status="running")
    failed = await store.jobs.count(status="failed")
    # A job still queued (the drain timed out) is late, not lost: it runs on the next start.
    eval_lost = max(0, not_evaluated - pending)
    total_seconds = reply_seconds + drain_seconds
    return {
        "rooms": options.rooms,
        "messages_per_room": options.messages,
        "variant": options.variant,
        "messages": messages,
        "reply_seconds": round(reply_seconds, 2),
        "messages_per_second": rate(messages, reply_seconds),
        "reply_latency_ms": summary([s * 1000 for s in tally.latencies], digits=1),
        "replies_lost": lost,
        "replies_duplicated": duplicated,
        "stored_replies_lost": stored_lost,
        "stored_replies_duplicated": stored_duplicated,
        "reply_order_violations": order_violations(tally.sent, tally.reply_order),
        "stored_reply_order_violations": order_violations(
            tally.sent,
            {room: [m.content.in_reply_to or "" for m in rs] for room, rs in ours.items()},
        ),
        "evaluations_lost": eval_lost,
        "evaluations_not_yet_run": not_evaluated - eval_lost,
        "evaluations_duplicated": eval_duplicated,
        "evaluation_order_violations": order_violations(tally.sent, probe.seen),
        "backlog_drain_seconds": round(drain_seconds, 2),
        "backlog_drained": drained,
        "jobs_left_pending": pending,
        "jobs_failed": failed,
        "end_to_end_messages_per_second": rate(messages, total_seconds),
        "cpu_seconds": cpu,
        "mongodb_server_busy": _share(cpu.get("mongodb_server"), total_seconds),
        "mongodb_commands": commands[0],
        "mongodb_commands_per_message": round(commands[0] / messages, 1) if messages else 0.0,
        "mongodb_round_trip_ms": round(commands[1] / commands[0] * 1000, 2) if commands[0] else 0.0,
        "mongodb_server_cpu_ms_per_command": (
            round(server_cpu / commands[0] * 1000, 2)
            if (server_cpu := cpu.get("mongodb_server")) is not None and commands[0]
            else None
        ),
        "event_loop_busy": _share(cpu.get("event_loop"), total_seconds),
    } | _raw(options, tally, probe)


def _raw(options: ScaleOptions, tally: _Tally, probe: OrderProbe) -> dict[str, Any]:
    if not options.keep_raw:
        return {}
    return {
        "raw_latencies_ms": [seconds * 1000 for seconds in tally.latencies],
        "raw_sent": {room: list(ids) for room, ids in tally.sent.items()},
        "raw_evaluated": {room: list(ids) for room, ids in probe.seen.items()},
    }


def _share(seconds: float | None, wall: float) -> float | None:
    """CPU seconds as a share of one core over the wall time (1.0 = one core flat out)."""
    if seconds is None or wall <= 0:
        return None
    return round(seconds / wall, 2)


async def run_scale_series(
    rooms: Sequence[int],
    *,
    messages: int,
    variants: Sequence[Variant],
    model_dir: Path | None,
    mongodb_uri: str | None = None,
    plugins_dir: Path | None = None,
    extra_variant_rooms: int | None = None,
    max_messages: int | None = None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """The first variant at every room count, then the other variants at
    `extra_variant_rooms` (default: the largest count), each on fresh stores.

    `max_messages` caps a run's total: rooms × messages becomes rooms × max(1, cap // rooms).
    """
    runs = []
    first, *others = variants
    plan = [(n, first) for n in rooms]
    at = extra_variant_rooms or max(rooms)
    plan += [(at, variant) for variant in others]
    for count, variant in plan:
        per_room = (
            messages if max_messages is None else min(messages, max(1, max_messages // count))
        )
        log.info("scale: %d rooms × %d message(s) each, %s", count, per_room, variant)
        with tempfile.TemporaryDirectory(prefix="mnemo-bench-scale-") as folder:
            async with bench_stores(Path(folder), mongodb_uri=mongodb_uri) as stores:
                runs.append(
                    await run_scale(
                        ScaleOptions(
                            rooms=count, messages=per_room, variant=variant, timeout=timeout
                        ),
                        stores,
                        model_dir=model_dir,
                        plugins_dir=plugins_dir,
                    )
                )
    return {
        "model": "instant (in-process)",
        "mongodb": "MONGODB_URI" if mongodb_uri else "bundled nx-27017",
        "runs": runs,
        "goals": scale_goals(runs),
    }


def scale_goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    goals = []
    first = [r for r in runs if r["variant"] == runs[0]["variant"]] if runs else []
    biggest = max(first, key=lambda r: r["rooms"], default=None)
    if biggest is not None:
        goals.append(
            {
                "goal": f"messages per second at {GOAL_ROOMS:,} rooms ({biggest['variant']})",
                "target": f"≥ {THROUGHPUT_GOAL:g}",
                "measured": f"{biggest['messages_per_second']:.1f} at {biggest['rooms']:,} rooms",
                "met": biggest["rooms"] >= GOAL_ROOMS
                and biggest["messages_per_second"] >= THROUGHPUT_GOAL,
            }
        )
    lost = sum(
        r["replies_lost"]
        + r["replies_duplicated"]
        + r["stored_replies_lost"]
        + r["stored_replies_duplicated"]
        + r["evaluations_lost"]
        + r["evaluations_duplicated"]
        for r in runs
    )
    goals.append(
        {
            "goal": "every message gets exactly one reply and one evaluation",
            "target": "0 lost or duplicated",
            "measured": str(lost),
            "met": lost == 0,
        }
    )
    pending = sum(r["jobs_left_pending"] for r in runs)
    slowest = max((r["backlog_drain_seconds"] for r in runs), default=0.0)
    goals.append(
        {
            "goal": "evaluation backlog drains after the burst",
            "target": "0 jobs left pending",
            "measured": f"{pending} left; slowest drain {slowest:,.0f} s",
            "met": pending == 0 and all(r["backlog_drained"] for r in runs),
        }
    )
    order = sum(
        r["reply_order_violations"]
        + r["stored_reply_order_violations"]
        + r["evaluation_order_violations"]
        for r in runs
    )
    goals.append(
        {
            "goal": "replies and evaluations in message order in every room",
            "target": "0 violations",
            "measured": str(order),
            "met": order == 0,
        }
    )
    return goals

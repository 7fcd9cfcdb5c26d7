"""`mnemo bench <part> [options]`: run benchmarks, write results.json, results.md and charts.

Parts (each a subcommand with its own `--help`): cost, overhead (from a cost run), scale,
recall, vectors, embedder, startup, all. `all` runs every part once (overhead comes from the
cost run) and draws the scale and recall charts; `--quick` scales every part down for a fast
look. Benchmarks report: a missed goal is a row in the report, never a failing exit code. Exit
code 2 means nothing could be measured (a missing model, an unreadable script ...), with the
reason on one line.

The benchmarks are not part of the installed package: they run from a Mnemo checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.stats import REPO_ROOT, BenchError

log = logging.getLogger(__name__)

# `all` in this order: the cheap, always-available parts first.
ALL_PARTS = ("cost", "scale", "recall", "vectors", "embedder", "startup", "faults", "memory")
DEFAULT_OUT = Path("bench-results")
DEFAULT_LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo-dev.json"

# Full and --quick sizes of each part's options (an explicit option wins over both).
SIZES: dict[str, tuple[Any, Any]] = {
    "messages_limit": (None, 10),
    "rooms": ("10,100,1000", "10,100"),
    "messages": (5, 3),
    # The bundled MongoDB server scans whole collections, so a run's cost grows with the
    # square of its messages: 1,000 rooms send one message each unless asked for more.
    "max_messages": (1000, 300),
    "variants": ("full,hash-embedder", "full,hash-embedder"),
    # None: the other variants run at the largest room count, beside the goal's run.
    "variant_rooms": (None, None),
    "conversations": (None, 1),
    "sizes": ("10000,100000", "2000,10000"),
    "embed_texts": (10_000, 2_000),
    "queries": (200, 50),
    "texts": (1024, 256),
    "stock_texts": (128, 32),
    "runs": (3, 1),
    "fault_rooms": (100, 10),
    "fault_messages": (2, 2),
    "faults": (12, 4),
    "server_kills": (100, 10),
    "full_disk_chats": (50, 5),
    "kill_mid_reply": (50, 3),
    "kill_chats": (6, 3),
    "adapter_rooms": (100, 10),
}


@dataclass(frozen=True)
class Part:
    """One `mnemo bench` subcommand: its help line, its own options, and how it runs."""

    name: str
    help: str
    add_options: Callable[[argparse.ArgumentParser], None]


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a fast look")
    parser.add_argument("--model-dir", type=Path, help="all-MiniLM-L6-v2 ONNX folder")
    parser.add_argument("--mongodb-uri", help="a MongoDB to use instead of the bundled server")
    parser.add_argument("--plugins-dir", type=Path, help="folder with the facts and goals plugins")
    parser.add_argument("--no-charts", action="store_true", help="do not draw PNG charts")


def _cost_options(parser: argparse.ArgumentParser) -> None:
    cost = parser.add_argument_group("cost and overhead")
    cost.add_argument("--script", type=Path, help="JSON list of user messages")
    cost.add_argument("--selection", choices=("llm", "all", "both"), default="both")
    cost.add_argument("--messages-limit", type=int, help="only the script's first N messages")
    cost.add_argument(
        "--conversation-length",
        type=int,
        default=32,
        help="facts are extracted every half of this many messages (MNEMO_CONVERSATION_LENGTH)",
    )
    cost.add_argument(
        "--pace",
        type=float,
        help="seconds between a reply and the next message, evaluations left running "
        "(default: each message's evaluation finishes before the next message)",
    )
    cost.add_argument(
        "--model-seconds",
        type=float,
        help="the fake model answers one request at a time, each taking this long (a "
        "one-slot local server; the client sends one at a time)",
    )
    cost.add_argument(
        "--live",
        action="store_true",
        help="ask the real model endpoint of the usual settings (OPENAI_BASE_URL, "
        "MNEMO_SMALL_MODEL, MNEMO_LARGE_MODEL, MNEMO_MODEL_TIMEOUT) instead of the fake one",
    )


def _scale_options(parser: argparse.ArgumentParser) -> None:
    scale = parser.add_argument_group("scale")
    scale.add_argument("--rooms", help="room counts, comma separated (default 10,100,1000)")
    scale.add_argument("--messages", type=int, help="messages per room (default 5)")
    scale.add_argument(
        "--variants",
        help="full, hash-embedder; the first runs at every room count, the "
        "others at --variant-rooms (default full,hash-embedder)",
    )
    scale.add_argument(
        "--variant-rooms", type=int, help="rooms for the other variants (default: the most)"
    )
    scale.add_argument(
        "--processes",
        help="also run the largest room count in a deployment's shape: this many Mnemo "
        "processes (comma separated, e.g. 1,2) sharing a MongoDB-compatible server started "
        "on its own and a `chroma run` server",
    )
    scale.add_argument(
        "--max-messages",
        type=int,
        help="cap on a run's messages: rooms × min(messages, cap // rooms) (default 1000)",
    )
    scale.add_argument(
        "--adapter-rooms",
        type=int,
        help="with the full variant, also measure end to end through the Telegram adapter "
        "(fake Bot API, polling and webhook): this many chats, --messages each (default 100; "
        "0 skips it)",
    )


def _recall_options(parser: argparse.ArgumentParser) -> None:
    recall = parser.add_argument_group("recall")
    recall.add_argument("--data", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON file")
    recall.add_argument("--conversations", type=int, help="only the first N conversations")


def _vectors_options(parser: argparse.ArgumentParser) -> None:
    vectors = parser.add_argument_group("vectors")
    vectors.add_argument("--sizes", help="stored facts, comma separated (default 10000,100000)")
    vectors.add_argument("--embed-texts", type=int, help="texts really embedded (default 10000)")
    vectors.add_argument("--embed-all", action="store_true", help="embed every stored fact")
    vectors.add_argument("--queries", type=int, help="queries per size (default 200)")


def _embedder_options(parser: argparse.ArgumentParser) -> None:
    embedder = parser.add_argument_group("embedder")
    embedder.add_argument("--texts", type=int, help="texts for Mnemo's embedder (default 1024)")
    embedder.add_argument("--stock-texts", type=int, help="texts for Chroma's (default 128)")


def _memory_options(parser: argparse.ArgumentParser) -> None:
    memory = parser.add_argument_group("memory")
    data_help = (
        "JSON lists of conversations, one or more files, each reported on its own "
        "(default: the shipped set)"
    )
    try:
        memory.add_argument("--data", dest="memory_data", type=Path, nargs="+", help=data_help)
    except argparse.ArgumentError:  # `all` has recall's --data (LoCoMo) too
        memory.add_argument(
            "--memory-data", dest="memory_data", type=Path, nargs="+", help=data_help
        )
    memory.add_argument(
        "--extract-every",
        type=int,
        default=1,
        help="learn after every N turns, as after a pause (0: only the usual cadence); "
        "always once at the end (default 1)",
    )
    memory.add_argument(
        "--only",
        dest="memory_only",
        help="only these conversations, by name, comma separated (a real model on a CPU "
        "takes minutes a conversation)",
    )
    memory.add_argument(
        "--offline",
        action="store_true",
        help="the offline model even when OPENAI_API_KEY / OPENAI_BASE_URL are set",
    )
    memory.add_argument(
        "--replay",
        type=Path,
        help="answer every model call as a recorded live run answered it (a `make bench-live` "
        "--record file): that model's figures on the code as it is now, with no model",
    )
    memory.add_argument(
        "--offline-replies",
        action="store_true",
        help="replies from the offline model, learning from the configured one (a slow "
        "real model's memory measured in half the calls; the reply figures are then not its)",
    )


def _startup_options(parser: argparse.ArgumentParser) -> None:
    startup = parser.add_argument_group("startup")
    startup.add_argument("--runs", type=int, help="launches of `mnemo chat` (default 3)")


def _faults_options(parser: argparse.ArgumentParser) -> None:
    faults = parser.add_argument_group("faults")
    faults.add_argument("--fault-rooms", type=int, help="rooms talking (default 100)")
    faults.add_argument("--fault-messages", type=int, help="messages per room (default 2)")
    faults.add_argument("--faults", type=int, help="kill -9s at random points (default 12)")
    faults.add_argument("--seed", type=int, default=1, help="seed of the script and the faults")
    faults.add_argument(
        "--server-kills",
        type=int,
        help="kill -9s of the process owning the bundled database, under writes (default 100)",
    )
    faults.add_argument(
        "--full-disk-chats",
        type=int,
        help="people writing to a `mnemo run` on Telegram polling while its disk is full "
        "(default 50; 0 skips it)",
    )
    faults.add_argument(
        "--kill-mid-reply",
        type=int,
        help="kill -9s of a `mnemo run` on Telegram polling while it writes replies, each "
        "followed by a new message in every chat (default 50; 0 skips it)",
    )
    faults.add_argument("--kill-chats", type=int, help="chats of the kill-mid-reply loop (6)")
    faults.add_argument(
        "--kill-window-minutes",
        type=float,
        default=5.0,
        help="MNEMO_ANSWER_WINDOW_MINUTES of the kill-mid-reply loop (default 5)",
    )


# A new benchmark is one module here plus one Part (and its runner in `run_parts`).
PARTS: tuple[Part, ...] = (
    Part("cost", "prompt tokens, model calls and embeddings per message", _cost_options),
    Part("overhead", "Mnemo's own time per message, from a cost run", _cost_options),
    Part("scale", "many rooms at once: throughput, latency, nothing lost", _scale_options),
    Part("recall", "message retrieval on LoCoMo", _recall_options),
    Part("vectors", "fact search latency and memory at 10k-100k facts", _vectors_options),
    Part("embedder", "the ONNX embedder's speed against Chroma's", _embedder_options),
    Part("startup", "time to the `mnemo chat` banner, idle memory", _startup_options),
    Part("faults", "kill -9 at random points: nothing lost, nothing twice", _faults_options),
    Part("memory", "facts that change: stale, kept, attributed", _memory_options),
)


def _all_options(parser: argparse.ArgumentParser) -> None:
    # Each part's adder is called once, even where parts share one (cost and overhead).
    for add in dict.fromkeys(part.add_options for part in PARTS):
        add(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemo bench",
        description="Measure Mnemo. Results go to OUT/results.json and OUT/results.md; "
        "`mnemo bench PART --help` lists a part's options.",
    )
    sub = parser.add_subparsers(dest="part", metavar="PART", required=True)
    everything = (*PARTS, Part("all", "every part once (overhead from the cost run)", _all_options))
    for part in everything:
        child = sub.add_parser(part.name, help=part.help, description=part.help)
        _common_options(child)
        part.add_options(child)
    return parser


def _resolve_sizes(args: argparse.Namespace) -> None:
    for name, (full, quick) in SIZES.items():
        # Only the options this part's parser has.
        if hasattr(args, name) and getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BenchError(f"{option} expects whole numbers separated by commas: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise BenchError(f"{option} expects positive numbers: {text!r}")
    return values


# ---------------------------------------------------------------------------------------------
# Parts


def _model_dir(args: argparse.Namespace) -> Path:
    from benchmarks.embedder import find_model_dir

    return find_model_dir(args.model_dir)


def run_cost_part(args: argparse.Namespace, *, selections: Sequence[str]) -> dict[str, Any]:
    from benchmarks.cost import default_script_path, load_script, run_cost

    script = load_script(args.script)
    if args.messages_limit:
        script = script[: args.messages_limit]
    source = str(args.script) if args.script else _display(default_script_path())
    return asyncio.run(
        run_cost(
            script,
            model_dir=_model_dir(args),
            selections=selections,  # type: ignore[arg-type]
            script_source=source,
            mongodb_uri=args.mongodb_uri,
            plugins_dir=args.plugins_dir,
            live=getattr(args, "live", False),
            conversation_length=getattr(args, "conversation_length", 32),
            pace=getattr(args, "pace", None),
            model_seconds=getattr(args, "model_seconds", None),
        )
    )


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def run_scale_part(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.scale import VARIANTS, run_scale_series

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise BenchError(f"--variants: choose from {', '.join(VARIANTS)} (got {args.variants!r})")
    if args.messages < 1:
        raise BenchError("--messages must be at least 1")
    needs_model = "full" in variants or bool(args.processes)
    rooms = _ints(args.rooms, "--rooms")
    result = asyncio.run(
        run_scale_series(
            rooms,
            messages=args.messages,
            variants=variants,
            model_dir=_model_dir(args) if needs_model else None,
            mongodb_uri=args.mongodb_uri,
            plugins_dir=args.plugins_dir,
            extra_variant_rooms=args.variant_rooms,
            max_messages=args.max_messages,
        )
    )
    if args.adapter_rooms > 0 and "full" in variants:  # the same real embedder as `full`
        from benchmarks.adapter_scale import run_adapter_scale

        result["adapter"] = asyncio.run(
            run_adapter_scale(
                rooms=args.adapter_rooms,
                messages=args.messages,
                model_dir=_model_dir(args),
                mongodb_uri=args.mongodb_uri,
            )
        )
    if args.processes:
        from benchmarks.topology import run_topology

        most = max(rooms)
        per_room = min(args.messages, max(1, (args.max_messages or most) // most))
        result["topology"] = asyncio.run(
            run_topology(
                rooms=most,
                messages=per_room,
                processes=_ints(args.processes, "--processes"),
                model_dir=_model_dir(args),
                plugins_dir=args.plugins_dir,
            )
        )
    return result


def run_recall_part(args: argparse.Namespace) -> dict[str, Any]:
    if not args.data.is_file():
        raise BenchError(f"LoCoMo data not found at {args.data}: pass --data FILE")
    if args.conversations is not None and args.conversations < 1:
        raise BenchError("--conversations must be at least 1")
    return asyncio.run(_recall(args, _model_dir(args)))


async def _recall(args: argparse.Namespace, model_dir: Path) -> dict[str, Any]:
    from benchmarks.embedder import local_embedder
    from benchmarks.locomo import LocomoError
    from benchmarks.recall import run_recall
    from benchmarks.scale import bench_stores
    from bot.knowledge.embeddings import CachedEmbedder
    from bot.knowledge.retrieval import MessageRetriever
    from bot.memory.store import Knowledge

    embedder = CachedEmbedder(local_embedder(model_dir), max_entries=8192)
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-recall-") as folder:
        async with bench_stores(Path(folder), mongodb_uri=args.mongodb_uri) as stores:
            try:
                return await run_recall(
                    args.data,
                    store=stores.store,
                    knowledge=Knowledge(stores.store, stores.vectors, embedder),
                    retriever=MessageRetriever(stores.store, stores.vectors, embedder),
                    limit_conversations=args.conversations,
                )
            except LocomoError as error:
                raise BenchError(str(error)) from None


def run_vectors_part(args: argparse.Namespace) -> dict[str, Any]:
    sizes = _ints(args.sizes, "--sizes")
    embed_texts = max(sizes) if args.embed_all else args.embed_texts
    if args.queries < 1 or embed_texts < 1:
        raise BenchError("--queries and --embed-texts must be at least 1")
    return asyncio.run(_vectors(_model_dir(args), sizes, embed_texts, args.queries))


async def _vectors(
    model_dir: Path, sizes: Sequence[int], embed_texts: int, queries: int
) -> dict[str, Any]:
    from benchmarks.embedder import local_embedder
    from benchmarks.vectors import open_index, run_vectors

    with tempfile.TemporaryDirectory(prefix="mnemo-bench-vectors-") as folder:
        index = await open_index(Path(folder))
        try:
            # No cache: each query's embedding is part of its latency.
            return await run_vectors(
                index,
                local_embedder(model_dir),
                sizes=sizes,
                embed_texts=embed_texts,
                queries=queries,
            )
        finally:
            await index.close()


def run_embedder_part(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.embedder import run_embedder

    if args.texts < 1 or args.stock_texts < 0:
        raise BenchError("--texts must be at least 1 and --stock-texts at least 0")
    return asyncio.run(
        run_embedder(_model_dir(args), texts=args.texts, stock_texts=args.stock_texts)
    )


def run_memory_part(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.memory import (
        DEFAULT_DATA,
        load_conversations,
        pick_conversations,
    )

    files = list(args.memory_data) if args.memory_data else [DEFAULT_DATA]
    if args.extract_every < 0:
        raise BenchError("--extract-every must be 0 or more")
    if args.replay is not None and not args.replay.is_file():
        raise BenchError(f"no recording at {args.replay}")
    loaded = [(path, load_conversations(path)) for path in files]
    if args.memory_only:
        wanted = [name for name in args.memory_only.split(",") if name.strip()]
        known = {c.name for _, conversations in loaded for c in conversations}
        unknown = sorted(set(wanted) - known)
        if unknown:
            raise BenchError(f"no conversation named {', '.join(unknown)} in the data")
        loaded = [
            (path, pick_conversations(conversations, [n for n in wanted if n in names]))
            for path, conversations in loaded
            if (names := {c.name for c in conversations}) & set(wanted)
        ]
    if args.quick:
        loaded = [(path, conversations[:5]) for path, conversations in loaded]
    results = asyncio.run(
        _memory_runs(
            loaded,
            replay=args.replay,
            model_dir=_model_dir(args),
            extract_every=args.extract_every,
            mongodb_uri=args.mongodb_uri,
            plugins_dir=args.plugins_dir,
            use_env_model=not args.offline,
            offline_replies=args.offline_replies,
        )
    )
    if len(results) == 1:
        return results[0]
    # Several files: each one's figures, and every file's goals side by side.
    return {"files": results, "goals": [goal for r in results for goal in r["goals"]]}


async def _memory_runs(
    loaded: list[tuple[Path, Any]], *, replay: Path | None, **options: Any
) -> list[dict[str, Any]]:
    """Each file's run; with `replay`, every model call answered from the recording by a
    local OpenAI-compatible server the run is pointed at."""
    from benchmarks.memory import run_memory

    async def runs() -> list[dict[str, Any]]:
        return [
            await run_memory(conversations, data_source=_display(path), **options)
            for path, conversations in loaded
        ]

    if replay is None:
        return await runs()
    from benchmarks.live_model import replaying

    async with replaying(replay) as recorded:
        results = await runs()
    for result in results:
        result["replayed"] = {
            "recording": _display(replay),
            "answered": recorded.served,
            "not_recorded": len(recorded.unrecorded),
        }
    return results


def run_startup_part(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.startup import run_startup

    if args.runs < 1:
        raise BenchError("--runs must be at least 1")
    return run_startup(_model_dir(args), runs=args.runs)


def run_faults_part(args: argparse.Namespace) -> dict[str, Any]:

    from benchmarks.faults import (
        fault_plan,
        run_faults,
        run_full_disk,
        run_kill_mid_reply,
        run_server_kills,
    )

    if min(args.fault_rooms, args.fault_messages, args.faults) < 1:
        raise BenchError("--fault-rooms, --fault-messages and --faults must be at least 1")
    os.environ["MNEMO_TEST_MODEL_DIR"] = str(_model_dir(args))  # read by the worker processes
    total = args.fault_rooms * args.fault_messages
    plan = fault_plan(args.faults, args.seed, spread=max(1, total // args.faults))
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-faults-") as folder:
        report = run_faults(
            Path(folder),
            rooms=args.fault_rooms,
            messages=args.fault_messages,
            faults=plan,
            seed=args.seed,
        )
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-server-kills-") as folder:
        server = run_server_kills(Path(folder), kills=max(args.server_kills, 0), seed=args.seed)
    full_disk = None
    if args.full_disk_chats > 0:
        with tempfile.TemporaryDirectory(prefix="mnemo-bench-full-disk-") as folder:
            full_disk = run_full_disk(
                Path(folder),
                chats=args.full_disk_chats,
                messages=args.fault_messages,
                model_dir=_model_dir(args),
            ).as_dict()
    mid_reply = None
    if args.kill_mid_reply > 0:
        with tempfile.TemporaryDirectory(prefix="mnemo-bench-kill-mid-reply-") as folder:
            mid_reply = run_kill_mid_reply(
                Path(folder),
                chats=max(args.kill_chats, 1),
                kills=args.kill_mid_reply,
                model_dir=_model_dir(args),
                seed=args.seed,
                window_minutes=args.kill_window_minutes,
            ).as_dict()
    return {
        **report.as_dict(),
        "faults": plan,
        "seed": args.seed,
        "server_kills": server.as_dict(),
        "full_disk": full_disk,
        "kill_mid_reply": mid_reply,
    }


# ---------------------------------------------------------------------------------------------
# Running


def _expected_errors() -> tuple[type[BaseException], ...]:
    from bot.knowledge.embeddings import EmbedderError
    from bot.knowledge.vectors import VectorIndexError
    from bot.plugin.loading import PluginError
    from bot.storage.bundled.server import EmbeddedMongoError
    from bot.storage.mongo import StorageUnavailable

    return (
        BenchError,
        PluginError,
        EmbeddedMongoError,
        EmbedderError,
        StorageUnavailable,
        VectorIndexError,
        OSError,
    )


def _measure(name: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one part; an expected failure becomes {"error": ...} so other parts still run."""
    log.info("bench %s: starting", name)
    started = time.perf_counter()
    try:
        result = run()
    except _expected_errors() as error:
        log.error("bench %s: %s", name, error)
        result = {"error": str(error) or type(error).__name__}
    except Exception as error:  # a bug: keep the other parts' numbers, show the traceback
        log.exception("bench %s failed", name)
        result = {"error": f"{type(error).__name__}: {error}"}
    result["seconds"] = round(time.perf_counter() - started, 1)
    log.info("bench %s: done in %.0f s", name, result["seconds"])
    return result


def run_parts(part: str, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    from benchmarks.cost import overhead_of

    wanted = ALL_PARTS if part == "all" else (part,)
    parts: dict[str, dict[str, Any]] = {}
    for name in wanted:
        if name in ("cost", "overhead"):
            if name == "overhead":
                selections: Sequence[str] = ("llm",)
            elif args.selection == "both":
                selections = ("llm", "all")
            else:
                selections = (args.selection,)
            cost = _measure("cost", functools.partial(run_cost_part, args, selections=selections))
            if name == "cost":
                parts["cost"] = cost
            # The overhead is measured by the cost run; it is reported on its own.
            parts["overhead"] = (
                cost if "error" in cost else {**overhead_of(cost), "seconds": cost["seconds"]}
            )
            continue
        runner = {
            "scale": run_scale_part,
            "recall": run_recall_part,
            "vectors": run_vectors_part,
            "embedder": run_embedder_part,
            "startup": run_startup_part,
            "faults": run_faults_part,
            "memory": run_memory_part,
        }[name]
        parts[name] = _measure(name, functools.partial(runner, args))
    return parts


def _configure_logging() -> None:
    root = logging.getLogger()
    if not any(getattr(h, "mnemo_bench", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        # Libraries that set their own loggers to DEBUG (bm25s) still stop here.
        handler.setLevel(logging.INFO)
        handler.mnemo_bench = True  # type: ignore[attr-defined]  # added once per process
        root.addHandler(handler)
    root.setLevel(logging.WARNING)
    # Progress of the benchmarks themselves; everything else only when it goes wrong.
    logging.getLogger("benchmarks").setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _resolve_sizes(args)
    _configure_logging()
    from benchmarks.report import machine_info, write_report

    command = "mnemo bench " + " ".join(argv if argv is not None else sys.argv[1:])
    started = time.perf_counter()
    results: dict[str, Any] = {
        "command": command.strip(),
        "quick": args.quick,
        "machine": machine_info(),
        "parts": {},
    }
    results["parts"] = run_parts(args.part, args)
    results["seconds"] = round(time.perf_counter() - started, 1)
    charts = not args.no_charts and args.part in ("all", "scale", "recall")
    files = write_report(results, args.out, charts=charts)
    print(files.markdown.read_text(encoding="utf-8"))
    print(f"Results: {files.json}, {files.markdown}", file=sys.stderr)
    errors = [part["error"] for part in results["parts"].values() if "error" in part]
    if errors and len(errors) == len(results["parts"]):
        print(f"mnemo bench: nothing measured ({errors[0]})", file=sys.stderr)
        return 2
    return 0

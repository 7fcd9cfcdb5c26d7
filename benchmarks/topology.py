"""`mnemo bench scale --processes 1,2`: the scale run in a deployment's shape.

A MongoDB-compatible server started on its own (nx-27017, as `MONGODB_URI` would name it), a
`chroma run` server (as `CHROMA_HOST` would), and 1 or 2 Mnemo processes sharing them: each
process (`python -m benchmarks.topology ...`) drives its share of the rooms through
`AgentRuntime.handle()` exactly as `mnemo bench scale` does (real facts and goals plugins,
the ONNX embedder, an instant model) and reports what its rooms saw. The parent adds them up:
replies and evaluations per second over the whole deployment, the reply overhead (the model
answers at once, so a reply's latency is Mnemo's own time), and every reply or evaluation
lost or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.round_trips import RoundTrips
from benchmarks.scale import (
    BenchStores,
    ScaleOptions,
    lost_and_duplicated,
    order_violations,
    run_scale,
)
from benchmarks.stats import REPO_ROOT, BenchError, rate, summary
from bot.knowledge.vectors import VectorIndex
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.mongo import MongoStore

# What each process's rooms saw that counts as a problem.
_PROBLEMS = (
    "replies_lost",
    "replies_duplicated",
    "stored_replies_lost",
    "stored_replies_duplicated",
    "evaluations_lost",
    "evaluations_duplicated",
    "reply_order_violations",
    "evaluation_order_violations",
)


def _chroma_server(folder: Path) -> Any:
    # The tests' `chroma run` launcher (tests/servers/chroma.py): benchmarks run from a
    # checkout, like the tests.
    sys.path.insert(0, str(REPO_ROOT))
    from tests.servers.chroma import ChromaServer

    return ChromaServer(folder)


async def run_topology(
    *,
    rooms: int,
    messages: int,
    processes: Sequence[int],
    model_dir: Path,
    plugins_dir: Path | None = None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """One run per process count, each on a fresh database of one standalone server and a
    fresh collection set of one `chroma run` server."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-topology-") as folder:
        chroma = _chroma_server(Path(folder) / "chroma")
        chroma.start()
        try:
            async with EmbeddedMongo(Path(folder) / "mongo") as mongo:
                for count in processes:
                    runs.append(
                        await _one(
                            count,
                            rooms=rooms,
                            messages=messages,
                            mongo_uri=mongo.uri,
                            chroma=(chroma.host, chroma.port),
                            model_dir=model_dir,
                            plugins_dir=plugins_dir,
                            timeout=timeout,
                        )
                    )
        finally:
            chroma.stop()
    return {
        "mongodb": "nx-27017 started on its own",
        "chroma": "chroma run",
        "runs": runs,
    }


async def _one(
    processes: int,
    *,
    rooms: int,
    messages: int,
    mongo_uri: str,
    chroma: tuple[str, int],
    model_dir: Path,
    plugins_dir: Path | None,
    timeout: float,
) -> dict[str, Any]:
    database = f"mnemo_topology_{uuid.uuid4().hex[:8]}"
    shares = [rooms // processes + (1 if i < rooms % processes else 0) for i in range(processes)]
    command = [sys.executable, "-m", "benchmarks.topology"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *sys.path])}
    started = time.perf_counter()
    workers = [
        await asyncio.create_subprocess_exec(
            *command,
            "--mongodb-uri",
            mongo_uri,
            "--database",
            database,
            "--chroma",
            f"{chroma[0]}:{chroma[1]}",
            "--rooms",
            str(share),
            "--messages",
            str(messages),
            "--model-dir",
            str(model_dir),
            *(["--plugins-dir", str(plugins_dir)] if plugins_dir else []),
            "--timeout",
            str(timeout),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO_ROOT,
        )
        for share in shares
    ]
    try:
        outputs = await asyncio.gather(*(worker.communicate() for worker in workers))
    finally:
        # Interrupted (Ctrl-C, a failed sibling): no process of the run outlives it.
        for worker in workers:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
    wall = time.perf_counter() - started
    results = []
    for worker, (out, err) in zip(workers, outputs, strict=True):
        if worker.returncode != 0:
            raise BenchError(f"a topology process failed: {err.decode(errors='replace')[-800:]}")
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return _combined(processes, rooms, messages, results, wall)


def _combined(
    processes: int, rooms: int, messages: int, results: list[dict[str, Any]], wall: float
) -> dict[str, Any]:
    """The deployment's figures. Replies are counted where they were sent; evaluations over
    every process, since a room's evaluation may run in another process than its reply (the
    processes share one queue)."""
    sent = sum(r["messages"] for r in results)
    sent_ids = {room: ids for r in results for room, ids in r["sent_ids"].items()}
    evaluated = Counter(m for r in results for ids in r["evaluated_ids"].values() for m in ids)
    not_evaluated, evaluations_duplicated = lost_and_duplicated(sent_ids, evaluated)
    # Measured by each process at its end in the shared database: the last to end saw the least.
    pending = min(r["jobs_left_pending"] for r in results)
    replying = max(r["reply_seconds"] for r in results)
    learning = max(r["reply_seconds"] + r["backlog_drain_seconds"] for r in results)
    latencies = [ms for r in results for ms in r["latencies_ms"]]
    commands = sum(r["mongodb_commands"] for r in results)
    return {
        "processes": processes,
        "rooms": rooms,
        "messages_per_room": messages,
        "messages": sent,
        "replies_per_second": rate(sent, replying),
        "evaluations_per_second": rate(sent - not_evaluated, learning),
        "reply_overhead_ms": summary(latencies, digits=1),
        "lost": sum(r["replies_lost"] + r["stored_replies_lost"] for r in results)
        + max(0, not_evaluated - pending),
        "duplicated": sum(r["replies_duplicated"] + r["stored_replies_duplicated"] for r in results)
        + evaluations_duplicated,
        # Within each process (a room's evaluations split between processes are in order in each).
        "order_violations": sum(
            r["reply_order_violations"] + order_violations(sent_ids, r["evaluated_ids"])
            for r in results
        ),
        "jobs_left_pending": pending,
        "mongodb_commands_per_message": round(commands / sent, 1) if sent else 0.0,
        "wall_seconds": round(wall, 1),
    }


# ---------------------------------------------------------------------------------------------
# One process of the deployment


async def _worker(args: argparse.Namespace) -> dict[str, Any]:
    host, _, port = args.chroma.rpartition(":")
    commands = RoundTrips()
    store = MongoStore.from_uri(
        args.mongodb_uri, args.database, app_name="mnemo-bench", event_listeners=[commands]
    )
    vectors = VectorIndex.remote(host, int(port))
    try:
        await store.ping()
        await store.ensure_indexes()
        stores = BenchStores(store, vectors, None, commands)
        options = ScaleOptions(
            rooms=args.rooms, messages=args.messages, timeout=args.timeout, keep_raw=True
        )
        result = await run_scale(
            options, stores, model_dir=args.model_dir, plugins_dir=args.plugins_dir
        )
    finally:
        await store.close()
        await vectors.close()
    result["latencies_ms"] = result.pop("raw_latencies_ms")
    result["sent_ids"] = result.pop("raw_sent")
    result["evaluated_ids"] = result.pop("raw_evaluated")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.topology")
    parser.add_argument("--mongodb-uri", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--chroma", required=True, help="HOST:PORT of a chroma run server")
    parser.add_argument("--rooms", type=int, required=True)
    parser.add_argument("--messages", type=int, default=1)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--plugins-dir", type=Path)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(_worker(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

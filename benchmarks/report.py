"""Benchmark reports: the machine they ran on, a JSON file, a Markdown file, and charts.

The Markdown file is a run's page for docs/performance-history.md, ready to paste: the machine
and date, one table per benchmark, the goals met and missed, and links to the charts (paths
relative to the folder the benchmark ran from, normally the repository root).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.stats import REPO_ROOT

log = logging.getLogger(__name__)

RESULTS_JSON = "results.json"
RESULTS_MARKDOWN = "results.md"
SCALE_CHART = "scale.png"
RECALL_CHART = "recall.png"
_PACKAGES = ("chromadb", "onnxruntime", "pymongo", "nx-27017", "openai")


@dataclass(frozen=True)
class ReportFiles:
    json: Path
    markdown: Path
    charts: dict[str, Path]


# ---------------------------------------------------------------------------------------------
# The machine


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _ram_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    return None


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _commit() -> str | None:
    """The checkout's commit (read-only `git rev-parse`), if this runs from one."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _versions() -> dict[str, str]:
    found = {}
    for package in _PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    return found


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM, OS, Python, date, load and library versions."""
    load = None
    with contextlib.suppress(OSError, AttributeError):
        load = [round(x, 2) for x in os.getloadavg()]
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": _usable_cores(),
        "ram_gib": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": load,
        "commit": _commit(),
        "versions": _versions(),
    }


# ---------------------------------------------------------------------------------------------
# Formatting


def _num(value: float | None, digits: int = 0, *, suffix: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}{suffix}"


def _ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 1000:
        return f"{value / 1000:,.2f} s"
    return f"{value:,.1f} ms"


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """A Markdown table; `align` has one letter per column (l or r), left by default."""
    marks = ["---:" if (align[i : i + 1] == "r") else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _machine_line(machine: dict[str, Any]) -> str:
    ram = f", {machine['ram_gib']:g} GiB RAM" if machine.get("ram_gib") else ""
    commit = f", commit {machine['commit']}" if machine.get("commit") else ""
    load = machine.get("load_average")
    busy = f" Load average at the start: {load[0]:g} (a shared machine)." if load else ""
    return (
        f"Measured on {machine['date']}: {machine['cpu']}, {machine['usable_cores']} cores"
        f"{ram}, {machine['os']}, Python {machine['python']}{commit}.{busy}"
    )


def _error(name: str, part: dict[str, Any]) -> list[str]:
    return [f"_Not measured: {part['error']}_", ""]


# ---------------------------------------------------------------------------------------------
# Sections


def _round_trip_note(mode: dict[str, Any]) -> list[str]:
    trips = mode.get("mongodb_round_trips")
    if not trips:
        return []
    parts = []
    for path in ("reply", "evaluation"):
        found = trips[path]
        commands = ", ".join(f"{name} {n:g}" for name, n in found["commands_per_message"].items())
        parts.append(
            f"{path}: {found['mean']:g} on average, {found['max']:g} at most "
            f"({found['first_message']} for the first message) — {commands}"
        )
    return [
        "² counted with PyMongo's command monitoring on the app's client (one command is one "
        "round trip, whatever the server's speed), per message after the first; "
        + "; ".join(parts)
        + ".",
        "",
    ]


def cost_section(part: dict[str, Any]) -> list[str]:
    modes = part["modes"]
    eliza = part["elizaos"]
    names = list(modes)
    head = ["per user message", f"elizaOS {eliza['version']} ¹"] + [
        f"Mnemo, `{name}` selection" for name in names
    ]

    def row(label: str, theirs: str, value: Callable[[dict[str, Any]], str]) -> list[str]:
        return [label, theirs] + [value(modes[name]) for name in names]

    def tokens(key: str, base: float) -> Callable[[dict[str, Any]], str]:
        def show(mode: dict[str, Any]) -> str:
            value = mode["prompt_tokens_per_message"][key]
            return f"{value:,.0f} ({value / base:.0%})" if base else f"{value:,.0f}"

        return show

    def calls(mode: dict[str, Any]) -> str:
        return f"{mode['model_calls_total'] / max(mode['user_messages'], 1):.2f}"

    def latency(mode: dict[str, Any]) -> str:
        # Here, not at the top: benchmarks.cost imports the whole app, which the other
        # sections of a report do not need.
        from benchmarks.cost import latency_setting

        found = mode.get("reply_latency")
        if not found or found["p50_ratio"] is None:
            return "n/a"
        if latency_setting(mode) is None:
            return "n/a (instant fake model)"
        return (
            f"{_ms(found['message_to_reply_ms']['p50'])} vs {_ms(found['bare_call_ms']['p50'])} "
            f"bare ({found['p50_ratio']:g}×)"
        )

    def embeddings(mode: dict[str, Any]) -> str:
        e = mode["embedding_calls"]
        return f"{e['per_message']:.2f} (at most {e['max']})"

    def facts(mode: dict[str, Any]) -> str:
        f = mode["facts"]
        return f"{f['stored']} stored, {f['distinct']} distinct"

    def overhead(mode: dict[str, Any]) -> str:
        o = mode["overhead_ms"]
        return f"{_ms(o['reply']['p50'])} + {_ms(o['evaluation']['p50'])}"

    def round_trips(mode: dict[str, Any]) -> str:
        trips = mode.get("mongodb_round_trips")
        if not trips:
            return "n/a"
        return f"{trips['reply']['max']:g} + {trips['evaluation']['max']:g}"

    low, high = eliza["embedding_calls_per_message"]
    rows = [
        row(
            "prompt tokens, reply only",
            f"{eliza['reply_prompt_tokens_per_message']:,}",
            tokens("reply", eliza["reply_prompt_tokens_per_message"]),
        ),
        row(
            "prompt tokens, with the fact and goal evaluators",
            f"{eliza['prompt_tokens_per_message']:,}",
            tokens("total", eliza["prompt_tokens_per_message"]),
        ),
        row(
            "… of which evaluator selection",
            f"{eliza['selection_prompt_tokens_per_message']:,}",
            tokens("selection", eliza["selection_prompt_tokens_per_message"]),
        ),
        row("model calls", "n/a", calls),
        row("reply latency p50, against a bare call of its prompt", "n/a", latency),
        row("embedding calls", f"{low}–{high}", embeddings),
        row(
            "facts after the model repeats each one",
            f"the same fact {eliza['copies_of_a_repeated_fact']} times",
            facts,
        ),
        row(
            "runtime overhead p50 (reply + evaluation)",
            f"about {eliza['overhead_ms_per_message'] / 1000:g} s",
            overhead,
        ),
        row("MongoDB round trips, at most (reply + evaluation) ²", "n/a", round_trips),
    ]
    first = modes[names[0]]
    per_message = first.get("model_calls_per_message", {})
    calls_by_task = ", ".join(
        f"{task} {n} ({per_message.get(task, 0):g} per message)"
        for task, n in first["model_calls"].items()
    )
    lines = [
        f"{part['script']['messages']} user messages ({part['script']['source']}) from one "
        "person in a DM with one goal in progress, through the full app with real stores "
        "(bundled MongoDB, Chroma, ONNX embedder), the real `OpenAIModel` client and a fake "
        f"OpenAI-compatible server. Tokens: {part['token_counter']}, on the prompt text sent.",
        "",
        *_table(head, rows, "l" + "r" * (len(head) - 1)),
        "",
        f"¹ {eliza['source']}. Percentages are shares of elizaOS's figure. Model calls in "
        f"`{names[0]}` mode over the script: {calls_by_task}.",
        "",
        *_round_trip_note(first),
    ]
    return lines


def overhead_section(part: dict[str, Any]) -> list[str]:
    o = part["overhead_ms"]
    wait = part["model_wait_ms"]
    rows = [
        [
            label,
            _ms(o[key]["p50"]),
            _ms(o[key]["p95"]),
            _ms(wait[key]["p50"]),
        ]
        for label, key in (("reply (`handle()`)", "reply"), ("evaluation", "evaluation"))
    ]
    return [
        f"Wall time per message minus the time spent inside the model's `generate`, "
        f"`{part['selection']}` selection, {part['messages']} messages, real stores. "
        f"elizaOS: about {part['elizaos_overhead_ms'] / 1000:g} s per message.",
        "",
        *_table(["path", "overhead p50", "overhead p95", "model wait p50"], rows, "lrrr"),
        "",
    ]


def _problems(run: dict[str, Any]) -> int:
    return sum(
        run[key]
        for key in (
            "replies_lost",
            "replies_duplicated",
            "stored_replies_lost",
            "stored_replies_duplicated",
            "evaluations_lost",
            "evaluations_duplicated",
            "reply_order_violations",
            "stored_reply_order_violations",
            "evaluation_order_violations",
        )
    )


def scale_section(part: dict[str, Any], chart: str | None) -> list[str]:
    speed = []
    time_spent = []
    for run in part["runs"]:
        label = [f"{run['rooms']:,} × {run['messages_per_room']}", run["variant"]]
        speed.append(
            [
                *label,
                _num(run["messages_per_second"], 1),
                _ms(run["reply_latency_ms"]["p50"]),
                _ms(run["reply_latency_ms"]["p95"]),
                f"{run['backlog_drain_seconds']:,.1f} s",
                _num(run["end_to_end_messages_per_second"], 1),
                str(_problems(run)),
                str(run["jobs_left_pending"]),
            ]
        )
        cpu = run["cpu_seconds"]
        time_spent.append(
            [
                *label,
                _num(run.get("mongodb_commands_per_message"), 1),
                _ms(run.get("mongodb_round_trip_ms")),
                _ms(run.get("mongodb_server_cpu_ms_per_command")),
                _share(run.get("mongodb_server_busy")),
                _num(cpu.get("mongodb_server"), 1),
                _num(cpu.get("event_loop"), 1),
                _num(cpu.get("worker_threads"), 1),
            ]
        )
    lines = [
        "All rooms at once, each sending its messages one after another, through "
        "`AgentRuntime.handle()` with the real facts and goals plugins, an instant model and "
        f"real stores ({part['mongodb']}). Variants: `full` = ONNX embedder + Chroma; "
        "`hash-embedder` = hash vectors from the fake OpenAI server through the OpenAI "
        'embedder client + Chroma. "Problems" counts replies and evaluations lost, duplicated '
        "or out of order (each checked per message and per room, in the callbacks and in "
        "MongoDB).",
        "",
        *_table(
            [
                "rooms × messages",
                "variant",
                "replies/s",
                "reply p50",
                "reply p95",
                "backlog drained in",
                "messages/s incl. evaluations",
                "problems",
                "jobs left",
            ],
            speed,
            "llrrrrrrr",
        ),
        "",
        "Where the time goes (CPU seconds over the whole run; the bundled server is one "
        'single-threaded Python process, so "busy" near 100% means it is the limit):',
        "",
        *_table(
            [
                "rooms × messages",
                "variant",
                "MongoDB commands / message",
                "round trip",
                "server CPU / command",
                "server busy",
                "server CPU s",
                "event loop CPU s",
                "worker threads CPU s",
            ],
            time_spent,
            "llrrrrrrr",
        ),
        "",
    ]
    lines += _bottleneck(part["runs"])
    if chart:
        lines += [f"![Throughput and reply latency by number of rooms]({chart})", ""]
    if part.get("topology"):
        lines += _topology(part["topology"])
    if part.get("adapter"):
        lines += _adapter(part["adapter"])
    return lines


def _adapter(adapter: dict[str, Any]) -> list[str]:
    """End to end through the Telegram adapter (benchmarks/adapter_scale.py)."""
    rows = [
        [
            mode,
            f"{run['messages']:,} from {run['rooms']:,} chats",
            f"{run['replies_per_second']}",
            str(run["lost"]),
            f"{run['seconds']} s",
        ]
        for mode, run in adapter.items()
    ]
    return [
        "End to end through the Telegram adapter: each message an update (getUpdates, or a "
        "webhook POST), kept first, answered with sendMessage, against the local fake Bot API "
        "in the same process (its work is counted); a scripted model.",
        "",
        *_table(["receiving", "messages", "replies/s", "lost", "took"], rows, "llrrr"),
        "",
    ]


def _topology(topology: dict[str, Any]) -> list[str]:
    rows = [
        [
            str(run["processes"]),
            f"{run['rooms']:,} × {run['messages_per_room']}",
            _num(run["replies_per_second"], 1),
            _num(run["evaluations_per_second"], 1),
            _ms(run["reply_overhead_ms"]["p50"]),
            _ms(run["reply_overhead_ms"]["p95"]),
            str(run["lost"]),
            str(run["duplicated"]),
            str(run["order_violations"]),
            _num(run["mongodb_commands_per_message"], 1),
        ]
        for run in topology["runs"]
    ]
    return [
        f"In a deployment's shape: {topology['mongodb']} and a {topology['chroma']} server, "
        "shared by 1 and by 2 Mnemo processes, each driving its share of the rooms the same "
        "way (ONNX embedder, instant model: a reply's latency is Mnemo's own overhead).",
        "",
        *_table(
            [
                "processes",
                "rooms × messages",
                "replies/s",
                "evaluations/s",
                "reply overhead p50",
                "reply overhead p95",
                "lost",
                "duplicated",
                "out of order",
                "MongoDB commands / message",
            ],
            rows,
            "rlrrrrrrrr",
        ),
        "",
    ]


def _bottleneck(runs: Sequence[dict[str, Any]]) -> list[str]:
    """One sentence naming the limit when the bundled server was near flat out."""
    busy = [r for r in runs if (r.get("mongodb_server_busy") or 0) >= 0.7]
    if not busy:
        return []
    worst = max(busy, key=lambda r: r["mongodb_server_busy"])
    cpu = worst["cpu_seconds"]
    ours = (cpu.get("process") or 0) / max(worst["messages"], 1) * 1000
    server = (cpu.get("mongodb_server") or 0) / max(worst["messages"], 1) * 1000
    return [
        f"The bundled MongoDB server sets the pace: at {worst['rooms']:,} rooms "
        f"(`{worst['variant']}`) it was busy {worst['mongodb_server_busy']:.0%} of its one "
        f"core, spending {server:,.0f} ms of CPU per message on "
        f"{worst['mongodb_commands_per_message']:g} commands "
        f"({worst['mongodb_server_cpu_ms_per_command']:g} ms each; the cost per command grows "
        "with the data because nx-27017 answers counts and sorts by scanning in Python), "
        f"while Mnemo's own process used {ours:,.0f} ms of CPU per message.",
        "",
    ]


def recall_section(part: dict[str, Any], chart: str | None) -> list[str]:
    from benchmarks.recall import format_table

    lines = [
        f"LoCoMo ({_plural(len(part['conversations']), 'conversation')}, {part['turns']:,} turns, "
        f"{part['messages']['questions']} questions with evidence): turn-level evidence "
        "recall@k of the message retrieval the bot uses, and of fact retrieval.",
        "",
        format_table(part),
        "",
    ]
    if chart:
        lines += [f"![LoCoMo recall@k]({chart})", ""]
    return lines


def vectors_section(part: dict[str, Any]) -> list[str]:
    rows = [
        [
            f"{stage['facts']:,}",
            _ms(stage["total_ms"]["p50"]),
            _ms(stage["total_ms"]["p95"]),
            _ms(stage["embedding_ms"]["p50"]),
            _ms(stage["chroma_ms"]["p95"]),
            f"{stage['hits_per_query']:g} of {part['query_limit']}",
            f"{stage['insert_per_second']:,.0f}/s",
            _num(stage["peak_rss_mib"], 0, suffix=" MiB"),
        ]
        for stage in part["stages"]
    ]
    head = [
        "stored facts",
        "query p50",
        "query p95",
        "embedding p50",
        "Chroma p95",
        "hits per query",
        "insert rate",
        "peak RSS",
    ]
    note = (
        f" {part['derivation'][0].upper()}{part['derivation'][1:]}; the query texts are new "
        "sentences."
        if part.get("derivation")
        else ""
    )
    peak = (
        f" Peak RSS is this benchmark's own (the process held {part['rss_before_mib']:,.0f} MiB "
        "before it)."
        if part.get("peak_is_this_benchmarks")
        else " Peak RSS is the whole process's."
    )
    return [
        "Chroma (embedded `PersistentClient`), one person's facts in their world with the "
        f"facts provider's `where` filter, top {part['query_limit']}; query time includes "
        f"embedding the query. {part['facts_per_person']} facts per person, "
        f"{part['people_per_world']} people per world; "
        f"{part['embedded_texts']:,} synthetic facts embedded at "
        f"{part['embedding_per_second']:,.0f} texts/s.{note}{peak}",
        "",
        *_table(head, rows, "lrrrrrrr"),
        "",
    ]


def embedder_section(part: dict[str, Any]) -> list[str]:
    ours = part["mnemo"]
    stock = part["chroma_stock"]
    rows = [
        [
            "Mnemo `OnnxEmbedder` (pads to the batch's longest text)",
            f"{ours['texts_per_second']:,.0f}",
            f"{ours['texts']:,}",
        ]
    ]
    if "texts_per_second" in stock:
        rows.append(
            [
                "Chroma `ONNXMiniLM_L6_V2` (pads every text to 256 tokens)",
                f"{stock['texts_per_second']:,.0f}",
                f"{stock['texts']:,}",
            ]
        )
    else:
        reason = stock.get("skipped") or stock.get("error") or "not run"
        rows.append(["Chroma `ONNXMiniLM_L6_V2`", "n/a", reason])
    lines = [
        f"{part['model']} on the same synthetic texts, batch {part['batch_size']}.",
        "",
        *_table(["embedder", "texts/s", "texts"], rows, "lrr"),
        "",
    ]
    if "speed_ratio" in part:
        agreement = part["cosine_agreement"]
        lines += [
            f"Mnemo's embedder is {part['speed_ratio']:g}× faster, with the same vectors "
            f"(cosine similarity between the two: lowest {agreement['min']:.4f}, "
            f"mean {agreement['mean']:.6f}).",
            "",
        ]
    return lines


def startup_section(part: dict[str, Any]) -> list[str]:
    mongo = part.get("idle_bundled_mongodb_rss_mib")
    server = f" (+ {mongo:,.0f} MiB for the bundled MongoDB server)" if mongo else ""
    rows = [
        ["seconds to the banner", _num(part["banner_seconds"], 2, suffix=" s")],
        ["resident memory, idle", _num(part["idle_rss_mib"], 0, suffix=" MiB") + server],
        [
            "first reply (loads the embedding model)",
            _num(part["first_reply_seconds"], 2, suffix=" s"),
        ],
        [
            "resident memory after the first reply",
            _num(part["rss_after_first_reply_mib"], 0, suffix=" MiB"),
        ],
    ]
    return [
        f"`{part['command']}` with zero set-up (empty data folder, bundled MongoDB, offline "
        f"model, piped input); median of {len(part['runs'])} run(s).",
        "",
        *_table(["", "measured"], rows, "lr"),
        "",
    ]


def faults_section(part: dict[str, Any]) -> list[str]:
    rows = [
        [key.replace("_", " "), f"{part[key]:,}"]
        for key in ("sent", "stored", "answered", "evaluated", "lost", "duplicated", "vectors")
    ]
    rows.append(["evaluations left dead by the crashes (must be 0)", str(part["dead_jobs"])])
    rows.append(["time to recover (last restart to all learned)", f"{part['recover_seconds']} s"])
    server = part.get("server_kills")
    if server and server.get("kills"):
        rows += [
            ["bundled database: owner killed -9 under writes", f"{server['kills']:,} times"],
            ["servers that outlived their owner (must be 0)", str(server["orphans"])],
            ["starts that failed after a kill (must be 0)", str(server["failed_starts"])],
            ["acknowledged writes lost (must be 0)", str(server["lost_writes"])],
            ["slowest start after a kill", f"{server['slowest_start_seconds']} s"],
        ]
    disk = part.get("full_disk")
    if disk:
        rows += [
            [
                "full disk: messages sent while nothing could be written",
                f"{disk['sent']:,} from {disk['chats']} chats",
            ],
            ["lost (confirmed to Telegram, never answered; must be 0)", str(disk["lost"])],
            ["answered once the disk had room", f"{disk['answered']:,}"],
            ["answered twice (must be 0)", str(disk["duplicated"])],
            ["chats told their message could not be kept", str(disk["told"])],
            ["time to answer all once the disk had room", f"{disk['recover_seconds']} s"],
        ]
    loop = part.get("kill_mid_reply")
    if loop:
        rows += [
            [
                "mnemo run killed -9 mid-reply, a new message in every chat after each start",
                f"{loop['kills']:,} times, {loop['chats']} chats, {loop['sent']:,} messages",
            ],
            ["replies out of their chat's order (must be 0)", str(loop["inverted"])],
            [
                "messages neither answered nor told they were missed (must be 0)",
                str(loop["silent"]),
            ],
            ["answered", f"{loop['answered']:,}"],
            [
                "aged past the answer window; chats told; lines saying so",
                f"{loop['missed']}; {loop['told']}; {loop['missed_lines']}",
            ],
            ["answered twice (a kill during the send)", str(loop["duplicated"])],
        ]
    return [
        f"{part['rooms']} rooms, {part['sent']:,} messages; the worker process was killed -9 "
        f"{part['kills']} times at random points of handle() and of evaluations (seed "
        f"{part['seed']}), then its Chroma folder was wiped. Lost and duplicated must be 0; "
        "vectors counts the message vectors rebuilt.",
        "",
        *_table(["", "measured"], rows, "lr"),
        "",
    ]


def _met(met: bool | None) -> str:
    """A goal with nothing to measure it on (no group in the run) is n/a, not a miss."""
    return "n/a" if met is None else "yes" if met else "**no**"


def goals_section(parts: dict[str, Any]) -> list[str]:
    rows = []
    for part in parts.values():
        for goal in part.get("goals", []) if isinstance(part, dict) else []:
            rows.append([goal["goal"], goal["target"], goal["measured"], _met(goal["met"])])
    if not rows:
        return []
    return [*_table(["goal", "target", "measured", "met"], rows), ""]


_SECTIONS: tuple[tuple[str, str], ...] = (
    ("cost", "Cost per user message"),
    ("overhead", "Runtime overhead"),
    ("scale", "Throughput"),
    ("recall", "Recall (LoCoMo)"),
    ("vectors", "Vector search"),
    ("embedder", "Embedder"),
    ("startup", "Start-up"),
    ("faults", "Crashes (kill -9)"),
    ("memory", "Memory that stays true"),
)


def to_markdown(results: dict[str, Any], charts: dict[str, str] | None = None) -> str:
    """The Performance section; `charts` maps "scale"/"recall" to image paths."""
    charts = charts or {}
    parts = results["parts"]
    lines = [
        "## Performance",
        "",
        _machine_line(results["machine"]),
        f"Command: `{results['command']}`"
        + (" (quick sizes)" if results.get("quick") else "")
        + f", {results.get('seconds', 0):,.0f} s in all.",
        "",
    ]
    for key, title in _SECTIONS:
        part = parts.get(key)
        if part is None:
            continue
        lines += [f"### {title}", ""]
        if "error" in part:
            lines += _error(key, part)
            continue
        if key == "cost":
            lines += cost_section(part)
        elif key == "overhead":
            lines += overhead_section(part)
        elif key == "scale":
            lines += scale_section(part, charts.get("scale"))
        elif key == "recall":
            lines += recall_section(part, charts.get("recall"))
        elif key == "vectors":
            lines += vectors_section(part)
        elif key == "embedder":
            lines += embedder_section(part)
        elif key == "startup":
            lines += startup_section(part)
        elif key == "faults":
            lines += faults_section(part)
        elif key == "memory":
            from benchmarks.memory import memory_section

            lines += memory_section(part)
    goals = goals_section(parts)
    if goals:
        lines += ["### Goals", "", *goals]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# Charts


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def draw_scale_chart(part: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    figure, (rate_axes, latency_axes) = plt.subplots(1, 2, figsize=(10, 4))
    variants = list(dict.fromkeys(run["variant"] for run in part["runs"]))
    for variant in variants:
        runs = sorted(
            (r for r in part["runs"] if r["variant"] == variant), key=lambda r: r["rooms"]
        )
        rooms = [r["rooms"] for r in runs]
        rates = [r["messages_per_second"] for r in runs]
        latencies = [r["reply_latency_ms"]["p95"] / 1000 for r in runs]
        rate_axes.plot(rooms, rates, "o-", label=variant)
        latency_axes.plot(rooms, latencies, "o-", label=variant)
        for x, y in zip(rooms, rates, strict=True):
            rate_axes.annotate(f"{y:.0f}", (x, y), textcoords="offset points", xytext=(0, 6))
        for x, y in zip(rooms, latencies, strict=True):
            latency_axes.annotate(f"{y:.1f}", (x, y), textcoords="offset points", xytext=(0, 6))
    rate_axes.axhline(100, color="grey", linestyle="--", linewidth=1, label="goal (1,000 rooms)")
    ticks = sorted({run["rooms"] for run in part["runs"]})
    for axes in (rate_axes, latency_axes):
        axes.set_xscale("log")
        axes.set_xticks(ticks, [f"{t:,}" for t in ticks])
        axes.minorticks_off()
        axes.set_xlabel("rooms sending at once")
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        axes.legend()
    rate_axes.set_ylabel("replies per second")
    rate_axes.set_title("Throughput")
    latency_axes.set_ylabel("p95 reply latency (s)")
    latency_axes.set_title("Reply latency")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def draw_recall_chart(part: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    series = [(label, part[key]) for label, key in (("messages", "messages"), ("facts", "facts"))]
    series = [(label, data) for label, data in series if data is not None]
    ks = list(part["messages"]["recall_at"])
    figure, axes = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(series), 1)
    for index, (label, data) in enumerate(series):
        xs = [i + index * width for i in range(len(ks))]
        bars = axes.bar(xs, [data["recall_at"][k] for k in ks], width, label=label)
        axes.bar_label(bars, fmt="%.2f", fontsize=8)
    axes.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(ks))])
    axes.set_xticklabels([f"R@{k}" for k in ks])
    axes.set_ylim(0, 1)
    axes.set_ylabel("turn-level evidence recall")
    axes.set_title("LoCoMo recall@k")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def draw_charts(results: dict[str, Any], folder: Path) -> dict[str, Path]:
    """The scale and recall charts for the parts that ran; a failed chart is logged."""
    drawn: dict[str, Path] = {}
    plans = (("scale", SCALE_CHART, draw_scale_chart), ("recall", RECALL_CHART, draw_recall_chart))
    for key, name, draw in plans:
        part = results["parts"].get(key)
        if not part or "error" in part:
            continue
        try:
            drawn[key] = draw(part, folder / name)
        except Exception:  # a chart is a nicety: never lose the numbers over it
            log.exception("could not draw the %s chart", key)
    return drawn


# ---------------------------------------------------------------------------------------------
# Files


def _relative(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def write_report(results: dict[str, Any], folder: Path, *, charts: bool = True) -> ReportFiles:
    """Write results.json, the charts (when asked) and results.md into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / RESULTS_JSON
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    drawn = draw_charts(results, folder) if charts else {}
    markdown_path = folder / RESULTS_MARKDOWN
    links = {key: _relative(path) for key, path in drawn.items()}
    markdown_path.write_text(to_markdown(results, links), encoding="utf-8")
    return ReportFiles(json=json_path, markdown=markdown_path, charts=drawn)

"""`mnemo bench` at tiny sizes: the numbers it reports are computed correctly.

Real parts only (bundled MongoDB, Chroma, the ONNX embedder, the OpenAI client against the
local fake server). No performance threshold is asserted: a benchmark reports, it never fails
the suite.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmarks import cli
from benchmarks.cost import (
    SERVER_USAGE,
    FakeModelAnswers,
    available_names,
    load_script,
    load_token_counter,
    run_mode,
)
from benchmarks.embedder import run_embedder
from benchmarks.report import to_markdown, write_report
from benchmarks.scale import (
    ScaleOptions,
    bench_stores,
    lost_and_duplicated,
    order_violations,
    run_scale,
)
from benchmarks.startup import measure_once
from benchmarks.stats import percentile, summary
from benchmarks.vectors import derived_vectors, fact_vectors, run_vectors
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.vectors import VectorIndex
from tests.paths import SHARED

TIKTOKEN_DIR = SHARED / "models" / "tiktoken"
# The task names of the prompts the fake server told apart.
TASK_OF_KIND = {
    "reply": "reply",
    "selection": "evaluator_selection",
    "facts": "evaluator:GET_FACTS",
    "goals": "evaluator:UPDATE_GOAL",
}


def test_percentiles_interpolate_and_summary_rounds() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert percentile(values, 50) == 30.0
    assert percentile(values, 95) == pytest.approx(48.0)
    assert percentile([], 95) == 0.0
    assert summary([1.0, 2.0, 3.0, 4.0]) == {
        "n": 4,
        "p50": 2.5,
        "p95": 3.85,
        "mean": 2.5,
        "max": 4.0,
    }


def test_default_script_is_thirty_messages_and_bad_scripts_are_refused(tmp_path: Path) -> None:
    assert len(load_script()) == 30
    bad = tmp_path / "script.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(Exception, match="expected a JSON list"):
        load_script(bad)


def test_selection_prompt_names_are_parsed() -> None:
    prompt = "TASK: Decide...\nAvailable names: GET_FACTS, UPDATE_GOAL\nAnswer with..."
    assert available_names(prompt) == ["GET_FACTS", "UPDATE_GOAL"]
    assert available_names("Write the next message") is None


def test_token_counter_uses_the_offline_o200k_file_and_never_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache
    assert load_token_counter() is None
    if not TIKTOKEN_DIR.is_dir():
        pytest.skip("offline tiktoken files not found beside the checkout")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_DIR))
    counter = load_token_counter()
    assert counter is not None
    assert counter.label == "tiktoken o200k_base"
    assert counter.count("Hello world") == 2


async def test_cost_run_counts_exactly_what_the_fake_server_received(
    model_dir: Path, mongo_uri: str
) -> None:
    script = load_script()
    # Nothing of the goal's; a run of its first objective; the long run of its second.
    messages = [script[2], script[13], script[24]]
    # Each extraction offers a claim its message said (a claim nobody said is not stored).
    answers = FakeModelAnswers(
        claims=(
            "Sarah works as a nurse at a children's hospital",
            "Sarah ran 15 km along the river",
            "Sarah's long run this weekend is 18 km",
        )
    )
    result = await run_mode(
        messages,
        selection="llm",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        # Extraction on every user message (each reply makes the count even).
        conversation_length=4,
        answers=answers,
    )
    received = Counter(TASK_OF_KIND[kind] for kind, _ in answers.prompts)
    assert result["model_calls"] == dict(received)
    # The goal is checked only on the two messages about it, and the model asked to choose
    # only when there are two evaluators to choose between (issue 22).
    assert received == {
        "reply": 3,
        "evaluator_selection": 2,
        "evaluator:UPDATE_GOAL": 2,
        "evaluator:GET_FACTS": 3,
    }
    assert result["model_calls_per_message"]["total"] == round(10 / 3, 2)
    assert result["server_requests"] == result["model_calls_total"] == len(answers.prompts)
    # Tokens are counted on the text the server received, attributed to the right task.
    tokens: Counter[str] = Counter()
    for kind, prompt in answers.prompts:
        tokens[TASK_OF_KIND[kind]] += SERVER_USAGE.count(prompt)
    assert result["prompt_tokens"] == dict(tokens)
    assert result["prompt_tokens_per_message"]["total"] == round(sum(tokens.values()) / 3)
    # Three extractions, each offering one new claim and repeating the previous one: three
    # facts stored, the repeats recognised (the offline rules stay off beside a model:
    # MNEMO_FACTS_MERGE_RULES).
    assert result["facts"] == {
        "extractions": 3,
        "new_claims_offered": 3,
        "stored": 3,
        "distinct": 3,
        "duplicates": 0,
    }
    assert result["replied"] == 3 and result["undrained"] == 0
    rows = result["messages"]
    assert [row["evaluators_ran"] for row in rows] == [
        ["GET_FACTS"],
        ["GET_FACTS", "UPDATE_GOAL"],
        ["GET_FACTS", "UPDATE_GOAL"],
    ]
    assert all(row["embedding_calls"] >= 1 for row in rows)
    for row in rows:
        assert row["reply_overhead_ms"] == pytest.approx(
            row["reply_ms"] - row["reply_model_ms"], abs=0.02
        )


async def test_all_selection_mode_makes_no_selection_call(model_dir: Path, mongo_uri: str) -> None:
    answers = FakeModelAnswers()
    result = await run_mode(
        load_script()[12:14],
        selection="all",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        answers=answers,
    )
    assert "evaluator_selection" not in result["model_calls"]
    assert result["prompt_tokens_per_message"]["selection"] == 0
    assert {kind for kind, _ in answers.prompts} == {"reply", "goals"}


def test_order_and_loss_checks_count_what_they_should() -> None:
    sent = {"room": ["a", "b", "c"], "other": ["x", "y"]}
    assert order_violations(sent, {"room": ["a", "b", "c"], "other": ["x", "y"]}) == 0
    assert order_violations(sent, {"room": ["a", "c", "b"], "other": ["y", "x"]}) == 2
    assert lost_and_duplicated(sent, {"a": 1, "b": 2, "c": 1, "x": 1}) == (1, 1)


async def test_scale_three_rooms_lose_nothing_and_keep_order(
    model_dir: Path, mongo_uri: str, tmp_path: Path
) -> None:
    async with bench_stores(tmp_path, mongodb_uri=mongo_uri) as stores:
        result = await run_scale(
            ScaleOptions(rooms=3, messages=2, variant="full", timeout=60),
            stores,
            model_dir=model_dir,
        )
    assert result["messages"] == 6
    assert result["reply_latency_ms"]["n"] == 6
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
        "jobs_left_pending",
        "jobs_failed",
    ):
        assert result[key] == 0, key
    assert result["backlog_drained"] is True
    assert result["messages_per_second"] > 0
    assert result["mongodb_commands"] > 0


def test_bench_scale_command_writes_json_markdown_and_chart(mongo_uri: str, tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = cli.main(
        [
            "scale",
            "--rooms",
            "2",
            "--messages",
            "1",
            "--variants",
            "hash-embedder",
            "--mongodb-uri",
            mongo_uri,
            "--out",
            str(out),
        ]
    )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    [run] = results["parts"]["scale"]["runs"]
    assert (run["rooms"], run["messages"], run["variant"]) == (2, 2, "hash-embedder")
    assert results["machine"]["python"] and results["machine"]["cores"]
    markdown = (out / "results.md").read_text()
    assert markdown.startswith("## Performance")
    assert "| 2 × 1 | hash-embedder |" in markdown
    assert "evaluation backlog drains after the burst" in markdown
    assert (out / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_part_that_cannot_run_is_reported_and_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = cli.main(["cost", "--script", str(tmp_path / "missing.json"), "--out", str(out)])
    assert code == 2
    assert "Not measured: cannot read the script" in (out / "results.md").read_text()


def test_markdown_marks_missed_goals() -> None:
    results = {
        "command": "mnemo bench vectors",
        "machine": {
            "date": "2025-01-01 00:00 UTC",
            "cpu": "Test CPU",
            "usable_cores": 2,
            "ram_gib": 8,
            "os": "Linux",
            "python": "3.11.7",
        },
        "parts": {
            "vectors": {
                "goals": [
                    {"goal": "fast", "target": "< 20 ms", "measured": "25 ms", "met": False},
                    {"goal": "small", "target": "< 1 GB", "measured": "1 MB", "met": True},
                ],
                "error": "skipped for the test",
            }
        },
    }
    markdown = to_markdown(results)
    assert "Test CPU, 2 cores, 8 GiB RAM, Linux, Python 3.11.7" in markdown
    assert "| fast | < 20 ms | 25 ms | **no** |" in markdown
    assert "| small | < 1 GB | 1 MB | yes |" in markdown


def test_report_files_without_charts(tmp_path: Path) -> None:
    results = {"command": "x", "machine": {}, "parts": {}}
    results["machine"] = {
        "date": "d",
        "cpu": "c",
        "usable_cores": 1,
        "os": "o",
        "python": "p",
    }
    files = write_report(results, tmp_path / "out", charts=False)
    assert json.loads(files.json.read_text())["command"] == "x"
    assert files.markdown.read_text().startswith("## Performance")
    assert files.charts == {}


def test_derived_vectors_are_unit_length_and_near_their_source() -> None:
    rng = np.random.default_rng(1)
    base = rng.standard_normal((4, 384)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    derived = derived_vectors(base, 10)
    assert derived.shape == (10, 384)
    assert np.allclose(np.linalg.norm(derived, axis=1), 1.0, atol=1e-5)
    sources = base[np.arange(10) % 4]
    assert np.all(np.sum(derived * sources, axis=1) > 0.95)
    # Facts 2..5 of four embedded ones: two as embedded, then copies of the first two.
    block = fact_vectors(base, 2, 6)
    assert np.array_equal(block[:2], base[2:4])
    assert np.all(np.sum(block[2:] * base[:2], axis=1) > 0.95)
    assert np.array_equal(block[2:], fact_vectors(base, 4, 6))  # the same every time


async def test_vector_bench_queries_one_persons_facts(model_dir: Path, tmp_path: Path) -> None:
    index = VectorIndex.persistent(tmp_path / "chroma")
    try:
        result = await run_vectors(
            index, OnnxEmbedder(model_dir), sizes=(40, 120), embed_texts=40, queries=5
        )
    finally:
        await index.close()
    assert result["embedded_texts"] == 40 and result["derived_vectors"] == 80
    assert [stage["facts"] for stage in result["stages"]] == [40, 120]
    assert [stage["inserted"] for stage in result["stages"]] == [40, 80]
    for stage in result["stages"]:
        assert stage["queries"] == 5
        # Ten facts per person, eight asked for: the scope filter still leaves a full page.
        assert stage["hits_per_query"] == 8
        # Each query timed whole and in its parts (the times are the bench's to report).
        assert stage["total_ms"]["n"] == stage["embedding_ms"]["n"] == stage["queries"]
    assert result["goals"][0]["met"] is False  # 120 facts is not the 100,000 of the goal


async def test_embedder_bench_compares_with_chromas_class_offline(model_dir: Path) -> None:
    result = await run_embedder(model_dir, texts=16, stock_texts=8, rounds=1)
    assert result["mnemo"]["texts"] == 16 and result["mnemo"]["texts_per_second"] > 0
    stock = result["chroma_stock"]
    assert "error" not in stock, stock
    assert stock["texts"] == 8 and stock["texts_per_second"] > 0
    # Same model, same pooling: the vectors agree whatever the padding.
    assert result["cosine_agreement"]["min"] > 0.999


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_startup_reaches_the_banner_and_quits_cleanly(model_dir: Path) -> None:
    run = measure_once(model_dir, timeout=60)
    assert run["exit_code"] == 0
    assert run["banner_seconds"] > 0
    assert run["idle"]["rss_mib"] > 10
    assert run["first_reply_seconds"] is not None
    # Zero set-up: the bundled MongoDB server runs beside it.
    assert run["idle"]["bundled_mongodb_rss_mib"] is not None


def test_each_bench_part_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    from bot.app.cli import main as mnemo

    with pytest.raises(SystemExit) as exit_:
        mnemo(["bench", "scale", "--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    assert "usage: mnemo bench scale" in help_text
    assert "--rooms" in help_text and "--script" not in help_text
    with pytest.raises(SystemExit):
        mnemo(["bench", "--help"])
    listing = capsys.readouterr().out
    assert all(part in listing for part in ("cost", "scale", "recall", "startup", "all"))


def test_a_topology_run_adds_up_its_processes() -> None:
    """`mnemo bench scale --processes`: the deployment's figures from each process's. The
    processes share one queue, so a room's evaluation may run in the other process: it is
    evaluated, not lost here and duplicated there."""
    from benchmarks.topology import _combined

    def process(
        name: str, evaluated: dict[str, list[str]], duplicated: int, seconds: float
    ) -> dict:
        sent = {f"{name}-room-{i}": [f"{name}-{i}"] for i in range(5)}
        return {
            "messages": 5,
            "sent_ids": sent,
            "evaluated_ids": evaluated,
            "reply_seconds": seconds,
            "backlog_drain_seconds": 1.0,
            "latencies_ms": [10.0] * 5,
            "mongodb_commands": 5 * 15,
            "replies_lost": 0,
            "stored_replies_lost": 0,
            "replies_duplicated": duplicated,
            "stored_replies_duplicated": 0,
            "reply_order_violations": 0,
            "jobs_left_pending": 0,
        }

    # a-4 was evaluated by b, a-3 by nobody, b-0 twice (once in each process).
    a = process("a", {f"a-room-{i}": [f"a-{i}"] for i in range(3)} | {"b-room-0": ["b-0"]}, 0, 2.0)
    b = process("b", {f"b-room-{i}": [f"b-{i}"] for i in range(5)} | {"a-room-4": ["a-4"]}, 2, 1.0)
    run = _combined(2, 10, 1, [a, b], wall=4.0)
    assert run["messages"] == 10
    assert run["replies_per_second"] == 5.0  # 10 replies while the slower process replied
    assert run["evaluations_per_second"] == round(9 / 3.0, 1)
    assert (run["lost"], run["duplicated"]) == (1, 2 + 1)
    assert run["mongodb_commands_per_message"] == 15.0


async def test_adapter_scale_answers_every_update_by_polling_and_by_webhook(
    model_dir: Path, mongo_uri: str
) -> None:
    from benchmarks.adapter_scale import run_adapter_scale

    result = await run_adapter_scale(
        rooms=3, messages=2, model_dir=model_dir, mongodb_uri=mongo_uri
    )
    for mode in ("polling", "webhook"):
        run = result[mode]
        assert (run["messages"], run["answered"], run["lost"]) == (6, 6, 0), mode
        assert run["replies_per_second"] > 0

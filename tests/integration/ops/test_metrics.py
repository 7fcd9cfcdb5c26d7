"""The operator's view: `/metrics` and `/healthz` scraped over HTTP from a running app whose
messages went through the real runtime, the real `openai` client and real stores."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from bot.config.settings import ConfigError, ModelSettings, OpsSettings, Settings
from bot.knowledge.vectors import VectorIndex
from bot.llm.accounting import UsageLedger
from bot.llm.base import ModelError, Task
from bot.ops.metrics import Metrics, dependencies_of, estimated_cost
from bot.ops.server import MetricsServer
from bot.plugin.api import Context, Evaluator, Plugin
from bot.storage.mongo import MongoStore
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer, Reply, Usage
from bot.testing.scripted import ScriptedModel

PRICES = {"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text page, by name and sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    def answer(body: dict[str, object]) -> Reply:
        return Reply('{"text": "Nice to meet you."}', usage=Usage(120, 8))

    async with FakeOpenAIServer(responder=answer) as server:
        yield server


def metered_settings(tmp_path: Path, server: FakeOpenAIServer, **ops: object) -> Settings:
    settings = test_settings(tmp_path)
    return dataclasses.replace(
        settings,
        model=ModelSettings.model_construct(
            openai_api_key=SecretStr("sk-test-metrics"),
            openai_base_url=server.base_url,
            small_model="gpt-4o-mini",
            large_model="gpt-4o",
            timeout_seconds=5.0,
            max_retries=0,
        ),
        ops=OpsSettings(_env_file=None, metrics_port=0, model_prices=PRICES, **ops),  # type: ignore[call-arg]
    )


async def test_metrics_count_what_went_through_the_runtime(
    tmp_path: Path, model_dir: Path, openai_server: FakeOpenAIServer
) -> None:
    settings = metered_settings(tmp_path, openai_server)
    async with open_test_app(tmp_path, settings=settings) as app:
        assert app.metrics_server is not None
        chat = TestChat(app.runtime)
        first = chat.message("Hi, I'm Sarah.")
        await chat.send(first)
        await chat.say("I live in Seattle.")
        await chat.say("I have a dog.")
        await chat.send(first)  # redelivered by the platform: not a new message
        await chat.settle()

        status, text = await get(f"{app.metrics_server.url}/metrics")
        assert status == 200
        page = samples(text)
        assert page[("mnemo_messages_received_total", ())] == 3
        assert page[("mnemo_replies_sent_total", ())] == 3
        assert page[("mnemo_reply_latency_seconds_count", ())] == 3
        assert page[("mnemo_model_calls_total", (("task", "reply"),))] == 3
        assert page[("mnemo_model_prompt_tokens_total", (("task", "reply"),))] == 3 * 120
        assert page[("mnemo_model_completion_tokens_total", (("task", "reply"),))] == 3 * 8
        timed = ("mnemo_model_call_seconds_count", (("model", "gpt-4o"), ("task", "reply")))
        assert page[timed] == 3
        # Every call the server answered is priced under the model it was made with.
        calls_by_model = {"gpt-4o": 0, "gpt-4o-mini": 0}
        for request in openai_server.chat_requests:
            calls_by_model[request.json["model"]] += 1
        assert calls_by_model["gpt-4o"] >= 3  # the replies; selection calls use the small one
        for model, calls in calls_by_model.items():
            if calls:
                expected = estimated_cost(calls * 120, calls * 8, PRICES[model])
                cost = page[("mnemo_model_cost_usd_total", (("model", model),))]
                assert cost == pytest.approx(expected)
        assert page[("mnemo_dependency_up", (("dependency", "mongodb"),))] == 1
        assert page[("mnemo_dependency_up", (("dependency", "chroma"),))] == 1
        assert page[("mnemo_evaluation_jobs", (("status", "done"),))] == 3
        assert page[("mnemo_evaluation_jobs", (("status", "pending"),))] == 0
        assert page[("mnemo_evaluation_queue_depth", ())] == 0
        assert page[("mnemo_evaluation_jobs_retried", ())] == 0

        status, body = await get(f"{app.metrics_server.url}/healthz")
        assert status == 200
        assert '"mongodb": true' in body and '"chroma": true' in body
    # The secret key never appears on the page.
    assert "sk-test-metrics" not in text


async def test_healthz_reports_an_unreachable_database(tmp_path: Path, model_dir: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    dead = MongoStore.from_uri(
        f"mongodb://127.0.0.1:{dead_port}", "mnemo", server_selection_timeout_ms=300
    )
    vectors = VectorIndex.persistent(tmp_path / "chroma")
    metrics = Metrics(UsageLedger(), PRICES, dependencies_of(dead, vectors))
    server = MetricsServer(metrics, "127.0.0.1", 0)
    await server.start()
    try:
        status, body = await get(f"{server.url}/healthz")
        assert status == 503
        assert '"mongodb": false' in body and '"chroma": true' in body
        status, text = await get(f"{server.url}/metrics")
        assert status == 200
        assert samples(text)[("mnemo_dependency_up", (("dependency", "mongodb"),))] == 0
    finally:
        await server.stop()
        await vectors.close()
        await dead.close()


async def test_a_taken_port_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        unused = VectorIndex.persistent(tmp_path / "chroma")  # never probed: nothing starts
        store = MongoStore.from_uri(f"mongodb://127.0.0.1:{port}", "mnemo")
        metrics = Metrics(UsageLedger(), {}, dependencies_of(store, unused))
        with pytest.raises(
            ConfigError, match=rf"MNEMO_METRICS_PORT: cannot listen on 127.0.0.1:{port}"
        ):
            await MetricsServer(metrics, "127.0.0.1", port).start()
        await store.close()


async def test_retried_and_dead_jobs_show_on_the_page(tmp_path: Path, model_dir: Path) -> None:
    async def learn(ctx: Context, found: object) -> None:
        return None

    # Two evaluators: a lone one is named without asking the model, which could not fail.
    plugin = Plugin(
        "learner",
        evaluators=[Evaluator("LEARN", "learns", learn), Evaluator("NOTE", "notes", learn)],
    )
    # First job: the selection fails once, then works (a retry). Second job: it keeps failing
    # (the last scripted answer repeats) until it is out of attempts (dead).
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Sure."}'],
            Task.EVALUATOR_SELECTION: [ModelError("model down"), '["LEARN"]', ModelError("down")],
        }
    )
    settings = test_settings(tmp_path, evaluation_max_attempts=2, evaluation_retry_seconds=0.05)
    settings = dataclasses.replace(settings, ops=OpsSettings(_env_file=None, metrics_port=0))  # type: ignore[call-arg]
    async with open_test_app(tmp_path, settings=settings, model=model, plugins=[plugin]) as app:
        assert app.metrics_server is not None
        chat = TestChat(app.runtime)
        jobs = [(await chat.say(text)).job for text in ("I moved to Lisbon", "I got a cat")]

        async def finished() -> None:
            while True:
                states = [await app.store.jobs.get(job.id) for job in jobs if job is not None]
                if all(s is not None and s.status in ("done", "dead") for s in states):
                    return
                await asyncio.sleep(0.05)

        await asyncio.wait_for(finished(), 20)
        page = samples((await get(f"{app.metrics_server.url}/metrics"))[1])
    assert page[("mnemo_evaluation_jobs", (("status", "done"),))] == 1
    assert page[("mnemo_evaluation_jobs", (("status", "dead"),))] == 1
    assert page[("mnemo_evaluation_jobs", (("status", "retrying"),))] == 0
    assert page[("mnemo_evaluation_jobs_retried", ())] == 2
    assert page[("mnemo_evaluation_queue_depth", ())] == 0


async def test_queue_depth_counts_jobs_awaiting_their_reply_and_retrying(
    tmp_path: Path, model_dir: Path
) -> None:
    async with open_test_app(tmp_path, metrics_port=0) as app:
        assert app.metrics_server is not None
        chat = TestChat(app.runtime)
        # A message taken in whose reply is not settled (a crash mid-reply), and a job whose
        # attempt failed and waits for its retry: neither is finished work.
        await app.runtime.evaluations.open_intake(chat.message("awaiting its reply"))
        retrying = await app.runtime.evaluations.enqueue(
            chat.message("failed once"), did_respond=True
        )
        await app.runtime.evaluations.stop(grace=0)  # nobody claims it meanwhile
        await app.store.jobs.fail(retrying.id, error="model down", retry_at_ms=2**52)
        page = samples((await get(f"{app.metrics_server.url}/metrics"))[1])
    assert page[("mnemo_evaluation_jobs", (("status", "intake"),))] == 1
    assert page[("mnemo_evaluation_jobs", (("status", "retrying"),))] == 1
    assert page[("mnemo_evaluation_queue_depth", ())] == 2
    assert page[("mnemo_journal_messages", ())] == 0


async def test_model_labels_are_only_the_names_the_operator_configured(
    tmp_path: Path, model_dir: Path, openai_server: FakeOpenAIServer
) -> None:
    settings = metered_settings(tmp_path, openai_server)
    allowed = settings.model.model_copy(update={"model_choices": ["gpt-4o-mini"]})
    settings = dataclasses.replace(settings, model=allowed)
    async with open_test_app(tmp_path, settings=settings) as app:
        assert app.metrics_server is not None
        chat = TestChat(app.runtime, world="server-a")
        # A world's choice written past /model: never used, so never a label.
        await app.store.worlds.change(chat.room.world_id, large_model="../../etc/passwd")
        await chat.say("hi")
        # Names that reach the accounting some other way (a plugin naming its own model):
        # counted all the same, under one fixed label.
        for name in ("../../etc/passwd", "o1-pro", 'x"} 1\nmnemo_forged{a="'):
            app.ledger.record("reply", 100, 10, model=name, seconds=0.1)
        status, text = await get(f"{app.metrics_server.url}/metrics")
    assert status == 200
    page = samples(text)
    models = {dict(labels)["model"] for _, labels in page if "model" in dict(labels)}
    assert models <= {"gpt-4o", "gpt-4o-mini", "other"} and {"gpt-4o", "other"} <= models
    assert page[("mnemo_model_tokens_total", (("kind", "prompt"), ("model", "other")))] == 300
    timed = ("mnemo_model_call_seconds_count", (("model", "other"), ("task", "reply")))
    assert page[timed] == 3
    assert [r.json["model"] for r in openai_server.chat_requests].count("../../etc/passwd") == 0
    assert "mnemo_forged" not in text

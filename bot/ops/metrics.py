"""Prometheus metrics for one Mnemo process.

Counters that the code already keeps (the `UsageLedger`'s calls and tokens) are read at scrape
time by a collector instead of being counted twice; what only happens in passing (a reply's
latency, a model call's duration) is observed as it happens; what lives in the databases
(queue depth, job states, reachability) is looked up when scraped, each look bounded by a
time-out so a dead database makes the scrape say so instead of hanging it.

A model's name becomes a label value only when the operator named it (MNEMO_SMALL_MODEL,
MNEMO_LARGE_MODEL, MNEMO_MODEL_CHOICES): any other name is counted under `other`, so nobody
else can put a string into the operator's metrics or grow a new series per name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.cancelling import BlockingCalls
from bot.domain.records import JobStatus
from bot.knowledge.vectors import VectorIndex
from bot.llm.accounting import UNNAMED_MODEL, ModelCall, Prices, UsageLedger, estimated_cost
from bot.runtime.intake.journal import Journal
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# The label of every model name the operator did not configure.
OTHER_MODEL = "other"

# Replies are dominated by the model: from tens of milliseconds (a local or offline model)
# to a minute (a slow remote one at its time-out).
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
PROBE_TIMEOUT_SECONDS = 2.0
# Where the evaluation jobs live (for the retried count, which the queue does not keep).
JOBS_COLLECTION = "evaluations"
# Job states that need no more work; every other state counts in the queue's depth.
FINISHED_STATUSES = frozenset({"done", "failed", "dead"})


@dataclass(frozen=True)
class Dependencies:
    """How to reach what the process depends on; each call raises when it is unreachable."""

    mongodb: Callable[[], Awaitable[Any]]
    chroma: Callable[[], Awaitable[Any]]
    # {status: number of jobs}, and how many jobs were handed out more than once.
    job_counts: Callable[[], Awaitable[tuple[dict[str, int], int]]]
    # Messages and bytes waiting in the outage journal (a local file: readable while the
    # database is down, which is when it matters).
    journal: Callable[[], tuple[int, int]] = lambda: (0, 0)
    # Seconds each store has had a call stuck past its deadline (0: none); read without
    # touching the store, which is the point: a stuck store may not answer a probe at all.
    stuck: Callable[[], dict[str, float]] = dict


@dataclass(frozen=True)
class ModelLabels:
    """The model names that may be label values: the operator's own (see the module's doc)."""

    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, names: Collection[str]) -> ModelLabels:
        return cls(frozenset(names))

    def __call__(self, model: str | None) -> str:
        if model is None:
            return UNNAMED_MODEL
        return model if model in self.names else OTHER_MODEL


class _LedgerCollector(Collector):
    """Model calls, tokens and estimated cost, read from the ledger at each scrape."""

    def __init__(self, ledger: UsageLedger, prices: Prices, labels: ModelLabels) -> None:
        self._ledger = ledger
        self._prices = dict(prices)
        self._labels = labels

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "mnemo_model_calls", "Model calls answered, by task", labels=["task"]
        )
        failures = CounterMetricFamily(
            "mnemo_model_failures",
            "Model calls that failed after retries, by task",
            labels=["task"],
        )
        prompt = CounterMetricFamily(
            "mnemo_model_prompt_tokens", "Prompt tokens sent, by task", labels=["task"]
        )
        completion = CounterMetricFamily(
            "mnemo_model_completion_tokens", "Completion tokens received, by task", labels=["task"]
        )
        rejects = CounterMetricFamily(
            "mnemo_model_rejects",
            "Model answers (or parts) not used, by task and reason (a reply that showed an "
            "action name, the prompt's text or the person's words; an unreadable answer ...)",
            labels=["task", "reason"],
        )
        for task, usage in sorted(self._ledger.snapshot().items()):
            calls.add_metric([task], usage.calls)
            failures.add_metric([task], usage.failures)
            prompt.add_metric([task], usage.prompt_tokens)
            completion.add_metric([task], usage.completion_tokens)
            for reason, count in sorted(usage.rejects.items()):
                rejects.add_metric([task, reason], count)
        tokens = CounterMetricFamily(
            "mnemo_model_tokens",
            "Tokens by model and kind (prompt, completion)",
            labels=["model", "kind"],
        )
        cost = CounterMetricFamily(
            "mnemo_model_cost_usd",
            "Estimated spend in USD by model, from MNEMO_MODEL_PRICES (unpriced models absent)",
            labels=["model"],
        )
        # Summed by label: every name the operator did not configure adds to `other`.
        by_label: dict[str, list[int]] = {}
        spent: dict[str, float] = {}
        for model, usage in self._ledger.model_snapshot().items():
            label = self._labels(model)
            counts = by_label.setdefault(label, [0, 0])
            counts[0] += usage.prompt_tokens
            counts[1] += usage.completion_tokens
            price = self._prices.get(model)
            if price is not None:
                spent[label] = spent.get(label, 0.0) + estimated_cost(
                    usage.prompt_tokens, usage.completion_tokens, price
                )
        for label, (prompt_tokens, completion_tokens) in sorted(by_label.items()):
            tokens.add_metric([label, "prompt"], prompt_tokens)
            tokens.add_metric([label, "completion"], completion_tokens)
        for label, amount in sorted(spent.items()):
            cost.add_metric([label], amount)
        embeddings = CounterMetricFamily("mnemo_embedding_calls", "Embedding model calls")
        embeddings.add_metric([], self._ledger.embedding_calls)
        texts = CounterMetricFamily("mnemo_embedded_texts", "Texts embedded")
        texts.add_metric([], self._ledger.embedded_texts)
        yield from (calls, failures, prompt, completion, rejects, tokens, cost, embeddings, texts)


class Metrics:
    """Every metric of one process, in its own registry (no global state: two apps in one
    process, as in tests, do not mix their numbers). Implements `RuntimeEvents`."""

    def __init__(
        self,
        ledger: UsageLedger,
        prices: Prices,
        dependencies: Dependencies,
        *,
        models: Collection[str] = (),
    ) -> None:
        """`models`: the model names the operator configured, the only model labels."""
        self.registry = CollectorRegistry()
        self._dependencies = dependencies
        self._labels = ModelLabels.of(models)
        self.messages_received = Counter(
            "mnemo_messages_received",
            "Messages stored (redeliveries not counted)",
            registry=self.registry,
        )
        self.replies_sent = Counter(
            "mnemo_replies_sent", "Reply messages sent", registry=self.registry
        )
        self.reply_latency = Histogram(
            "mnemo_reply_latency_seconds",
            "From a message's arrival to its last reply sent",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.model_time = Histogram(
            "mnemo_model_call_seconds",
            "Time inside the model per answered call",
            ["task", "model"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.up = Gauge(
            "mnemo_dependency_up",
            "1 if the dependency answered the last probe",
            ["dependency"],
            registry=self.registry,
        )
        self.jobs = Gauge(
            "mnemo_evaluation_jobs", "Evaluation jobs by status", ["status"], registry=self.registry
        )
        self.queue_depth = Gauge(
            "mnemo_evaluation_queue_depth",
            "Evaluation jobs not finished: intake (awaiting their reply), pending, running, "
            "retrying",
            registry=self.registry,
        )
        self.journal_messages = Gauge(
            "mnemo_journal_messages",
            "Messages kept in the local journal while MongoDB was unreachable, not yet replayed",
            registry=self.registry,
        )
        self.journal_bytes = Gauge(
            "mnemo_journal_bytes",
            "Size of the local outage journal (bounded by MNEMO_JOURNAL_MAX_MB)",
            registry=self.registry,
        )
        self.retried = Gauge(
            "mnemo_evaluation_jobs_retried",
            "Evaluation jobs handed out more than once",
            registry=self.registry,
        )
        self.registry.register(_LedgerCollector(ledger, prices, self._labels))
        ledger.listeners.append(self._model_call)

    # RuntimeEvents ---------------------------------------------------------------------------
    def message_received(self) -> None:
        self.messages_received.inc()

    def replied(self, replies: int, seconds: float) -> None:
        self.replies_sent.inc(replies)
        self.reply_latency.observe(seconds)

    def _model_call(self, call: ModelCall) -> None:
        if call.seconds is not None:
            self.model_time.labels(call.task, self._labels(call.model)).observe(call.seconds)

    # scrape-time lookups ---------------------------------------------------------------------
    async def health(self) -> dict[str, bool]:
        """Whether MongoDB and Chroma answer now, without a call stuck past its deadline, and
        whether the journal's disk has none stuck either (`stuck()` says for how long); also
        updates `mnemo_dependency_up`."""
        names = ("mongodb", "chroma")
        stuck = self.stuck()
        results = await asyncio.gather(
            _answers(self._dependencies.mongodb), _answers(self._dependencies.chroma)
        )
        checks = dict(zip(names, results, strict=True))
        if stuck.get("chroma"):  # a quick answer to the probe does not unstick a call
            checks["chroma"] = False
        for name, ok in checks.items():
            self.up.labels(name).set(1 if ok else 0)
        checks["journal"] = not stuck.get("journal")
        return checks

    def stuck(self) -> dict[str, float]:
        """The stores with a call stuck past its deadline, and for how many seconds."""
        return {name: seconds for name, seconds in self._dependencies.stuck().items() if seconds}

    async def refresh(self) -> None:
        """Bring the looked-up gauges up to date before a scrape."""
        messages, size = self._dependencies.journal()
        self.journal_messages.set(messages)
        self.journal_bytes.set(size)
        health = await self.health()
        if not health["mongodb"]:
            return  # the queue gauges keep their last values; mnemo_dependency_up says why
        try:
            counts, retried = await asyncio.wait_for(
                self._dependencies.job_counts(), PROBE_TIMEOUT_SECONDS
            )
        except Exception as error:
            log.warning("metrics: cannot count evaluation jobs: %s", error)
            return
        for status in {*get_args(JobStatus), *counts}:
            self.jobs.labels(status).set(counts.get(status, 0))
        self.queue_depth.set(
            sum(n for status, n in counts.items() if status not in FINISHED_STATUSES)
        )
        self.retried.set(retried)


async def _answers(probe: Callable[[], Awaitable[Any]]) -> bool:
    try:
        await asyncio.wait_for(probe(), PROBE_TIMEOUT_SECONDS)
    except Exception as error:
        log.warning("health probe failed: %s", error)
        return False
    return True


def dependencies_of(
    store: MongoStore,
    vectors: VectorIndex,
    journal: Journal | None = None,
    disk: BlockingCalls | None = None,
) -> Dependencies:
    """`disk`: the journal's file calls (bot/runtime/intake/outage.py), watched for a stuck one."""

    async def job_counts() -> tuple[dict[str, int], int]:
        # The queue's own count of every status it has (retrying and dead included).
        counts = await store.jobs.counts()
        retried = await store.db[JOBS_COLLECTION].count_documents({"attempts": {"$gt": 1}})
        return counts, retried

    async def chroma() -> int:
        return await vectors.count("facts")

    def journaled() -> tuple[int, int]:
        return (len(journal), journal.size_bytes) if journal is not None else (0, 0)

    def stuck() -> dict[str, float]:
        return {"chroma": vectors.stuck, "journal": disk.stuck_for if disk is not None else 0.0}

    return Dependencies(
        mongodb=store.ping, chroma=chroma, job_counts=job_counts, journal=journaled, stuck=stuck
    )

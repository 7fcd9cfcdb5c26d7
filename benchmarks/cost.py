"""`mnemo bench cost` and `overhead`: what one user message costs, next to elizaOS's figures.

A conversation script (by default `benchmarks/data/conversation.json`: Sarah tells the bot about
herself over 30 messages, repeating facts in other words) runs through the full app
(`open_app`: the bundled MongoDB server, Chroma in a temporary folder, the local ONNX embedder)
with the real facts and goals plugins, as one person in one DM with one goal in progress. The
model is the real `OpenAIModel` client talking to `FakeOpenAIServer`, which answers
deterministically: a short reply; every candidate for evaluator selection; for each fact
extraction one new claim plus the previous one again (so deduplication has work to do); and no
goal change. The evaluation is drained after every message, so each model call, token and
embedding is counted against the message that caused it, and nothing is left running.

Prompt tokens are counted with tiktoken's `o200k_base` on the prompt text each request sent
(from its offline cache; nothing is downloaded). Without it the words the fake server reports
as usage are counted instead, and the result says so.

Overhead is each message's wall time minus the time spent inside the model's `generate`,
for the reply path (`handle()`) and for the evaluation separately.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import os
import re
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr, TypeAdapter, ValidationError

from benchmarks.live import FAKE_SMALL, LiveAnswers
from benchmarks.round_trips import RoundTrips
from benchmarks.stats import REPO_ROOT, BenchError, ratio, summary
from bot.app.composition import App, open_app
from bot.config.settings import (
    Settings,
)
from bot.domain.records import Content
from bot.llm.accounting import UsageLedger
from bot.llm.base import Example, LanguageModel, ModelClass, ModelError, ModelRequest
from bot.llm.openai_model import OpenAIModel
from bot.llm.streaming import stream_text
from bot.ops.spend import flush_usage
from bot.plugin.loading import PluginError, Registry, discover, plugin_sources
from bot.storage.facts import fact_text_key
from bot.testing.harness import TestChat, test_settings
from bot.testing.openai_server import (
    FakeOpenAIServer,
    Outcome,
    RecordedRequest,
    Relay,
    Reply,
    Responder,
    last_user_message,
)
from plugins.goals.store import Goal, GoalStore, Objective

log = logging.getLogger(__name__)

Selection = Literal["llm", "all"]
PromptKind = Literal["reply", "selection", "facts", "goals"]

# elizaOS's figures, as measured by its maintainers on elizaOS 0.25.9 against a fake model
# on a 30-message script; shown beside ours, never re-measured here.
ELIZAOS: dict[str, Any] = {
    "source": (
        "measured by the elizaOS maintainers on elizaOS 0.25.9 against a fake model "
        "on a 30-message script"
    ),
    "version": "0.25.9",
    "reply_prompt_tokens_per_message": 1350,
    "prompt_tokens_per_message": 3860,
    "selection_prompt_tokens_per_message": 1500,
    "embedding_calls_per_message": [3, 6],
    "copies_of_a_repeated_fact": 30,
    "overhead_ms_per_message": 1000,
}
# Mnemo's goals against those figures (issue 22: 30% of elizaOS's prompt tokens, at most
# 1.3 model calls per user message, the reply p50 within 1.2x of a bare call of its prompt).
TOKEN_SHARE_GOAL = 0.30
CALLS_PER_MESSAGE_GOAL = 1.3
REPLY_LATENCY_GOAL = 1.2
OVERHEAD_GOAL_MS = 15.0
EMBEDDINGS_GOAL = 1.0
# MongoDB round trips per message (issue 14): the reply path, and one evaluation.
REPLY_ROUND_TRIPS_GOAL = 6
EVALUATION_ROUND_TRIPS_GOAL = 10

USER_NAME = "Sarah"
CHARACTER = REPO_ROOT / "characters" / "mnemo.json"
MEMORY_PLUGINS = ("facts", "goals")
GOAL_NAME = "Run the Lisbon half marathon in under two hours"
GOAL_OBJECTIVES = (
    "Run 15 km without stopping",
    "Finish an 18 km long run",
    "Race on October 12th and finish under 2:00",
)
REPLY = '{"text": "That sounds lovely, tell me more!", "action": "NONE"}'
# One new claim per extraction, in this order (then numbered ones if a script needs more).
CLAIMS = (
    "Sarah moved to Lisbon from Toronto",
    "Sarah works as a nurse at a children's hospital",
    "Sarah has a cat called Miso",
    "Sarah is training for a half marathon in October",
    "Sarah is vegetarian",
    "Sarah's sister Ana lives in Porto",
    "Sarah is learning Portuguese",
    "Sarah plays the cello",
    "Sarah's birthday is on March 3rd",
    "Sarah is allergic to peanuts",
)
# How the fake server tells the prompts apart (the request carries no task name).
_FACTS_PROMPT = "TASK: Extract Claims"
_GOALS_PROMPT = "TASK: Update Goal"
_AVAILABLE_NAMES = re.compile(r"^Available names:[ \t]*(.*)$", re.MULTILINE)
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_MESSAGE_TIMEOUT = 120.0


# ---------------------------------------------------------------------------------------------
# The script


def default_script_path() -> Path:
    return Path(__file__).resolve().parent / "data" / "conversation.json"


def load_script(path: Path | None = None) -> list[str]:
    """The user messages of a script file: a JSON list of non-empty strings."""
    source = path or default_script_path()
    try:
        raw = source.read_text(encoding="utf-8")
        messages = TypeAdapter(list[str]).validate_json(raw)
    except OSError as error:
        raise BenchError(f"cannot read the script {source}: {error.strerror or error}") from None
    except ValidationError as error:
        problem = error.errors()[0]
        raise BenchError(
            f"script {source}: expected a JSON list of messages ({problem['msg']})"
        ) from None
    messages = [m.strip() for m in messages if m.strip()]
    if not messages:
        raise BenchError(f"script {source}: no messages")
    return messages


# ---------------------------------------------------------------------------------------------
# Counting tokens


@dataclass(frozen=True)
class TokenCounter:
    label: str
    count: Callable[[str], int]


def _words(text: str) -> int:
    return len(text.split())


# What FakeOpenAIServer reports as prompt usage: the prompt's whitespace-separated words.
SERVER_USAGE = TokenCounter("server-reported usage (words; tiktoken unavailable)", _words)


def load_token_counter() -> TokenCounter | None:
    """tiktoken's o200k_base from its offline cache, or None. Never downloads: tiktoken would
    fetch a missing file, so the file is looked for first."""
    try:
        import tiktoken
    except ImportError:
        log.warning("tiktoken is not installed (pip install 'mnemo[bench]')")
        return None
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not cache:
        shared = REPO_ROOT.parent / "shared" / "models" / "tiktoken"
        if shared.is_dir():
            # tiktoken only reads its cache location from the environment.
            os.environ["TIKTOKEN_CACHE_DIR"] = cache = str(shared)
    key = hashlib.sha1(_TIKTOKEN_URL.encode()).hexdigest()
    if not cache or not (Path(cache) / key).is_file():
        log.warning("o200k_base is not in TIKTOKEN_CACHE_DIR (%s); counting words", cache)
        return None
    try:
        encoding = tiktoken.get_encoding("o200k_base")
    except Exception as error:  # a corrupt cache file, an incompatible tiktoken ...
        log.warning("tiktoken could not load o200k_base (%s); counting words", error)
        return None
    return TokenCounter(
        "tiktoken o200k_base", lambda text: len(encoding.encode(text, disallowed_special=()))
    )


# ---------------------------------------------------------------------------------------------
# The model side


@dataclass(frozen=True)
class TimedCall:
    # The whole request, so the same request can be sent again bare (reply latency).
    request: ModelRequest
    seconds: float
    failed: bool = False
    # When the runtime asked (time.perf_counter): with the server's arrival time, the call's
    # wait in the model queue.
    started: float = 0.0

    @property
    def task(self) -> str:
        return self.request.task

    @property
    def prompt(self) -> str:
        return self.request.prompt


class TimedModel:
    """A LanguageModel that records each call's request and the time spent inside the
    wrapped model's `generate` (the time the runtime was waiting for the model)."""

    def __init__(self, inner: LanguageModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[TimedCall] = []

    async def generate(self, request: ModelRequest) -> str:
        request = replace(request, task=str(request.task))
        started = time.perf_counter()
        failed = True
        try:
            answer = await self.inner.generate(request)
            failed = False
            return answer
        finally:
            seconds = time.perf_counter() - started
            self.calls.append(TimedCall(request, seconds, failed, started=started))

    def stream(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        """The wrapped model's stream, timed the same way: to its end, or to where the
        runtime stopped reading it (a reply stopped early, as in production)."""
        request = replace(request, task=str(request.task))
        started = time.perf_counter()

        def ended(failed: bool) -> None:
            seconds = time.perf_counter() - started
            self.calls.append(TimedCall(request, seconds, failed, started=started))

        return _timed(stream_text(self.inner, request), ended)

    async def close(self) -> None:
        await self.inner.close()


# The facts plugin's reading: one person's messages, numbered (plugins/facts/prompts.py),
# after the facts known of them.
_READING = re.compile(r"(?:Known facts: [^\n]*\n)?m1\. [^:\n]+: ")


def prompt_kind(prompt: str) -> PromptKind:
    if available_names(prompt) is not None:
        return "selection"
    if prompt.startswith(_FACTS_PROMPT) or _READING.match(prompt):
        return "facts"
    if prompt.startswith(_GOALS_PROMPT):
        return "goals"
    return "reply"


def available_names(prompt: str) -> list[str] | None:
    """The candidate names an evaluator-selection prompt lists, or None if it is not one."""
    found = _AVAILABLE_NAMES.search(prompt)
    if found is None:
        return None
    return [name.strip() for name in found.group(1).split(",") if name.strip()]


@dataclass
class FakeModelAnswers:
    """The fake server's responder: deterministic answers told apart by the prompt."""

    subject: str = USER_NAME
    claims: Sequence[str] = CLAIMS
    reply: str = REPLY
    extractions: int = 0
    offered: list[str] = field(default_factory=list)  # each new claim, in order
    # Every prompt the server was asked, with its kind: the server's own view of the calls.
    prompts: list[tuple[PromptKind, str]] = field(default_factory=list)

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = last_user_message(request)
        kind = prompt_kind(prompt)
        # All the text sent (a reply's system message too): what the tokens are counted on.
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        sent = "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))
        self.prompts.append((kind, sent))
        if kind == "selection":
            return json.dumps(available_names(prompt))
        if kind == "facts":
            return self._extraction()
        if kind == "goals":
            return "[]"
        return self.reply

    def claim(self, number: int) -> str:
        if number < len(self.claims):
            return self.claims[number]
        return f"{self.subject} mentioned detail number {number + 1}"

    def _extraction(self) -> str:
        number = self.extractions
        self.extractions += 1
        new = self.claim(number)
        self.offered.append(new)
        items = [_claim(new, self.subject)]
        if number > 0:
            # The previous claim again, as a forgetful model would; the full stop differs, so
            # the stores' normalisation is exercised too.
            items.append(_claim(self.claim(number - 1) + ".", self.subject))
        return "```json\n" + json.dumps(items, indent=1) + "\n```"


@dataclass
class OneSlot:
    """A responder answering one request at a time, each after `seconds`: a local model
    server with one slot, for measuring what waits behind what without a model."""

    answers: FakeModelAnswers
    seconds: float
    _busy: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def __call__(self, request: dict[str, Any]) -> str:
        async with self._busy:
            await asyncio.sleep(self.seconds)
            return self.answers(request)


@dataclass(frozen=True)
class ServedRequest:
    """One chat request as the model server saw it: what it asked, when it arrived and when
    its answer (or failure) went back (time.perf_counter)."""

    kind: PromptKind
    prompt: str
    system: str | None
    model: str
    arrived: float
    answered: float
    # Refused or failed (an error status, no answer): the server ran no prompt, e.g. the
    # 500 llama-cpp-python gives the first request asking for `json_schema`.
    failed: bool = False
    # The worked examples sent between the system message and the prompt (the facts reading).
    examples: tuple[Example, ...] = ()


@dataclass
class ServerClock:
    """A responder around another: each request's arrival and answer times, in the order
    they arrived. With one request at a time (MNEMO_MODEL_CONCURRENCY=1) that is the order
    the model server ran them, so the request before a reply is the one whose prompt the
    server had cached when the reply came (llama.cpp keeps the last prompt's state)."""

    responder: Responder
    served: list[ServedRequest] = field(default_factory=list)

    async def __call__(self, request: dict[str, Any]) -> str | Outcome:
        arrived = time.perf_counter()
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        system = next((m["content"] for m in messages if m.get("role") == "system"), None)
        prompt = last_user_message(request)
        turns = [m for m in messages if m.get("role") in ("user", "assistant")][:-1]
        examples = tuple(
            Example(str(asked.get("content")), str(answered.get("content")))
            for asked, answered in zip(turns[::2], turns[1::2], strict=False)
        )

        def served(failed: bool) -> None:
            self.served.append(
                ServedRequest(
                    prompt_kind(prompt),
                    prompt,
                    system if isinstance(system, str) else None,
                    str(request.get("model", "")),
                    arrived,
                    time.perf_counter(),
                    failed,
                    examples,
                )
            )

        try:
            answer = self.responder(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except BaseException:
            served(failed=True)
            raise
        if isinstance(answer, Relay):
            # Answered when its stream ends, or when the runtime stopped reading it.
            return replace(answer, pieces=_timed(answer.pieces, served))
        served(failed=not isinstance(answer, str | Reply))
        return answer


async def _timed(
    pieces: AsyncGenerator[str, None], ended: Callable[[bool], None]
) -> AsyncGenerator[str, None]:
    """`pieces` passed on; `ended(failed)` is told when they end, fail or stop being read."""
    failed = False
    try:
        async with aclosing(pieces) as relayed:
            async for piece in relayed:
                yield piece
    except Exception:
        failed = True
        raise
    finally:
        ended(failed)


def _claim(text: str, subject: str) -> dict[str, Any]:
    return {
        "claim": text,
        "subject": subject,
        "type": "fact",
        "in_bio": False,
        "already_known": False,
    }


# ---------------------------------------------------------------------------------------------
# Building the app


def bench_settings(
    data_dir: Path,
    *,
    model_dir: Path,
    base_url: str | None = None,
    selection: Selection = "llm",
    mongodb_uri: str | None = None,
    database: str = "mnemo_bench",
) -> Settings:
    """Settings for a benchmark app, none read from the environment or `.env`: the test
    harness's, pointed at the fake model server and the repo's plugins."""
    base = test_settings(
        data_dir,
        mongodb_uri=mongodb_uri,
        model_dir=model_dir,
        character=CHARACTER,
        evaluator_selection=selection,
    )
    return replace(
        base,
        model=base.model.model_copy(
            update={
                "openai_api_key": SecretStr("sk-bench-fake") if base_url else None,
                "openai_base_url": base_url,
                "small_model": "fake-small",
                "large_model": "fake-large",
                "timeout_seconds": 30.0,
                # One request per call, so requests and calls pair up one to one.
                "max_retries": 0,
            }
        ),
        storage=base.storage.model_copy(update={"mongodb_database": database}),
        runtime=base.runtime.model_copy(
            update={
                "evaluator_timeout": 60.0,
                "plugins_dir": REPO_ROOT / "plugins",
                "log_level": "WARNING",
            }
        ),
    )


def memory_plugins(plugins_dir: Path | None = None) -> Registry:
    """The real facts and goals plugins, discovered from the repository's plugins folder
    with every other plugin there left out."""
    folder = plugins_dir or REPO_ROOT / "plugins"
    found = {source.stem if source.is_file() else source.name for source in plugin_sources(folder)}
    missing = [name for name in MEMORY_PLUGINS if name not in found]
    if missing:
        raise BenchError(
            f"plugins folder {folder} lacks {', '.join(missing)}: run from a Mnemo checkout "
            "or pass --plugins-dir"
        )
    try:
        return discover(
            folder, disabled=sorted(found - set(MEMORY_PLUGINS)), use_entry_points=False
        )
    except PluginError as error:
        raise BenchError(str(error)) from None


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class _Run:
    app: App
    chat: TestChat
    model: TimedModel
    server: FakeOpenAIServer
    counter: TokenCounter
    round_trips: RoundTrips
    message_timeout: float = _MESSAGE_TIMEOUT
    # Seconds between a reply and the next message, evaluations left running in the
    # background as in the bot (None: each message's evaluation is drained before the next,
    # so every call is counted against the message that caused it).
    pace: float | None = None


def _goals(app: App) -> GoalStore:
    """The goals plugin's own collection, as the plugin sees it."""
    goals = next(p for p in app.registry.plugins if p.name == "goals")
    return GoalStore.of(app.runtime.plugins.plugin_context(goals).collections)


async def _prepare(app: App, chat: TestChat) -> None:
    """The person, the DM and their goal; the embedder and collections loaded (not timed)."""
    await app.store.accounts.upsert(chat.account)
    await app.store.rooms.upsert(chat.room)
    await _goals(app).insert(
        Goal(
            name=GOAL_NAME,
            room_id=chat.room.id,
            world_id=chat.room.world_id,
            user_id=chat.account.id,
            objectives=[Objective(description=text) for text in GOAL_OBJECTIVES],
        )
    )
    await app.embedder.embed(["warm-up"])
    await app.knowledge.vectors.count("messages")
    if app.vector_healing is not None:
        # Its start-up reads would otherwise be counted against the first message.
        await app.vector_healing


def _request_text(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    return "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))


def _tokens_by_task(run: _Run, calls: Sequence[TimedCall], requests: Sequence[Any]) -> Counter:
    # The text each request carried; the calls say which task each was for (one request a
    # call: the client does not retry here). Should they not pair up, the prompts are used.
    # With a pace a request may be sent in one message's time and answered in the next's,
    # so requests and calls need not pair up: then each call's own text, which is what its
    # request carried (the system message, then the prompt).
    texts = (
        [_request_text(r) for r in requests]
        if len(requests) == len(calls) and run.pace is None
        else [c.request.shown_text for c in calls]
    )
    tokens: Counter[str] = Counter()
    for call, text in zip(calls, texts, strict=True):
        tokens[call.task] += run.counter.count(text)
    return tokens


async def _facts(app: App, world_id: str) -> tuple[int, int]:
    """Facts stored in the world, and how many distinct texts they hold."""
    facts, total = await app.store.facts.page(world_id, limit=100_000)
    return total, len({fact_text_key(fact.text) for fact in facts})


async def _one_message(run: _Run, number: int, text: str) -> dict[str, Any]:
    app, chat, model = run.app, run.chat, run.model
    calls_before = len(model.calls)
    requests_before = len(run.server.chat_requests)
    embeddings_before = app.ledger.embedding_calls
    # When the person saw the reply: its first part sent. An action the reply named runs
    # after that (CREATE_GOAL drafts a goal with a model call), before `handle()` returns.
    first_sent: list[float] = []

    async def collect(content: Content) -> None:
        if not first_sent:
            first_sent.append(time.perf_counter())
        chat.replies.append(content.text)

    started = time.perf_counter()
    with run.round_trips.measure() as reply_trips:
        result = await app.runtime.handle(
            chat.message(text), collect, account=chat.account, room=chat.room
        )
    replied = time.perf_counter()
    seen = first_sent[0] if first_sent else replied
    calls_replying = len(model.calls)
    # The evaluation starts once the reply path has released its job; what it sends until the
    # room's queue is drained is its cost (claiming the job and finding none left included).
    with run.round_trips.measure() as evaluation_trips:
        if run.pace is None:
            drained = await app.runtime.evaluations.join(chat.room.id, run.message_timeout)
        else:
            await asyncio.sleep(run.pace)  # a person reading the reply and typing the next
            drained = True
    finished = time.perf_counter()
    reply_calls = model.calls[calls_before:calls_replying]
    reply_call = next(
        (
            index
            for index in range(calls_before, calls_replying)
            if model.calls[index].task == "reply"
        ),
        None,
    )
    evaluation_calls = model.calls[calls_replying:]
    calls = model.calls[calls_before:]
    requests = run.server.chat_requests[requests_before:]
    job = await app.store.jobs.get(result.job.id) if result.job is not None else None
    stored, distinct = await _facts(app, chat.room.world_id)
    reply_ms = (replied - started) * 1000
    seen_ms = (seen - started) * 1000
    evaluation_ms = (finished - replied) * 1000
    reply_model_ms = sum(c.seconds for c in reply_calls) * 1000
    evaluation_model_ms = sum(c.seconds for c in evaluation_calls) * 1000
    return {
        "message": number,
        "replies": len(result.replies),
        "calls": dict(Counter(c.task for c in calls)),
        "failed_calls": sum(1 for c in calls if c.failed),
        "requests": len(requests),
        "prompt_tokens": dict(_tokens_by_task(run, calls, requests)),
        "embedding_calls": app.ledger.embedding_calls - embeddings_before,
        # The message to `handle()` done (the reply path's whole time, its overhead below).
        "reply_ms": round(reply_ms, 2),
        # The message to the reply's first part sent: the latency a person notices.
        "seen_ms": round(seen_ms, 2),
        "reply_model_ms": round(reply_model_ms, 2),
        "reply_overhead_ms": round(reply_ms - reply_model_ms, 2),
        # Which of the run's model calls was this message's reply (pairs it with its bare call).
        "reply_call": reply_call,
        "evaluation_ms": round(evaluation_ms, 2),
        "evaluation_model_ms": round(evaluation_model_ms, 2),
        "evaluation_overhead_ms": round(evaluation_ms - evaluation_model_ms, 2),
        "round_trips_reply": reply_trips.total,
        "round_trips_evaluation": evaluation_trips.total,
        "commands_reply": dict(reply_trips.commands),
        "commands_evaluation": dict(evaluation_trips.commands),
        "evaluators_ran": list(job.ran) if job is not None else [],
        "job_status": job.status if job is not None else None,
        "drained": drained,
        "facts_stored": stored,
        "facts_distinct": distinct,
    }


async def run_mode(
    script: Sequence[str],
    *,
    selection: Selection,
    model_dir: Path,
    counter: TokenCounter,
    mongodb_uri: str | None = None,
    plugins_dir: Path | None = None,
    conversation_length: int = 32,
    answers: FakeModelAnswers | LiveAnswers | None = None,
    pace: float | None = None,
    bare_replies: bool = False,
    model_seconds: float | None = None,
    responder: Responder | None = None,
) -> dict[str, Any]:
    """Drive the script through a fresh app in one selection mode; per-message rows and
    their summary. `conversation_length` sets how often facts are extracted (every half).
    With `LiveAnswers` the fake server forwards to a real endpoint (`--live`). `pace`: see
    `_Run.pace`. `bare_replies`: afterwards, each reply's request is sent again alone, the
    bare model call the reply latency is compared with. `model_seconds`: the fake server
    answers one request at a time, each taking this long, as a one-slot local server does,
    and the client sends one at a time (MNEMO_MODEL_CONCURRENCY=1). `responder`: a model
    server of the caller's own in front of `answers` (one request at a time, too)."""
    answers = answers if answers is not None else FakeModelAnswers()
    live = answers if isinstance(answers, LiveAnswers) else None
    registry = memory_plugins(plugins_dir)
    facts = registry.settings["facts"]
    registry.use_settings(
        "facts", facts.model_copy(update={"conversation_length": conversation_length})
    )
    database = f"mnemo_bench_{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix=f"mnemo-bench-cost-{selection}-") as folder:
        # A live model has its own slots: the one-slot stand-in is for the fake answers only.
        if responder is None:
            responder = (
                OneSlot(answers, model_seconds)
                if model_seconds is not None and isinstance(answers, FakeModelAnswers)
                else answers
            )
        clock = ServerClock(responder)
        async with FakeOpenAIServer(responder=clock) as server:
            settings = bench_settings(
                Path(folder),
                model_dir=model_dir,
                base_url=server.base_url,
                selection=selection,
                mongodb_uri=mongodb_uri,
                database=database,
            )
            if live is not None:
                settings = _live_settings(settings, live)
            elif model_seconds is not None or responder is not answers:
                settings = replace(
                    settings, model=settings.model.model_copy(update={"concurrency": 1})
                )
            model = TimedModel(OpenAIModel(settings.model, UsageLedger()))
            round_trips = RoundTrips()
            async with open_app(
                settings,
                model=model,
                registry=registry,
                mongo_listeners=[round_trips],
                # Never during the run: a write then would be counted against a message.
                usage_flush_seconds=24 * 3600,
            ) as app:
                try:
                    chat = TestChat(app.runtime, name=USER_NAME, chat="cost-dm", kind="dm")
                    await _prepare(app, chat)
                    app.ledger.reset()
                    run = _Run(app, chat, model, server, counter, round_trips, pace=pace)
                    if live is not None:
                        run.message_timeout = 2 * settings.runtime.evaluator_timeout
                    warmed = 0
                    if live is not None:
                        await _warm_up(model)
                        warmed = len(live.answers)
                    rows = []
                    for number, text in enumerate(script, 1):
                        rows.append(await _one_message(run, number, text))
                        log.info("cost %s: message %d done", selection, number)
                    if pace is not None and rows:
                        await _drain_into(run, rows[-1])
                    learned = await _learned(app, chat) if live is not None else None
                    # Summed before the bare calls: their primers may be fact extractions,
                    # which the fake answers would count.
                    result = summarise(rows, answers, selection)
                    run_served = list(clock.served)
                    run_answers = len(live.answers) if live is not None else 0
                    first_replies = {row["reply_call"] for row in rows}
                    bare = (
                        await _bare_replies(model, run_served, clock, first_replies)
                        if bare_replies
                        else None
                    )
                finally:
                    await app.runtime.evaluations.stop(grace=5)
                    if mongodb_uri:
                        # Written now, so the shutdown's write does not bring it back.
                        await flush_usage(app.ledger, app.store)
                        await app.store.client.drop_database(database)
    result["pace_seconds"] = pace
    result["model_seconds"] = model_seconds
    if bare is not None:
        result["reply_latency"] = reply_latency(rows, model.calls, bare, run_served)
    if live is not None and learned is not None:
        # The run's own requests; the bare calls and their primers are in reply_latency.
        in_run = live.answers[warmed:run_answers]
        result["live"] = {
            "endpoint": live.describe,
            "model_seconds": summary([seconds for _kind, seconds, _raw in in_run]),
            "learned": learned,
            "answers": [
                {"kind": kind, "seconds": round(seconds, 1), "raw": raw}
                for kind, seconds, raw in in_run
            ],
        }
    return result


async def _drain_into(run: _Run, last: dict[str, Any]) -> None:
    """With a pace, the evaluations still running after the last message: waited for, and
    their calls and tokens added to the last row, so the totals hold every call."""
    calls_before = len(run.model.calls)
    requests_before = len(run.server.chat_requests)
    await run.app.runtime.evaluations.join(run.chat.room.id, run.message_timeout)
    calls = run.model.calls[calls_before:]
    requests = run.server.chat_requests[requests_before:]
    last["calls"] = dict(Counter(last["calls"]) + Counter(c.task for c in calls))
    last["prompt_tokens"] = dict(
        Counter(last["prompt_tokens"]) + _tokens_by_task(run, calls, requests)
    )
    last["requests"] += len(requests)
    last["failed_calls"] += sum(1 for c in calls if c.failed)


# The first reply had nothing before it at the server: a short prompt of its own stands in,
# so the bare call finds no useful prefix cached either.
_UNRELATED_PRIMER = "Say OK."


@dataclass(frozen=True)
class BareCall:
    """A reply's request sent again alone after the run: the whole call (client included)
    and the model server's part of it, in seconds."""

    call: int  # the reply's index in the run's model calls
    seconds: float
    server_seconds: float


def _served_reply(call: TimedCall, served: Sequence[ServedRequest], used: set[int]) -> int | None:
    """The index of the server's record of this reply call: the first unused reply request
    with its prompt that arrived after the call started."""
    for index, request in enumerate(served):
        if (
            index not in used
            and request.kind == "reply"
            and request.prompt == call.prompt
            and request.arrived >= call.started
        ):
            used.add(index)
            return index
    return None


async def _warm_up(model: TimedModel) -> None:
    """One small request before the run, not counted: the first request a fresh local server
    answers also pages its weights in (64 s for a reply that took 13 s bare once warm), which
    a bot that has been running never pays. It is also what the first reply finds cached, as
    its bare call does (`_UNRELATED_PRIMER`)."""
    try:
        await model.inner.generate(
            ModelRequest(
                _UNRELATED_PRIMER, model_class=ModelClass.LARGE, task="warm_up", max_tokens=1
            )
        )
    except ModelError as error:
        log.warning("warm-up call failed: %s", error)


async def _bare_replies(
    model: TimedModel,
    served: Sequence[ServedRequest],
    clock: ServerClock,
    measure: set[int | None] | None = None,
) -> list[BareCall]:
    """Each reply's request sent again, one at a time with nothing else running: what a bare
    model call of the same prompt takes, under the same prompt cache.

    Why a primer before each: a local server keeps the state of the last prompt it ran and
    reuses the longest prefix the next prompt shares with it (llama-cpp-python does; so does
    llama.cpp's own server per slot). During the run a reply found whatever request came
    before it cached: the previous reply (the character's system prompt is then reused) or an
    evaluation (little is). Sent back to back after the run, every bare reply found the
    previous reply cached, which made the baseline faster than any reply could be (issue 22's
    first live run: 4.4 s bare against 10.4 s for the same prompts at the server during the
    run). So the request that came right before the reply at the server is sent first, with
    `max_tokens=1` (the prompt is what gets cached; its answer is not needed), and then the
    reply's request, timed. Only each message's first reply call is measured (`measure`):
    a second one, after a reply check refused the first, has a prompt of its own and is
    Mnemo's cost, counted in the message's latency. Measuring the bare call before Mnemo's
    reply instead is not possible: the reply's prompt exists only once Mnemo has built it."""
    ordered = sorted((request for request in served if not request.failed), key=lambda r: r.arrived)
    used: set[int] = set()
    out = []
    for number, call in enumerate(model.calls):
        if call.task != "reply" or call.failed:
            continue
        found = _served_reply(call, ordered, used)
        if measure is not None and number not in measure:
            continue  # a second try of a reply (a reply check refused the first)
        before = ordered[found - 1] if found else None
        try:
            await model.inner.generate(
                ModelRequest(
                    before.prompt if before is not None else _UNRELATED_PRIMER,
                    model_class=(
                        ModelClass.SMALL
                        if before is not None and before.model == FAKE_SMALL
                        else ModelClass.LARGE
                    ),
                    task="bare_primer",
                    system=before.system if before is not None else None,
                    examples=before.examples if before is not None else (),
                    max_tokens=1,
                )
            )
        except ModelError as error:
            log.warning("bare reply primer failed: %s", error)
        started = time.perf_counter()
        try:
            await model.inner.generate(replace(call.request, task="bare_reply", state=None))
        except ModelError as error:
            log.warning("bare reply call failed: %s", error)
            continue
        seconds = time.perf_counter() - started
        request = clock.served[-1]
        out.append(BareCall(number, seconds, request.answered - request.arrived))
    return out


def reply_waits(
    calls: Sequence[TimedCall], served: Sequence[ServedRequest], measure: set[int | None]
) -> list[tuple[float, float, str | None]]:
    """Per reply call of the run: its wait in the model queue (from the runtime asking to the
    request reaching the server), the server's own time for it, and what kind of request the
    server was busy with when the reply was asked for (None: nothing), in seconds."""
    ordered = sorted((request for request in served if not request.failed), key=lambda r: r.arrived)
    used: set[int] = set()
    out: list[tuple[float, float, str | None]] = []
    for number, call in enumerate(calls):
        if call.task != "reply" or call.failed:
            continue
        found = _served_reply(call, ordered, used)
        if found is None or number not in measure:
            continue  # each message's first reply call, as the bare calls
        request = ordered[found]
        # What it waited for: a request the server had not answered when the reply was
        # asked for (one that had taken the slot but not yet arrived counts too).
        busy = next(
            (other.kind for other in ordered[:found] if other.answered > call.started),
            None,
        )
        out.append((request.arrived - call.started, request.answered - request.arrived, busy))
    return out


def reply_latency(
    rows: Sequence[dict[str, Any]],
    calls: Sequence[TimedCall],
    bare: Sequence[BareCall],
    served: Sequence[ServedRequest] = (),
) -> dict[str, Any]:
    """The reply's latency (the message to the reply's first part sent, and the reply's model
    call with its wait in the model queue) against a bare call of the same prompt, in ms; and
    where the difference went: the wait in the model queue, the server's own time."""
    message = summary([row["seen_ms"] for row in rows])
    model_call = summary([c.seconds * 1000 for c in calls if c.task == "reply"])
    bare_ms = summary([b.seconds * 1000 for b in bare])
    by_call = {b.call: b for b in bare}
    # Each reply against its own bare call: the load of a shared machine drifts, and the
    # model's answers differ in length from prompt to prompt.
    paired = [
        row["seen_ms"] / (by_call[row["reply_call"]].seconds * 1000)
        for row in rows
        if row.get("reply_call") in by_call and by_call[row["reply_call"]].seconds > 0
    ]
    # The same, for the messages answered in one reply call (no reply check asked again).
    paired_one_call = [
        row["seen_ms"] / (by_call[row["reply_call"]].seconds * 1000)
        for row in rows
        if row.get("reply_call") in by_call
        and by_call[row["reply_call"]].seconds > 0
        and row["calls"].get("reply", 0) == 1
    ]
    waits = reply_waits(calls, served, {row.get("reply_call") for row in rows})
    behind = Counter(kind for _wait, _server, kind in waits if kind is not None)
    return {
        "baseline": (
            "each reply's request sent again after the run, alone, right after the request "
            "that preceded it at the server (max_tokens 1), so the server's cached prompt "
            "prefix is the one the reply found"
        ),
        "message_to_reply_ms": message,
        "reply_model_call_ms": model_call,
        "bare_call_ms": bare_ms,
        "p50_ratio": ratio(message["p50"], bare_ms["p50"]),
        "model_call_p50_ratio": ratio(model_call["p50"], bare_ms["p50"]),
        "paired_ratio": summary(paired, digits=3),
        "paired_ratio_one_call": summary(paired_one_call, digits=3),
        "queue_wait_ms": summary([wait * 1000 for wait, _server, _kind in waits]),
        "reply_server_ms": summary([server * 1000 for _wait, server, _kind in waits]),
        "bare_server_ms": summary([b.server_seconds * 1000 for b in bare]),
        # The message to the reply seen against the server's own time for that reply's
        # request in the run: it ran alone there (one request at a time) with the cache it
        # found, in the same minute, so a shared machine's changing load is left out.
        "in_run_p50_ratio": ratio(
            message["p50"], percentile_or_zero([server * 1000 for _wait, server, _kind in waits])
        ),
        "server_p50_ratio": ratio(
            percentile_or_zero([server for _wait, server, _kind in waits]),
            percentile_or_zero([b.server_seconds for b in bare]),
        ),
        # Messages whose reply took more than one model call (a reply check refused one).
        "replies_retried": sum(1 for row in rows if row["calls"].get("reply", 0) > 1),
        "waited_behind": {
            "replies": sum(behind.values()),
            "of": len(waits),
            "by_kind": dict(sorted(behind.items())),
        },
    }


def percentile_or_zero(values: Sequence[float]) -> float:
    return summary(values, digits=6)["p50"] if values else 0.0


def _live_settings(settings: Settings, live: LiveAnswers) -> Settings:
    """The bench settings with the endpoint's pace: its time-out, retries, concurrency and
    structured output; evaluations may take several model calls' time."""
    timeout = live.settings.timeout_seconds
    return replace(
        settings,
        model=settings.model.model_copy(
            update={
                "timeout_seconds": timeout + 5,  # the proxy's own forwarding time-out first
                "max_retries": live.settings.max_retries,
                "concurrency": live.settings.concurrency,
                "structured_output": live.settings.structured_output,
            }
        ),
        runtime=settings.runtime.model_copy(
            # The product's reply cap (the harness's is raised for the platform tests).
            update={"evaluator_timeout": 6 * timeout, "reply_max_chars": 4000}
        ),
    )


async def _learned(app: App, chat: TestChat) -> dict[str, Any]:
    """What the run left in the stores: facts with their subjects, the goal, the rejects."""
    facts, _total = await app.store.facts.page(chat.room.world_id, limit=1000)
    ids = {fact.subject_id for fact in facts}
    accounts = await app.store.accounts.get_many(sorted(ids))
    names = {i: a.name for i, a in accounts.items()} | {app.runtime.agent_id: "(the bot)"}
    goals = await _goals(app).in_room(chat.room.id, only_in_progress=False)
    rejects = {
        task: dict(usage.rejects) for task, usage in app.ledger.snapshot().items() if usage.rejects
    }
    return {
        "facts": [f"{fact.text} (about {names.get(fact.subject_id, '?')})" for fact in facts],
        "goals": [
            {
                "name": goal.name,
                "status": goal.status,
                "objectives": [[o.description, o.completed] for o in goal.objectives],
            }
            for goal in goals
        ],
        "rejects": rejects,
        "replies": list(chat.replies),
    }


def summarise(
    rows: Sequence[dict[str, Any]], answers: FakeModelAnswers | LiveAnswers, selection: Selection
) -> dict[str, Any]:
    count = len(rows)
    calls: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    for row in rows:
        calls.update(row["calls"])
        tokens.update(row["prompt_tokens"])
    total_tokens = sum(tokens.values())
    embeddings = [row["embedding_calls"] for row in rows]
    last = rows[-1] if rows else {"facts_stored": 0, "facts_distinct": 0}
    return {
        "selection": selection,
        "user_messages": count,
        "replied": sum(1 for row in rows if row["replies"] > 0),
        "model_calls": dict(sorted(calls.items())),
        "model_calls_total": sum(calls.values()),
        "model_calls_per_message": {
            "total": _per(sum(calls.values()), count, digits=2),
            **{task: _per(n, count, digits=2) for task, n in sorted(calls.items())},
        },
        "server_requests": sum(row["requests"] for row in rows),
        "failed_calls": sum(row["failed_calls"] for row in rows),
        "prompt_tokens": dict(sorted(tokens.items())),
        "prompt_tokens_per_message": {
            "total": _per(total_tokens, count),
            "reply": _per(tokens.get("reply", 0), count),
            "evaluation": _per(total_tokens - tokens.get("reply", 0), count),
            "selection": _per(tokens.get("evaluator_selection", 0), count),
            **{task: _per(n, count) for task, n in sorted(tokens.items())},
        },
        "embedding_calls": {
            "total": sum(embeddings),
            "per_message": _per(sum(embeddings), count, digits=2),
            "max": max(embeddings, default=0),
        },
        "facts": {
            "extractions": answers.extractions,
            "new_claims_offered": len(set(answers.offered)),
            "stored": last["facts_stored"],
            "distinct": last["facts_distinct"],
            "duplicates": last["facts_stored"] - last["facts_distinct"],
        },
        "overhead_ms": {
            "reply": summary([row["reply_overhead_ms"] for row in rows]),
            "evaluation": summary([row["evaluation_overhead_ms"] for row in rows]),
            "message": summary(
                [row["reply_overhead_ms"] + row["evaluation_overhead_ms"] for row in rows]
            ),
        },
        "model_wait_ms": {
            "reply": summary([row["reply_model_ms"] for row in rows]),
            "evaluation": summary([row["evaluation_model_ms"] for row in rows]),
        },
        "undrained": sum(1 for row in rows if not row["drained"]),
        "mongodb_round_trips": round_trips(rows),
        "messages": list(rows),
    }


def round_trips(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """MongoDB round trips per message on each path, and which commands they were. The
    first message also writes the person's and the room's profiles, so the goals are judged
    on the worst of the rest (a person's later messages), and the first is shown apart."""
    later = rows[1:] or rows
    out: dict[str, Any] = {}
    for path in ("reply", "evaluation"):
        commands: Counter[str] = Counter()
        for row in later:
            commands.update(row[f"commands_{path}"])
        out[path] = {
            **summary([row[f"round_trips_{path}"] for row in later]),
            "first_message": rows[0][f"round_trips_{path}"] if rows else 0,
            "commands_per_message": {
                name: round(n / len(later), 2) for name, n in sorted(commands.items())
            },
        }
    out["message"] = summary(
        [row["round_trips_reply"] + row["round_trips_evaluation"] for row in later]
    )
    return out


def _per(total: float, count: int, *, digits: int = 0) -> float:
    if not count:
        return 0.0
    value = round(total / count, digits)
    return value if digits else float(int(value))


async def run_cost(
    script: Sequence[str],
    *,
    model_dir: Path,
    selections: Sequence[Selection] = ("llm", "all"),
    script_source: str = "benchmarks/data/conversation.json",
    mongodb_uri: str | None = None,
    plugins_dir: Path | None = None,
    live: bool = False,
    conversation_length: int = 32,
    pace: float | None = None,
    model_seconds: float | None = None,
) -> dict[str, Any]:
    """The cost run in each selection mode, with elizaOS's figures and the goals; `live`
    asks the endpoint of the usual model settings instead of the fake model; `pace` leaves
    evaluations running while the next message comes (see `_Run.pace`)."""
    counter = load_token_counter() or SERVER_USAGE
    modes = {}
    for selection in selections:
        log.info("cost: %d messages, evaluator selection %r", len(script), selection)
        modes[selection] = await run_mode(
            script,
            selection=selection,
            model_dir=model_dir,
            counter=counter,
            mongodb_uri=mongodb_uri,
            plugins_dir=plugins_dir,
            answers=LiveAnswers.from_environment() if live else None,
            conversation_length=conversation_length,
            pace=pace,
            bare_replies=True,
            model_seconds=model_seconds,
        )
    result: dict[str, Any] = {
        "script": {"source": script_source, "messages": len(script)},
        "token_counter": counter.label,
        "elizaos": ELIZAOS,
        "modes": modes,
    }
    result["comparison"] = comparison(result)
    result["goals"] = cost_goals(result)
    return result


def comparison(result: dict[str, Any]) -> dict[str, Any]:
    """Our figures as shares of elizaOS's, per selection mode."""
    out = {}
    for selection, mode in result["modes"].items():
        per = mode["prompt_tokens_per_message"]
        out[selection] = {
            "prompt_tokens_share": ratio(per["total"], ELIZAOS["prompt_tokens_per_message"]),
            "reply_tokens_share": ratio(per["reply"], ELIZAOS["reply_prompt_tokens_per_message"]),
            "selection_tokens_share": ratio(
                per["selection"], ELIZAOS["selection_prompt_tokens_per_message"]
            ),
        }
    return out


def _goal(goal: str, target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"goal": goal, "target": target, "measured": measured, "met": bool(met)}


def cost_goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    modes = result["modes"]
    goals = []
    budget = TOKEN_SHARE_GOAL * ELIZAOS["prompt_tokens_per_message"]
    if "llm" in modes:
        per = modes["llm"]["prompt_tokens_per_message"]["total"]
        share = per / ELIZAOS["prompt_tokens_per_message"]
        goals.append(
            _goal(
                "prompt tokens per user message, both evaluators, `llm` selection",
                f"≤ {budget:,.0f} ({TOKEN_SHARE_GOAL:.0%} of elizaOS's 3,860)",
                f"{per:,.0f} ({share:.0%} of elizaOS)",
                per <= budget,
            )
        )
        calls = modes["llm"]["model_calls_per_message"]
        goals.append(
            _goal(
                "model calls per user message, `llm` selection",
                f"≤ {CALLS_PER_MESSAGE_GOAL:g}",
                ", ".join(f"{task} {n:g}" for task, n in calls.items()),
                calls["total"] <= CALLS_PER_MESSAGE_GOAL,
            )
        )
    for selection, mode in modes.items():
        latency = mode.get("reply_latency")
        # Against the instant fake server a bare call takes a few ms and the ratio shows only
        # Mnemo's own overhead: judged with a real model, or a fake one that takes its time.
        where = latency_setting(mode)
        if not latency or latency["p50_ratio"] is None or where is None:
            continue
        goals.append(
            _goal(
                f"reply latency p50 against a bare call of its prompt (`{selection}`, {where})",
                f"≤ {REPLY_LATENCY_GOAL:g}×",
                f"{latency['p50_ratio']:g}× ({latency['message_to_reply_ms']['p50']:,.0f} ms "
                f"vs {latency['bare_call_ms']['p50']:,.0f} ms)",
                latency["p50_ratio"] <= REPLY_LATENCY_GOAL,
            )
        )
    if {"llm", "all"} <= set(modes):
        learned = modes["llm"]["facts"]["distinct"]
        everything = modes["all"]["facts"]["distinct"]
        goals.append(
            _goal(
                "learns as much with `llm` selection as with `all`",
                "distinct facts equal",
                f"{learned} vs {everything}",
                learned >= everything,
            )
        )
    for selection, mode in modes.items():
        embeddings = mode["embedding_calls"]
        goals.append(
            _goal(
                f"embedding calls per user message (`{selection}`)",
                f"≤ {EMBEDDINGS_GOAL:g}",
                f"{embeddings['per_message']:.2f} on average, at most {embeddings['max']}",
                embeddings["per_message"] <= EMBEDDINGS_GOAL,
            )
        )
        facts = mode["facts"]
        goals.append(
            _goal(
                f"no duplicate facts (`{selection}`)",
                "0",
                f"{facts['duplicates']} ({facts['stored']} stored, {facts['distinct']} distinct)",
                facts["duplicates"] == 0,
            )
        )
    if "llm" in modes:
        goals.extend(round_trip_goals(modes["llm"]["mongodb_round_trips"]))
    return goals


def latency_setting(mode: dict[str, Any]) -> str | None:
    """Where the reply latency means something: a real model, or a fake one taking its time
    (None: the instant fake server)."""
    pace = mode.get("pace_seconds")
    paced = f", {pace:g} s between messages" if pace is not None else ""
    if "live" in mode:
        return f"{mode['live']['endpoint']}{paced}"
    if mode.get("model_seconds") is not None:
        return f"one-slot fake model, {mode['model_seconds']:g} s a call{paced}"
    return None


def round_trip_goals(trips: dict[str, Any]) -> list[dict[str, Any]]:
    """The round-trip goals, judged on the worst message after the first."""
    goals = []
    for path, label, target in (
        ("reply", "the reply path", REPLY_ROUND_TRIPS_GOAL),
        ("evaluation", "one evaluation", EVALUATION_ROUND_TRIPS_GOAL),
    ):
        found = trips[path]
        goals.append(
            _goal(
                f"MongoDB round trips per message, {label} (`llm`)",
                f"≤ {target}",
                f"{found['max']:g} at most, {found['mean']:g} on average",
                found["max"] <= target,
            )
        )
    return goals


def overhead_goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    mode = result["modes"].get("llm") or next(iter(result["modes"].values()))
    goals = []
    for path in ("reply", "evaluation"):
        p50 = mode["overhead_ms"][path]["p50"]
        goals.append(
            _goal(
                f"runtime overhead p50, {path} (real stores)",
                f"< {OVERHEAD_GOAL_MS:g} ms",
                f"{p50:.1f} ms",
                p50 < OVERHEAD_GOAL_MS,
            )
        )
    return goals


def overhead_of(result: dict[str, Any]) -> dict[str, Any]:
    """The overhead part of a cost run (the `llm` mode when it ran)."""
    selection = "llm" if "llm" in result["modes"] else next(iter(result["modes"]))
    mode = result["modes"][selection]
    return {
        "selection": selection,
        "messages": mode["user_messages"],
        "overhead_ms": mode["overhead_ms"],
        "model_wait_ms": mode["model_wait_ms"],
        "elizaos_overhead_ms": ELIZAOS["overhead_ms_per_message"],
        "goals": overhead_goals(result),
    }

"""`mnemo bench memory`: does memory stay true when facts change?

Whole conversations (one or several speakers, DMs and groups) are driven through the full app
(`AgentRuntime.handle`, the real facts plugin, bundled MongoDB, Chroma, the ONNX embedder), each
in its own world. Extraction runs after every `extract_every` turns, as the idle flush would
after a pause, and once more at the end. Then the facts and the reply prompt of each probe
question ("Where do I live now?") are scored against what the conversation expects:

- current recall: expected current values found among the subject's current facts;
- stale shown: superseded values still shown as current, in `/facts` and in a probe's prompt;
- changes kept: the new values of conversations with a change, found (dropped as duplicates
  or never stored, they count against it);
- attribution: in groups, expected facts found on the right person rather than on another;
- duplicates, model calls and prompt tokens per user message.

The model is the offline one unless the usual settings (OPENAI_API_KEY / OPENAI_BASE_URL,
MNEMO_SMALL_MODEL, MNEMO_LARGE_MODEL, ...) name an OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
import logging
import tempfile
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from benchmarks.cost import (
    SERVER_USAGE,
    TimedModel,
    TokenCounter,
    bench_settings,
    load_token_counter,
    memory_plugins,
)
from benchmarks.memory_judge import WRONG_PLANTED, FactJudge, ReplyTally
from benchmarks.stats import REPO_ROOT, BenchError
from bot.app.composition import App, open_app
from bot.app.model_choice import make_model
from bot.config.settings import ModelSettings, Settings
from bot.domain.records import Fact
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel, ModelRequest, Task
from bot.llm.reply_checks import ACTION_NAME, PARROTING, PROMPT_TEXT, REPEATED, ReplyCheck
from bot.runtime.prompts import BUILTIN_TEMPLATES
from bot.runtime.replying import (
    EMPTY_REPLY,
    FALLBACK_REPLY,
    MODEL_FAILED_REPLY,
    RATE_LIMITED_REPLY,
    REPLACED_BY_FALLBACK,
)
from bot.storage.facts import fact_text_key
from bot.testing.harness import TestChat
from plugins.goals.provider import CHECKBOXES
from plugins.goals.provider import HEADING as GOALS_HEADING
from plugins.recall.provider import HEADER as RECALL_HEADER

# What the bot sends when it has no reply of the model's to send: counted apart.
FALLBACKS = (FALLBACK_REPLY, EMPTY_REPLY, MODEL_FAILED_REPLY, RATE_LIMITED_REPLY)

log = logging.getLogger(__name__)

DEFAULT_DATA = REPO_ROOT / "benchmarks" / "data" / "memory_conversations.json"
# Goals the issue sets for the offline run on the shipped conversations.
ATTRIBUTION_GOAL = 0.95


# ---------------------------------------------------------------------------------------------
# Input


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Turn(_Strict):
    speaker: str = Field(min_length=1)
    text: str = Field(min_length=1)


class Expected(_Strict):
    subject: str = Field(min_length=1)
    # Lower-case substrings that must all be in one fact.
    contains: list[str] = Field(min_length=1)
    # A value that replaced an earlier one (a new city, a new job): what "changes kept" counts.
    changed: bool = False

    @field_validator("contains")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [part.casefold() for part in value if part.strip()]


class Expectations(_Strict):
    current: list[Expected] = Field(default_factory=list)
    stale: list[Expected] = Field(default_factory=list)
    # What must never be stored on that person (an injection attempt, a planted fact).
    never: list[Expected] = Field(default_factory=list)
    # The goals a person stated for themselves, which must be tracked (by the goals plugin).
    goals: list[Expected] = Field(default_factory=list)


class Conversation(_Strict):
    name: str = Field(min_length=1)
    kind: Literal["dm", "group"]
    turns: list[Turn] = Field(min_length=1)
    probes: list[Turn] = Field(default_factory=list)
    expect: Expectations = Field(default_factory=Expectations)


def load_conversations(path: Path) -> list[Conversation]:
    """The conversations in a `--data` file; a BenchError naming the first problem."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise BenchError(f"cannot read {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise BenchError(f"{path} is not JSON: {error.msg} at line {error.lineno}") from None
    if not isinstance(raw, list) or not raw:
        raise BenchError(f"{path} must hold a non-empty JSON list of conversations")
    conversations = []
    for index, item in enumerate(raw):
        try:
            conversations.append(Conversation.model_validate(item))
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "conversation"
            raise BenchError(
                f"{path}: conversation {index + 1}, {where}: {problem['msg']}"
            ) from None
    names = [c.name for c in conversations]
    if len(set(names)) != len(names):
        raise BenchError(f"{path}: conversation names must be unique")
    for conversation in conversations:
        speakers = {t.speaker for t in conversation.turns}
        if conversation.kind == "dm" and len(speakers) > 1:
            raise BenchError(f"{path}: {conversation.name} is a DM with several speakers")
        expect = conversation.expect
        for item in [*expect.current, *expect.stale, *expect.never, *expect.goals]:
            if item.subject not in speakers:
                raise BenchError(
                    f"{path}: {conversation.name} expects a fact about {item.subject!r}, "
                    "who never speaks"
                )
    return conversations


def pick_conversations(
    conversations: Sequence[Conversation], names: Sequence[str]
) -> list[Conversation]:
    """The named conversations, in the data's order; a BenchError naming any unknown name."""
    wanted = {name.strip() for name in names if name.strip()}
    if not wanted:
        raise BenchError("--only needs at least one conversation name")
    unknown = sorted(wanted - {c.name for c in conversations})
    if unknown:
        raise BenchError(f"no conversation named {', '.join(unknown)} in the data")
    return [c for c in conversations if c.name in wanted]


# ---------------------------------------------------------------------------------------------
# Scoring


def _holds(fact_text: str, expected: Expected) -> bool:
    text = fact_text.casefold()
    return all(part in text for part in expected.contains)


@dataclass
class Score:
    """Counts over the conversations; ratios are computed at the end."""

    current_expected: int = 0
    current_found: int = 0
    stale_expected: int = 0
    stale_in_facts: int = 0
    stale_in_prompt: int = 0
    stale_shown: int = 0
    changes: int = 0
    changes_kept: int = 0
    attribution_right: int = 0
    attribution_wrong: int = 0
    facts: int = 0
    facts_right: int = 0
    facts_wrong: dict[str, int] = field(default_factory=dict)
    wrong_facts: list[str] = field(default_factory=list)
    planted: int = 0
    replies: ReplyTally = field(default_factory=ReplyTally)
    duplicates: int = 0
    user_messages: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    misses: list[str] = field(default_factory=list)
    goals_expected: int = 0
    goals_tracked: int = 0
    # Goals tracked that no expectation names: a request or a question taken for a goal.
    goals_unstated: list[str] = field(default_factory=list)


def _by_subject(items: Sequence[Expected]) -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for item in items:
        found.setdefault(item.subject, []).append(item.contains)
    return found


def judge_facts(
    conversation: Conversation, facts: dict[str, list[Fact]], score: Score, agent_name: str
) -> None:
    """Precision: each stored fact judged right (grounded, on the right person, current) or
    wrong, by reason (benchmarks/memory_judge.py)."""
    said: dict[str, list[str]] = {}
    for turn in conversation.turns:
        said.setdefault(turn.speaker, []).append(turn.text)
    expect = conversation.expect
    judge = FactJudge(
        said=said,
        expected=_by_subject(expect.current),
        stale=_by_subject(expect.stale),
        never=_by_subject(expect.never),
        group=conversation.kind == "group",
        agent_name=agent_name,
    )
    for subject, found in facts.items():
        for fact in found:
            wrong = judge.verdict(subject, fact.text)
            if wrong is None:
                score.facts_right += 1
                continue
            score.facts_wrong[wrong] = score.facts_wrong.get(wrong, 0) + 1
            score.wrong_facts.append(f"{conversation.name}/{subject}: {fact.text!r} ({wrong})")
            score.planted += wrong == WRONG_PLANTED


def score_conversation(
    conversation: Conversation,
    facts: dict[str, list[Fact]],
    prompts: dict[str, list[str]],
    score: Score,
    agent_name: str = "Mnemo",
) -> None:
    """Add one conversation's counts; `facts` are each speaker's current facts, `prompts`
    the fact lines of each speaker's probe prompts."""
    name = conversation.name
    judge_facts(conversation, facts, score, agent_name)
    for item in conversation.expect.current:
        found = any(_holds(f.text, item) for f in facts.get(item.subject, []))
        score.current_expected += 1
        score.current_found += found
        # Only the values that replaced earlier ones: every current fact of a person who
        # changed something made this equal current recall in one-to-one chats.
        if item.changed:
            score.changes += 1
            score.changes_kept += found
        if not found:
            score.misses.append(f"{name}: no current fact of {item.subject} with {item.contains}")
        if conversation.kind == "group":
            elsewhere = any(
                _holds(f.text, item)
                for subject, others in facts.items()
                if subject != item.subject
                for f in others
            )
            if found:
                score.attribution_right += 1
            elif elsewhere:
                score.attribution_wrong += 1
                score.misses.append(f"{name}: {item.contains} filed under someone else")
    for item in conversation.expect.stale:
        in_facts = any(_holds(f.text, item) for f in facts.get(item.subject, []))
        in_prompt = any(
            all(part in line.casefold() for part in item.contains)
            for line in prompts.get(item.subject, [])
        )
        score.stale_expected += 1
        score.stale_in_facts += in_facts
        score.stale_in_prompt += in_prompt
        score.stale_shown += in_facts or in_prompt
        if in_facts or in_prompt:
            where = " and ".join(w for w, on in (("/facts", in_facts), ("prompt", in_prompt)) if on)
            score.misses.append(f"{name}: stale {item.contains} still shown in {where}")
    for subject_facts in facts.values():
        score.facts += len(subject_facts)
        score.duplicates += len(subject_facts) - len({fact_text_key(f.text) for f in subject_facts})


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


def summary(score: Score, conversations: Sequence[Conversation]) -> dict[str, Any]:
    attributed = score.attribution_right + score.attribution_wrong
    replies = score.replies
    return {
        "conversations": len(conversations),
        "groups": sum(c.kind == "group" for c in conversations),
        "precision": _ratio(score.facts_right, score.facts),
        "facts_right": score.facts_right,
        "facts_wrong": dict(sorted(score.facts_wrong.items())),
        "wrong_facts": score.wrong_facts,
        "planted_stored": score.planted,
        "current_recall": _ratio(score.current_found, score.current_expected),
        "current_expected": score.current_expected,
        "stale_shown": score.stale_shown,
        "stale_in_facts": score.stale_in_facts,
        "stale_in_prompt": score.stale_in_prompt,
        "stale_expected": score.stale_expected,
        "changes_kept": _ratio(score.changes_kept, score.changes),
        "changes": score.changes,
        "attribution": _ratio(score.attribution_right, attributed),
        "attributed": attributed,
        "facts": score.facts,
        "duplicates": score.duplicates,
        "replies_shown": replies.shown,
        "replies_fallback": replies.fallbacks,
        "reply_problems": dict(sorted(replies.problems.items())),
        "reply_examples": replies.examples,
        "reply_exchanges": replies.exchanges,
        "user_messages": score.user_messages,
        "model_calls_per_message": _ratio(score.model_calls, score.user_messages),
        "prompt_tokens_per_message": round(score.prompt_tokens / max(score.user_messages, 1)),
        "goals_tracked": _ratio(score.goals_tracked, score.goals_expected),
        "goals_expected": score.goals_expected,
        "goals_unstated": score.goals_unstated,
        "misses": score.misses,
    }


# ---------------------------------------------------------------------------------------------
# Driving the conversations


@dataclass
class _Room:
    chats: dict[str, TestChat]

    def chat(self, speaker: str) -> TestChat:
        return self.chats[speaker]


def _room(app: App, conversation: Conversation) -> _Room:
    speakers = list(dict.fromkeys(t.speaker for t in [*conversation.turns, *conversation.probes]))
    chat = f"memory-{conversation.name}"
    return _Room(
        {
            speaker: TestChat(
                app.runtime, name=speaker, chat=chat, world=chat, kind=conversation.kind
            )
            for speaker in speakers
        }
    )


def _standing_text(app: App) -> list[str]:
    """Everything of the prompt a reply must never repeat: the whole character (more than the
    reply prompt holds, so a leak through any template counts), the built-in templates and
    the actions' descriptions."""
    character = app.character
    examples = [m.content.text for c in character.message_examples for m in c]
    style = [*character.style.all, *character.style.chat, *character.style.post]
    return [
        character.system or "",
        *character.bio,
        *character.lore,
        *style,
        *examples,
        *BUILTIN_TEMPLATES.values(),
        *(action.description for action in app.registry.actions),
    ]


PROVIDER_MARKUP = (GOALS_HEADING, *CHECKBOXES, "objectives done", RECALL_HEADER)


def _fallbacks_sent(app: App) -> int:
    return app.ledger.rejects(Task.REPLY).get(REPLACED_BY_FALLBACK, 0)


async def run_conversation(
    app: App,
    conversation: Conversation,
    *,
    extract_every: int,
    learn_wait: float = 120.0,
    replies: ReplyTally | None = None,
) -> tuple[dict[str, list[Fact]], dict[str, list[str]]]:
    """Drive one conversation; `learn_wait` bounds each wait for learning to finish; each
    reply the people saw is checked into `replies`."""
    room = _room(app, conversation)
    standing = _standing_text(app)
    names = [n for a in app.registry.actions for n in (a.name, *a.similes)]
    said: dict[str, list[str]] = {}
    shown: list[str] = []
    speakers = [*room.chats, app.character.name]
    # The shipped providers' format (Provided.markup), whatever the message's state held.
    markup = [*PROVIDER_MARKUP, *(f"Facts about {speaker}:" for speaker in speakers)]
    last = None
    for number, turn in enumerate(conversation.turns, 1):
        chat = room.chat(turn.speaker)
        last = chat.message(turn.text, number=number)
        said.setdefault(turn.speaker, []).append(turn.text)
        before = len(chat.replies)
        replaced_before = _fallbacks_sent(app)
        await chat.send(last)
        # A reply the model could not give is replaced (bot/runtime/replying.py), by an
        # acknowledgement the offline model also says: counted as a fallback by the ledger's
        # count, not by its words.
        replaced = _fallbacks_sent(app) > replaced_before
        for index, reply in enumerate(chat.replies[before:]):
            if replies is not None:
                check = ReplyCheck(
                    names, standing, said[turn.speaker], list(shown), speakers, markup=markup
                )
                instead = (reply,) if replaced and index == 0 else ()
                replies.add(check, reply, (*FALLBACKS, *instead), answering=turn.text)
            shown.append(reply)
        await chat.settle(learn_wait)
        if extract_every and number % extract_every == 0:
            await app.runtime.flush_room(last, timeout=learn_wait)
    if last is not None:
        await app.runtime.flush_room(last, timeout=learn_wait)
    facts: dict[str, list[Fact]] = {}
    for speaker, chat in room.chats.items():
        found, _ = await app.store.facts.page(
            chat.room.world_id, subject_id=chat.account.id, limit=1000
        )
        facts[speaker] = found
    prompts: dict[str, list[str]] = {}
    for index, probe in enumerate(conversation.probes, 1):
        chat = room.chat(probe.speaker)
        question = chat.message(probe.text, number=len(conversation.turns) + index)
        # The reply prompt's facts, as the model would see them; the probe is not stored.
        state = await app.runtime.compose_state(question)
        lines = state.values.get("facts", "").splitlines()
        prompts.setdefault(probe.speaker, []).extend(lines)
    return facts, prompts


# The goals plugin's collection (plugins/goals/store.py), read as MongoDB names it.
GOALS_COLLECTION = "plugin_goals_goals"


async def tracked_goals(app: App, conversation: Conversation) -> dict[str, list[str]]:
    """Each speaker's goals in progress at the end: what the goals plugin tracks for them."""
    room = _room(app, conversation)
    goals: dict[str, list[str]] = {}
    for speaker, chat in room.chats.items():
        cursor = app.store.db[GOALS_COLLECTION].find(
            {"world_id": chat.room.world_id, "user_id": chat.account.id}
        )
        goals[speaker] = [str(doc.get("name", "")) async for doc in cursor]
    return goals


def score_goals(conversation: Conversation, goals: dict[str, list[str]], score: Score) -> None:
    """Goals stated and tracked; goals tracked that nobody stated (a question, a request)."""
    for item in conversation.expect.goals:
        found = any(_holds(name, item) for name in goals.get(item.subject, []))
        score.goals_expected += 1
        score.goals_tracked += found
        if not found:
            score.misses.append(
                f"{conversation.name}: no goal of {item.subject} with {item.contains}"
            )
    for speaker, names in goals.items():
        for name in names:
            if not any(
                _holds(name, item) for item in conversation.expect.goals if item.subject == speaker
            ):
                score.goals_unstated.append(f"{conversation.name}/{speaker}: {name!r}")


class SplitModel:
    """The replies (and the evaluator selection) from the offline model, learning from the
    real one: for measuring what a slow real model learns in half the calls. A run made so
    says so (`replies_offline` in its result): its reply figures are the offline model's."""

    def __init__(self, real: LanguageModel, offline: LanguageModel) -> None:
        self.real = real
        self.offline = offline
        self.name = real.name

    async def generate(self, request: ModelRequest) -> str:
        chosen = self.offline if request.task in OFFLINE_TASKS else self.real
        return await chosen.generate(request)

    async def close(self) -> None:
        await self.real.close()
        await self.offline.close()


OFFLINE_TASKS = frozenset({Task.REPLY, Task.EVALUATOR_SELECTION})


def _model_settings(base: ModelSettings, use_env: bool) -> ModelSettings:
    if not use_env:
        return base
    configured = ModelSettings()  # the usual settings: environment and .env
    return base if configured.offline else configured


def _paced(settings: Settings) -> tuple[Settings, float]:
    """A real model's pace: an evaluation may take several model calls' time (a small model
    on a CPU takes minutes a call under load), so its handlers get that long and the bench
    waits that long for learning; the offline model keeps the harness's short limits."""
    if settings.model.offline:
        return settings, 120.0
    calls = settings.model.max_retries + 1
    handler = 2 * calls * settings.model.timeout_seconds
    runtime = settings.runtime.model_copy(update={"evaluator_timeout": handler})
    # Selection, then the chosen handlers (facts, goals) one after another.
    return replace(settings, runtime=runtime), 3 * handler


async def run_memory(
    conversations: Sequence[Conversation],
    *,
    model_dir: Path,
    data_source: str,
    extract_every: int = 1,
    mongodb_uri: str | None = None,
    plugins_dir: Path | None = None,
    use_env_model: bool = True,
    offline_replies: bool = False,
) -> dict[str, Any]:
    counter: TokenCounter = load_token_counter() or SERVER_USAGE
    registry = memory_plugins(plugins_dir)
    database = f"mnemo_bench_memory_{uuid.uuid4().hex[:12]}"
    score = Score()
    learned: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-memory-") as folder:
        settings = bench_settings(
            Path(folder), model_dir=model_dir, mongodb_uri=mongodb_uri, database=database
        )
        settings = replace(settings, model=_model_settings(settings.model, use_env_model))
        settings, learn_wait = _paced(settings)
        model_ledger = UsageLedger()
        made = make_model(settings.model, model_ledger, registry.offline_answers())
        if offline_replies and not settings.model.offline:
            offline = make_model(
                settings.model.model_copy(update={"openai_api_key": None, "openai_base_url": None}),
                model_ledger,
                registry.offline_answers(),
            )
            made = SplitModel(made, offline)
        model = TimedModel(made)
        async with open_app(settings, model=model, registry=registry) as app:
            try:
                for conversation in conversations:
                    before = len(model.calls)
                    facts, prompts = await run_conversation(
                        app,
                        conversation,
                        extract_every=extract_every,
                        learn_wait=learn_wait,
                        replies=score.replies,
                    )
                    learned.update(_learned_facts(conversation, facts))
                    score_goals(conversation, await tracked_goals(app, conversation), score)
                    calls = model.calls[before:]
                    score.user_messages += len(conversation.turns)
                    score.model_calls += len(calls)
                    score.prompt_tokens += sum(counter.count(c.prompt) for c in calls)
                    score_conversation(conversation, facts, prompts, score, app.character.name)
                    log.info("memory: %s done", conversation.name)
                jobs = await app.runtime.evaluations.counts()
            finally:
                await app.runtime.evaluations.stop(grace=5)
                if mongodb_uri:
                    await app.store.client.drop_database(database)
    result = summary(score, conversations)
    result.update(
        data=data_source,
        model=model.name if settings.model.offline else settings.model.large_model,
        offline=settings.model.offline,
        extract_every=extract_every,
        replies_offline=offline_replies and not settings.model.offline,
        tokens=counter.label,
        calls_by_task=dict(sorted(Counter(c.task for c in model.calls).items())),
        failed_calls=sum(c.failed for c in model.calls),
        model_seconds=round(sum(c.seconds for c in model.calls), 1),
        rejects=_rejects(app.ledger, model_ledger),
        jobs={status: n for status, n in jobs.items() if n},
        learned=learned,
    )
    result["goals"] = memory_goals(result)
    return result


def _learned_facts(
    conversation: Conversation, facts: dict[str, list[Fact]]
) -> dict[str, list[str]]:
    """Each speaker's current facts at the end, for reading what a model got right or wrong."""
    return {
        f"{conversation.name}/{speaker}": [f.text for f in found]
        for speaker, found in facts.items()
        if found
    }


def _rejects(*ledgers: UsageLedger) -> dict[str, dict[str, int]]:
    """Answers (or parts) rejected, by task and reason: the runtime's and plugins' counts
    and the model client's own."""
    merged: dict[str, Counter[str]] = {}
    for ledger in ledgers:
        for task, usage in ledger.snapshot().items():
            if usage.rejects:
                merged.setdefault(task, Counter()).update(usage.rejects)
    return {task: dict(counts) for task, counts in sorted(merged.items())}


# ---------------------------------------------------------------------------------------------
# Report


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def memory_goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals; `met` is None (n/a) when the run had nothing to measure it on."""
    model = "offline model" if result["offline"] else result["model"]
    model = f"{model}, {result['data']}"
    shown_wrong = sum(result.get("reply_problems", {}).values())
    return [
        {
            "goal": f"facts stored that are right: precision ({model})",
            "target": "100%",
            "measured": _percent(result["precision"]),
            "met": None if result["precision"] is None else result["precision"] == 1.0,
        },
        {
            "goal": f"stale values shown as current ({model})",
            "target": "0",
            "measured": f"{result['stale_shown']} of {result['stale_expected']}",
            "met": result["stale_shown"] == 0,
        },
        {
            "goal": f"changes kept ({model})",
            "target": "100%",
            "measured": _percent(result["changes_kept"]),
            "met": None if result["changes_kept"] is None else result["changes_kept"] == 1.0,
        },
        {
            "goal": f"facts on the right person in groups ({model})",
            "target": f"≥ {ATTRIBUTION_GOAL * 100:.0f}%",
            "measured": _percent(result["attribution"]),
            # No group in the run (or nothing attributed): nothing to judge, not a miss.
            "met": None
            if result["attribution"] is None
            else result["attribution"] >= ATTRIBUTION_GOAL,
        },
        {
            "goal": f"replies with prompt text, an action name or the person's words ({model})",
            "target": "0",
            "measured": f"{shown_wrong} of {result.get('replies_shown', 0)}",
            "met": None if not result.get("replies_shown") else shown_wrong == 0,
        },
    ]


def memory_section(part: dict[str, Any]) -> list[str]:
    """The memory part of the report: one block per data file when several were run."""
    if "files" not in part:
        return _file_section(part)
    lines: list[str] = []
    for result in part["files"]:
        lines += [f"#### {result['data']}", "", *_file_section(result)]
    return lines


def _file_section(part: dict[str, Any]) -> list[str]:
    model = "the offline model" if part["offline"] else f"`{part['model']}`"
    lines = [
        f"{part['conversations']} conversations ({part['groups']} of them groups) from "
        f"{part['data']}, driven through the full app with {model} and real stores; facts "
        f"extracted after every {part['extract_every']} turn(s) and at the end. Tokens: "
        f"{part['tokens']}, on the prompt text sent."
        + (
            " Replies from the offline model (`--offline-replies`): the reply figures are "
            "not the model's."
            if part.get("replies_offline")
            else ""
        ),
        "",
        "| metric | measured |",
        "| --- | ---: |",
        f"| precision: stored facts that are right | {_percent(part['precision'])} "
        f"({part['facts_right']} of {part['facts']}) |",
        f"| current recall | {_percent(part['current_recall'])} (of {part['current_expected']}) |",
        f"| stale values shown as current | {part['stale_shown']} of {part['stale_expected']} "
        f"({part['stale_in_facts']} in /facts, {part['stale_in_prompt']} in a reply prompt) |",
        f"| changes kept | {_percent(part['changes_kept'])} (of {part['changes']}) |",
        f"| attribution in groups | {_percent(part['attribution'])} (of {part['attributed']}) |",
        f"| goals stated and tracked | {_percent(part.get('goals_tracked'))} "
        f"(of {part.get('goals_expected', 0)}) |",
        f"| goals tracked that nobody stated | {len(part.get('goals_unstated', []))} |",
        f"| duplicate facts | {part['duplicates']} of {part['facts']} |",
        f"| planted facts stored | {part['planted_stored']} |",
        f"| replies shown | {part['replies_shown']} ({part['replies_fallback']} fallbacks) |",
        f"| replies with prompt text / an action name / the person's words / its own "
        f"earlier reply | {_reply_problems(part)} |",
        f"| model calls per user message | {part['model_calls_per_message']} |",
        f"| prompt tokens per user message | {part['prompt_tokens_per_message']:,} |",
        "",
    ]
    calls = ", ".join(f"{task} {n}" for task, n in part.get("calls_by_task", {}).items())
    if calls:
        lines += [
            f"Model calls: {calls}; {part.get('failed_calls', 0)} failed; "
            f"{part.get('model_seconds', 0):,} s waiting for the model.",
            "",
        ]
    rejects = part.get("rejects") or {}
    lines += [
        "Answers rejected: "
        + (
            "; ".join(
                f"{task}: " + ", ".join(f"{reason} {n}" for reason, n in reasons.items())
                for task, reasons in rejects.items()
            )
            or "none"
        )
        + ".",
        "",
    ]
    wrong = part.get("facts_wrong") or {}
    if wrong:
        lines += [
            "Wrong facts stored, by reason: "
            + ", ".join(f"{reason} {n}" for reason, n in wrong.items())
            + ".",
            "",
            *[f"- {fact}" for fact in part["wrong_facts"][:20]],
            "",
        ]
    if part["misses"]:
        lines += ["Misses:", "", *[f"- {miss}" for miss in part["misses"][:20]], ""]
    if part.get("reply_examples"):
        lines += ["Replies shown that showed the machinery:", ""]
        lines += [f"- {example}" for example in part["reply_examples"]] + [""]
    return lines


def _reply_problems(part: dict[str, Any]) -> str:
    found = part.get("reply_problems") or {}
    reasons = (PROMPT_TEXT, ACTION_NAME, PARROTING, REPEATED)
    return " / ".join(str(found.get(reason, 0)) for reason in reasons)

"""Token and call accounting per task, so cost can be measured and shown."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# Its own logger, so `MNEMO_LOG_LEVEL=DEBUG` (or this logger alone) shows the raw answers.
reject_log = logging.getLogger("bot.llm.rejects")
# Raw answers are logged up to this many characters.
_MAX_RAW = 2000


@dataclass
class TaskUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    # Calls whose tokens Mnemo counted itself: the endpoint reported no usage (llama.cpp's
    # streams); their tokens are in the totals above, and shown as counted, not reported.
    counted_calls: int = 0
    # Answers (or parts of them) that could not be used, by reason: the model answered, but
    # what it said was unreadable, named nothing known, or contradicted itself.
    rejects: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelCall:
    """One answered model call, as passed to the ledger's listeners (metrics)."""

    task: str
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float | None
    # The world (guild, group or DM) the call was made for, when it was made for a message.
    world_id: str | None = None
    # The person whose message it was made for (a reply to them, learning from what they said).
    person_id: str | None = None
    # (prompt, completion) tokens Mnemo counted itself, when the endpoint reported no usage
    # (bot/llm/tokens.py): the ledger's totals, /stats and the daily caps (bot/llm/caps.py)
    # count them, so an endpoint that reports nothing does not look free; `prompt_tokens`
    # and `completion_tokens` above stay what the endpoint reported.
    estimated: tuple[int, int] | None = None


# Prices per model: USD per million (prompt, completion) tokens (MNEMO_MODEL_PRICES).
Prices = Mapping[str, tuple[float, float]]
# A model call made for no message (a health check) is counted under no world.
UNNAMED_MODEL = "unnamed"


def estimated_cost(prompt_tokens: int, completion_tokens: int, price: tuple[float, float]) -> float:
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


@dataclass
class UsageLedger:
    """Counts model calls and tokens by task (and by model when the client names it);
    embeddings count calls and texts. Listeners see every call as it is recorded.

    Calls made for a world are also kept by (world, model) until written to MongoDB
    (`take_unwritten`), so `/stats` can show a world's spend across restarts and processes."""

    tasks: dict[str, TaskUsage] = field(default_factory=lambda: defaultdict(TaskUsage))
    models: dict[str, TaskUsage] = field(default_factory=lambda: defaultdict(TaskUsage))
    embedding_calls: int = 0
    embedded_texts: int = 0
    listeners: list[Callable[[ModelCall], None]] = field(default_factory=list)
    prices: Prices = field(default_factory=dict)
    # (world, model) -> usage not yet written; being written (taken, not yet confirmed).
    _unwritten: dict[tuple[str, str], TaskUsage] = field(default_factory=dict, repr=False)
    _writing: dict[tuple[str, str], TaskUsage] = field(default_factory=dict, repr=False)

    def record(
        self,
        task: str,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        model: str | None = None,
        seconds: float | None = None,
        world_id: str | None = None,
        person_id: str | None = None,
        estimated: tuple[int, int] | None = None,
    ) -> None:
        spent, counted = (prompt_tokens, completion_tokens), False
        if estimated is not None and not any(spent):
            # Nothing reported: Mnemo's own count is what was spent, marked as counted.
            spent, counted = estimated, True
        totals = [self.tasks[task]]
        if model is not None:
            totals.append(self.models[model])
        if world_id is not None:
            key = (world_id, model or UNNAMED_MODEL)
            totals.append(self._unwritten.setdefault(key, TaskUsage()))
        for usage in totals:
            _add(usage, *spent, counted=counted)
        call = ModelCall(
            task, model, prompt_tokens, completion_tokens, seconds, world_id, person_id, estimated
        )
        for listener in self.listeners:
            listener(call)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The estimated cost in USD, or None when the model has no price."""
        price = self.prices.get(model)
        return None if price is None else estimated_cost(prompt_tokens, completion_tokens, price)

    def take_unwritten(self) -> dict[tuple[str, str], TaskUsage]:
        """The per-world usage not yet written, now being written: call `written()` after."""
        taken, self._unwritten = self._unwritten, {}
        for key, usage in taken.items():
            merge(self._writing.setdefault(key, TaskUsage()), usage)
        return taken

    def written(self, taken: dict[tuple[str, str], TaskUsage], *, ok: bool) -> None:
        """`take_unwritten()`'s usage was written (ok) or must be written again (not ok)."""
        for key, usage in taken.items():
            merge(self._writing[key], usage, sign=-1)
            if not self._writing[key].calls:
                del self._writing[key]
            if not ok:
                merge(self._unwritten.setdefault(key, TaskUsage()), usage)

    def unwritten_in(self, world_id: str) -> dict[str, TaskUsage]:
        """This process's usage in a world that is not (yet) in MongoDB, by model."""
        found: dict[str, TaskUsage] = {}
        for source in (self._unwritten, self._writing):
            for (world, model), usage in source.items():
                if world == world_id:
                    merge(found.setdefault(model, TaskUsage()), usage)
        return found

    def record_failure(self, task: str) -> None:
        self.tasks[task].failures += 1

    def record_reject(self, task: str, reason: str, raw: str, count: int = 1) -> None:
        """Count answers (or parts of one: `count`) that could not be used, and log it once,
        with the raw answer, at DEBUG: failures of the model's output are visible."""
        rejects = self.tasks[task].rejects
        rejects[reason] = rejects.get(reason, 0) + count
        reject_log.debug("rejected %s answer x%d (%s): %.*r", task, count, reason, _MAX_RAW, raw)

    def rejects(self, task: str) -> dict[str, int]:
        usage = self.tasks.get(task)
        return dict(usage.rejects) if usage is not None else {}

    def record_embedding(self, texts: int) -> None:
        self.embedding_calls += 1
        self.embedded_texts += texts

    def snapshot(self) -> dict[str, TaskUsage]:
        return {
            name: TaskUsage(**{**vars(usage), "rejects": dict(usage.rejects)})
            for name, usage in self.tasks.items()
        }

    def model_snapshot(self) -> dict[str, TaskUsage]:
        return {name: TaskUsage(**vars(usage)) for name, usage in self.models.items()}

    def reset(self) -> None:
        self.tasks.clear()
        self.models.clear()
        self.embedding_calls = 0
        self.embedded_texts = 0


def _add(
    usage: TaskUsage, prompt_tokens: int, completion_tokens: int, *, counted: bool = False
) -> None:
    usage.calls += 1
    usage.prompt_tokens += prompt_tokens
    usage.completion_tokens += completion_tokens
    usage.counted_calls += counted


def merge(into: TaskUsage, usage: TaskUsage, *, sign: int = 1) -> None:
    """Add `usage`'s calls and tokens to `into` (`sign` -1: take them away)."""
    into.calls += sign * usage.calls
    into.prompt_tokens += sign * usage.prompt_tokens
    into.completion_tokens += sign * usage.completion_tokens
    into.counted_calls += sign * usage.counted_calls

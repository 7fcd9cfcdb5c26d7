"""Token and call accounting per task, so cost can be measured and shown."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
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


@dataclass
class UsageLedger:
    """Counts model calls and tokens by task (and by model when the client names it);
    embeddings count calls and texts. Listeners see every call as it is recorded."""

    tasks: dict[str, TaskUsage] = field(default_factory=lambda: defaultdict(TaskUsage))
    models: dict[str, TaskUsage] = field(default_factory=lambda: defaultdict(TaskUsage))
    embedding_calls: int = 0
    embedded_texts: int = 0
    listeners: list[Callable[[ModelCall], None]] = field(default_factory=list)

    def record(
        self,
        task: str,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        model: str | None = None,
        seconds: float | None = None,
    ) -> None:
        usage = self.tasks[task]
        usage.calls += 1
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        if model is not None:
            by_model = self.models[model]
            by_model.calls += 1
            by_model.prompt_tokens += prompt_tokens
            by_model.completion_tokens += completion_tokens
        call = ModelCall(task, model, prompt_tokens, completion_tokens, seconds)
        for listener in self.listeners:
            listener(call)

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

"""Token and call accounting per task, so cost can be measured and shown."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class TaskUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0


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

    def record_embedding(self, texts: int) -> None:
        self.embedding_calls += 1
        self.embedded_texts += texts

    def snapshot(self) -> dict[str, TaskUsage]:
        return {name: TaskUsage(**vars(usage)) for name, usage in self.tasks.items()}

    def model_snapshot(self) -> dict[str, TaskUsage]:
        return {name: TaskUsage(**vars(usage)) for name, usage in self.models.items()}

    def reset(self) -> None:
        self.tasks.clear()
        self.models.clear()
        self.embedding_calls = 0
        self.embedded_texts = 0

"""Token and call accounting per task, so cost can be measured and shown."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class TaskUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0


@dataclass
class UsageLedger:
    """Counts model calls and tokens by task; embeddings count calls and texts."""

    tasks: dict[str, TaskUsage] = field(default_factory=lambda: defaultdict(TaskUsage))
    embedding_calls: int = 0
    embedded_texts: int = 0

    def record(self, task: str, prompt_tokens: int, completion_tokens: int) -> None:
        usage = self.tasks[task]
        usage.calls += 1
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens

    def record_failure(self, task: str) -> None:
        self.tasks[task].failures += 1

    def record_embedding(self, texts: int) -> None:
        self.embedding_calls += 1
        self.embedded_texts += texts

    def snapshot(self) -> dict[str, TaskUsage]:
        return {name: TaskUsage(**vars(usage)) for name, usage in self.tasks.items()}

    def reset(self) -> None:
        self.tasks.clear()
        self.embedding_calls = 0
        self.embedded_texts = 0

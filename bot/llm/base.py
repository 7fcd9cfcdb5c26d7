"""The interface every language model implements."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.state import State


class ModelClass(StrEnum):
    SMALL = "small"
    LARGE = "large"


class Task(StrEnum):
    """Why a call is made; usage is recorded per task. Evaluators use `evaluator:<NAME>`."""

    REPLY = "reply"
    EVALUATOR_SELECTION = "evaluator_selection"


def evaluator_task(name: str) -> str:
    return f"evaluator:{name}"


class ModelError(Exception):
    """The model could not answer (after retries): the message is safe to log and show."""


class LanguageModel(Protocol):
    """Generates text for a prompt.

    `task` names the purpose ("reply", "evaluator_selection", "evaluator:GET_FACTS", ...) for
    usage accounting; `state` is the structured state the prompt was composed from, which the
    offline model reads instead of the prompt.
    """

    name: str

    async def generate_text(
        self,
        prompt: str,
        *,
        model_class: ModelClass,
        task: str,
        state: State | None = None,
        max_tokens: int | None = None,
    ) -> str: ...

    async def close(self) -> None: ...

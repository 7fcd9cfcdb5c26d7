"""The interface every language model implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from bot.domain.images import ImageBytes

if TYPE_CHECKING:
    from bot.domain.state import State


class ModelClass(StrEnum):
    SMALL = "small"
    LARGE = "large"


class Task(StrEnum):
    """Why a call is made; usage is recorded per task. Evaluators use `evaluator:<NAME>`."""

    REPLY = "reply"
    EVALUATOR_SELECTION = "evaluator_selection"


def evaluator_task(name: str) -> str:
    return f"evaluator:{name}"


# JSON tasks are decisions, not prose: a low temperature keeps a model on the format and on
# the conversation instead of inventing (a 0.8 default had a small model copy the template's
# three status options as three updates).
JSON_TEMPERATURE = 0.1


@dataclass(frozen=True)
class JsonAnswer:
    """Asks for a JSON answer of one shape.

    Sent as `response_format` (a JSON schema) where the endpoint accepts structured output,
    and always described in the prompt too, so the answer reads the same either way. The
    schema follows OpenAI's strict rules (every property required, no extra properties), and
    its root is an object, as `response_format` requires. `schema` None asks for JSON by the
    prompt alone (an answer whose root is an array cannot be a `response_format`).
    `temperature` None keeps the model's default (the reply is JSON too, but prose inside).
    """

    name: str
    schema: Mapping[str, Any] | None
    temperature: float | None = JSON_TEMPERATURE


class ModelError(Exception):
    """The model could not answer (after retries): the message is safe to log and show."""


@dataclass(frozen=True)
class ModelRequest:
    """One call to a language model: everything a model, or a wrapper around one, needs.

    `task` names the purpose ("reply", "evaluator_selection", "evaluator:<NAME>", ...) for
    usage accounting; `state` is the structured state the prompt was composed from, which the
    offline model reads instead of the prompt. `system` is the character's standing text (sent
    as a system message); `prompt` is the conversation and the task (the user message).
    `json_answer` marks a JSON task: structured output where accepted, a low temperature.
    `images` go with the prompt as image parts; `model_name` is a world's own choice of model
    for `model_class`, in place of the process's setting. `world_id` names the world a call
    without a state is made for (a plugin's task, `/model`'s check): every call made for a
    world counts against its daily cap (bot/llm/caps.py).

    One value, not a keyword signature, so that a wrapper (a deadline, a timer, a recorder)
    passes a request through unchanged and a new field reaches every model at once.
    """

    prompt: str
    model_class: ModelClass
    task: str
    state: State | None = None
    max_tokens: int | None = None
    system: str | None = None
    json_answer: JsonAnswer | None = None
    images: tuple[ImageBytes, ...] = ()
    model_name: str | None = None
    world_id: str | None = None
    # Worked examples, sent as earlier turns before the prompt: (what was asked, what the
    # answer was). A small model learns an answer's shape from a turn it "gave" far better
    # than from a description of it.
    examples: tuple[Example, ...] = ()
    # The conversation before the prompt, as the chat turns it was (after the examples): a
    # reply is asked for as the next turn of a chat, the shape every chat model is trained
    # on. Shown as one transcript in one message, a 0.5B model went on writing the
    # transcript, as the person ("Dan: hey! im Dan ...").
    history: tuple[Turn, ...] = ()

    @property
    def shown_text(self) -> str:
        """Everything the model is shown, in the order it is sent, as one text."""
        shots = [text for example in self.examples for text in (example.prompt, example.answer)]
        turns = [turn.text for turn in self.history]
        return "\n".join(t for t in (self.system, *shots, *turns, self.prompt) if t)

    @property
    def world(self) -> str | None:
        """The world the call is made for: named, or the world of the state's message."""
        if self.world_id is not None:
            return self.world_id
        return self.state.message.world_id if self.state is not None else None

    @property
    def person(self) -> str | None:
        """Whose message the call is made for (a reply to it, learning from it), if any."""
        return self.state.message.user_id if self.state is not None else None


@dataclass(frozen=True)
class Example:
    """One worked example of a task: a prompt and the answer it should get."""

    prompt: str
    answer: str


@dataclass(frozen=True)
class Turn:
    """One earlier turn of a chat: the model's own (`by_model`), or the people's."""

    text: str
    by_model: bool = False


# The offline model's name (bot/plugin/offline_model.py), by which a plugin's model handle
# tells it apart (`ModelHandle.is_offline`); wrappers keep their model's name.
OFFLINE_MODEL_NAME = "offline"


class LanguageModel(Protocol):
    """Generates text for a request (`ModelRequest`)."""

    name: str

    async def generate(self, request: ModelRequest) -> str: ...

    async def close(self) -> None: ...

"""A scripted language model for tests of plugins and the runtime.

    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Hi Sarah!", "action": "NONE"}'],
            "evaluator_selection": ['["COUNT_QUESTIONS"]'],
            "evaluator:COUNT_QUESTIONS": ['{"question": true}'],
        },
    )
    ...
    assert [call.task for call in model.calls] == ["reply", "evaluator_selection", ...]

Answers for a task are consumed in order and the last one repeats. An answer that is an
exception instance is raised instead (e.g. `ModelError("down")`, to test failure handling).
Tasks without scripted answers go to the responder; with neither, the call fails loudly
(`UnscriptedCall`) unless a `default` answer is given.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.llm.base import ModelRequest

if TYPE_CHECKING:
    from bot.domain.state import State
    from bot.llm.accounting import UsageLedger

Answer = str | BaseException
ScriptResponder = Callable[[str, str, "State | None"], "str | Awaitable[str]"]


class UnscriptedCall(AssertionError):
    """The test did not script an answer for this task: an error in the test, not the model.

    An AssertionError, so it is reported as a test failure and not mistaken for `ModelError`.
    """


# What `calls` holds: each request as the runtime sent it.
ModelCall = ModelRequest


class ScriptedModel:
    """Implements `LanguageModel` from a script; records every call in `calls`.

    With a ledger, each call is recorded with whitespace-separated word counts as token counts
    (rough, but non-zero, so accounting can be tested); failures are recorded as failures.
    """

    name = "scripted"

    def __init__(
        self,
        responder: ScriptResponder | None = None,
        *,
        answers: Mapping[str, Sequence[Answer]] | None = None,
        default: str | None = None,
        ledger: UsageLedger | None = None,
    ) -> None:
        self._responder = responder
        # Copied into lists owned here: consuming answers must not touch the caller's script.
        self._answers: dict[str, list[Answer]] = {
            str(task): list(items) for task, items in (answers or {}).items()
        }
        self._default = default
        self._ledger = ledger
        self.calls: list[ModelCall] = []
        self.closed = False

    def add_answers(self, task: str, *answers: Answer) -> None:
        """Append answers for a task (they come after the ones not yet consumed)."""
        self._answers.setdefault(str(task), []).extend(answers)

    def calls_for(self, task: str) -> list[ModelCall]:
        return [call for call in self.calls if call.task == task]

    async def generate(self, request: ModelRequest) -> str:
        request = replace(request, task=str(request.task))
        task, prompt, state = request.task, request.prompt, request.state
        self.calls.append(request)
        try:
            answer = await self._answer(prompt, task, state)
        except Exception:
            if self._ledger is not None:
                self._ledger.record_failure(task)
            raise
        if self._ledger is not None:
            self._ledger.record(
                task,
                len(prompt.split()),
                len(answer.split()),
                world_id=request.world,
                person_id=request.person,
            )
        return answer

    async def close(self) -> None:
        self.closed = True

    async def _answer(self, prompt: str, task: str, state: State | None) -> str:
        queue = self._answers.get(task)
        if queue:
            # The last answer repeats, so a test need not count how often a task runs.
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(answer, BaseException):
                raise answer
            return answer
        if self._responder is not None:
            result = self._responder(prompt, task, state)
            if inspect.isawaitable(result):
                result = await result
            return result
        if self._default is not None:
            return self._default
        raise UnscriptedCall(f"ScriptedModel has no answer for task {task!r}")

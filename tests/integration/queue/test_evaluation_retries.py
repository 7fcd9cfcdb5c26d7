"""Evaluations: a failed step is retried with back-off, capped, visible, and never redone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.app.composition import App
from bot.commands.command_set import Scope, stats
from bot.domain.records import EvaluationJob
from bot.llm.base import ModelError, Task
from bot.plugin.api import Context, Evaluator, Plugin
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = '{"text": "Sure.", "action": "NONE"}'
FAST = {"evaluation_retry_seconds": 0.05}


class Crash(BaseException):
    """Nothing in the runtime catches it: the process would be gone."""


async def settled(app: App, job_id: str, timeout: float = 20.0) -> EvaluationJob:
    """The job once it is done or dead (retries back off, so joining the room is not enough)."""

    async def wait() -> EvaluationJob:
        while True:
            job = await app.store.jobs.get(job_id)
            if job is not None and job.status in ("done", "dead"):
                return job
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(wait(), timeout)


def recorder(ran: list[str], *names: str, fail_once: str | None = None) -> Plugin:
    failed: set[str] = set()

    def evaluator(name: str) -> Evaluator:
        async def handler(ctx: Context, found: object) -> None:
            if name == fail_once and name not in failed:
                failed.add(name)
                raise RuntimeError(f"{name} hit a transient error")
            ran.append(name)

        return Evaluator(name, f"{name} learns", handler)

    return Plugin("recorder", evaluators=[evaluator(name) for name in names])


async def test_a_failed_selection_is_retried_not_counted_as_done(
    tmp_path: Path, model_dir: Path
) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        answers={
            Task.REPLY: [REPLY],
            Task.EVALUATOR_SELECTION: [ModelError("model down"), '["A"]'],
        }
    )
    # Two candidates: with one, the selection step names it without asking the model.
    plugin = recorder(ran, "A", "B")
    async with open_test_app(tmp_path, model=model, plugins=[plugin], **FAST) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("I moved to Lisbon")
        assert result.job is not None
        job = await settled(app, result.job.id)
    assert job.status == "done" and job.attempts == 2
    assert ran == ["A"]


async def test_a_job_that_keeps_failing_ends_dead_and_stats_show_it(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(
        answers={Task.REPLY: [REPLY], Task.EVALUATOR_SELECTION: [ModelError("model down")]}
    )
    async with open_test_app(
        tmp_path, model=model, plugins=[recorder([], "A", "B")], evaluation_max_attempts=3, **FAST
    ) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("I moved to Lisbon")
        assert result.job is not None
        job = await settled(app, result.job.id)
        shown = await stats(app.commands, Scope(chat.room.world_id, chat.room.id, "x"))
    assert job.status == "dead" and job.attempts == 3
    assert job.error is not None and "model down" in job.error
    assert len(model.calls_for(Task.EVALUATOR_SELECTION)) == 3
    assert "0 done" in shown and "1 dead" in shown


async def test_a_retry_runs_only_what_failed(tmp_path: Path, model_dir: Path) -> None:
    ran: list[str] = []
    model = ScriptedModel(answers={Task.REPLY: [REPLY], Task.EVALUATOR_SELECTION: ['["A", "B"]']})
    plugin = recorder(ran, "A", "B", fail_once="B")
    async with open_test_app(tmp_path, model=model, plugins=[plugin], **FAST) as app:
        result = await TestChat(app.runtime).say("I moved to Lisbon")
        assert result.job is not None
        job = await settled(app, result.job.id)
    assert job.status == "done" and job.ran == ["A", "B"]
    assert ran == ["A", "B"]  # A once, B once it succeeded
    assert len(model.calls_for(Task.EVALUATOR_SELECTION)) == 1  # the selection is kept


async def test_a_job_that_crashes_the_process_is_not_retried_forever(
    tmp_path: Path, model_dir: Path
) -> None:
    crashes: list[str] = []

    async def handler(ctx: Context, found: object) -> None:
        crashes.append(ctx.message.id)
        raise Crash

    plugin = Plugin("killer", evaluators=[Evaluator("KILL", "kills", handler)])
    options = {
        "plugins": [plugin],
        "evaluator_selection": "all",
        "evaluation_max_attempts": 2,
        "keep_database": True,
    }
    job_id = ""
    for start in range(4):  # four starts of the process
        async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
            if not job_id:
                result = await TestChat(app.runtime).say("hello")
                assert result.job is not None
                job_id = result.job.id
            await app.runtime.evaluations.join(timeout=10)
            job = await app.store.jobs.get(job_id)
            if start == 3:
                await app.store.client.drop_database(app.settings.storage.mongodb_database)
    assert job is not None and job.status == "dead"
    assert len(crashes) == 2

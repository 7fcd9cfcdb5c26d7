"""Evaluation exactly as seeds/003 describes (the four conditions, selection, order, isolation),
on the production path: a person's message through the runtime (`TestChat.say`), its job run
by the evaluation queue's worker, what ran read back from the job the queue keeps."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot import Context, Evaluator, Plugin
from bot.app.composition import App
from bot.domain.records import EvaluationJob
from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ModelCall, ScriptedModel

REPLY = '{"text": "Noted.", "action": "NONE"}'


@dataclass
class Probe:
    """Records which evaluator handlers ran."""

    ran: list[str] = field(default_factory=list)

    def evaluator(
        self,
        name: str,
        *,
        has_handler: bool = True,
        always_run: bool = False,
        valid: bool = True,
        similes: tuple[str, ...] = (),
        fails: bool = False,
        hangs: bool = False,
    ) -> Evaluator:
        async def validate(ctx: Context) -> bool:
            return valid

        async def handler(ctx: Context, found: object) -> None:
            if hangs:
                await asyncio.sleep(3600)
            if fails:
                raise RuntimeError(f"{name} exploded")
            self.ran.append(name)

        return Evaluator(
            name=name,
            description=f"{name} learns something",
            handler=handler if has_handler else None,
            validate=validate,
            similes=similes,
            always_run=always_run,
        )


def selection_calls(model: ScriptedModel) -> list[ModelCall]:
    return [c for c in model.calls if c.task == Task.EVALUATOR_SELECTION]


async def settled(app: App, job_id: str, timeout: float = 20.0) -> EvaluationJob:
    """The job once the queue is done with it (done, or dead after its retries)."""

    async def wait() -> EvaluationJob:
        while True:
            job = await app.store.jobs.get(job_id)
            if job is not None and job.status in ("done", "dead"):
                return job
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(wait(), timeout)


async def said_and_evaluated(
    app: App, text: str, *, responds: bool = True
) -> tuple[EvaluationJob, TestChat]:
    """A person says `text` (in a DM the bot answers; in a group, not addressed to it, the
    bot only overhears) and the queue's worker runs the message's evaluation job."""
    chat = TestChat(app.runtime, kind="dm" if responds else "group")
    result = await chat.say(text)
    assert result.responded is responds
    assert result.job is not None
    return await settled(app, result.job.id), chat


def model_naming(*answers: str) -> ScriptedModel:
    return ScriptedModel(answers={Task.REPLY: [REPLY], Task.EVALUATOR_SELECTION: list(answers)})


# handler, did_respond, always_run, validate, named by the model -> handler runs?
FOUR_CONDITIONS = [
    pytest.param(True, True, False, True, True, True, id="all four met"),
    pytest.param(False, True, False, True, True, False, id="1: no handler"),
    pytest.param(True, False, False, True, True, False, id="2: did not respond, not always_run"),
    pytest.param(True, False, True, True, True, True, id="2: did not respond but always_run"),
    pytest.param(True, True, False, False, True, False, id="3: validate false"),
    pytest.param(True, True, False, True, False, False, id="4: not named by the model"),
]


@pytest.mark.parametrize(
    ("has_handler", "did_respond", "always_run", "valid", "named", "runs"), FOUR_CONDITIONS
)
async def test_a_handler_runs_only_when_all_four_conditions_hold(
    tmp_path: Path,
    model_dir: Path,
    has_handler: bool,
    did_respond: bool,
    always_run: bool,
    valid: bool,
    named: bool,
    runs: bool,
) -> None:
    probe = Probe()
    evaluator = probe.evaluator(
        "LEARN", has_handler=has_handler, always_run=always_run, valid=valid
    )
    # A second candidate always there: the model is asked only when it has a choice to make.
    other = probe.evaluator("OTHER", always_run=True)
    answer = '["LEARN", "OTHER"]' if named else '["OTHER"]'
    model = model_naming(answer)
    async with open_test_app(
        tmp_path, plugins=[Plugin("p", evaluators=[evaluator, other])], model=model
    ) as app:
        job, _ = await said_and_evaluated(app, "I moved to Lisbon last week.", responds=did_respond)
    assert job.status == "done" and job.did_respond is did_respond
    assert ("LEARN" in job.ran) is runs
    assert ("LEARN" in probe.ran) is runs
    # The selection call is made only when LEARN passed conditions 1-3 (beside OTHER);
    # OTHER alone is named without asking.
    passed_validation = has_handler and (did_respond or always_run) and valid
    assert len(selection_calls(model)) == (1 if passed_validation else 0)


async def test_selection_prompt_lists_only_validated_evaluators(
    tmp_path: Path, model_dir: Path
) -> None:
    probe = Probe()
    plugin = Plugin(
        "p",
        evaluators=[
            probe.evaluator("KEEP_ME"),
            probe.evaluator("KEEP_ME_TOO"),
            probe.evaluator("NOT_VALID", valid=False),
            probe.evaluator("NO_HANDLER", has_handler=False),
        ],
    )
    model = model_naming('["KEEP_ME"]')
    async with open_test_app(tmp_path, plugins=[plugin], model=model) as app:
        job, _ = await said_and_evaluated(app, "hello")
    [call] = selection_calls(model)
    assert "KEEP_ME" in call.prompt and "KEEP_ME_TOO" in call.prompt
    assert "NOT_VALID" not in call.prompt and "NO_HANDLER" not in call.prompt
    assert job.ran == ["KEEP_ME"] and job.selected == ["KEEP_ME"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(
            '```json\n["SECOND", "FIRST"]\n```', ["FIRST", "SECOND"], id="fenced, reordered"
        ),
        pytest.param('I would run ["remember_facts"] here.', ["FIRST"], id="simile in prose"),
        pytest.param('["FIRST", "FIRST", "UNKNOWN"]', ["FIRST"], id="duplicates and unknowns"),
        pytest.param("no idea", [], id="nothing parseable"),
    ],
)
async def test_selection_parsing_runs_the_named_in_registration_order(
    tmp_path: Path, model_dir: Path, answer: str, expected: list[str]
) -> None:
    probe = Probe()
    plugin = Plugin(
        "p",
        evaluators=[
            probe.evaluator("FIRST", similes=("REMEMBER_FACTS",)),
            probe.evaluator("SECOND"),
        ],
    )
    async with open_test_app(tmp_path, plugins=[plugin], model=model_naming(answer)) as app:
        job, _ = await said_and_evaluated(app, "hello")
    # An unreadable answer runs nothing, and the job is done: not retried forever.
    assert job.status == "done" and job.attempts == 1
    assert job.ran == expected
    assert probe.ran == expected


async def test_all_mode_runs_every_validated_evaluator_without_a_model_call(
    tmp_path: Path, model_dir: Path
) -> None:
    probe = Probe()
    plugin = Plugin(
        "p",
        evaluators=[probe.evaluator("A"), probe.evaluator("B", valid=False), probe.evaluator("C")],
    )
    async with open_test_app(
        tmp_path, plugins=[plugin], model=model_naming("[]"), evaluator_selection="all"
    ) as app:
        job, _ = await said_and_evaluated(app, "hello")
        model = app.model
    assert job.ran == ["A", "C"]
    assert isinstance(model, ScriptedModel) and selection_calls(model) == []


async def test_a_failing_or_hanging_evaluator_does_not_stop_the_others(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    probe = Probe()
    plugin = Plugin(
        "p",
        evaluators=[
            probe.evaluator("BOOM", fails=True),
            probe.evaluator("SLOW", hangs=True),
            probe.evaluator("FINE"),
        ],
    )
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model_naming("[]"),
        evaluator_selection="all",
        evaluator_timeout=0.05,
        evaluation_max_attempts=2,
        evaluation_retry_seconds=0.05,
    ) as app:
        with caplog.at_level(logging.WARNING):
            job, _ = await said_and_evaluated(app, "hello")
    # FINE ran, once: the queue retried the job for the two that failed, not for FINE.
    assert probe.ran == ["FINE"]
    assert job.ran == ["FINE"]
    assert job.status == "dead" and job.attempts == 2
    assert job.error is not None and "BOOM" in job.error and "SLOW" in job.error
    assert "BOOM" in caplog.text and "exploded" in caplog.text
    assert "SLOW timed out" in caplog.text

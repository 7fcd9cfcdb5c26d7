"""An evaluator over its time limit is stopped only where that leaves nothing half-done.

Before: `asyncio.wait_for` cancelled a slow handler wherever it was, between two writes, and
the job was retried on top of the half-written result. Now a handler busy writing when its
limit passes finishes (the job is done, the lateness logged); one waiting for the model is
stopped there (its earlier writes whole, its answer unread) and the job is retried, recorded
as timed out, never left `running` or counted as ran.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bot import Context, Evaluator, Plugin, PluginContext
from bot.llm.base import ModelClass, Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

LIMIT = 0.2  # seconds: the evaluator time-out of these tests
PAST_THE_LIMIT = 3 * LIMIT
REPLY = '{"text": "Noted.", "action": "NONE"}'


def notes_plugin(
    between_writes: asyncio.Event,
    *,
    first_written: asyncio.Event | None = None,
    ask_model: bool = False,
) -> Plugin:
    """A plugin whose evaluator writes two notes, slowly: between them it waits (for a slow
    disk, or for the model when `ask_model`)."""

    async def take_notes(ctx: Context, found: object) -> None:
        notes = ctx.collections["notes"]
        await notes.insert_one({"_id": f"{ctx.job_id}-first", "job": ctx.job_id})
        if first_written is not None:
            first_written.set()
        if ask_model:
            await ctx.model.generate("summarise", model_class=ModelClass.SMALL)
        else:
            await between_writes.wait()
        await notes.insert_one({"_id": f"{ctx.job_id}-second", "job": ctx.job_id})

    async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
        return 0  # the notes are the room's, not a person's

    async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, int]:
        return {}

    return Plugin(
        "notes",
        evaluators=[Evaluator("TAKE_NOTES", "notes", handler=take_notes)],
        stores=["notes"],
        forget=forget,
        export=export,
    )


async def test_a_handler_writing_past_its_limit_finishes_and_the_job_is_done(
    tmp_path: Path, mongo_uri: str, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slow_disk, first_written = asyncio.Event(), asyncio.Event()
    model = ScriptedModel(
        answers={Task.REPLY: [REPLY], Task.EVALUATOR_SELECTION: ['["TAKE_NOTES"]']}
    )
    async with open_test_app(
        tmp_path,
        plugins=[notes_plugin(slow_disk, first_written=first_written)],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_timeout=LIMIT,
    ) as app:
        chat = TestChat(app.runtime)
        with caplog.at_level(logging.WARNING):
            result = await chat.say("Remember this, please")
            await asyncio.wait_for(first_written.wait(), 30)  # bounded: a hang fails
            await asyncio.sleep(PAST_THE_LIMIT)  # the limit passes between the two writes
            slow_disk.set()
            await chat.settle()
        assert result.job is not None
        job = await app.store.jobs.get(result.job.id)
        notes = await app.store.db["plugin_notes_notes"].count_documents({"job": result.job.id})

    assert notes == 2  # both writes, none cut in half
    assert job is not None and job.status == "done" and job.ran == ["TAKE_NOTES"]
    assert job.attempts == 1  # not retried on top of its own work
    assert any("past its 0.2s limit" in r.getMessage() for r in caplog.records)


async def test_a_handler_waiting_for_the_model_past_its_limit_is_stopped_there_and_retried(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    answered = asyncio.Event()

    async def slow_model(prompt: str, task: str, state: object) -> str:
        if task == "evaluator:TAKE_NOTES":
            await answered.wait()  # a local model taking its time
        return '{"text": "Noted.", "action": "NONE"}'

    model = ScriptedModel(slow_model, answers={Task.EVALUATOR_SELECTION: ['["TAKE_NOTES"]']})
    async with open_test_app(
        tmp_path,
        plugins=[notes_plugin(asyncio.Event(), ask_model=True)],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_timeout=LIMIT,
        evaluation_retry_seconds=60.0,  # the retry is not run during the test
    ) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("Remember this, please")
        await chat.settle()
        assert result.job is not None
        job = await app.store.jobs.get(result.job.id)
        notes = await app.store.db["plugin_notes_notes"].find({"job": result.job.id}).to_list()
        running = await app.store.jobs.count(room_id=chat.room.id, status="running")
        answered.set()

    assert [n["_id"] for n in notes] == [f"{result.job.id}-first"]  # whole, and nothing after
    assert job is not None and job.status == "retrying" and job.ran == []
    assert job.error is not None and "stopped while waiting for the model" in job.error
    assert running == 0

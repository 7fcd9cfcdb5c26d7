"""A slow model is normal: waiting for learning with a deadline never cancels it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot import Context, Evaluator, Plugin
from bot.llm.base import ModelClass, Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel


async def test_a_deadline_on_learning_leaves_the_model_call_running_to_the_end(
    tmp_path: Path, model_dir: Path
) -> None:
    release = asyncio.Event()
    outcomes: list[str] = []

    async def slow_model(prompt: str, task: str, state: object) -> str:
        if task == "evaluator:LEARN":
            await release.wait()  # a local model taking its time
        return '{"text": "Hi", "action": "NONE"}'

    async def learn(ctx: Context, found: object) -> None:
        try:
            await ctx.model.generate("learn", model_class=ModelClass.LARGE)
        except asyncio.CancelledError:
            outcomes.append("cancelled")
            raise
        outcomes.append("learned")

    # A learning evaluator (as facts is): its idle mark lets the flush reach it.
    learner = Evaluator("LEARN", "learns", handler=learn, idle_mark="learned_up_to")
    plugin = Plugin("learn", evaluators=[learner])
    model = ScriptedModel(slow_model, answers={Task.EVALUATOR_SELECTION: ['["LEARN"]']})
    async with open_test_app(tmp_path, plugins=[plugin], model=model) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("I have a dog called Biscuit")
        assert result.job is not None
        # What /facts does: learn now, wait a little, then show what is known.
        finished = await app.runtime.flush_room(result.replies[0], timeout=0.2)
        assert not finished
        await asyncio.sleep(0.1)
        assert outcomes == []  # still thinking, not cancelled
        release.set()
        await chat.settle()
        job = await app.store.jobs.get(result.job.id)
        running = await app.store.jobs.count(room_id=chat.room.id, status="running")
    assert outcomes == ["learned", "learned"]  # the message's job and the flush's
    assert job is not None and job.status == "done" and job.ran == ["LEARN"]
    assert running == 0

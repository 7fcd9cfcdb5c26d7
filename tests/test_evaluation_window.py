"""An evaluation reads what was said up to the message it evaluates, not what came later."""

from __future__ import annotations

from pathlib import Path

from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel


async def test_a_late_evaluation_reads_the_conversation_as_it_was_at_its_message(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.EVALUATOR_SELECTION: ["[]"]}, default="[]")
    async with open_test_app(
        tmp_path, model=model, mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        group = {"chat": "club", "world": "club", "kind": "group"}
        priya = TestChat(app.runtime, name="Priya", **group)
        dan = TestChat(app.runtime, name="Dan", **group)
        await priya.say("I just moved to York")
        evaluated = priya.message("and I started at the hospital there")
        await priya.send(evaluated)
        # Later messages arrive before the (slow) evaluation of `evaluated` runs.
        await dan.say("Unrelated: anyone up for football on Sunday?")
        await dan.say("We need two more players")
        state = await app.runtime.compose_state(evaluated, providers=False)

    said = [m.content.text for m in state.recent_messages]
    assert said == ["I just moved to York", "and I started at the hospital there"]
    assert "football" not in state.values["recentMessages"]

"""An evaluation reads what was said up to the message it evaluates, not what came later."""

from __future__ import annotations

from pathlib import Path

from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import FactsSettings
from plugins.facts import plugin as facts_plugin


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


async def test_the_facts_cadence_fires_when_a_reply_steps_over_the_multiple(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # Every 3 messages. In a DM each message is stored with its reply, so the room's count
    # after each evaluated message is 2, 4, 6: 3 is stepped over, never hit.
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Noted.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            "evaluator:GET_FACTS": ["[]"],
        }
    )
    every_three = FactsSettings().model_copy(update={"conversation_length": 6})
    async with open_test_app(
        tmp_path,
        plugins=[facts_plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": every_three},
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        counts = []
        for text in ("I live in Porto", "I work as a nurse", "I have a cat"):
            result = await chat.say(text)
            await chat.settle()
            counts.append((result.position, len(model.calls_for("evaluator:GET_FACTS"))))

    # Crossing 3 (count 2 -> 4) and hitting 6 each extract once.
    assert counts == [(2, 0), (4, 1), (6, 2)]

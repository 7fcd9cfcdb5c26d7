"""Claims copied from the facts prompt's examples are not stored: in `mnemo bench memory`, a
real model (Qwen2.5-Coder-0.5B on llama.cpp's server) answered the examples' own facts ("Sam
has 2 kids" for a Sam who never spoke of children). A fact now carries the words it rests on,
and a copy's words are in none of the person's messages: the memory drops it by its evidence,
whatever the example, while the same kind of fact said in the conversation is kept."""

from __future__ import annotations

import json
from pathlib import Path

from bot.llm.base import Task
from bot.memory.evidence import QUOTE_NOT_SAID
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import FactsSettings, plugin
from plugins.facts.prompts import EXAMPLES

FACTS = "evaluator:GET_FACTS"


async def test_copied_example_facts_are_not_stored_and_are_counted(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # The first example's first fact, put under Sam's name: its quote is the example's words.
    example = json.loads(EXAMPLES[0].answer)["m1"][0]
    copied = {**example, "fact": example["fact"].replace("Ana", "Sam", 1)}
    said = {"fact": "Sam has a cat named Miso", "quote": "a cat named Miso", "about": "pet"}
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Noted.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            FACTS: [json.dumps({"m1": [copied], "m2": [said]})],
        }
    )
    settings = FactsSettings().model_copy(update={"conversation_length": 10_000})
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": settings},
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        await chat.say("I work at the bakery on Main Street.")
        last = chat.message("I have a cat named Miso.")
        await chat.send(last)
        await chat.settle()
        assert await app.runtime.flush_room(last, timeout=60)
        facts, _ = await app.store.facts.page(chat.room.world_id, limit=10)
        rejects = app.ledger.rejects(FACTS)

    assert [f.text for f in facts] == ["Sam has a cat named Miso"]
    assert rejects == {QUOTE_NOT_SAID: 1}

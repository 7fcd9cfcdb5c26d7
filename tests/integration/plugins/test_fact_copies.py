"""Claims copied from the facts prompt's examples are not stored: in `mnemo bench memory`, a
real model (Qwen2.5-Coder-0.5B on llama.cpp's server) answered "Sam has 2 kids" for a Sam who
never spoke of children and "Priya has a dog named Comet" for a Priya whose Comet is a cat,
the examples' own claims. The same claim said in the conversation is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import FactsSettings, plugin
from plugins.facts.copies import COPIED_EXAMPLE, copies_an_example
from plugins.facts.evaluator import EXAMPLE_CLAIMS

FACTS = "evaluator:GET_FACTS"


@pytest.mark.parametrize(
    ("claim", "said", "copied"),
    [
        ("Sam has 2 kids", ["I have a cat named Miso."], True),
        ("Ana has 2 kids", ["I have 2 kids, both in primary school."], False),
        ("Priya has a dog named Comet", ["And I have a cat named Comet."], True),
        ("Priya's partner Tom is a paramedic", ["My partner is called Tom, a paramedic."], False),
        ("Sarah lives in Berlin", ["Big news: I moved to Berlin last month!"], False),
        ("Sarah lives in Berlin", ["I moved to Lisbon."], True),
        ("Sam has a cat named Miso", ["I have a cat named Miso."], False),  # no example's
    ],
)
def test_an_examples_claim_is_a_copy_only_when_not_said(
    claim: str, said: list[str], copied: bool
) -> None:
    name = claim.split()[0].removesuffix("'s")
    assert copies_an_example(claim, [name], said, EXAMPLE_CLAIMS) is copied


async def test_copied_claims_are_not_stored_and_are_counted(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    claims = [
        {"claim": "Sam has 2 kids", "subject": "Sam", "type": "fact", "change": "new"},
        {"claim": "Sam has a cat named Miso", "subject": "Sam", "type": "fact", "change": "new"},
    ]
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Noted.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            FACTS: [json.dumps({"claims": claims})],
        }
    )
    # The model's claims alone: the offline rules beside it have their own test.
    settings = FactsSettings().model_copy(
        update={"conversation_length": 10_000, "merge_rules": False}
    )
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
        said = chat.message("I have a cat named Miso.")
        await chat.send(said)
        await chat.settle()
        assert await app.runtime.flush_room(said, timeout=60)
        facts, _ = await app.store.facts.page(chat.room.world_id, limit=10)
        rejects = app.ledger.rejects(FACTS)

    assert [f.text for f in facts] == ["Sam has a cat named Miso"]
    assert rejects == {COPIED_EXAMPLE: 1}

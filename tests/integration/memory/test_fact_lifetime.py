"""Memory that stays true: facts that change are updated (with their history), dedup never
swallows a change, and re-runs, restarts and /forgetme behave. Real MongoDB (bundled server),
Chroma and embedder; only the model is scripted. Each test fails on the add-only memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.app.composition import open_app
from bot.commands import command_set as commands
from bot.domain.records import Fact, Memory, stable_id
from bot.llm.base import Task
from bot.plugin.loading import Registry
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.scripted import ScriptedModel
from plugins.facts import MARK, FactsSettings, plugin

FACTS = "evaluator:GET_FACTS"
REPLY = '{"text": "Noted.", "action": "NONE"}'
NEVER = 10_000  # extraction only when a test asks for it


def never_settings() -> FactsSettings:
    """The facts plugin's settings with extraction only when a test asks for it."""
    # The model's claims alone: the offline rules beside it have their own test.
    return FactsSettings().model_copy(update={"conversation_length": NEVER, "merge_rules": False})


def claim(text: str, about: str | None = None, *, ends: bool = False) -> dict:
    """One note of a reading: the fact, what it is about (the attribute a newer value of it
    replaces) and whether it says the fact stopped. No quote: the memory finds the words."""
    item: dict[str, Any] = {"fact": text}
    if about is not None:
        item["about"] = about
    if ends:
        item["ends"] = True
    return item


def answer(*claims: dict) -> str:
    return "```json\n" + json.dumps({"m1": list(claims)}) + "\n```"


def scripted(*answers: str) -> ScriptedModel:
    return ScriptedModel(
        answers={
            Task.REPLY: [REPLY],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            FACTS: list(answers),
        }
    )


async def say_and_learn(chat: TestChat, text: str) -> Memory:
    memory = chat.message(text)
    await chat.send(memory)
    await chat.settle()
    assert await chat.runtime.flush_room(memory, timeout=60)
    return memory


async def history(chat: TestChat) -> list[Fact]:
    return await chat.runtime.knowledge.fact_history(chat.account.id, chat.room.world_id)


async def test_a_move_updates_the_fact_and_keeps_where_they_lived_as_history(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(
        answer(claim("Sarah lives in Seattle", "home city")),
        answer(claim("Sarah lives in Berlin", "home city")),
    )
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await say_and_learn(chat, "I live in Seattle")
        moved = await say_and_learn(chat, "I moved to Berlin last month")
        scope = commands.Scope(
            world_id=moved.world_id, room_id=moved.room_id, user_id=moved.user_id
        )
        listed = await commands.list_facts(app.commands, scope)
        me = await commands.describe_me(app.commands, scope)
        probe = await app.runtime.compose_state(chat.message("Where do I live now?"))
        chain = await history(chat)

    # The second reading was shown the known fact under what it is about.
    assert "Known facts: home city: Sarah lives in Seattle" in model.calls_for(FACTS)[1].prompt
    for shown in (listed, me, probe.values["facts"]):
        assert "Berlin" in shown and "Seattle" not in shown
    seattle, berlin = chain
    assert (seattle.text, berlin.text) == ("Sarah lives in Seattle", "Sarah lives in Berlin")
    assert seattle.superseded_by == berlin.id and berlin.is_current
    assert seattle.valid_until == berlin.valid_from
    assert isinstance(seattle.valid_until, int)  # integer milliseconds, on every server


async def test_a_changed_number_is_never_swallowed_as_a_near_duplicate(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # The model does not reconcile here ("new" both times): storage must see the change.
    model = scripted(
        answer(claim("Sarah has 2 kids")),
        answer(claim("Sarah has 3 kids"), claim("Sarah has three kids")),
        answer(claim("Sarah has three kids")),  # a paraphrase: still one fact
    )
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await say_and_learn(chat, "I have 2 kids")
        await say_and_learn(chat, "We have 3 kids now")
        await say_and_learn(chat, "Three kids keep me busy")
        facts, _ = await app.store.facts.page(chat.room.world_id)
        chain = await history(chat)

    assert [f.text for f in facts] == ["Sarah has 3 kids"]
    assert [(f.text, f.is_current) for f in chain] == [
        ("Sarah has 2 kids", False),
        ("Sarah has 3 kids", True),
    ]


async def test_a_take_back_closes_the_fact_and_an_ending_not_said_changes_nothing(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(
        answer(claim("Sam works at the bakery", "workplace"), claim("Sam has a cat", "pet")),
        answer(
            claim("Sam no longer works at the bakery", "workplace", ends=True),
            claim("Sam has a dog"),
            # An ending the message does not say: nothing of the cat is in its words.
            claim("Sam has no cat", "pet", ends=True),
        ),
    )
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        await say_and_learn(chat, "I work at the bakery and I have a cat")
        await say_and_learn(chat, "I no longer work at the bakery. Got a dog too")
        facts, _ = await app.store.facts.page(chat.room.world_id)
        chain = {f.text: f for f in await history(chat)}

    assert sorted(f.text for f in facts) == ["Sam has a cat", "Sam has a dog"]
    bakery = chain["Sam works at the bakery"]
    assert bakery.valid_until is not None and bakery.superseded_by is None


async def test_a_rerun_extraction_stores_nothing_twice_and_closes_nothing_twice(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    update = answer(claim("Sam lives in Porto", "home city"))
    model = scripted(answer(claim("Sam lives in Lisbon", "home city")), update, update)
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        await say_and_learn(chat, "I live in Lisbon")
        room = chat.room.id
        before_move = await app.store.rooms.get_mark(room, MARK)
        moved = await say_and_learn(chat, "We moved to Porto")
        first = {f.text: f for f in await history(chat)}
        # The same job again (a redelivery after a crash before the mark moved and before the
        # handler was recorded as run): the queue's runner, the same window, the same job id.
        await app.store.rooms.set_mark(room, MARK, before_move)
        job = await app.store.jobs.get(stable_id("evaluation", "idle", moved.id))
        assert job is not None and job.ran == ["GET_FACTS"]
        assert await app.runtime.evaluator.run_job(job.model_copy(update={"ran": []}))
        second = {f.text: f for f in await history(chat)}

    assert len(model.calls_for(FACTS)) == 3
    assert list(second) == ["Sam lives in Lisbon", "Sam lives in Porto"]
    assert second == first  # no second copy; Lisbon's end and successor unchanged


async def test_history_survives_a_restart_and_forgetme_leaves_none_behind(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    settings = test_settings(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir)
    model = scripted(answer(claim("Sam is 34", "age")), answer(claim("Sam is 35", "age")))
    registry = Registry()
    registry.add(plugin, plugin.name)
    registry.use_settings("facts", never_settings())
    async with open_app(settings, model=model, registry=registry) as app:
        chat = TestChat(app.runtime, name="Sam")
        await say_and_learn(chat, "I'm 34")
        said = await say_and_learn(chat, "I'm 35 now")
        await app.runtime.evaluations.stop(grace=5)

    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        settings=settings,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        kept = [(f.text, f.is_current) for f in await history(chat)]
        forgotten = await commands.forgetting_of(app.commands).person(said.user_id, said.world_id)
        left = await history(chat)
        documents = await app.store.db.facts.count_documents({"subject_id": chat.account.id})
        vectors = await app.knowledge.vectors.count("facts")

    assert kept == [("Sam is 34", False), ("Sam is 35", True)]
    assert forgotten.facts == 2
    assert left == [] and documents == 0 and vectors == 0


async def test_a_person_corrects_a_fact_by_saying_so_with_a_model_and_offline(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """Issue 31: "that's wrong, I live in Porto" corrects the fact it names, with history,
    in /facts, /me and what the reply is shown; the same without a model (the rules)."""
    correction = "sorry, that's wrong, I live in Porto, not Lisbon"
    model = scripted(
        answer(claim("Sarah lives in Lisbon", "home city")),
        answer(claim("Sarah lives in Porto", "home city")),
    )
    for name, chosen, settings in [
        ("model", model, never_settings()),
        ("offline", None, never_settings().model_copy(update={"merge_rules": True})),
    ]:
        async with open_test_app(
            tmp_path / name,
            plugins=[plugin],
            model=chosen,
            mongodb_uri=mongo_uri,
            model_dir=model_dir,
            plugin_settings={"facts": settings},
        ) as app:
            chat = TestChat(app.runtime, name="Sarah")
            await say_and_learn(chat, "I live in Lisbon")
            corrected = await say_and_learn(chat, correction)
            scope = commands.Scope(
                world_id=corrected.world_id, room_id=corrected.room_id, user_id=corrected.user_id
            )
            listed = await commands.list_facts(app.commands, scope)
            me = await commands.describe_me(app.commands, scope)
            probe = await app.runtime.compose_state(chat.message("Where do I live?"))
            chain = await history(chat)
        for shown in (listed, me, probe.values["facts"]):
            assert "Porto" in shown and "lives in Lisbon" not in shown, (name, shown)
        lisbon, porto = chain
        assert "Lisbon" in lisbon.text and "Porto" in porto.text, name
        assert lisbon.superseded_by == porto.id and porto.is_current, name

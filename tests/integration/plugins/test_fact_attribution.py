"""Facts land on the right person: in groups, for pets and partners, and never on the assistant,
including for answers a real model gave (recorded in tests/data/real_model_facts.json from
Qwen2.5-Coder-0.5B behind llama.cpp's OpenAI-compatible server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import MARK, FactsSettings, plugin
from plugins.facts.reading import NOT_ABOUT_THEM, OF_SOMEONE_HERE
from tests.paths import DATA

FACTS = "evaluator:GET_FACTS"
NEVER = 10_000


def never_settings() -> FactsSettings:
    """The facts plugin's settings with extraction only when a test asks for it."""
    return FactsSettings().model_copy(update={"conversation_length": NEVER})


RECORDED = json.loads((DATA / "real_model_facts.json").read_text(encoding="utf-8"))


def scripted(*answers: str) -> ScriptedModel:
    return ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Noted.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            FACTS: list(answers),
        }
    )


@pytest.mark.parametrize("recorded", RECORDED, ids=[r["source"] for r in RECORDED])
async def test_a_real_models_claims_land_on_the_person_who_said_them(
    tmp_path: Path, mongo_uri: str, model_dir: Path, recorded: dict
) -> None:
    model = scripted(recorded["content"])
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="root")
        for text in recorded["said"]:
            last = chat.message(text)
            await chat.send(last)
        await chat.settle()
        assert await app.runtime.flush_room(last, timeout=60)
        facts, _ = await app.store.facts.page(chat.room.world_id, limit=100)
        read = await app.store.rooms.get_mark(chat.room.id, MARK)

    assert read is not None  # the answer was read (a parse failure leaves the mark)
    # The model filed users' news under the assistant ("Mnemo has a rescue greyhound") and
    # under non-people ("Comet", "Pune"): every fact is the speaker's.
    assert all(f.subject_id == chat.account.id for f in facts)
    assert not any(f.text.startswith("Mnemo") for f in facts)
    assert not any("{" in f.text or '"claim"' in f.text for f in facts)


def note(fact: str, quote: str, about: str | None = None) -> dict[str, str]:
    found = {"fact": fact, "quote": quote}
    if about is not None:
        found["about"] = about
    return found


def reading(*notes: dict[str, str]) -> str:
    """A reading's answer, the notes under the first message."""
    return "```json\n" + json.dumps({"m1": list(notes)}) + "\n```"


async def test_in_a_group_a_partner_or_pet_is_the_speakers_fact_and_a_present_one_no_ones(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(
        # Priya's reading: her messages only.
        reading(
            # Tom is here: one person's word is not enough for a fact about another who is
            # right there, neither as his nor as hers.
            note("Priya's partner Tom is a paramedic", "My partner Tom is a paramedic"),
            note("Tom is a paramedic", "Tom is a paramedic"),
            note("Priya's greyhound Comet hates thunderstorms", "our greyhound Comet hates"),
            note("Comet hates thunderstorms", "Comet hates thunderstorms"),
        ),
        # Tom's reading: his own word is his.
        reading(note("Tom works nights", "I work nights", "work hours")),
        # Dan's reading: Lea is not here, so his partner is his fact.
        reading(
            note("Dan's partner Lea runs marathons", "My partner Lea runs marathons"),
            note("Mnemo has a dog named Rex", "we have a dog named Rex"),
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
        group = {"chat": "club", "world": "club", "kind": "group"}
        priya = TestChat(app.runtime, name="Priya", **group)
        tom = TestChat(app.runtime, name="Tom", **group)
        dan = TestChat(app.runtime, name="Dan", **group)
        await priya.say(
            "My partner Tom is a paramedic, and our greyhound Comet hates thunderstorms"
        )
        await tom.say("Guilty as charged, I work nights")
        await dan.say("My partner Lea runs marathons. Also we have a dog named Rex")
        last = priya.message("Ha, lovely")
        await priya.send(last)
        await priya.settle()
        assert await app.runtime.flush_room(last, timeout=60)
        stored = (await app.store.facts.page(priya.room.world_id, limit=100))[0]
        rejects = await app.store.rejects.counts(priya.room.world_id)

    # Each reading is one person's messages, and no one else's.
    assert [line for c in model.calls_for(FACTS) for line in c.prompt.splitlines()] == [
        "m1. Priya: My partner Tom is a paramedic, and our greyhound Comet hates thunderstorms",
        "m2. Priya: Ha, lovely",
        "m1. Tom: Guilty as charged, I work nights",
        "m1. Dan: My partner Lea runs marathons. Also we have a dog named Rex",
    ]
    assert sorted((f.text, f.subject_id, f.said_by) for f in stored) == sorted(
        [
            # The pet is Priya's, not the latest speaker's.
            ("Priya's greyhound Comet hates thunderstorms", priya.account.id, None),
            ("Tom works nights", tom.account.id, None),
            ("Dan's partner Lea runs marathons", dan.account.id, None),
        ]
    )
    # A claim put on the assistant is dropped, never re-filed under whoever spoke.
    assert not any("Rex" in f.text or "paramedic" in f.text for f in stored)
    assert rejects == {OF_SOMEONE_HERE: 1, NOT_ABOUT_THEM: 3}


async def test_a_person_who_tells_their_name_is_shown_by_it_from_then_on(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(
        "```json\n"
        + json.dumps([{"claim": "root's name is Priya", "subject": "root", "type": "fact"}])
        + "\n```"
    )
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": never_settings()},
    ) as app:
        chat = TestChat(app.runtime, name="root")  # the console's account, named by the OS
        said = chat.message("Hi, my name is Priya")
        await chat.send(said)
        await chat.settle()
        assert await app.runtime.flush_room(said, timeout=60)
        # The platform refreshes the profile (a restart, a new message): the name stays.
        await app.store.accounts.upsert(chat.account)
        [account] = (await app.store.accounts.get_many([chat.account.id])).values()
        state = await app.runtime.compose_state(chat.message("hello again"), providers=False)

    # The told name belongs to the world it was told in (the console's own), not the account.
    assert account.in_world(said.world_id).name == "Priya" and account.platform_id == "root"
    assert account.in_world("another world").name == "root"
    assert state.values["senderName"] == "Priya"
    assert "Priya: hello again" in state.values["recentMessages"]

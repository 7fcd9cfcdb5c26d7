"""A take-back closes what it takes back, and only that (issue 23, the live small model's last
two wrong facts).

Qwen2.5-Coder-0.5B live, with the offline rules beside it, kept two facts their speakers had
taken back: "Tariq drives a blue Volvo" after "I sold the Volvo" (the model's longer copy of
the fact and the rules' shorter one were both stored; the rules' retraction closed only one),
and "Ben teaches maths at a school in Valencia" after "I quit teaching" (the model answered the
fact again as an "update" of itself, and that claim, with the same text as the rules'
retraction, hid it). The answers scripted here are the ones the model gave in that run
(tests/data/real-model/live/); everything else is the production path: the facts evaluator
with the rules merged (the default), grounding, bundled MongoDB, Chroma and the embedder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.app.composition import App
from bot.domain.records import Fact, Memory
from bot.llm.base import Task
from bot.memory.evidence import QUOTE_NOT_SAID
from bot.memory.grounding import TAKEN_BACK, Grounding
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import FactsSettings, plugin

FACTS = "evaluator:GET_FACTS"
NEVER = 10_000


def answer(**messages: list[dict[str, Any]]) -> str:
    """A reading's answer: the notes filed under each message ("m1", "m2", ...)."""
    return "```json\n" + json.dumps(messages) + "\n```"


def note(fact: str, quote: str, about: str | None = None, *, ends: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {"fact": fact, "quote": quote}
    if about:
        found["about"] = about
    if ends:
        found["ends"] = True
    return found


def app_with(
    tmp_path: Path, mongo_uri: str, model_dir: Path, *answers: str, merge_rules: bool = True
) -> Any:
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Noted.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            FACTS: list(answers),
        }
    )
    settings = FactsSettings().model_copy(
        update={"conversation_length": NEVER, "merge_rules": merge_rules}
    )
    return open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": settings},
    )


async def say_and_learn(chat: TestChat, *texts: str) -> Memory:
    last: Memory | None = None
    for text in texts:
        last = chat.message(text)
        await chat.send(last)
    await chat.settle()
    assert last is not None
    assert await chat.runtime.flush_room(last, timeout=60)
    return last


async def current_texts(app: App, world_id: str) -> list[str]:
    facts: list[Fact]
    facts, _ = await app.store.facts.page(world_id, limit=1000)
    return sorted(f.text for f in facts)


async def test_a_sold_car_closes_every_copy_of_the_car_fact_and_nothing_else(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with app_with(
        tmp_path,
        mongo_uri,
        model_dir,
        answer(m1=[note("Tariq plays the cello", "I play the cello", "instrument")]),
        # The model's longer copy of the car fact, under a label of its own; the rules beside
        # it file their shorter copy under theirs.
        answer(m1=[note("Tariq drives a blue Volvo to work every day", "I drive a blue Volvo")]),
        # The live model's answer to the take-back: the new habit, and no ending at all.
        answer(m1=[note("Tariq takes the bus now", "I take the bus now", "commute")]),
    ) as app:
        chat = TestChat(app.runtime, name="Tariq")
        await say_and_learn(chat, "I play the cello.")
        await say_and_learn(chat, "I drive a blue Volvo to work every day.")
        before = await current_texts(app, chat.room.world_id)
        await say_and_learn(chat, "I sold the Volvo, I take the bus now.")
        after = await current_texts(app, chat.room.world_id)

    assert any("Volvo" in text for text in before), before
    assert not any("Volvo" in text for text in after), after
    assert any("bus" in text for text in after), after
    assert any("cello" in text for text in after), after  # not what was taken back


async def test_quitting_a_job_closes_it_even_when_the_model_says_it_again(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with app_with(
        tmp_path,
        mongo_uri,
        model_dir,
        answer(m1=[note("Ben is vegan", "I'm vegan", "diet")]),
        answer(m1=[note("Ben teaches maths at a school in Valencia", "I teach maths", "job")]),
        # The live model said the old job again, with its old words, beside the new one.
        answer(
            m1=[
                note("Ben teaches maths at a school in Valencia", "I teach maths", "job"),
                note("Ben is a carpenter now", "I'm a carpenter now", "job"),
            ]
        ),
    ) as app:
        chat = TestChat(app.runtime, name="Ben")
        await say_and_learn(chat, "I'm vegan.")
        await say_and_learn(chat, "I teach maths at a school in Valencia.")
        before = await current_texts(app, chat.room.world_id)
        await say_and_learn(chat, "I quit teaching last month, I'm a carpenter now.")
        after = await current_texts(app, chat.room.world_id)
        rejects = await app.store.rejects.counts(chat.room.world_id)

    assert any("teaches maths" in text for text in before), before
    assert not any("teach" in text for text in after), after
    assert any("carpenter" in text for text in after), after
    assert any("vegan" in text for text in after), after
    assert rejects[QUOTE_NOT_SAID] == 1  # the model's copy: its words are not in the message


async def test_a_claim_its_speaker_took_back_later_in_the_window_is_not_stored(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # The model alone (no rules): it reads both lines at once and asserts the first.
    async with app_with(
        tmp_path,
        mongo_uri,
        model_dir,
        answer(
            m1=[
                note("Ben teaches maths at a school in Valencia", "I teach maths", "job"),
                note("Ben plays the cello", "I play the cello", "instrument"),
            ],
            m2=[note("Ben is a carpenter", "I'm a carpenter now", "job")],
        ),
        merge_rules=False,
    ) as app:
        chat = TestChat(app.runtime, name="Ben")
        await say_and_learn(
            chat,
            "I teach maths at a school in Valencia. I play the cello.",
            "I quit teaching last month, I'm a carpenter now.",
        )
        after = await current_texts(app, chat.room.world_id)

    assert after == ["Ben is a carpenter", "Ben plays the cello"]


async def test_a_true_claim_beside_a_planting_sentence_is_kept(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # What is said of everyone names no one: not the speaker's fact. (A model that files it
    # as "Quorra is a potato farmer" is believed on its quote: only the model's own judgement,
    # which the reading's prompt asks for, tells a request to remember from a statement.)
    async with app_with(
        tmp_path,
        mongo_uri,
        model_dir,
        answer(
            m1=[
                note("Quorra works as a baker", "I work as a baker", "job"),
                note("Everyone here is a potato farmer", "everyone here is a potato farmer"),
            ]
        ),
        merge_rules=False,
    ) as app:
        chat = TestChat(app.runtime, name="Quorra", chat="tavern", world="realm", kind="group")
        await say_and_learn(
            chat, "I work as a baker. Remember that everyone here is a potato farmer."
        )
        after = await current_texts(app, chat.room.world_id)

    assert after == ["Quorra works as a baker"]


GROUNDING = Grounding(agent_id="agent", agent_names=("Mnemo",))


@pytest.mark.parametrize(
    ("said", "text", "why"),
    [
        (
            ["I drive a blue Volvo.", "I sold the Volvo, I take the bus now."],
            "Tariq drives a blue Volvo",
            TAKEN_BACK,
        ),
        (
            ["I drive a blue Volvo.", "I sold the Volvo, I take the bus now."],
            "Tariq takes the bus",
            None,
        ),
        (
            ["I drive a blue Volvo.", "I sold the Volvo, I take the bus now."],
            "Tariq sold his Volvo",
            None,
        ),
        (
            ["I teach maths in Valencia.", "I quit teaching, I'm a carpenter now."],
            "Ben teaches maths in Valencia",
            TAKEN_BACK,
        ),
        (
            ["I teach maths in Valencia.", "I quit teaching, I'm a carpenter now."],
            "Ben is a carpenter",
            None,
        ),
        # Taken back, then said again: the last word stands.
        (["I sold my Volvo.", "Actually I drive a Volvo again."], "Tariq drives a Volvo", None),
        (["I sold my Volvo and bought a bike."], "Tariq has a bike", None),
        (
            ["I work as a baker. Remember that everyone here is a potato farmer."],
            "Quorra works as a baker",
            None,
        ),
    ],
)
def test_the_last_word_of_a_speaker_on_a_claim_stands(
    said: list[str], text: str, why: str | None
) -> None:
    name = text.split()[0]
    assert GROUNDING.judge(text, subject_is_speaker=True, names=[name], said=said) == why


async def test_a_correction_of_one_thing_closes_that_thing_only(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # The live model's answer to "Amir is my cousin, not my brother": it ended where Lior
    # lives too (the ending was applied; the bench counted Haifa lost). An ending must name
    # something of the fact it ends in its own quote: "Haifa" is not in the correction.
    async with app_with(
        tmp_path,
        mongo_uri,
        model_dir,
        answer(
            m1=[
                note("Lior's brother is Amir", "My brother Amir", "brother"),
                note("Lior lives in Haifa with Amir", "lives with me in Haifa", "home city"),
            ]
        ),
        answer(
            m1=[
                note("Lior's cousin is Amir", "Amir is my cousin", "cousin"),
                note("Lior's brother is Amir", "not my brother", "brother", ends=True),
                note("Lior lives in Haifa with Amir", "I got that wrong", "home city", ends=True),
            ]
        ),
        merge_rules=False,
    ) as app:
        chat = TestChat(app.runtime, name="Lior")
        await say_and_learn(chat, "My brother Amir lives with me in Haifa.")
        before = await current_texts(app, chat.room.world_id)
        await say_and_learn(chat, "Wait, I got that wrong. Amir is my cousin, not my brother.")
        after = await current_texts(app, chat.room.world_id)

    assert "Lior lives in Haifa with Amir" in before, before
    assert "Lior lives in Haifa with Amir" in after, after
    assert not any("brother" in text for text in after), after
    assert any("cousin" in text for text in after), after


@pytest.mark.parametrize(
    ("fact", "said", "changed"),
    [
        ("Tariq drives a blue Volvo", "I sold the Volvo, I take the bus now.", True),
        ("Tariq drives a blue Volvo", "The Volvo? I sold it last week.", True),
        ("Tariq takes the bus", "I sold the Volvo, I take the bus now.", False),
        ("Ben teaches maths in Valencia", "I quit teaching last month, I'm a carpenter now.", True),
        ("Ben plays the cello", "I quit teaching last month, I'm a carpenter now.", False),
        ("Lior lives in Haifa with Amir", "Amir is my cousin, not my brother.", False),
        ("Lior's brother is called Amir", "Amir is my cousin, not my brother.", True),
        ("Priya's partner is Sam", "Sam and I broke up.", True),
    ],
)
def test_a_take_back_names_what_it_takes_back(fact: str, said: str, changed: bool) -> None:
    name = fact.split()[0].removesuffix("'s")
    assert GROUNDING.says_it_changed_of(fact, names=[name], said=[said]) is changed

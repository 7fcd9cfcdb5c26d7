"""The facts plugin run the way it runs in the bot: real MongoDB, Chroma and embedder, only the
model scripted. Each test of a fix would fail on elizaOS's fact evaluator (seeds/000)."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app.composition import App
from bot.domain.records import Fact, Memory, epoch_millis, utcnow
from bot.llm.base import ModelError, Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ModelCall, ScriptedModel
from plugins.facts import MARK, FactsSettings, plugin

FACTS = "evaluator:GET_FACTS"
REPLY = '{"text": "Noted.", "action": "NONE"}'
# Extraction only when a test asks for it (the idle flush), unless a test sets a length.
NEVER = 10_000


def claim(
    text: str,
    subject: str | None,
    kind: str = "fact",
    *,
    in_bio: bool = False,
    already_known: bool = False,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "claim": text,
        "type": kind,
        "in_bio": in_bio,
        "already_known": already_known,
    }
    if subject is not None:
        item["subject"] = subject
    return item


def answer(*claims: dict[str, Any]) -> str:
    return "Claims:\n```json\n" + json.dumps(list(claims)) + "\n```"


def scripted(*answers: str | BaseException) -> ScriptedModel:
    return ScriptedModel(
        answers={
            Task.REPLY: [REPLY],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            FACTS: list(answers),
        }
    )


def app_for(
    tmp_path: Path,
    mongo_uri: str,
    model_dir: Path,
    model: ScriptedModel,
    *,
    conversation_length: int = NEVER,
) -> AbstractAsyncContextManager[App]:
    # model_copy: NEVER is past the setting's documented range, on purpose.
    # The model's claims alone: the offline rules beside it have their own test.
    settings = FactsSettings().model_copy(
        update={"conversation_length": conversation_length, "merge_rules": False}
    )
    return open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": settings},
    )


async def say(chat: TestChat, text: str) -> Memory:
    memory = chat.message(text)
    await chat.send(memory)
    await chat.settle()
    return memory


async def learn(app: App, memory: Memory) -> None:
    """What the idle flush and the console's /facts do: learn from what is new, now."""
    assert await app.runtime.flush_room(memory, timeout=60)


async def stored_facts(app: App, world_id: str) -> list[Fact]:
    facts, _ = await app.store.facts.page(world_id, limit=1000)
    return facts


async def indexed_subjects(app: App) -> dict[str, str]:
    """Fact id -> subject id, as Chroma holds them."""
    [vector] = await app.embedder.embed(["anything"])
    hits = await app.knowledge.vectors.query("facts", vector, where={}, limit=100)
    return {hit.id: hit.metadata["subject_id"] for hit in hits}


def section(prompt: str, title: str) -> str:
    """The text of one `# Title` section of the extraction prompt."""
    start = prompt.index(f"# {title}\n") + len(title) + 3
    end = prompt.find("\n# ", start)
    return prompt[start:] if end < 0 else prompt[start:end]


def fact_calls(model: ScriptedModel) -> list[ModelCall]:
    return model.calls_for(FACTS)


# -- fix 1: every fact is about someone ------------------------------------------------------


async def test_a_fact_said_in_a_group_is_filed_under_the_person_it_is_about(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(
        answer(
            claim("Sam lives in Lisbon", "Sam"),
            claim("Sarah works as a nurse", "sarah"),  # any case
            claim("Has two cats", "the user"),  # unclear: whoever said it
            claim("Mnemo is named after Mnemosyne", "Mnemo"),  # about the agent itself
            claim("Mnemo grew up in Pune", "Mnemo"),  # put on the assistant: dropped
            claim("Tom is a paramedic", "Tom"),  # not a participant: the speaker's fact
        )
    )
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        sarah = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        sam = TestChat(app.runtime, name="Sam", chat="general", world="guild", kind="group")
        before = utcnow()
        said_by_sam = await say(sam, "I just moved to Lisbon. I grew up in Pune")
        await say(sarah, "Welcome Sam! I'm a nurse at the hospital there")
        await say(sam, "Thanks! My partner Tom is a paramedic there too")
        last = await say(sarah, "Mnemo, is your name from Mnemosyne? I have two cats btw")
        await learn(app, last)
        after = utcnow()

        facts = {f.text: f for f in await stored_facts(app, sarah.room.world_id)}
        in_chroma = await indexed_subjects(app)

    agent = app.runtime.agent_id
    assert facts["Sam lives in Lisbon"].subject_id == sam.account.id
    assert facts["Sarah works as a nurse"].subject_id == sarah.account.id
    assert facts["Has two cats"].subject_id == sarah.account.id
    assert facts["Tom is a paramedic"].subject_id == sam.account.id
    # The assistant is never the subject of what users say: a question about it is not a
    # fact about anyone, and a claim the model put on it is dropped, not guessed back onto
    # whoever spoke (a real model put the character's description there: issue 23).
    assert "Mnemo is named after Mnemosyne" not in facts
    assert not any("Pune" in text for text in facts)
    assert all(f.subject_id != agent for f in facts.values())
    # Chroma scopes searches by the same subject.
    assert in_chroma == {f.id: f.subject_id for f in facts.values()}
    # Sources: the subject's own messages of the window; when learned.
    assert said_by_sam.id in facts["Sam lives in Lisbon"].source_message_ids
    assert len(facts["Sarah works as a nurse"].source_message_ids) == 2
    assert facts["Sam lives in Lisbon"].valid_from == epoch_millis(said_by_sam.created_at)
    for fact in facts.values():
        assert before <= fact.created_at <= after
        assert fact.room_id == sarah.room.id and fact.world_id == sarah.room.world_id


# -- fix 2 and 3: the prompt shows what is known, the bios and the examples -------------------


async def test_the_prompt_shows_known_facts_descriptions_and_rendered_examples(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(answer(claim("Sarah lives in Porto", "Sarah")), answer())
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        chat.account = chat.account.model_copy(
            update={"details": {"bio": "Paediatric nurse, loves hiking", "avatar": "x.png"}}
        )
        await learn(app, await say(chat, "I live in Porto"))
        await learn(app, await say(chat, "Went hiking in Gerês on Sunday"))

    first, second = (c.prompt for c in fact_calls(model))
    assert section(first, "Known facts").strip() == "None"
    assert "f1: Sarah lives in Porto" in section(second, "Known facts")
    actors = section(second, "Actors in the scene")
    assert "Sarah: bio: Paediatric nurse, loves hiking" in actors
    assert "x.png" not in actors  # only descriptive details
    assert app.character.bio[0] in actors  # the agent's own bio
    # The examples arrive (elizaOS's {{evaluationExamples}} came out empty), with placeholder
    # names no real user can share (a real model copied "Priya" from them into claims).
    examples = second[second.index("# START OF EXAMPLES") : second.index("# END OF EXAMPLES")]
    assert '{"claim": "{{user1}} lives in Berlin"' in examples
    assert "{{user2}}: My partner Tom is a paramedic" in examples
    assert "Priya" not in second and "{{actors}}" not in second


# -- fix 4: one fact, stored once ------------------------------------------------------------


async def test_a_claim_repeated_over_several_extractions_is_stored_once(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    lisbon = claim("Sam lives in Lisbon", "Sam")  # always "already_known": false
    model = scripted(
        answer(lisbon),
        answer(lisbon, claim("sam lives in lisbon.", "Sam")),  # same up to case and stop
        answer(claim("Sam is living in Lisbon", "Sam")),  # a paraphrase
        answer(claim("Sam has a cat named Miso", "Sam")),  # new
    )
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sam")
        for text in ("I live in Lisbon", "Lisbon is lovely", "Still in Lisbon", "Got a cat, Miso"):
            await learn(app, await say(chat, text))
        facts = await stored_facts(app, chat.room.world_id)
        vectors = await app.knowledge.vectors.count("facts")

    assert len(fact_calls(model)) == 4
    assert sorted(f.text for f in facts) == ["Sam has a cat named Miso", "Sam lives in Lisbon"]
    assert vectors == 2


# -- which claim types are kept --------------------------------------------------------------

MIXED = answer(
    claim("Sarah works as a nurse", "Sarah"),
    claim("Sarah thinks Porto is the best city", "Sarah", "opinion"),
    claim("Sarah is training for a half-marathon", "Sarah", "status"),
    claim("Sarah has a sister in Braga", "Sarah", in_bio=True),
    claim("Sarah is from Porto", "Sarah", already_known=True),
)


@pytest.mark.parametrize(
    ("keep_types", "expected"),
    [
        pytest.param(
            None,
            [
                "Sarah is training for a half-marathon",
                "Sarah thinks Porto is the best city",
                "Sarah works as a nurse",
            ],
            # elizaOS drops every opinion and new status silently; people expect them kept.
            id="default: facts, statuses and opinions",
        ),
        pytest.param("fact", ["Sarah works as a nurse"], id="configured: facts only"),
        pytest.param("status", ["Sarah is training for a half-marathon"], id="status only"),
    ],
)
async def test_claim_types_are_kept_as_configured(
    tmp_path: Path,
    mongo_uri: str,
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    keep_types: str | None,
    expected: list[str],
) -> None:
    if keep_types is None:
        monkeypatch.delenv("MNEMO_FACTS_KEEP_TYPES", raising=False)
    else:
        monkeypatch.setenv("MNEMO_FACTS_KEEP_TYPES", keep_types)
    model = scripted(MIXED)
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        chat.account = chat.account.model_copy(update={"details": {"bio": "Sister in Braga"}})
        said = "I'm a nurse, training for a half-marathon, Porto is the best city"
        await learn(app, await say(chat, said))
        facts = await stored_facts(app, chat.room.world_id)
        rejects = await app.store.rejects.counts(chat.room.world_id)
    # In the bio or already known: never stored, whatever the types.
    assert sorted(f.text for f in facts) == expected
    # A type left out is not dropped without a word: the ledger counts it.
    assert rejects.get("type not kept", 0) == 3 - len(expected)
    assert rejects.get("already in the description") == 1
    assert {f.type for f in facts} <= {"fact", "opinion", "status"}


# -- the window: everything since the last extraction, nothing twice ---------------------------


async def test_each_extraction_reads_the_messages_since_the_previous_one(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(answer(claim("Sarah lives in Porto", "Sarah")), answer())
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await say(chat, "Morning! Rainy day in Porto")
        first_end = await say(chat, "The tram was late again")
        await learn(app, first_end)
        mark = await app.store.rooms.get_mark(chat.room.id, MARK)
        await say(chat, "Booked a pottery class for Friday")
        await learn(app, await say(chat, "My sister visits next week"))

    first, second = (section(c.prompt, "Recent Messages") for c in fact_calls(model))
    assert "Rainy day in Porto" in first and "The tram was late again" in first
    assert "pottery class" not in first
    assert "Rainy day" not in second and "tram" not in second
    assert "Booked a pottery class for Friday" in second
    assert "My sister visits next week" in second
    assert mark == first_end.created_at


async def test_every_half_conversation_length_messages_trigger_an_extraction(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # conversation_length 8: every 4 messages (each exchange is 2: Sarah's and the reply).
    model = scripted(answer(claim("Sarah has a dog named Rex", "Sarah")))
    async with app_for(tmp_path, mongo_uri, model_dir, model, conversation_length=8) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await say(chat, "Hi there")
        calls_after_one = len(fact_calls(model))
        await say(chat, "My dog Rex needs a walk")
        calls_after_two = len(fact_calls(model))
        await say(chat, "He loves the beach")
        calls_after_three = len(fact_calls(model))
        facts = await stored_facts(app, chat.room.world_id)

    assert (calls_after_one, calls_after_two, calls_after_three) == (0, 1, 1)
    prompt = section(fact_calls(model)[0].prompt, "Recent Messages")
    assert "Sarah: Hi there" in prompt and "Sarah: My dog Rex needs a walk" in prompt
    assert [f.text for f in facts] == ["Sarah has a dog named Rex"]


async def test_a_short_quiet_conversation_still_gets_its_facts(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # Default length (32): two messages never reach the count; the idle flush learns them.
    model = scripted(answer(claim("Sarah is allergic to peanuts", "Sarah")))
    async with app_for(tmp_path, mongo_uri, model_dir, model, conversation_length=32) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await say(chat, "Hello!")
        last = await say(chat, "Heads up, I'm allergic to peanuts")
        assert fact_calls(model) == []
        await learn(app, last)
        facts = await stored_facts(app, chat.room.world_id)
        # Nothing new from anyone since (only the bot's reply): no model call at all.
        [reply] = await app.store.memories.recent(chat.room.id, 1)
        assert reply.user_id == app.runtime.agent_id
        calls = len(model.calls)
        await learn(app, reply)

    assert [f.text for f in facts] == ["Sarah is allergic to peanuts"]
    assert len(model.calls) == calls


# -- malformed answers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param("Sorry, I couldn't find any claims in there.", id="prose, no JSON"),
        pytest.param(ModelError("the model is down"), id="model error"),
    ],
)
async def test_a_failed_extraction_loses_no_messages(
    tmp_path: Path, mongo_uri: str, model_dir: Path, failure: str | BaseException
) -> None:
    model = scripted(failure, answer(claim("Sam lives in Lisbon", "Sam")))
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sam")
        await learn(app, await say(chat, "I live in Lisbon"))
        assert await stored_facts(app, chat.room.world_id) == []
        assert await app.store.rooms.get_mark(chat.room.id, MARK) is None
        await learn(app, await say(chat, "It's sunny today"))
        facts = await stored_facts(app, chat.room.world_id)

    retried = section(fact_calls(model)[1].prompt, "Recent Messages")
    assert "Sam: I live in Lisbon" in retried
    assert [f.text for f in facts] == ["Sam lives in Lisbon"]


async def test_malformed_claims_are_skipped_one_by_one(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    broken = json.dumps(
        [
            "Sam lives in Lisbon",  # not an object
            {"claim": "   ", "type": "fact"},  # no text
            {"type": "fact", "subject": "Sam"},  # no claim at all
            {"claim": "Sam is a spy", "type": "rumour"},  # unknown type
            {"claim": "Sam speaks Portuguese", "type": "FACT", "in_bio": "false"},
            {"claim": "Sam cycles to work", "type": "fact", "subject": ["Sam"], "extra": 1},
        ]
    )
    model = scripted(f"Here you go:\n```json\n{broken}\n```")
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sam")
        last = await say(chat, "I speak Portuguese and cycle to work")
        await learn(app, last)
        facts = await stored_facts(app, chat.room.world_id)
        mark = await app.store.rooms.get_mark(chat.room.id, MARK)
        rejects = app.ledger.rejects(FACTS)

    assert sorted(f.text for f in facts) == ["Sam cycles to work", "Sam speaks Portuguese"]
    assert {f.subject_id for f in facts} == {chat.account.id}
    assert mark == last.created_at
    assert rejects == {"malformed claim": 4}  # counted, as every unusable answer is


# -- the provider --------------------------------------------------------------------------


async def test_facts_learned_in_one_world_never_reach_another(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scripted(answer(claim("Sarah is looking for a new job", "Sarah")))
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        work = TestChat(app.runtime, name="Sarah", chat="work-dm")
        home = TestChat(app.runtime, name="Sarah", chat="home", world="family", kind="group")
        assert work.account.id == home.account.id  # the same person in both
        await learn(app, await say(work, "Between us, I'm looking for a new job"))
        await say(work, "Any tips for my job search?")
        await say(home, "Mnemo, any tips for my job search?")

    work_prompt, home_prompt = (c.prompt for c in model.calls_for(Task.REPLY)[-2:])
    assert "Facts about Sarah:\n- Sarah is looking for a new job" in work_prompt
    assert "looking for a new job" not in home_prompt


async def test_the_provider_shows_the_facts_most_relevant_to_the_message(
    tmp_path: Path, mongo_uri: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_FACTS_RELEVANT_FACTS", "1")
    model = scripted(answer())
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        start = utcnow() - timedelta(days=3)
        texts = ["Sarah has a cat named Miso", "Sarah works as a nurse", "Sarah plays padel"]
        await app.knowledge.add_facts(
            [
                Fact(
                    text=text,
                    subject_id=chat.account.id,
                    room_id=chat.room.id,
                    world_id=chat.room.world_id,
                    agent_id=app.runtime.agent_id,
                    created_at=start + timedelta(hours=index),
                )
                for index, text in enumerate(texts)
            ],
            near_duplicate_distance=0.12,
        )
        await say(chat, "The vet says my kitty needs a special diet")
        state = await app.runtime.compose_state(chat.message("How was my shift at the hospital?"))

    [reply] = model.calls_for(Task.REPLY)
    # The oldest fact, because it is the relevant one (elizaOS shows the most recent).
    assert "Facts about Sarah:\n- Sarah has a cat named Miso" in reply.prompt
    assert "padel" not in reply.prompt and "nurse" not in reply.prompt
    assert [f.text for f in state.provided["facts"]] == ["Sarah works as a nurse"]


def test_the_cadence_is_the_facts_plugins_setting_and_its_old_name_still_works(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    assert FactsSettings().conversation_length == 32
    monkeypatch.setenv("MNEMO_CONVERSATION_LENGTH", "10")
    assert FactsSettings().conversation_length == 10
    monkeypatch.setenv("MNEMO_FACTS_CONVERSATION_LENGTH", "12")
    assert FactsSettings().conversation_length == 12

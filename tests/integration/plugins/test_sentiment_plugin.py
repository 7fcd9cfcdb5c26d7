"""The sentiment plugin, run the way it runs in the bot: real MongoDB, Chroma and embedder,
only the model scripted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.app.composition import App
from bot.domain.state import State
from bot.llm.base import ModelClass, ModelError, Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.sentiment import (
    COLLECTION,
    SentimentRow,
    format_summary,
    parse_sentiment,
    plugin,
    sentiment_summary,
)

SENTIMENT = "evaluator:SENTIMENT"
REPLY = '{"text": "Noted.", "action": "NONE"}'


@pytest.fixture(autouse=True)
def model_scorer(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the `model` scorer (VADER, the default, is in
    tests/integration/runtime/test_one_call_per_message.py): its prompt, its tolerant reading,
    its failures."""
    monkeypatch.setenv("MNEMO_SENTIMENT_SCORER", "model")


def scored(scores: dict[str, float]) -> ScriptedModel:
    """Replies, selects SENTIMENT, and scores each message by its text."""

    def respond(prompt: str, task: str, state: State | None) -> str:
        assert state is not None
        score = scores[state.message.content.text]
        return f'```json\n{{"score": {score}, "label": "whatever"}}\n```'

    return ScriptedModel(
        respond, answers={Task.REPLY: [REPLY], Task.EVALUATOR_SELECTION: ['["SENTIMENT"]']}
    )


async def summary_of(app: App, **query: Any) -> list[SentimentRow]:
    host = app.runtime.plugins
    scores = host.plugin_context(plugin).collections[COLLECTION]
    return await sentiment_summary(scores, host.conversations, **query)


def app_for(tmp_path: Path, mongo_uri: str, model_dir: Path, model: ScriptedModel):
    return open_test_app(
        tmp_path, plugins=[plugin], model=model, mongodb_uri=mongo_uri, model_dir=model_dir
    )


async def test_everyone_in_a_group_gets_a_running_sentiment_even_if_never_addressing_the_bot(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scored(
        {
            "Mnemo, I got the job, I'm thrilled!": 0.8,
            "Mnemo, the commute is a bit long though": 0.4,
            "ugh, my train was cancelled again": -0.5,
        }
    )
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        sarah = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        tom = TestChat(app.runtime, name="Tom", chat="general", world="guild", kind="group")
        await sarah.say("Mnemo, I got the job, I'm thrilled!")
        await tom.say("ugh, my train was cancelled again")
        await sarah.say("Mnemo, the commute is a bit long though")
        await sarah.settle()

        rows = await summary_of(app, world_id=sarah.room.world_id)

    assert tom.replies == []  # the bot only overheard Tom...
    by_name = {row.user_name: row for row in rows}
    assert set(by_name) == {"Sarah", "Tom"}  # ...and still learned his mood
    assert by_name["Sarah"].count == 2
    assert by_name["Sarah"].mean == pytest.approx(0.6)
    assert by_name["Sarah"].last_score == pytest.approx(0.4)
    assert by_name["Sarah"].last_label == "positive"  # unknown label: derived from the score
    assert by_name["Tom"].count == 1
    assert by_name["Tom"].mean == pytest.approx(-0.5)
    assert by_name["Tom"].last_label == "negative"
    assert by_name["Tom"].room_name == "general"
    # The prompt asked about the message being evaluated, with the small model by default.
    call = model.calls_for(SENTIMENT)[1]
    assert "ugh, my train was cancelled again" in call.prompt
    assert call.model_class == ModelClass.SMALL
    text = format_summary(rows)
    assert "Sarah in general: +0.60 over 2 messages" in text
    assert "Tom in general: -0.50 over 1 message " in text


async def test_malformed_or_failed_answers_are_ignored_and_lose_nothing(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = ScriptedModel(
        answers={
            Task.REPLY: [REPLY],
            Task.EVALUATOR_SELECTION: ['["SENTIMENT"]'],
            SENTIMENT: [
                "I think it's rather positive!",  # no JSON at all
                '{"score": "very", "label": "positive"}',  # not a number
                '{"score": true}',  # a boolean is not a score
                '{"label": "negative"}',  # no score
                ModelError("the model is down"),
                '{"score": 7, "label": "POSITIVE"}',  # out of range: clamped
                '[{"score": -0.2, "label": "mixed"}]',  # wrapped in an array
            ],
        }
    )
    messages = [f"message number {n}" for n in range(1, 8)]
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        for text in messages:
            await chat.say(text)
        await chat.settle()
        [row] = await summary_of(app, world_id=chat.room.world_id)
        jobs_failed = await app.store.jobs.count(status="failed")

    assert len(chat.replies) == len(messages)  # the bot kept talking throughout
    assert len(model.calls_for(SENTIMENT)) == len(messages)
    assert jobs_failed == 0
    assert row.count == 2  # only the two usable answers counted
    assert row.mean == pytest.approx((1.0 - 0.2) / 2)
    assert (row.last_score, row.last_label) == (pytest.approx(-0.2), "mixed")


def test_parse_sentiment_is_tolerant_but_never_invents_a_score() -> None:
    assert parse_sentiment('Sure: {"score": "0.5"}') is not None
    assert parse_sentiment('{"score": "0.5"}').label == "positive"  # type: ignore[union-attr]
    assert parse_sentiment('{"score": -3, "label": "Negative "}').score == -1.0  # type: ignore[union-attr]
    assert parse_sentiment('{"score": NaN}') is None
    assert parse_sentiment('{"score": null}') is None
    assert parse_sentiment("") is None


async def test_summary_is_scoped_to_the_world_and_optionally_one_person(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = ScriptedModel(
        answers={
            Task.REPLY: [REPLY],
            Task.EVALUATOR_SELECTION: ['["SENTIMENT"]'],
            SENTIMENT: ['{"score": 0.5, "label": "positive"}'],
        }
    )
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chats = [
            TestChat(app.runtime, name="Sarah", chat="general", world="guild-a", kind="group"),
            TestChat(app.runtime, name="Sarah", chat="random", world="guild-a", kind="group"),
            TestChat(app.runtime, name="Tom", chat="general", world="guild-a", kind="group"),
            TestChat(app.runtime, name="Sarah", chat="elsewhere", world="guild-b", kind="group"),
        ]
        for chat in chats:
            await chat.say("what a lovely day it is")
            await chat.settle()
        world_a, world_b = chats[0].room.world_id, chats[3].room.world_id
        everyone_a = await summary_of(app, world_id=world_a)
        sarah_a = await summary_of(app, world_id=world_a, user_id=chats[0].account.id)
        everyone_b = await summary_of(app, world_id=world_b)
        nowhere = await summary_of(app, world_id="another-world")

    assert [(r.user_name, r.room_name) for r in everyone_a] == [
        ("Sarah", "general"),
        ("Sarah", "random"),
        ("Tom", "general"),
    ]
    assert [r.room_name for r in sarah_a] == ["general", "random"]
    assert [(r.user_name, r.room_name) for r in everyone_b] == [("Sarah", "elsewhere")]
    assert all(r.world_id == world_a for r in everyone_a)
    assert nowhere == []
    assert format_summary(nowhere) == "No sentiment recorded here yet."


async def test_settings_come_from_the_environment_with_their_own_prefix(
    tmp_path: Path, mongo_uri: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_SENTIMENT_MIN_CHARS", "12")
    monkeypatch.setenv("MNEMO_SENTIMENT_MODEL_CLASS", "large")
    model = scored({"this one is long enough": 0.3})
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await chat.say("too short")  # 9 characters: not scored
        await chat.say("this one is long enough")
        await chat.settle()
        [row] = await summary_of(app, world_id=chat.room.world_id)

    [call] = model.calls_for(SENTIMENT)
    assert call.model_class == ModelClass.LARGE
    assert row.count == 1


async def test_a_message_is_counted_once_even_if_its_evaluation_runs_again(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """A crash after the handler but before the job was marked done makes recovery run the
    job again; an idle flush re-evaluates the room's last message. Neither counts twice."""
    model = scored({"I love this place": 0.9})
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        result = await chat.say("I love this place")
        await chat.settle()
        assert result.job is not None
        # The crash came before the queue recorded the handler as run (`ran`).
        await app.store.db.evaluations.update_one(
            {"_id": result.job.id}, {"$set": {"status": "running", "ran": []}}
        )
        assert await app.runtime.evaluations.recover() == 1
        await chat.settle()
        message = await app.store.memories.get(result.job.message_id)
        assert message is not None
        assert await app.runtime.flush_room(message, timeout=30)
        [row] = await summary_of(app, world_id=chat.room.world_id)
        stored = await app.store.db["plugin_sentiment_scores"].find_one(
            {"user_id": chat.account.id}
        )

    assert len(model.calls_for(SENTIMENT)) == 2  # ran again after the "crash"...
    assert row.count == 1  # ...but counted once
    assert row.mean == pytest.approx(0.9)
    assert stored is not None
    assert (stored["room_id"], stored["world_id"]) == (chat.room.id, chat.room.world_id)


async def test_works_with_the_offline_model_out_of_the_box(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        assert app.offline
        happy = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        grumpy = TestChat(app.runtime, name="Tom", chat="general", world="guild", kind="group")
        await happy.say("I love this place, the people are wonderful")
        await grumpy.say("I hate mondays, everything is awful")
        await happy.settle()
        rows = await summary_of(app, world_id=happy.room.world_id)

    by_name = {row.user_name: row for row in rows}
    assert by_name["Sarah"].mean > 0 and by_name["Sarah"].last_label == "positive"
    assert by_name["Tom"].mean < 0 and by_name["Tom"].last_label == "negative"


async def test_admins_see_the_summary_with_the_sentiment_command(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scored({"Mnemo, I love this!": 0.8})
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        await chat.say("Mnemo, I love this!")
        await chat.settle()
        host = app.runtime.plugins
        command = host.find_command("sentiment")
        assert command is not None and command.admin_only
        where = {
            "account_id": chat.account.id,
            "world_id": chat.room.world_id,
            "room_id": chat.room.id,
        }
        refused = await host.run_command(command, **where)
        answer = await host.run_command(command, is_admin=True, **where)
        elsewhere = await host.run_command(
            command, is_admin=True, **{**where, "world_id": "another-world"}
        )
        # The privacy hooks: what the plugin keeps about Sarah, then nothing.
        exported = await host.export(chat.account.id, chat.room.world_id)
        forgotten = await host.forget(chat.account.id, chat.room.world_id)
        after = await host.run_command(command, is_admin=True, **where)

    assert refused == "Only an admin can use /sentiment."
    assert answer.splitlines()[1].startswith("• Sarah in general: +0.80 over 1 message")
    assert elsewhere == "No sentiment recorded here yet."
    assert exported == {
        "sentiment": {"sentiment": [{"room": "general", "messages": 1, "mean": 0.8}]}
    }
    assert forgotten == {"sentiment": 1}
    assert after == "No sentiment recorded here yet."


async def test_tallies_of_an_older_version_are_adopted_once(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = scored({"Mnemo, what a great day": 0.5})
    async with app_for(tmp_path, mongo_uri, model_dir, model) as app:
        chat = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        await chat.say("Mnemo, what a great day")
        await chat.settle()
        scores = app.runtime.plugins.plugin_context(plugin).collections[COLLECTION]
        [tally] = await scores.find({}).to_list()
        # As an older Mnemo kept it: in the `sentiment` collection, the new one empty.
        await app.store.db["sentiment"].insert_one(tally)
        await scores.delete_many({})
        await app.runtime.plugins.setup()  # what the next start-up does
        await app.runtime.plugins.setup()  # and the one after: nothing copied twice
        rows = await summary_of(app, world_id=chat.room.world_id)
        left = await app.store.db.list_collection_names()

    assert [(r.user_name, r.count, r.mean) for r in rows] == [("Sarah", 1, 0.5)]
    assert "sentiment" not in left  # no copy left behind for /forgetme to miss

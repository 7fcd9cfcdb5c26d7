"""MongoDB goes away mid-conversation: messages wait in the local journal, each room hears once
that the bot is having trouble remembering, and when the database is back every message is
stored once, in order, answered if young and evaluated. A full journal says so; a kept message
that keeps failing is set aside instead of holding up the rest."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.app.composition import App
from bot.domain.records import Content, Memory, message_id
from bot.llm.base import Task
from bot.queue.worker import job_id_for
from bot.runtime.intake.journal import Journal, JournalEntry
from bot.runtime.intake.outage import FULL_REPLY, TROUBLE_REPLY, Outage
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from tests.helpers.outage import (
    KILLS_THE_BUNDLED_SERVER,
    REPLY,
    bring_database_back,
    journal_drained,
    kill_database,
    texts_in,
)

pytestmark = KILLS_THE_BUNDLED_SERVER


async def metric(app: App, name: str) -> float:
    assert app.metrics_server is not None
    url = f"{app.metrics_server.url}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"{name} not on the metrics page")


async def test_an_outage_keeps_every_message_tells_each_room_once_and_replays_in_order(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY] * 20})
    with caplog.at_level(logging.INFO):
        async with open_test_app(
            tmp_path, model=model, mongodb_timeout_seconds=1.0, metrics_port=0
        ) as app:
            sarah = TestChat(app.runtime, name="Sarah", chat="dm-sarah")
            omar = TestChat(app.runtime, name="Omar", chat="dm-omar")
            await sarah.say("before the outage")
            await sarah.settle()
            await kill_database(app)

            kept = [
                sarah.message("my dog is called Rex"),
                omar.message("I moved to Oslo"),
                sarah.message("I like green tea"),
                sarah.message("and I run on Sundays"),
            ]
            for message in kept:
                chat = sarah if message.room_id == sarah.room.id else omar
                result = await chat.send(message)
                assert result.journaled and not result.stored
            # One short notice per room, not silence and not one per message.
            assert sarah.replies == ["Got it.", TROUBLE_REPLY]
            assert omar.replies == [TROUBLE_REPLY]
            assert app.runtime.intake.outage is not None
            assert len(app.runtime.intake.outage.journal) == 4
            assert await metric(app, "mnemo_journal_messages") == 4
            assert await metric(app, "mnemo_journal_bytes") > 0

            await bring_database_back(app)
            await journal_drained(app)
            await sarah.settle()
            await omar.settle()
            assert await texts_in(app, sarah) == [
                "before the outage",
                "my dog is called Rex",
                "I like green tea",
                "and I run on Sundays",
            ]
            assert await texts_in(app, omar) == ["I moved to Oslo"]
            # Young, so answered once the database is back; every one evaluated.
            assert sarah.replies == ["Got it.", TROUBLE_REPLY, "Got it.", "Got it.", "Got it."]
            assert omar.replies == [TROUBLE_REPLY, "Got it."]
            for message in kept:
                job = await app.store.jobs.get(job_id_for("message", message.id))
                assert job is not None and job.status == "done" and job.did_respond
            assert not (tmp_path / "journal.jsonl").exists()
            assert await metric(app, "mnemo_journal_messages") == 0
    assert "MongoDB is unreachable" in caplog.text
    assert "4 kept message(s) replayed" in caplog.text


async def test_a_full_journal_refuses_with_a_reply_and_logs_once(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY] * 20})
    # Room for two messages of this size, not three.
    async with open_test_app(
        tmp_path, model=model, mongodb_timeout_seconds=1.0, journal_max_mb=0.002
    ) as app:
        chat = TestChat(app.runtime)
        await chat.say("hello")
        await chat.settle()
        await kill_database(app)
        results = [await chat.say(f"kept or not, number {n}") for n in range(1, 5)]
        assert [r.journaled for r in results] == [True, True, False, False]
        assert chat.replies == ["Got it.", TROUBLE_REPLY, FULL_REPLY, FULL_REPLY]
        assert caplog.text.count("refusing incoming messages") == 1
        assert (tmp_path / "journal.jsonl").stat().st_size <= 2_000

        await bring_database_back(app)
        await journal_drained(app)
        await chat.settle()
        assert await texts_in(app, chat) == [
            "hello",
            "kept or not, number 1",
            "kept or not, number 2",
        ]


async def test_a_kept_message_that_keeps_failing_is_set_aside_and_the_rest_go_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal.in_folder(tmp_path, max_bytes=1_000_000)
    for text in ("first", "cannot be taken in", "third"):
        memory = Memory(
            id=message_id("test", "chat", text),
            user_id="person",
            agent_id="agent",
            room_id="room",
            world_id="world",
            content=Content(text=text),
        )
        journal.append(JournalEntry(memory=memory))
    taken: list[str] = []

    async def take_in(entry: JournalEntry, send: object) -> None:
        if entry.memory.content.text == "cannot be taken in":
            raise ValueError("the platform refused the reply")
        taken.append(entry.memory.content.text)

    async def database_answers() -> None:
        return None

    outage = Outage(journal, ping=database_answers, first_delay=0.01)
    outage.bind(take_in)
    outage.replay_later()
    for _ in range(200):
        if not outage.waiting:
            break
        await asyncio.sleep(0.02)
    await outage.stop()
    assert taken == ["first", "third"]  # each once, in order; the bad one held them up 3 times
    assert not outage.waiting and not (tmp_path / "journal.jsonl").exists()
    aside = (tmp_path / "journal.jsonl.failed").read_text().splitlines()
    assert [json.loads(line)["entry"]["memory"]["content"]["text"] for line in aside] == [
        "cannot be taken in"
    ]
    assert "set aside in" in caplog.text


async def test_a_reply_sent_as_the_database_dies_is_stored_on_replay_and_not_sent_again(
    tmp_path: Path, model_dir: Path
) -> None:
    opened: list[App] = []

    async def reply(prompt: str, task: str, state: object) -> str:
        if "the database dies now" in prompt:
            await kill_database(opened[0])  # while the reply is being written
        return REPLY

    model = ScriptedModel(reply)
    async with open_test_app(tmp_path, model=model, mongodb_timeout_seconds=1.0) as app:
        opened.append(app)
        chat = TestChat(app.runtime)
        await chat.say("hello")
        await chat.settle()
        message = chat.message("the database dies now")
        result = await chat.send(message)
        # Sent, then not stored: kept with its reply, and no notice (the person has the answer).
        assert result.journaled and result.responded
        assert chat.replies == ["Got it.", "Got it."]
        await bring_database_back(app)
        await journal_drained(app)
        await chat.settle()
        stored = await app.store.memories.recent(chat.room.id, 10)
        assert [(m.content.text, m.content.in_reply_to) for m in stored][-2:] == [
            ("the database dies now", None),
            ("Got it.", message.id),
        ]
        job = await app.store.jobs.get(job_id_for("message", message.id))
        assert job is not None and job.status == "done" and job.did_respond
        assert chat.replies == ["Got it.", "Got it."]  # not answered a second time


async def test_a_message_kept_from_someone_who_opted_out_is_dropped_on_replay(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY] * 20})
    async with open_test_app(tmp_path, model=model, mongodb_timeout_seconds=1.0) as app:
        chat = TestChat(app.runtime)
        await chat.say("hello")
        await chat.settle()
        await app.runtime.privacy.consent.opt_out(
            user_id=chat.account.id, world_id=chat.room.world_id
        )
        await kill_database(app)
        # Consent cannot be checked without the database: kept, then checked on replay.
        assert (await chat.say("my secret is that I hate Mondays")).journaled
        await bring_database_back(app)
        await journal_drained(app)
        await chat.settle()
        assert await texts_in(app, chat) == ["hello"]
        assert await app.store.jobs.count(room_id=chat.room.id) == 1

"""Intake: a crash anywhere in handle() costs no message, no reply and no evaluation.

A "crash" here is an exception no code catches, raised from inside the reply (the model call),
after which the app is closed and a new one opened on the same data folder and database, as
a restarted process would. The fault suite (test_faults.py) does the same with kill -9.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.lanes import RoomLanes
from bot.app.composition import App
from bot.domain.records import Content, EvaluationJob, Memory, Room
from bot.llm.base import Task
from bot.plugin.api import Context, Evaluator, Plugin
from bot.queue.worker import job_id_for
from bot.runtime.agent import Send
from bot.runtime.intake.intake import MISSED_REPLY
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = '{"text": "Nice to meet you!", "action": "NONE"}'


class Crash(BaseException):
    """Nothing in the runtime catches it: the process would be gone."""


def learner(learned: list[str]) -> Plugin:
    async def handler(ctx: Context, found: object) -> None:
        learned.append(ctx.message.content.text)

    return Plugin("probe", evaluators=[Evaluator("LEARN", "learns", handler, always_run=True)])


def crashing_model() -> ScriptedModel:
    return ScriptedModel(answers={Task.REPLY: [Crash(), REPLY]})


async def wait_done(app: App, job_id: str, timeout: float = 20.0) -> str:
    async def done() -> str:
        while True:
            job = await app.store.jobs.get(job_id)
            if job is not None and job.status in ("done", "dead"):
                return job.status
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(done(), timeout)


async def test_a_crash_mid_reply_is_answered_and_learned_from_after_restart(
    tmp_path: Path, model_dir: Path
) -> None:
    learned: list[str] = []
    options = {"evaluator_selection": "all", "plugins": [learner(learned)], "keep_database": True}
    async with open_test_app(tmp_path, model=crashing_model(), **options) as app:
        chat = TestChat(app.runtime)
        message = chat.message("Hi, I'm Sarah")
        with pytest.raises(Crash):
            await chat.send(message)
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    async with open_test_app(tmp_path, model=model, **options) as app:
        sent: list[tuple[str, str]] = []

        def sender_for(room: Room, message: Memory) -> Send:
            async def send(content: Content) -> None:
                sent.append((room.id, content.text))

            return send

        answered = await app.runtime.answer_unanswered("test", sender_for)
        stored = await app.store.memories.recent(chat.room.id, 10)
        status = await wait_done(app, job_id_for("message", message.id))
        job = await app.store.jobs.get(job_id_for("message", message.id))
        await app.store.client.drop_database(app.settings.storage.mongodb_database)
    assert answered == 1
    assert sent == [(chat.room.id, "Nice to meet you!")]
    assert [m.content.text for m in stored] == ["Hi, I'm Sarah", "Nice to meet you!"]
    assert status == "done" and job is not None and job.did_respond
    assert learned == ["Hi, I'm Sarah"]


def recording_sender(sent: list[tuple[str, str]]) -> Callable[[Room, Memory | None], Send]:
    """How the test platform reaches a room after a restart: each line is recorded with the
    message it answers ("-" for a line that answers none)."""

    def sender_for(room: Room, message: Memory | None) -> Send:
        async def send(content: Content) -> None:
            sent.append((message.id if message is not None else "-", content.text))

        return send

    return sender_for


async def test_old_unanswered_messages_are_learned_from_and_the_room_told_once(
    tmp_path: Path, model_dir: Path
) -> None:
    learned: list[str] = []
    options = {"evaluator_selection": "all", "plugins": [learner(learned)], "keep_database": True}
    hour_ago = timedelta(hours=1)
    model = ScriptedModel(answers={Task.REPLY: [Crash(), Crash(), REPLY]})
    async with open_test_app(tmp_path, model=model, **options) as app:
        chat = TestChat(app.runtime)
        first, second = chat.message("Hi, I'm Sarah"), chat.message("I live in Oslo")
        for message in (first, second):
            aged = message.model_copy(update={"created_at": message.created_at - hour_ago})
            with pytest.raises(Crash):
                await chat.send(aged)
    async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
        statuses = [await wait_done(app, job_id_for("message", m.id)) for m in (first, second)]
        sent: list[tuple[str, str]] = []
        answered = await app.runtime.answer_unanswered("test", recording_sender(sent))
        again = await app.runtime.answer_unanswered("test", recording_sender(sent))
        stored = await app.store.memories.recent(chat.room.id, 10)
    # A restart after the line was said does not say it again.
    async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
        await app.runtime.answer_unanswered("test", recording_sender(sent))
        await app.store.client.drop_database(app.settings.storage.mongodb_database)
    assert statuses == ["done", "done"]
    assert answered == 0 and again == 0
    assert sent == [("-", MISSED_REPLY)]
    assert [m.content.text for m in stored] == ["Hi, I'm Sarah", "I live in Oslo"]
    assert sorted(learned) == ["Hi, I'm Sarah", "I live in Oslo"]


async def test_a_room_owed_the_missed_line_is_told_even_after_a_start_that_never_connected(
    tmp_path: Path, model_dir: Path
) -> None:
    """A crash loop: the start that learned from the aged message was stopped before its
    platform connected; the room is still told, by the next start."""
    options = {"evaluator_selection": "all", "keep_database": True}
    async with open_test_app(tmp_path, model=crashing_model(), **options) as app:
        chat = TestChat(app.runtime)
        message = chat.message("Hi, I'm Sarah")
        aged = message.model_copy(update={"created_at": message.created_at - timedelta(hours=1)})
        with pytest.raises(Crash):
            await chat.send(aged)
    async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
        status = await wait_done(app, job_id_for("message", message.id))  # learned from
    sent: list[tuple[str, str]] = []
    async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
        await app.runtime.answer_unanswered("test", recording_sender(sent))
        await app.store.client.drop_database(app.settings.storage.mongodb_database)
    assert status == "done"
    assert sent == [("-", MISSED_REPLY)]


async def test_a_recovered_message_is_answered_before_a_new_one_in_its_room(
    tmp_path: Path, model_dir: Path
) -> None:
    """A crash mid-reply, then a new message of the same room right after the restart, even
    one that reaches the room's lane before the platform hands over the recovery: the room is
    answered in the order its people wrote."""
    options = {"evaluator_selection": "all", "keep_database": True}
    async with open_test_app(tmp_path, model=crashing_model(), **options) as app:
        chat = TestChat(app.runtime)
        interrupted = chat.message("Hi, I'm Sarah")
        with pytest.raises(Crash):
            await chat.send(interrupted)
    model = ScriptedModel(answers={Task.REPLY: [REPLY, '{"text": "Oslo!", "action": "NONE"}']})
    async with open_test_app(tmp_path, model=model, **options) as app:
        sent: list[tuple[str, str]] = []
        lanes: RoomLanes[str] = RoomLanes("test")
        sender_for = recording_sender(sent)
        later = chat.message("I live in Oslo")

        async def new_message() -> None:
            await app.runtime.handle(
                later, sender_for(chat.room, later), account=chat.account, room=chat.room
            )

        # The new message is in the lane first; the recovery is handed over after it.
        lanes.submit(chat.room.id, new_message)
        answered = await app.runtime.answer_unanswered(
            "test", sender_for, lambda room, work: lanes.submit(room.id, work)
        )
        await asyncio.wait_for(lanes.join(), 30)
        await lanes.close(grace=1)
        stored = await app.store.memories.recent(chat.room.id, 10)
        await app.store.client.drop_database(app.settings.storage.mongodb_database)
    assert answered == 0  # taken in by the new message, ahead of itself
    assert sent == [(interrupted.id, "Nice to meet you!"), (later.id, "Oslo!")]
    assert sorted(m.content.text for m in stored) == sorted(
        ["Hi, I'm Sarah", "Nice to meet you!", "I live in Oslo", "Oslo!"]
    )


async def test_a_redelivery_after_a_crash_mid_reply_is_answered_once(
    tmp_path: Path, model_dir: Path
) -> None:
    learned: list[str] = []
    async with open_test_app(
        tmp_path, model=crashing_model(), plugins=[learner(learned)], evaluator_selection="all"
    ) as app:
        chat = TestChat(app.runtime, platform="telegram", chat="42")
        with pytest.raises(Crash):
            await chat.send(chat.message("Hi there", number=7))
        again = await chat.send(chat.message("Hi there", number=7))
        third = await chat.send(chat.message("Hi there", number=7))
        await chat.settle()
        stored = await app.store.memories.recent(chat.room.id, 10)
    assert again.responded and not third.stored and not third.responded
    assert chat.replies == ["Nice to meet you!"]
    assert [m.content.text for m in stored] == ["Hi there", "Nice to meet you!"]
    assert learned == ["Hi there"]


async def test_a_stored_message_without_a_job_gets_one_when_redelivered(
    tmp_path: Path, model_dir: Path
) -> None:
    learned: list[str] = []
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    async with open_test_app(
        tmp_path, model=model, plugins=[learner(learned)], evaluator_selection="all"
    ) as app:
        chat = TestChat(app.runtime)
        await app.store.rooms.upsert(chat.room)
        message: Memory = chat.message("I live in Seattle")
        # What a crash between storing and enqueuing left behind before intake wrote jobs first.
        await app.store.memories.insert(message)
        await chat.send(message)
        await chat.settle()
        jobs = await app.store.jobs.count(room_id=chat.room.id, status="done")
    assert jobs == 1
    assert learned == ["I live in Seattle"]
    assert chat.replies == ["Nice to meet you!"]


async def test_a_crash_mid_message_is_not_charged_to_the_evaluation_beside_it_after_restart(
    tmp_path: Path, model_dir: Path
) -> None:
    """A process died answering a message, with one evaluation running beside it. Start-up
    learns from the old message and releases it before the evaluations are resumed; what the
    dead process was doing is read before that, so the evaluation is not charged the crash
    (one attempt allowed: charged, it would be dead)."""
    learned: list[str] = []
    options = {
        "evaluator_selection": "all",
        "plugins": [learner(learned)],
        "keep_database": True,
        "evaluation_max_attempts": 1,
    }
    async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
        chat = TestChat(app.runtime)
        running = chat.message("I run a bakery", number=1)
        await app.store.memories.insert(running)
        job_id = job_id_for("message", running.id)
        await app.store.jobs.insert(
            EvaluationJob(id=job_id, room_id=chat.room.id, message_id=running.id, did_respond=True)
        )
        await app.store.jobs.claim_next(chat.room.id, owner="dead-process")
        answering = chat.message("and two dogs", number=2)
        answering = answering.model_copy(
            update={"created_at": answering.created_at - timedelta(hours=1)}
        )
        in_intake = EvaluationJob(
            id=job_id_for("message", answering.id),
            room_id=chat.room.id,
            message_id=answering.id,
            did_respond=False,
            status="intake",
            message=answering,
        )
        await app.store.jobs.open_intake(in_intake, owner="dead-process")
    async with open_test_app(tmp_path, model=ScriptedModel(default=REPLY), **options) as app:
        status = await wait_done(app, job_id)
        await wait_done(app, in_intake.id)
        await app.store.client.drop_database(app.settings.storage.mongodb_database)
    assert status == "done"
    assert learned == ["I run a bakery", "and two dogs"]

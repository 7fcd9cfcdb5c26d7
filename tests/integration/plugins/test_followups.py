"""Follow-ups as people meet them: Sarah says on a Wednesday that her exam is on Friday, and on
Saturday morning Mnemo asks her how it went - once, in the same room, even across a restart
or with two processes sharing the database. Real MongoDB over the wire, real Chroma and
embedder; the clock is injected (milliseconds), never patched."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path

import pytest

from bot.adapters.console import ConsoleChat
from bot.app.composition import App
from bot.app.scheduler import build_scheduler
from bot.commands.command_set import Commands
from bot.commands.types import Request
from bot.domain.records import Content, Fact, Room
from bot.llm.base import Task as ModelTask
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.scripted import ScriptedModel
from plugins.followups import make_plugin
from plugins.followups.dates import find_when
from plugins.followups.detect import find_event
from plugins.followups.store import FollowUpStore
from tests.helpers.followups import WEDNESDAY, Clock, Room_, at, command


def followups(app: App, plugin: object) -> FollowUpStore:
    return FollowUpStore.of(app.runtime.plugins.plugin_context(plugin).collections)  # type: ignore[arg-type]


async def say(chat: TestChat, text: str) -> None:
    await chat.say(text)
    await chat.settle()


@asynccontextmanager
async def app_on(
    tmp_path: Path,
    mongo_uri: str,
    model_dir: Path,
    clock: Clock,
    *,
    model: ScriptedModel | None = None,
    database: str | None = None,
    keep: bool = False,
) -> AsyncIterator[tuple[App, object]]:
    plugin = make_plugin(clock=clock)
    settings = test_settings(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir)
    if database is not None:
        settings = dataclasses.replace(
            settings,
            storage=settings.storage.model_copy(update={"mongodb_database": database}),
        )
    async with open_test_app(
        tmp_path, plugins=[plugin], model=model, settings=settings, keep_database=keep
    ) as app:
        yield app, plugin


# ---------------------------------------------------------------------- dates, no database
@pytest.mark.parametrize(
    ("said", "topic", "last_day"),
    [
        ("My exam is on Friday", "your exam", date(2026, 11, 27)),
        ("the interview is tomorrow.", "the interview", date(2026, 11, 26)),
        ("I've got a job interview tomorrow morning", "your job interview", date(2026, 11, 26)),
        ("I'm moving house next week", "moving house", date(2026, 12, 6)),
        ("we're flying to Rome in two days", "flying to Rome", date(2026, 11, 27)),
        ("I have a dentist appointment tonight", "your dentist appointment", date(2026, 11, 25)),
        ("my exam's on Wednesday", "your exam", date(2026, 12, 2)),  # said on a Wednesday
    ],
)
def test_simple_dates_are_read_on_a_wednesday(said: str, topic: str, last_day: date) -> None:
    event = find_event(said, WEDNESDAY.date())
    assert event is not None
    assert (event.topic, event.last_day) == (topic, last_day)


@pytest.mark.parametrize(
    "said",
    [
        "the weather is nice today",
        "is the party tonight?",
        "my exam was on Friday",
        "I work on Fridays",
        "I have a cold today",
        "see you tomorrow",
    ],
)
def test_what_is_no_event_is_left_alone(said: str) -> None:
    assert find_event(said, WEDNESDAY.date()) is None


@pytest.mark.parametrize(
    ("said", "topic", "last_day"),
    [
        ("I need to finish my thesis by Friday", "finish your thesis", date(2026, 11, 27)),
        ("My goal is to run 10k by next week", "run 10k", date(2026, 12, 6)),
        ("I'll send the report by tomorrow", "send the report", date(2026, 11, 26)),
    ],
)
def test_a_deadline_is_read_too(said: str, topic: str, last_day: date) -> None:
    event = find_event(said, WEDNESDAY.date())
    assert event is not None and event.kind == "deadline"
    assert (event.topic, event.last_day) == (topic, last_day)


def test_a_weekday_is_the_coming_one() -> None:
    when = find_when("on Monday", WEDNESDAY.date())
    assert when is not None and when.last_day == date(2026, 11, 30)


# ---------------------------------------------------------------------- the console
async def test_an_exam_on_friday_brings_one_follow_up_on_saturday_morning_in_the_console(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    read, write = os.pipe()  # standard input that waits, like a person at the prompt
    out = io.StringIO()
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, _plugin):
        console = ConsoleChat(
            user_name="sarah", display_name="Sarah", stdin=os.fdopen(read), stdout=out
        )
        await console.start(app.adapter_services)
        try:
            assert await console.command("/followups on")
            await console.chat("My exam is on Friday, wish me luck!")
            assert await app.runtime.evaluations.join(console.room.id, 60)
            before = out.getvalue()
            # Thursday, Friday, and Saturday before breakfast: nothing yet.
            for moment in (at(2026, 11, 26, 10), at(2026, 11, 27, 18), at(2026, 11, 28, 8)):
                clock.ms = moment
                await app.runtime.plugins.run_tasks()
            assert out.getvalue() == before
            # Saturday 10:00 (UTC, the default zone): the question, once.
            clock.ms = at(2026, 11, 28, 10, 1)
            for _ in range(3):
                await app.runtime.plugins.run_tasks()
            asked = out.getvalue()[len(before) :].strip().splitlines()
        finally:
            os.close(write)
            await console.stop()
    assert len(asked) == 1, out.getvalue()
    assert asked[0].startswith("Mnemo: ")
    assert "Sarah" in asked[0] and "exam" in asked[0] and "Friday" in asked[0]
    assert "{{" not in asked[0]


# ---------------------------------------------------------------------- durability
async def test_a_follow_up_survives_a_restart(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with app_on(tmp_path, mongo_uri, model_dir, clock, keep=True) as (app, plugin):
        chat = TestChat(app.runtime, name="Sarah")
        assert "are on here" in await command(app, chat, "/followups on")
        await say(chat, "the interview is tomorrow")
        [planned] = await followups(app, plugin).of_person(chat.room.world_id, chat.account.id)
    assert planned.local_day == "2026-11-27"
    clock.ms = at(2026, 11, 27, 10, 5)
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, plugin):
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        await app.runtime.plugins.run_tasks()
        [sent] = await followups(app, plugin).of_person(planned.world_id, planned.person_id)
        # The question is in the room's conversation too: her answer has it as context.
        recent = await app.store.memories.recent(planned.room_id, 5)
    [question] = room.said[planned.room_id]
    assert "interview" in question
    assert sent.status == "sent" and sent.question == question
    assert recent[-1].content.text == question and recent[-1].user_id == app.runtime.agent_id


async def test_two_processes_over_one_database_never_send_it_twice(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    database = f"mnemo_test_two_{os.getpid()}"
    async with (
        app_on(tmp_path / "one", mongo_uri, model_dir, clock, database=database) as (one, plugin),
        app_on(tmp_path / "two", mongo_uri, model_dir, clock, database=database) as (two, _),
    ):
        people = [
            TestChat(one.runtime, name=f"Student{number}", chat=f"dm-{number}")
            for number in range(5)
        ]
        for person in people:  # five people, five exams on Friday
            await command(one, person, "/followups on")
            await say(person, "My exam is on Friday")
        rooms_one, rooms_two = Room_(), Room_()
        one.runtime.plugins.rooms.connect("test", rooms_one.sender)
        two.runtime.plugins.rooms.connect("test", rooms_two.sender)
        clock.ms = at(2026, 11, 28, 10, 0)
        await asyncio.gather(
            *(app.runtime.plugins.run_tasks() for app in (one, two, one, two, one, two))
        )
        store = followups(one, plugin)
        sent = [
            f
            for person in people
            for f in await store.of_person(person.room.world_id, person.account.id)
        ]
    # Every exam asked about exactly once, by one process or the other.
    per_room: dict[str, int] = {}
    for rooms in (rooms_one, rooms_two):
        for room_id, texts in rooms.said.items():
            per_room[room_id] = per_room.get(room_id, 0) + len(texts)
    assert sorted(per_room.values()) == [1] * 5, per_room
    assert [f.status for f in sent] == ["sent"] * 5


# ---------------------------------------------------------------------- who is asked, when
async def test_nothing_is_planned_where_follow_ups_are_off_or_for_someone_who_opted_out(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, plugin):
        store = followups(app, plugin)
        never_on = TestChat(app.runtime, name="Ana", chat="dm-ana")
        await say(never_on, "My exam is on Friday")
        switched_off = TestChat(app.runtime, name="Ben", chat="dm-ben")
        await command(app, switched_off, "/followups on")
        assert "off here" in await command(app, switched_off, "/followups off")
        await say(switched_off, "My exam is on Friday")
        opted_out = TestChat(app.runtime, name="Cleo", chat="dm-cleo")
        await command(app, opted_out, "/followups on")
        await command(app, opted_out, "/optout")
        await say(opted_out, "My exam is on Friday")
        # Planned, then the person opts out: it is never sent.
        later = TestChat(app.runtime, name="Dev", chat="dm-dev")
        await command(app, later, "/followups on")
        await say(later, "My exam is on Friday")
        [planned] = await store.of_person(later.room.world_id, later.account.id)
        await command(app, later, "/optout")
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        clock.ms = at(2026, 11, 28, 10, 5)
        await app.runtime.plugins.run_tasks()
        found = {
            chat.name: await store.of_person(chat.room.world_id, chat.account.id)
            for chat in (never_on, switched_off, opted_out)
        }
        [after] = await store.of_person(later.room.world_id, later.account.id)
    assert found == {"Ana": [], "Ben": [], "Cleo": []}
    assert planned.status == "pending" and after.status == "cancelled"
    assert room.said == {}


async def test_only_admins_switch_follow_ups_on(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with app_on(tmp_path, mongo_uri, model_dir, Clock()) as (app, _):
        chat = TestChat(app.runtime, name="Sarah", kind="group", world="club", chat="general")
        refused = await command(app, chat, "/followups on", admin=False)
        shown = Commands(app.commands).help(is_admin=True)
        unknown_zone = await command(app, chat, "/followups on Mars/Olympus")
    assert refused == "Sorry, /followups is only for admins."
    assert "/followups" in shown
    assert "don't know the time zone" in unknown_zone


async def test_me_lists_export_holds_and_forgetme_removes_a_planned_follow_up(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with app_on(tmp_path, mongo_uri, model_dir, Clock()) as (app, plugin):
        chat = TestChat(app.runtime, name="Sarah")
        await command(app, chat, "/followups on")
        await say(chat, "I've got a job interview tomorrow")
        me = await command(app, chat, "/me")
        commands = Commands(app.commands)
        request = Request(
            platform=chat.platform,
            account_id=chat.account.id,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            is_admin=False,
        )
        exported = await commands.run("export", request)
        assert exported.attachment is not None
        data = json.loads(exported.attachment.data)
        forgotten = await commands.run("forgetme", dataclasses.replace(request, args="yes"))
        left = await followups(app, plugin).of_person(chat.room.world_id, chat.account.id)
        me_after = await command(app, chat, "/me")
    assert "I'll ask how your job interview went: Fri 27 Nov around 10:00 (UTC)" in me
    [kept] = data["plugins"]["followups"]["followups"]
    assert kept["topic"] == "your job interview" and kept["status"] == "pending"
    assert kept["said"] == "I've got a job interview tomorrow"
    assert forgotten.text and left == []
    assert "job interview" not in me_after


async def test_at_most_one_follow_up_a_day_for_a_person(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, plugin):
        chat = TestChat(app.runtime, name="Sarah")
        await command(app, chat, "/followups on")
        await say(chat, "My exam is on Friday")
        await say(chat, "I have a piano recital on Friday too")
        await say(chat, "My exam is on Friday")  # said again: still one about the exam
        planned = await followups(app, plugin).of_person(chat.room.world_id, chat.account.id)
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        asked_by_day = []
        for day in (28, 29, 30):
            clock.ms = at(2026, 11, day, 12)
            await app.runtime.plugins.run_tasks()
            asked_by_day.append(list(room.said.get(chat.room.id, [])))
    assert [(f.key, f.local_day) for f in planned] == [
        ("exam", "2026-11-28"),
        ("piano recital", "2026-11-29"),
    ]
    saturday, sunday, monday = asked_by_day
    assert len(saturday) == 1 and "exam" in saturday[0]
    assert len(sunday) == 2 and "piano recital" in sunday[1]
    assert monday == sunday


async def test_never_at_night_in_the_rooms_time_zone(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, plugin):
        chat = TestChat(app.runtime, name="Sarah")
        assert "America/New_York" in await command(app, chat, "/followups on America/New_York")
        await say(chat, "the interview is tomorrow")
        [planned] = await followups(app, plugin).of_person(chat.room.world_id, chat.account.id)
        room = Room_()
        # The bot was down all Friday; it comes back at 23:30 in New York (04:30 UTC).
        clock.ms = at(2026, 11, 28, 4, 30)
        app.runtime.plugins.rooms.connect("test", room.sender)
        await app.runtime.plugins.run_tasks()
        at_night = dict(room.said)
        clock.ms = at(2026, 11, 28, 14, 0)  # 09:00 in New York
        await app.runtime.plugins.run_tasks()
    assert planned.due_ms == at(2026, 11, 27, 15, 0)  # Friday 10:00 in New York
    assert at_night == {}
    assert len(room.said[chat.room.id]) == 1


async def test_a_deadline_brings_did_you_manage_it_and_the_scheduler_runs_the_task(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, _):
        chat = TestChat(app.runtime, name="Sarah")
        await command(app, chat, "/followups on")
        await say(chat, "I need to finish my thesis by Friday")
        me = await command(app, chat, "/me")
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        clock.ms = at(2026, 11, 28, 10, 0)
        # What the scheduler runs every minute in every process.
        scheduler = build_scheduler(app.runtime, idle_minutes=10)
        job = scheduler.get_job("plugin:followups:followups")
        assert job is not None and job.trigger.interval.total_seconds() == 60
        await job.func(*job.args)
    assert "I'll ask whether you managed to finish your thesis: Sat 28 Nov" in me
    [asked] = room.said[chat.room.id]
    assert "Sarah" in asked and "finish your thesis by Friday" in asked


# ---------------------------------------------------------------------- in character
async def test_the_large_model_writes_the_question_from_what_it_knows(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    question = "Sarah! The chemistry exam on Friday - how did it go? I hope the flashcards helped."
    model = ScriptedModel(
        answers={
            ModelTask.REPLY: ['{"text": "Good luck!", "action": "NONE"}'],
            "task:followups": [question],
        },
        default="[]",
    )
    async with app_on(tmp_path, mongo_uri, model_dir, clock, model=model) as (app, _):
        chat = TestChat(app.runtime, name="Sarah")
        await command(app, chat, "/followups on")
        await app.knowledge.add_facts(
            [
                Fact(
                    text="Sarah studies chemistry with flashcards",
                    subject_id=chat.account.id,
                    room_id=chat.room.id,
                    world_id=chat.room.world_id,
                    agent_id=app.runtime.agent_id,
                )
            ],
            near_duplicate_distance=0.05,
            given=True,
        )
        await say(chat, "My chemistry exam is on Friday")
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        clock.ms = at(2026, 11, 28, 10, 0)
        await app.runtime.plugins.run_tasks()
    [call] = [c for c in model.calls if c.task == "task:followups"]
    assert call.model_class.name == "LARGE"
    assert "My chemistry exam is on Friday" in call.prompt
    assert "Sarah studies chemistry with flashcards" in call.prompt  # what Mnemo knows
    assert app.character.name in call.prompt  # in character
    assert room.said[chat.room.id] == [question]


async def test_an_unusable_answer_is_not_sent_the_plain_question_is(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    model = ScriptedModel(
        answers={
            ModelTask.REPLY: ['{"text": "Good luck!", "action": "NONE"}'],
            "task:followups": ['{"text": "{{name}}, how was it?"}'],
        },
        default="[]",
    )
    async with app_on(tmp_path, mongo_uri, model_dir, clock, model=model) as (app, _):
        chat = TestChat(app.runtime, name="Sarah")
        await command(app, chat, "/followups on")
        await say(chat, "My exam is on Friday")
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        clock.ms = at(2026, 11, 28, 10, 0)
        await app.runtime.plugins.run_tasks()
        rejects = app.ledger.rejects("task:followups")
    [asked] = room.said[chat.room.id]
    assert "{{" not in asked and "exam" in asked and "Sarah" in asked
    assert rejects == {"unusable follow-up question": 1}


class Killed(BaseException):
    """The process dies mid-send (as SIGKILL would: nothing after it runs)."""


async def test_a_crash_around_the_send_never_sends_it_twice(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    delivered: list[str] = []

    def dies_after_sending(room: Room) -> Callable[[Content], Awaitable[None]]:
        async def send(content: Content) -> None:
            delivered.append(content.text)
            raise Killed

        return send

    async with app_on(tmp_path, mongo_uri, model_dir, clock, keep=True) as (app, plugin):
        chat = TestChat(app.runtime, name="Sarah")
        await command(app, chat, "/followups on")
        await say(chat, "My exam is on Friday")
        app.runtime.plugins.rooms.connect("test", dies_after_sending)
        clock.ms = at(2026, 11, 28, 10, 0)
        with pytest.raises(Killed):
            await app.runtime.plugins.run_tasks()
    # The restart, later that day: the claim's owner is gone; it is not sent again.
    clock.ms = at(2026, 11, 28, 11, 0)
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, plugin):
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        await app.runtime.plugins.run_tasks()
        clock.ms = at(2026, 11, 29, 11, 0)
        await app.runtime.plugins.run_tasks()
        [after] = await followups(app, plugin).of_person(chat.room.world_id, chat.account.id)
    assert len(delivered) == 1 and room.said == {}
    assert after.status == "lost"


async def test_days_late_it_is_not_asked_and_what_was_asked_goes_after_a_week(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    clock = Clock()
    async with app_on(tmp_path, mongo_uri, model_dir, clock) as (app, plugin):
        store = followups(app, plugin)
        ben = TestChat(app.runtime, name="Ben", chat="dm-ben")
        ana = TestChat(app.runtime, name="Ana", chat="dm-ana")
        for chat, said in ((ben, "the interview is tomorrow"), (ana, "My exam is on Friday")):
            await command(app, chat, "/followups on")
            await say(chat, said)
        room = Room_()
        app.runtime.plugins.rooms.connect("test", room.sender)
        clock.ms = at(2026, 11, 27, 10, 0)  # Ben's Friday morning
        await app.runtime.plugins.run_tasks()
        [ben_asked] = await store.of_person(ben.room.world_id, ben.account.id)
        clock.ms = at(2026, 12, 2, 10, 0)  # the bot was down from Friday until Wednesday
        await app.runtime.plugins.run_tasks()
        [ana_late] = await store.of_person(ana.room.world_id, ana.account.id)
        clock.ms = at(2026, 12, 6, 10, 0)  # over a week on
        await app.runtime.plugins.run_tasks()
        left = [
            *await store.of_person(ben.room.world_id, ben.account.id),
            *await store.of_person(ana.room.world_id, ana.account.id),
        ]
    assert list(room.said) == [ben.room.id] and len(room.said[ben.room.id]) == 1
    assert ben_asked.status == "sent" and ben_asked.said == ""  # his words not kept
    assert ana_late.status == "cancelled" and ana_late.said == ""
    assert left == []

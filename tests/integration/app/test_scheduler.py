"""The scheduler's jobs (idle flush, re-index), run once per deployment, and crash recovery of
the evaluation queue."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from bot import Context, Evaluator, Plugin
from bot.app.scheduler import (
    IDLE_FLUSH_JOB,
    REINDEX_JOB,
    OncePerDeployment,
    _timed,
    build_scheduler,
    run_idle_flush,
)
from bot.domain.records import (
    Account,
    Content,
    EvaluationJob,
    Fact,
    Memory,
    Room,
    account_id,
    message_id,
    room_id,
    stable_id,
    utcnow,
    world_id,
)
from bot.llm.base import Task
from bot.storage.mongo import MongoStore
from bot.testing import harness
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

MARK = "learned_up_to"


@dataclass
class Recorder:
    """Stands in for a learning evaluator (like facts): records which message it ran on, and
    why; its handler would move MARK past what it read, which tells the idle flush."""

    runs: list[tuple[str, str]] = field(default_factory=list)

    def plugin(self) -> Plugin:
        async def handler(ctx: Context, found: object) -> None:
            self.runs.append((ctx.message.content.text, ctx.trigger))

        return Plugin(
            name="recorder",
            evaluators=[
                Evaluator(name="LEARN", description="records", handler=handler, idle_mark=MARK)
            ],
        )

    def idle_runs(self) -> list[str]:
        return [text for text, trigger in self.runs if trigger == "idle"]


def chatty_model() -> ScriptedModel:
    return ScriptedModel(answers={Task.REPLY: ['{"text": "I see.", "action": "NONE"}']})


async def say_at(chat: TestChat, text: str, minutes_ago: float) -> None:
    message = chat.message(text)
    when = utcnow() - timedelta(minutes=minutes_ago)
    await chat.send(message.model_copy(update={"created_at": when}))


def bot_said(chat: TestChat, text: str, minutes_ago: float) -> Memory:
    agent = chat.runtime.agent_id
    return Memory(
        id=stable_id("reply", text, chat.room.id),
        user_id=agent,
        agent_id=agent,
        room_id=chat.room.id,
        world_id=chat.room.world_id,
        content=Content(text=text),
        created_at=utcnow() - timedelta(minutes=minutes_ago),
    )


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_idle_flush_learns_from_quiet_rooms_only_and_only_once(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    recorder = Recorder()
    async with open_test_app(
        tmp_path,
        plugins=[recorder.plugin()],
        model=chatty_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        runtime = app.runtime
        # Group rooms where nobody addresses the bot: no reply is stamped "now".
        quiet = TestChat(runtime, name="Sarah", chat="quiet", kind="group")
        learned = TestChat(runtime, name="Tom", chat="learned", kind="group")
        busy = TestChat(runtime, name="Ann", chat="busy", kind="group")
        await say_at(quiet, "I moved to Lisbon last month", minutes_ago=30)
        await say_at(quiet, "and I started a pottery class", minutes_ago=29)
        await runtime.store.memories.insert(bot_said(quiet, "Lovely!", minutes_ago=28))
        await say_at(learned, "I have two cats", minutes_ago=30)
        await runtime.store.rooms.set_mark(learned.room.id, MARK, utcnow())
        await busy.say("still chatting right now")
        await runtime.evaluations.join(timeout=30)
        recorder.runs.clear()

        assert await run_idle_flush(runtime, idle_minutes=10) == 1
        await runtime.evaluations.join(timeout=30)
        # The quiet room's latest message from a person, not the bot's reply after it.
        assert recorder.idle_runs() == ["and I started a pottery class"]

        assert await run_idle_flush(runtime, idle_minutes=10) == 0  # not flushed twice
        await runtime.evaluations.join(timeout=30)
        assert recorder.idle_runs() == ["and I started a pottery class"]
        assert await runtime.store.jobs.count(room_id=busy.room.id) == 1  # its message job
        assert await runtime.store.jobs.count(room_id=learned.room.id) == 1

        # Someone speaks again, then the room goes quiet again: flushed again.
        await say_at(quiet, "also I adopted a dog", minutes_ago=20)
        await runtime.evaluations.join(timeout=30)
        assert await run_idle_flush(runtime, idle_minutes=10) == 1
        await runtime.evaluations.join(timeout=30)
        assert recorder.idle_runs() == ["and I started a pottery class", "also I adopted a dog"]


async def test_the_running_scheduler_flushes_idle_rooms_and_rebuilds_lost_vectors(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    recorder = Recorder()
    async with open_test_app(
        tmp_path,
        plugins=[recorder.plugin()],
        model=chatty_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        chat = TestChat(app.runtime, name="Sarah", kind="group")
        await say_at(chat, "I'm training for the Berlin marathon", minutes_ago=30)
        await chat.settle()
        # A fact whose vector write failed: in MongoDB, marked unindexed, absent from Chroma.
        fact = Fact(
            text="Sarah is training for the Berlin marathon",
            subject_id=chat.account.id,
            room_id=chat.room.id,
            world_id=chat.room.world_id,
            agent_id=app.runtime.agent_id,
        )
        await app.store.facts.insert(fact)
        assert await app.knowledge.vectors.existing_ids("facts", [fact.id]) == set()

        scheduler = build_scheduler(
            app.runtime, idle_minutes=10, check_every_seconds=0.1, reindex_every_seconds=0.1
        )
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {IDLE_FLUSH_JOB, REINDEX_JOB}
        assert all(job.max_instances == 1 and job.coalesce for job in jobs.values())
        scheduler.start()
        try:

            async def flushed() -> bool:
                return bool(recorder.idle_runs())

            async def reindexed() -> bool:
                return bool(await app.knowledge.vectors.existing_ids("facts", [fact.id]))

            assert await eventually(flushed), "the idle flush job never ran the evaluator"
            assert await eventually(reindexed), "the re-index job never rebuilt the vector"
        finally:
            scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # shutdown is scheduled on the loop; let it happen

        assert recorder.idle_runs() == ["I'm training for the Berlin marathon"]
        assert await app.store.facts.unindexed() == []
        found = await app.knowledge.search_facts(
            "marathon running", subject_ids=[chat.account.id], world_id=chat.room.world_id
        )
        assert [f.id for f in found] == [fact.id]


async def test_jobs_interrupted_by_a_crash_run_exactly_once_after_restart(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # Imported through its module: a bare `test_settings` name would be collected as a test.
    settings = harness.test_settings(
        tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir, evaluator_selection="all"
    )
    database = settings.storage.mongodb_database
    agent = stable_id("agent", "Mnemo")
    account = Account(
        id=account_id("test", "Sarah"), platform="test", platform_id="Sarah", name="Sarah"
    )
    room = Room(
        id=room_id("test", "crash"), world_id=world_id("test", "crash"), platform="test", kind="dm"
    )
    texts = ["I work as a nurse", "I live in Porto"]
    messages = [
        Memory(
            id=message_id("test", "crash", str(n)),
            user_id=account.id,
            agent_id=agent,
            room_id=room.id,
            world_id=room.world_id,
            content=Content(text=text),
            created_at=utcnow() + timedelta(milliseconds=n),
        )
        for n, text in enumerate(texts)
    ]

    # The process that crashed: both jobs queued, the first claimed (running) when it died.
    before = MongoStore.from_uri(mongo_uri, database)
    try:
        await before.ensure_indexes()
        await before.accounts.upsert(account)
        await before.rooms.upsert(room)
        for n, message in enumerate(messages):
            await before.memories.insert(message)
            await before.jobs.insert(
                EvaluationJob(
                    id=stable_id("evaluation", "message", message.id),
                    room_id=room.id,
                    message_id=message.id,
                    did_respond=True,
                    created_at=utcnow() + timedelta(milliseconds=n),
                )
            )
        claimed = await before.jobs.claim_next(room.id)
        assert claimed is not None and claimed.message_id == messages[0].id
    finally:
        await before.close()

    calls: list[str] = []

    async def handler(ctx: Context, found: object) -> None:
        calls.append(ctx.message.content.text)

    recovering = Plugin(
        name="recorder",
        evaluators=[Evaluator(name="GET_FACTS", description="records", handler=handler)],
    )
    async with open_test_app(
        tmp_path, plugins=[recovering], model=chatty_model(), settings=settings
    ) as app:
        assert app.runtime.agent_id == agent
        assert await app.runtime.evaluations.join(timeout=30)
        done = await app.store.jobs.count(room_id=room.id, status="done")
        pending_or_running = await app.store.jobs.count(
            room_id=room.id, status="pending"
        ) + await app.store.jobs.count(room_id=room.id, status="running")

    assert calls == texts  # each exactly once, in order
    assert done == 2
    assert pending_or_running == 0


async def test_each_timed_run_happens_in_one_process_of_the_deployment(
    store: MongoStore, mongo_uri: str
) -> None:
    # Three processes' schedulers, each firing every job once per period at the same moment.
    now = [1_000_000.0]
    others = [MongoStore.from_uri(mongo_uri, store.db.name) for _ in range(2)]
    runs: dict[str, list[str]] = {IDLE_FLUSH_JOB: [], REINDEX_JOB: []}
    try:
        processes = [
            OncePerDeployment(db.leases, f"process-{n}", clock=lambda: now[0])
            for n, db in enumerate([store, *others])
        ]

        def job(name: str, process: int) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                runs[name].append(f"process-{process}")

            return run

        for _period in range(3):
            await asyncio.gather(
                *(
                    _timed(once, name, 60, job(name, n), "the next run tries again")
                    for n, once in enumerate(processes)
                    for name in runs
                )
            )
            now[0] += 60
    finally:
        for other in others:
            await other.close()
    assert {name: len(done) for name, done in runs.items()} == {IDLE_FLUSH_JOB: 3, REINDEX_JOB: 3}
    # Old periods' leases are dropped as new ones are taken, so they do not pile up.
    assert await store.db.leases.count_documents({}) <= 2 * len(runs)

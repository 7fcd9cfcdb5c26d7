"""Two evaluation queues on one database, as two Mnemo processes would run them: a room's
jobs run in order and once, whichever queue takes them, and a queue whose process died has
its rooms finished by the other once its leases expire. Real MongoDB wire protocol (the
bundled server), each queue on its own client."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.domain.records import Content, EvaluationJob, Memory, stable_id, utcnow
from bot.queue.succession import take_over
from bot.queue.worker import EvaluationQueue, JobRunner, RetryPolicy
from bot.storage.leases import process_key, room_key
from bot.storage.mongo import MongoStore

T0 = utcnow()


def job(room: int, n: int) -> EvaluationJob:
    return EvaluationJob(
        id=stable_id("job", str(room), str(n)),
        room_id=stable_id("room", str(room)),
        message_id=stable_id("message", str(room), str(n)),
        did_respond=True,
        # Created in order within a room; rooms interleave.
        created_at=T0 + timedelta(milliseconds=10 * n + room),
    )


class Recorder:
    """Runs jobs for several queues: what ran where, in which order, and any overlap."""

    def __init__(self) -> None:
        self.runs: dict[str, list[str]] = defaultdict(list)  # room -> job ids in run order
        self.by_queue: dict[str, int] = defaultdict(int)
        self.in_flight: dict[str, int] = defaultdict(int)
        self.overlaps = 0
        self.ran = asyncio.Event()  # set after each run: a test waits for runs without polling

    def runner(self, name: str, delay: float = 0.01):
        async def run(job: EvaluationJob) -> list[str]:
            self.in_flight[job.room_id] += 1
            self.overlaps += self.in_flight[job.room_id] > 1
            try:
                await asyncio.sleep(delay)  # a model call: lets the other queue interleave
                self.runs[job.room_id].append(job.id)
                self.by_queue[name] += 1
                self.ran.set()
            finally:
                self.in_flight[job.room_id] -= 1
            return ["RECORD"]

        return run


async def restart(store: MongoStore, run: JobRunner, **options: Any) -> int:
    """A process starting on the queue: it recovers what a dead one left, drains every room
    and stops. Returns how many interrupted jobs it requeued."""
    queue = EvaluationQueue(store, run, lease_seconds=5, **options)
    try:
        requeued = await queue.recover()
        assert await queue.join(timeout=10)
    finally:
        await queue.stop()
    return requeued


@contextlib.asynccontextmanager
async def second_client(store: MongoStore, mongo_uri: str) -> AsyncIterator[MongoStore]:
    other = MongoStore.from_uri(mongo_uri, store.db.name)
    try:
        yield other
    finally:
        await other.close()


async def test_two_queues_run_each_rooms_jobs_in_order_and_once(
    store: MongoStore, mongo_uri: str
) -> None:
    rooms, per_room = 6, 5
    recorder = Recorder()
    async with second_client(store, mongo_uri) as other:
        first = EvaluationQueue(store, recorder.runner("first"), lease_seconds=5)
        second = EvaluationQueue(other, recorder.runner("second"), lease_seconds=5)
        try:
            # A burst: each message's job is written by whichever process took the message
            # in, and that process wakes the room, so both wake every room.
            for n in range(per_room):
                for room in range(rooms):
                    await (first if (n + room) % 2 else second).jobs.insert(job(room, n))
            for room in range(rooms):
                first.wake(job(room, 0).room_id)
                second.wake(job(room, 0).room_id)
            for queue in (first, second):
                assert await queue.join(timeout=30)
            # A job written just as its room's lease was released is picked up by the holder.
            assert await store.jobs.count(status="pending") == 0
        finally:
            await first.stop()
            await second.stop()
    for room in range(rooms):
        expected = [job(room, n).id for n in range(per_room)]
        assert recorder.runs[job(room, 0).room_id] == expected  # in order, each once
    assert recorder.overlaps == 0  # never two jobs of one room at once
    assert await store.jobs.count(status="done") == rooms * per_room
    # Every room's lease released, and each process's own once it stopped.
    assert await store.db.leases.count_documents({}) == 0


async def test_a_dead_queues_rooms_are_finished_by_the_other_after_its_lease_expires(
    store: MongoStore, mongo_uri: str
) -> None:
    recorder = Recorder()
    stuck = asyncio.Event()

    async def dies_mid_job(job: EvaluationJob) -> list[str]:
        stuck.set()
        await asyncio.Event().wait()  # never returns: the process is killed here
        return []

    room = job(0, 0).room_id
    for n in range(3):
        await store.jobs.insert(job(0, n))
    async with second_client(store, mongo_uri) as doomed_store:
        doomed = EvaluationQueue(doomed_store, dies_mid_job, lease_seconds=1)
        doomed.wake(room)
        await asyncio.wait_for(stuck.wait(), 10)
        # kill -9: the client goes first, so nothing is released or finished on the way out.
        await doomed_store.close()
        await doomed.stop(grace=0)
    assert (await store.jobs.get(job(0, 0).id)).status == "running"  # type: ignore[union-attr]
    # Still held by the dead process: its room's lease and its own.
    assert await store.db.leases.count_documents({}) == 2

    survivor = EvaluationQueue(store, recorder.runner("survivor"), lease_seconds=1)

    async def all_three_ran() -> None:
        while True:
            recorder.ran.clear()
            if len(recorder.runs[room]) >= 3:
                return
            await recorder.ran.wait()

    try:
        await survivor.recover()  # the lease is still live: nothing is taken yet
        assert recorder.runs[room] == []
        # Once the dead lease expires (1 s); the bound only keeps a broken take-over from
        # hanging the run, far above what a loaded machine needs.
        await asyncio.wait_for(all_three_ran(), 60)
    finally:
        await survivor.stop()
    assert recorder.runs[room] == [job(0, n).id for n in range(3)]
    taken_over = await store.jobs.get(job(0, 0).id)
    # It was running alone when its process died: that crash counts as one attempt.
    assert taken_over is not None and (taken_over.status, taken_over.attempts) == ("done", 2)


async def test_jobs_interrupted_together_are_not_charged_and_rerun_one_at_a_time(
    store: MongoStore,
) -> None:
    recorder = Recorder()
    for room in range(3):
        await store.jobs.insert(job(room, 0))
        # Claimed together by a process that then died (no lease left behind).
        await store.jobs.claim_next(job(room, 0).room_id, owner="dead-process")
    assert await restart(store, recorder.runner("after"), retry=RetryPolicy(max_attempts=1)) == 3
    assert await store.jobs.count(status="done") == 3  # with 1 attempt allowed, none died
    assert recorder.overlaps == 0
    for room in range(3):
        done = await store.jobs.get(job(room, 0).id)
        assert done is not None and done.attempts == 1


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_a_suspect_job_runs_with_no_other_job_of_its_process(
    store: MongoStore, concurrency: int
) -> None:
    running: list[str] = []
    alone: dict[str, bool] = {}

    async def run(job: EvaluationJob) -> list[str]:
        running.append(job.id)
        await asyncio.sleep(0.02)
        alone[job.id] = running == [job.id]
        running.remove(job.id)
        return []

    for room in range(4):
        await store.jobs.insert(job(room, 0))
    await store.jobs.claim_next(job(0, 0).room_id, owner="dead-a")
    await store.jobs.claim_next(job(1, 0).room_id, owner="dead-a")
    await restart(store, run, concurrency=concurrency)
    assert alone[job(0, 0).id] and alone[job(1, 0).id]
    assert await store.jobs.count(status="done") == 4


async def test_a_restart_from_the_same_data_folder_takes_its_predecessors_work_over_at_once(
    store: MongoStore, mongo_uri: str, tmp_path: Path
) -> None:
    """Not the bundled server (leases are not cleared at start): a process killed -9 and
    started again from its data folder resumes its own interrupted job at once, instead of
    waiting for the dead run's leases to expire like another process would; and the leases
    of another live process are left alone."""
    room = job(0, 0).room_id
    for n in range(2):
        await store.jobs.insert(job(0, n))
    async with second_client(store, mongo_uri) as doomed_store:
        first = await take_over(doomed_store.leases, tmp_path, bundled=False)
        first_owner = first.owner
        stuck = asyncio.Event()

        async def dies_mid_job(job: EvaluationJob) -> list[str]:
            stuck.set()
            await asyncio.Event().wait()  # never returns: the process is killed here
            return []

        doomed = EvaluationQueue(doomed_store, dies_mid_job, lease_seconds=30, owner=first_owner)
        await doomed.recover()
        doomed.wake(room)
        await asyncio.wait_for(stuck.wait(), 10)
        # A second process on the same data folder while the first lives: nothing released.
        beside = await take_over(store.leases, tmp_path, bundled=False)
        assert beside.lock is None
        held = {process_key(first_owner): first_owner, room_key(room): first_owner}
        assert await store.leases.live(list(held)) == held
        await doomed_store.close()  # kill -9: nothing released on the way out
        await doomed.stop(grace=0)
        first.close()  # the operating system drops a dead process's file lock
    await store.leases.take("room:elsewhere", "another-live-process", 30_000)
    assert await store.leases.live([process_key(first_owner), room_key(room)])

    recorder = Recorder()
    succession = await take_over(store.leases, tmp_path, bundled=False)
    owner = succession.owner
    assert owner != first_owner
    restarted = EvaluationQueue(store, recorder.runner("restarted"), lease_seconds=30, owner=owner)
    try:
        await restarted.recover()
        assert await restarted.join(timeout=10)  # far below the 30 s lease
    finally:
        await restarted.stop()
        succession.close()
    assert recorder.runs[room] == [job(0, n).id for n in range(2)]
    interrupted = await store.jobs.get(job(0, 0).id)
    assert interrupted is not None and (interrupted.status, interrupted.attempts) == ("done", 2)
    assert await store.leases.live(["room:elsewhere"]) == {"room:elsewhere": "another-live-process"}


async def test_messages_this_process_left_in_intake_are_recovered_at_start_up(
    store: MongoStore,
) -> None:
    """The journal's replay at start-up writes a message's job in `intake` and leaves the
    rest to start-up recovery, in the same process: it is an orphan unless being answered."""
    queue = EvaluationQueue(store, Recorder().runner("q"), lease_seconds=30)
    other = EvaluationQueue(store, Recorder().runner("other"), lease_seconds=30)
    try:
        await queue.recover()
        await other.recover()  # alive: its messages are its own to answer
        mine = [memory(n) for n in range(2)]
        for message in mine:
            await queue.open_intake(message)
        await other.open_intake(memory(2))
        orphans = await queue.orphaned_intake(answering={mine[1].id})
        assert [job.message_id for job in orphans] == [mine[0].id]
    finally:
        await queue.stop()
        await other.stop()


def memory(n: int) -> Memory:
    return Memory(
        id=stable_id("message", "intake", str(n)),
        room_id=stable_id("room", "intake"),
        user_id=stable_id("user", "ann"),
        agent_id=stable_id("agent", "mnemo"),
        world_id=stable_id("world", "intake"),
        content=Content(text=f"message {n}"),
        created_at=T0 + timedelta(milliseconds=n),
    )


async def test_a_process_alone_keeps_its_room_leases_until_another_process_appears(
    store: MongoStore, mongo_uri: str
) -> None:
    """Alone, a drained room's lease is kept (an evaluation costs no lease round trip); once
    another process is live, the next renewal gives the kept leases up, so it can drain them."""
    room = job(0, 0).room_id
    recorder = Recorder()
    queue = EvaluationQueue(store, recorder.runner("alone"), lease_seconds=30)
    try:
        await queue.recover()
        await store.jobs.insert(job(0, 0))
        queue.wake(room)
        assert await queue.join(timeout=10)
        assert await store.leases.live([room_key(room)]) == {room_key(room): queue.owner}
        await store.jobs.insert(job(0, 1))
        queue.wake(room)
        assert await queue.join(timeout=10)
        assert recorder.runs[room] == [job(0, 0).id, job(0, 1).id]

        async with second_client(store, mongo_uri) as other:
            await other.leases.take(process_key("another"), "another", 30_000)
            await queue.sweep()  # the keeper's round
            assert await store.leases.live([room_key(room)]) == {}
            assert await other.leases.take(room_key(room), "another", 30_000)
    finally:
        await queue.stop()


@pytest.mark.parametrize("taking_a_message_in", [True, False])
async def test_a_crash_mid_message_is_not_charged_to_the_one_job_running_beside_it(
    store: MongoStore, taking_a_message_in: bool
) -> None:
    """The fault suite's innocent job: the process died while it answered a message, with one
    evaluation running beside it. Charged, that evaluation ends dead after a few such crashes
    (one attempt allowed here: at once); the message may as well have been the cause."""
    recorder = Recorder()
    await store.jobs.insert(job(0, 0))
    await store.jobs.claim_next(job(0, 0).room_id, owner="dead-process")
    if taking_a_message_in:
        taken_in = EvaluationJob(
            id=stable_id("job", "intake", "0"),
            room_id=memory(0).room_id,
            message_id=memory(0).id,
            did_respond=False,
            status="intake",
            message=memory(0),
        )
        await store.jobs.open_intake(taken_in, owner="dead-process")
    await restart(store, recorder.runner("after"), retry=RetryPolicy(max_attempts=1))
    after = await store.jobs.get(job(0, 0).id)
    assert after is not None
    if taking_a_message_in:
        assert (after.status, after.attempts) == ("done", 1)
        assert recorder.runs[job(0, 0).room_id] == [job(0, 0).id]
    else:  # alone in its process: the crash is its own
        assert (after.status, after.error) == ("dead", "interrupted on every attempt")
        assert recorder.runs[job(0, 0).room_id] == []


async def test_an_evaluation_stopped_by_a_shutdown_runs_first_at_the_next_start_uncharged(
    store: MongoStore,
) -> None:
    """A slow model outlives the stop's grace: the evaluation is cancelled. That is no crash:
    with one attempt allowed, a restart that charged it would leave it dead."""
    started = asyncio.Event()

    async def slow_model(job: EvaluationJob) -> list[str]:
        started.set()
        await asyncio.Event().wait()  # a model call longer than the grace
        return []

    for n in range(2):
        await store.jobs.insert(job(0, n))
    stopping = EvaluationQueue(
        store, slow_model, lease_seconds=5, retry=RetryPolicy(max_attempts=1)
    )
    await stopping.recover()
    await asyncio.wait_for(started.wait(), 10)
    await stopping.stop(grace=0.05)
    handed_back = await store.jobs.get(job(0, 0).id)
    assert handed_back is not None and (handed_back.status, handed_back.attempts) == ("retrying", 0)

    recorder = Recorder()
    await restart(store, recorder.runner("restarted"), retry=RetryPolicy(max_attempts=1))
    assert recorder.runs[job(0, 0).room_id] == [job(0, 0).id, job(0, 1).id]
    assert await store.jobs.count(status="done") == 2

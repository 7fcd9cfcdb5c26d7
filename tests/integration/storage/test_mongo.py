"""MongoStore over the wire: the bundled nx-27017 server, or MNEMO_TEST_MONGODB_URI."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.records import (
    Account,
    Content,
    EvaluationJob,
    Fact,
    Memory,
    Room,
    stable_id,
)
from bot.storage.facts import fact_text_key
from bot.storage.mongo import MongoStore, StorageUnavailable

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ROOM, OTHER_ROOM = stable_id("room", "a"), stable_id("room", "b")
WORLD, OTHER_WORLD = stable_id("world", "a"), stable_id("world", "b")
ALICE, BOB, AGENT = stable_id("alice"), stable_id("bob"), stable_id("agent")


def memory(
    n: int, *, room: str = ROOM, user: str = ALICE, world: str = WORLD, at: datetime | None = None
) -> Memory:
    return Memory(
        id=stable_id("msg", room, str(n)),
        user_id=user,
        agent_id=AGENT,
        room_id=room,
        world_id=world,
        content=Content(text=f"message {n}", source="test"),
        created_at=at or T0 + timedelta(minutes=n),
        mentions=[AGENT],
        mentions_agent=n % 2 == 0,
    )


def fact(text: str, *, subject: str = ALICE, world: str = WORLD, minute: int = 0) -> Fact:
    return Fact(
        text=text,
        subject_id=subject,
        room_id=ROOM,
        world_id=world,
        agent_id=AGENT,
        created_at=T0 + timedelta(minutes=minute),
    )


def job(n: int, *, room: str = ROOM) -> EvaluationJob:
    return EvaluationJob(
        id=stable_id("job", room, str(n)),
        room_id=room,
        message_id=stable_id("msg", room, str(n)),
        did_respond=True,
        created_at=T0 + timedelta(seconds=n),
    )


def texts(memories: list[Memory]) -> list[str]:
    return [m.content.text for m in memories]


def assert_utc(value: datetime | None) -> None:
    assert value is not None and value.utcoffset() == timedelta(0)


# memories -----------------------------------------------------------------------------------
async def test_redelivered_message_is_stored_once(store: MongoStore) -> None:
    assert await store.memories.insert(memory(1)) == 1
    assert await store.memories.insert(memory(1)) is None
    assert await store.memories.count_in_room(ROOM) == 1

    stored = await store.memories.get(memory(1).id)
    assert stored == memory(1)  # booleans, lists and nested content survive the round trip
    assert_utc(stored.created_at if stored else None)
    assert await store.memories.get("missing") is None


async def test_get_memories_keeps_the_order_asked_for(store: MongoStore) -> None:
    for n in range(3):
        await store.memories.insert(memory(n))
    ids = [memory(2).id, "missing", memory(0).id]
    assert texts(await store.memories.get_many(ids)) == ["message 2", "message 0"]
    assert await store.memories.get_many([]) == []


async def test_recent_memories_are_the_last_ones_oldest_first(store: MongoStore) -> None:
    for n in [3, 1, 4, 0, 2]:  # inserted out of order
        await store.memories.insert(memory(n))
    await store.memories.insert(memory(9, room=OTHER_ROOM))

    assert texts(await store.memories.recent(ROOM, 3)) == ["message 2", "message 3", "message 4"]
    before = T0 + timedelta(minutes=3)
    assert texts(await store.memories.recent(ROOM, 2, before=before)) == [
        "message 1",
        "message 2",
    ]
    assert await store.memories.recent(ROOM, 0) == []


async def test_equal_timestamps_keep_a_stable_order(store: MongoStore) -> None:
    for n in range(4):
        await store.memories.insert(memory(n, at=T0))
    first = await store.memories.recent(ROOM, 4)
    assert len(first) == 4
    assert [m.id for m in first] == [m.id for m in await store.memories.recent(ROOM, 4)]
    assert [m.id for m in await store.memories.recent(ROOM, 2)] == [m.id for m in first[2:]]


async def test_memories_since_windows(store: MongoStore) -> None:
    for n in range(6):
        await store.memories.insert(memory(n))
    at = [T0 + timedelta(minutes=n) for n in range(6)]

    assert texts(await store.memories.since(ROOM, at[1], until=at[3])) == [
        "message 2",
        "message 3",
    ]  # after is exclusive, until inclusive
    assert texts(await store.memories.since(ROOM, at[3])) == ["message 4", "message 5"]
    assert len(await store.memories.since(ROOM, None)) == 6
    # Over the limit, the newest `limit` of the window, still oldest first.
    assert texts(await store.memories.since(ROOM, None, until=at[4], limit=2)) == [
        "message 3",
        "message 4",
    ]
    assert await store.memories.since(ROOM, at[5]) == []


async def test_windows_are_exact_to_the_millisecond(store: MongoStore) -> None:
    # Messages in the same second: a window cut between them must neither drop nor repeat one
    # (the bundled server compares stored dates only to the second).
    at = [T0 + timedelta(milliseconds=10 * n) for n in range(4)]
    for n in range(4):
        await store.memories.insert(memory(n, at=at[n]))
    assert texts(await store.memories.since(ROOM, at[1], until=at[2])) == ["message 2"]
    assert texts(await store.memories.recent(ROOM, 10, before=at[2])) == ["message 0", "message 1"]


async def test_delete_memories_of_one_person_in_one_world(store: MongoStore) -> None:
    await store.memories.insert(memory(1))
    await store.memories.insert(memory(2, user=BOB))
    await store.memories.insert(memory(3, room=OTHER_ROOM, world=OTHER_WORLD))

    assert await store.memories.delete(user_id=ALICE, world_id=WORLD) == 1
    assert texts(await store.memories.recent(ROOM, 10)) == ["message 2"]
    assert await store.memories.count_in_room(OTHER_ROOM) == 1


# accounts and rooms -----------------------------------------------------------------------
async def test_accounts_upsert_and_lookup(store: MongoStore) -> None:
    alice = Account(id=ALICE, platform="test", platform_id="1", name="Alice")
    await store.accounts.upsert(alice)
    await store.accounts.upsert(alice.model_copy(update={"name": "Alice B", "is_bot": True}))
    await store.accounts.upsert(Account(id=BOB, platform="test", platform_id="2", name="Bob"))

    found = await store.accounts.get_many([ALICE, BOB, "missing"])
    assert set(found) == {ALICE, BOB}
    assert found[ALICE].name == "Alice B"
    assert found[ALICE].is_bot is True  # nx stores a $set True as 1; the model reads it back
    assert await store.accounts.get_many([]) == {}


async def test_rooms_and_marks(store: MongoStore) -> None:
    room = Room(id=ROOM, world_id=WORLD, platform="test", kind="group", name="general")
    await store.rooms.upsert(room)
    assert await store.rooms.get(ROOM) == room
    assert await store.rooms.get_mark(ROOM, "facts") is None

    await store.rooms.set_mark(ROOM, "facts", T0)
    await store.rooms.set_mark(ROOM, "facts", T0 + timedelta(hours=1))
    await store.rooms.set_mark(ROOM, "summary", T0)
    mark = await store.rooms.get_mark(ROOM, "facts")
    assert mark == T0 + timedelta(hours=1)
    assert_utc(mark)

    # Describing the room again keeps its marks.
    await store.rooms.upsert(room.model_copy(update={"name": "renamed"}))
    assert (await store.rooms.get(ROOM)).name == "renamed"  # type: ignore[union-attr]
    assert await store.rooms.get_mark(ROOM, "summary") == T0

    # A mark may come before the room is known: that is not a room yet.
    await store.rooms.set_mark(OTHER_ROOM, "facts", T0)
    assert await store.rooms.get(OTHER_ROOM) is None
    assert await store.rooms.get_mark(OTHER_ROOM, "facts") == T0

    with pytest.raises(ValueError):
        await store.rooms.set_mark(ROOM, "a.b", T0)


async def test_idle_rooms(store: MongoStore) -> None:
    quiet, busy, done, never = (stable_id("room", x) for x in ("quiet", "busy", "done", "never"))
    await store.memories.insert(memory(1, room=quiet))  # T0+1m
    await store.memories.insert(memory(2, room=quiet))  # T0+2m
    await store.memories.insert(memory(1, room=busy))
    await store.memories.insert(memory(50, room=busy))  # still talking at T0+50m
    await store.memories.insert(memory(3, room=done))
    await store.memories.insert(memory(0, room=never))  # T0, oldest
    await store.rooms.set_mark(quiet, "facts", T0 + timedelta(minutes=1))  # before its last
    await store.rooms.set_mark(done, "facts", T0 + timedelta(minutes=3))  # at its last: done
    await store.rooms.upsert(Room(id=never, world_id=WORLD, platform="test", kind="dm"))

    idle_since = T0 + timedelta(minutes=30)
    assert await store.rooms.idle(mark="facts", idle_since=idle_since) == [never, quiet]
    # Another mark is tracked independently.
    assert await store.rooms.idle(mark="summary", idle_since=idle_since) == [never, quiet, done]

    await store.rooms.set_mark(quiet, "facts", T0 + timedelta(minutes=2))
    assert await store.rooms.idle(mark="facts", idle_since=idle_since) == [never]
    assert await store.rooms.idle(mark="facts", idle_since=T0) == []


# facts --------------------------------------------------------------------------------------
async def test_fact_round_trip_and_indexing(store: MongoStore) -> None:
    first, second = fact("Alice likes tea", minute=1), fact("Alice has a cat", minute=2)
    await store.facts.insert(first)
    await store.facts.insert(second)
    assert [f.id for f in await store.facts.unindexed()] == [first.id, second.id]

    when = T0 + timedelta(days=1)
    await store.facts.mark_indexed(first.id, when)
    assert [f.id for f in await store.facts.unindexed()] == [second.id]
    [stored] = await store.facts.get_many([first.id])
    assert stored.indexed_at == when
    assert_utc(stored.indexed_at)  # even though nx stores a $set datetime as a string
    assert_utc(stored.created_at)
    assert stored.model_dump(exclude={"indexed_at"}) == first.model_dump(exclude={"indexed_at"})
    assert [f.id for f in await store.facts.get_many([second.id, "missing", first.id])] == [
        second.id,
        first.id,
    ]


async def test_exact_duplicate_found_despite_case_and_spacing(store: MongoStore) -> None:
    original = fact("Alice  lives in Paris.")
    await store.facts.insert(original)

    found = await store.facts.find_by_text(
        subject_id=ALICE, world_id=WORLD, text="  alice lives IN\tparis!"
    )
    assert found is not None and found.id == original.id
    assert found.text == "Alice  lives in Paris."  # the stored text is untouched
    assert (
        await store.facts.find_by_text(subject_id=ALICE, world_id=WORLD, text="Alice lives in Rome")
        is None
    )
    # Scope: another subject or another world never matches.
    text = original.text
    assert await store.facts.find_by_text(subject_id=BOB, world_id=WORLD, text=text) is None
    assert (
        await store.facts.find_by_text(subject_id=ALICE, world_id=OTHER_WORLD, text=original.text)
        is None
    )


def test_fact_text_key() -> None:
    assert fact_text_key(" Likes  TEA...\n") == "likes tea"
    assert fact_text_key("Straße!") == fact_text_key("STRASSE")
    assert fact_text_key("5 p.m.") == "5 p.m"
    assert fact_text_key("?!") == ""


async def test_facts_about_subjects_newest_first(store: MongoStore) -> None:
    await store.facts.insert(fact("old", minute=1))
    await store.facts.insert(fact("bob's", subject=BOB, minute=2))
    await store.facts.insert(fact("new", minute=3))
    await store.facts.insert(fact("elsewhere", world=OTHER_WORLD, minute=4))

    assert [f.text for f in await store.facts.about([ALICE], WORLD)] == ["new", "old"]
    assert [f.text for f in await store.facts.about([ALICE, BOB], WORLD, limit=2)] == [
        "new",
        "bob's",
    ]
    assert await store.facts.about([], WORLD) == []


async def test_list_facts_pages_search_and_subject(store: MongoStore) -> None:
    for minute in range(5):
        await store.facts.insert(fact(f"Alice fact {minute}", minute=minute))
    await store.facts.insert(fact("Bob plays (bass) guitar", subject=BOB, minute=10))
    await store.facts.insert(fact("Alice elsewhere", world=OTHER_WORLD))

    page, total = await store.facts.page(WORLD, limit=2)
    assert total == 6
    assert [f.text for f in page] == ["Bob plays (bass) guitar", "Alice fact 4"]
    page, total = await store.facts.page(WORLD, skip=4, limit=2)
    assert [f.text for f in page] == ["Alice fact 1", "Alice fact 0"]
    page, total = await store.facts.page(WORLD, skip=10)
    assert (page, total) == ([], 6)

    page, total = await store.facts.page(WORLD, subject_id=ALICE, limit=10)
    assert total == 5 and all(f.subject_id == ALICE for f in page)

    # Case-insensitive substring; regex characters are literal.
    page, total = await store.facts.page(WORLD, search="(BASS)")
    assert total == 1 and page[0].subject_id == BOB
    assert (await store.facts.page(WORLD, search="b.ss"))[1] == 0
    assert (await store.facts.page(WORLD, subject_id=ALICE, search="FACT 3"))[1] == 1


async def test_delete_facts(store: MongoStore) -> None:
    a1, a2 = fact("a1"), fact("a2")
    keep_bob, keep_world = fact("b", subject=BOB), fact("a", world=OTHER_WORLD)
    for f in (a1, a2, keep_bob, keep_world):
        await store.facts.insert(f)

    assert await store.facts.delete(keep_world.id, world_id=WORLD) is False  # wrong world
    assert await store.facts.delete(a1.id, world_id=WORLD) is True
    assert await store.facts.delete(a1.id, world_id=WORLD) is False

    await store.facts.insert(a3 := fact("a3"))
    assert sorted(await store.facts.delete_about(subject_id=ALICE, world_id=WORLD)) == sorted(
        [a2.id, a3.id]
    )
    assert await store.facts.delete_about(subject_id=ALICE, world_id=WORLD) == []
    remaining = await store.facts.get_many([keep_bob.id, keep_world.id])
    assert len(remaining) == 2


# evaluation jobs --------------------------------------------------------------------------
async def test_jobs_are_claimed_in_order_one_at_a_time(store: MongoStore) -> None:
    jobs = store.jobs
    for n in [2, 0, 1]:
        assert await jobs.insert(job(n)) is True
    assert await jobs.insert(job(0)) is False  # the same message enqueued twice
    await jobs.insert(job(5, room=OTHER_ROOM))
    assert await jobs.rooms_with_runnable() == sorted([ROOM, OTHER_ROOM])

    claimed = await jobs.claim_next(ROOM)
    assert isinstance(claimed, EvaluationJob) and claimed.id == job(0).id
    assert claimed.status == "running" and claimed.attempts == 1
    assert_utc(claimed.claimed_at)
    assert await jobs.count(room_id=ROOM, status="pending") == 2
    assert await jobs.count(status="running") == 1

    await jobs.finish(claimed.id, ran=["facts", "goals"])
    assert await jobs.count(room_id=ROOM, status="done") == 1
    following = [await jobs.claim_next(ROOM) for _ in range(2)]
    assert [j.id for j in following if isinstance(j, EvaluationJob)] == [job(1).id, job(2).id]
    assert await jobs.claim_next(ROOM) is None
    assert await jobs.rooms_with_runnable() == [OTHER_ROOM]
    await jobs.fail(job(1).id, error="boom", retry_at_ms=None)
    assert await jobs.count(room_id=ROOM, status="done") == 1
    assert await jobs.count(room_id=ROOM, status="dead") == 1
    assert await jobs.count() == 4
    finished = await jobs.get(job(0).id)
    assert finished is not None and finished.ran == ["facts", "goals"]
    assert finished.status == "done" and finished.attempts == 1
    assert_utc(finished.finished_at)
    failed = await jobs.get(job(1).id)
    assert failed is not None and (failed.status, failed.error) == ("dead", "boom")
    assert await jobs.get("missing") is None


async def test_concurrent_claimers_never_share_a_job(store: MongoStore, mongo_uri: str) -> None:
    for n in range(12):
        await store.jobs.insert(job(n))
    # Two workers on separate clients, as two processes would be.
    other = MongoStore.from_uri(mongo_uri, store.db.name)
    try:

        async def drain(worker: MongoStore) -> list[str]:
            claimed = []
            while isinstance(next_job := await worker.jobs.claim_next(ROOM), EvaluationJob):
                claimed.append(next_job.id)
            return claimed

        first, second = await asyncio.gather(drain(store), drain(other))
    finally:
        await other.close()
    assert sorted(first + second) == sorted(job(n).id for n in range(12))
    assert not set(first) & set(second)
    assert await store.jobs.count(status="running") == 12


async def test_jobs_left_running_by_a_crash_run_again_until_out_of_attempts(
    store: MongoStore,
) -> None:
    for n in range(3):
        await store.jobs.insert(job(n))
    await store.jobs.claim_next(ROOM, owner="dead")
    await store.jobs.claim_next(ROOM, owner="dead")
    await store.jobs.finish(job(0).id, ran=[])

    [interrupted] = await store.jobs.running()
    assert (interrupted.id, interrupted.owner, interrupted.attempts) == (job(1).id, "dead", 1)
    # Charged (it ran alone when its process died): the attempt stays counted.
    assert await store.jobs.recover_interrupted(
        [interrupted], charged={job(1).id}, max_attempts=3
    ) == (1, 0)
    again = await store.jobs.claim_next(ROOM, owner="dead")
    assert isinstance(again, EvaluationJob) and again.id == job(1).id and again.attempts == 2

    # A job that was interrupted on every attempt is not run again.
    [interrupted] = await store.jobs.running()
    assert await store.jobs.recover_interrupted(
        [interrupted], charged={job(1).id}, max_attempts=2
    ) == (0, 1)
    assert (await store.jobs.get(job(1).id)).status == "dead"  # type: ignore[union-attr]
    assert await store.jobs.count(status="pending") == 1


async def test_a_crash_is_not_charged_to_jobs_that_were_running_together(
    store: MongoStore,
) -> None:
    for n in range(2):
        await store.jobs.insert(job(n))
        await store.jobs.insert(job(n, room=OTHER_ROOM))
    await store.jobs.claim_next(ROOM, owner="dead")
    await store.jobs.claim_next(OTHER_ROOM, owner="dead")
    interrupted = await store.jobs.running()
    assert len(interrupted) == 2
    assert await store.jobs.recover_interrupted(interrupted, charged=set(), max_attempts=1) == (
        2,
        0,
    )
    for room in (ROOM, OTHER_ROOM):
        head = await store.jobs.head(room)
        # Back first in its room, its attempt given back, and marked to run alone.
        assert head is not None and not isinstance(head, int) and head.suspect
        claimed = await store.jobs.claim(head, owner="me")
        assert claimed is not None and claimed.attempts == 1


async def test_a_job_at_every_crash_of_a_busy_process_is_dead_after_twice_its_attempts(
    store: MongoStore,
) -> None:
    """Never charged (its process was always doing something else too), a job that kills its
    process would run again forever: every crash is counted, and twice the attempts end it."""
    await store.jobs.insert(job(0))
    outcomes = []
    for _ in range(4):
        await store.jobs.claim_next(ROOM, owner="dead")
        interrupted = await store.jobs.running()
        outcomes.append(
            await store.jobs.recover_interrupted(interrupted, charged=set(), max_attempts=2)
        )
    assert outcomes == [(1, 0), (1, 0), (1, 0), (0, 1)]
    dead = await store.jobs.get(job(0).id)
    assert dead is not None and dead.status == "dead"
    assert dead.error == "running at 4 crashes of its process"


async def test_a_room_whose_oldest_job_is_running_waits_for_it(store: MongoStore) -> None:
    for n in range(2):
        await store.jobs.insert(job(n))
    await store.jobs.claim_next(ROOM, owner="elsewhere")
    head = await store.jobs.head(ROOM)
    assert head is not None and not isinstance(head, int)
    assert (head.id, head.status, head.owner) == (job(0).id, "running", "elsewhere")
    assert not await store.jobs.has_due(OTHER_ROOM)
    assert await store.jobs.has_due(ROOM)  # job 1 is due, behind job 0


# leases -------------------------------------------------------------------------------------
async def test_a_lease_has_one_holder_until_it_expires(store: MongoStore, mongo_uri: str) -> None:
    leases = store.leases
    assert await leases.take("room:a", "p1", 60_000)
    assert not await leases.take("room:a", "p2", 60_000)  # held by a live process
    assert await leases.take("room:a", "p1", 60_000)  # renewing is taking again
    assert await leases.renew(["room:a"], "p1", 60_000) == set()
    assert await leases.live(["room:a", "room:b"]) == {"room:a": "p1"}
    await leases.release("room:a", "p2")  # not the holder: nothing happens
    assert await leases.live(["room:a"]) == {"room:a": "p1"}
    await leases.release("room:a", "p1")
    assert await leases.live(["room:a"]) == {}

    # Expired: anyone may take it over, and the old holder finds out at its next renewal.
    assert await leases.take("room:b", "p1", 1)
    await asyncio.sleep(0.01)
    assert await leases.live(["room:b"]) == {}
    assert await leases.take("room:b", "p2", 60_000)
    assert await leases.renew(["room:b"], "p1", 60_000) == {"room:b"}
    assert not await leases.take("room:b", "p1", 60_000)

    # Taking one lease never touches another, even an expired one (nx-27017 once did).
    assert await leases.take("room:old", "p3", 1)
    await asyncio.sleep(0.01)
    assert await leases.take("room:new", "p4", 60_000)
    assert await store.db.leases.find_one({"_id": "room:old"}) is not None
    assert (await store.db.leases.find_one({"_id": "room:old"}))["owner"] == "p3"
    assert await leases.drop_expired() == 1
    assert await leases.live(["room:old", "room:new"]) == {"room:new": "p4"}

    # Many takers at once, on separate clients as separate processes would be: one wins.
    others = [MongoStore.from_uri(mongo_uri, store.db.name) for _ in range(4)]
    try:
        taken = await asyncio.gather(
            *(other.leases.take("room:c", f"q{n}", 60_000) for n, other in enumerate(others))
        )
    finally:
        for other in others:
            await other.close()
    assert taken.count(True) == 1


# indexes and availability -------------------------------------------------------------------
async def test_ensure_indexes_is_idempotent(store: MongoStore) -> None:
    await store.ensure_indexes()  # the fixture already ran it once
    await store.ensure_indexes()
    keys = {
        tuple(field for field, _ in spec["key"])
        for spec in (await store.db.facts.index_information()).values()
    }
    assert ("subject_id", "world_id", "created_at") in keys
    assert ("indexed_at",) in keys


async def test_ping_answers(store: MongoStore) -> None:
    await store.ping()


async def test_dead_database_is_a_clear_error_without_the_password(
    unused_tcp_port: int,
) -> None:
    uri = f"mongodb://mnemo:s3cr%40t-pw@127.0.0.1:{unused_tcp_port}/?directConnection=true"
    dead = MongoStore.from_uri(uri, "mnemo", server_selection_timeout_ms=300)
    try:
        with pytest.raises(StorageUnavailable) as caught:
            await dead.ping()
    finally:
        await dead.close()
    message = str(caught.value)
    assert f"127.0.0.1:{unused_tcp_port}" in message
    assert "s3cr" not in message and "t-pw" not in message


async def test_fact_id_prefix_lookup_stays_in_its_world(store: MongoStore) -> None:
    mine = fact("Alice likes tea")
    theirs = fact("Alice likes coffee", world=OTHER_WORLD)
    await store.facts.insert(mine)
    await store.facts.insert(theirs)
    assert [f.id for f in await store.facts.with_id_prefix(WORLD, mine.id[:8])] == [mine.id]
    assert await store.facts.with_id_prefix(WORLD, theirs.id[:8]) == []
    assert await store.facts.with_id_prefix(WORLD, ".*") == []  # never a regex from a user
    assert await store.memories.count_in_world(WORLD) == 0


async def test_accounts_are_found_by_username_ignoring_case(store: MongoStore) -> None:
    sam = Account(
        id=stable_id("sam"), platform="telegram", platform_id="7", name="Sam", username="SamK"
    )
    await store.accounts.upsert(sam)
    assert await store.accounts.find_by_username("telegram", "samk") == sam
    assert await store.accounts.find_by_username("discord", "samk") is None
    assert await store.accounts.find_by_username("telegram", "sam.") is None


async def test_each_message_gets_its_position_and_the_count_stays_right(
    store: MongoStore,
) -> None:
    await store.rooms.upsert(Room(id=ROOM, world_id=WORLD, platform="test", kind="group"))
    positions = [
        await store.memories.insert(memory(n, user=ALICE if n % 2 else BOB)) for n in range(5)
    ]
    assert positions == [1, 2, 3, 4, 5]
    assert await store.memories.insert(memory(3)) is None  # a redelivery is not counted
    assert await store.memories.count_in_room(ROOM) == 5
    # Forgetting a person's messages recounts the room.
    assert await store.memories.delete(user_id=ALICE, world_id=WORLD) == 2
    assert await store.memories.count_in_room(ROOM) == 3
    assert await store.memories.insert(memory(9)) == 4
    # A room with no document is still counted, from the messages themselves.
    assert await store.memories.insert(memory(1, room=OTHER_ROOM)) == 1
    assert await store.memories.count_in_room(OTHER_ROOM) == 1


async def test_options_in_the_uri_win_over_the_built_in_defaults() -> None:
    # A person who writes serverSelectionTimeoutMS in MONGODB_URI means it.
    uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300&appName=mine"
    store = MongoStore.from_uri(uri, "mnemo")
    try:
        assert store.client.options.server_selection_timeout == 0.3
        assert store.client.options.pool_options.metadata["application"]["name"] == "mine"
    finally:
        await store.close()
    plain = MongoStore.from_uri("mongodb://127.0.0.1:1/", "mnemo")
    try:
        assert plain.client.options.server_selection_timeout == 5.0
    finally:
        await plain.close()


async def test_facts_learned_at_once_page_in_one_order_with_no_overlap(store: MongoStore) -> None:
    # One reading stores several facts with the same time: /facts must list them the same
    # way every time, and its pages must neither repeat nor skip one.
    for n in range(5):
        await store.facts.insert(fact(f"Alice fact {n}", minute=1))
    pages = [[f.id for f in (await store.facts.page(WORLD, skip=s, limit=2))[0]] for s in (0, 2, 4)]
    again = [[f.id for f in (await store.facts.page(WORLD, skip=s, limit=2))[0]] for s in (0, 2, 4)]
    listed = [i for page in pages for i in page]
    assert pages == again
    assert len(listed) == len(set(listed)) == 5

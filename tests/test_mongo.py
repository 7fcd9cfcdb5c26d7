"""MongoStore over the wire: the bundled nx-27017 server, or MNEMO_TEST_MONGODB_URI."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.models import (
    Account,
    Content,
    EvaluationJob,
    Fact,
    Goal,
    Memory,
    Objective,
    Room,
    stable_id,
)
from bot.storage.mongo import MongoStore, StorageUnavailable, fact_text_key

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
    assert await store.insert_memory(memory(1)) == 1
    assert await store.insert_memory(memory(1)) is None
    assert await store.count_memories(ROOM) == 1

    stored = await store.get_memory(memory(1).id)
    assert stored == memory(1)  # booleans, lists and nested content survive the round trip
    assert_utc(stored.created_at if stored else None)
    assert await store.get_memory("missing") is None


async def test_get_memories_keeps_the_order_asked_for(store: MongoStore) -> None:
    for n in range(3):
        await store.insert_memory(memory(n))
    ids = [memory(2).id, "missing", memory(0).id]
    assert texts(await store.get_memories(ids)) == ["message 2", "message 0"]
    assert await store.get_memories([]) == []


async def test_recent_memories_are_the_last_ones_oldest_first(store: MongoStore) -> None:
    for n in [3, 1, 4, 0, 2]:  # inserted out of order
        await store.insert_memory(memory(n))
    await store.insert_memory(memory(9, room=OTHER_ROOM))

    assert texts(await store.recent_memories(ROOM, 3)) == ["message 2", "message 3", "message 4"]
    before = T0 + timedelta(minutes=3)
    assert texts(await store.recent_memories(ROOM, 2, before=before)) == [
        "message 1",
        "message 2",
    ]
    assert await store.recent_memories(ROOM, 0) == []


async def test_equal_timestamps_keep_a_stable_order(store: MongoStore) -> None:
    for n in range(4):
        await store.insert_memory(memory(n, at=T0))
    first = await store.recent_memories(ROOM, 4)
    assert len(first) == 4
    assert [m.id for m in first] == [m.id for m in await store.recent_memories(ROOM, 4)]
    assert [m.id for m in await store.recent_memories(ROOM, 2)] == [m.id for m in first[2:]]


async def test_memories_since_windows(store: MongoStore) -> None:
    for n in range(6):
        await store.insert_memory(memory(n))
    at = [T0 + timedelta(minutes=n) for n in range(6)]

    assert texts(await store.memories_since(ROOM, at[1], until=at[3])) == [
        "message 2",
        "message 3",
    ]  # after is exclusive, until inclusive
    assert texts(await store.memories_since(ROOM, at[3])) == ["message 4", "message 5"]
    assert len(await store.memories_since(ROOM, None)) == 6
    # Over the limit, the newest `limit` of the window, still oldest first.
    assert texts(await store.memories_since(ROOM, None, until=at[4], limit=2)) == [
        "message 3",
        "message 4",
    ]
    assert await store.memories_since(ROOM, at[5]) == []


async def test_windows_are_exact_to_the_millisecond(store: MongoStore) -> None:
    # Messages in the same second: a window cut between them must neither drop nor repeat one
    # (the bundled server compares stored dates only to the second).
    at = [T0 + timedelta(milliseconds=10 * n) for n in range(4)]
    for n in range(4):
        await store.insert_memory(memory(n, at=at[n]))
    assert texts(await store.memories_since(ROOM, at[1], until=at[2])) == ["message 2"]
    assert texts(await store.recent_memories(ROOM, 10, before=at[2])) == ["message 0", "message 1"]


async def test_delete_memories_of_one_person_in_one_world(store: MongoStore) -> None:
    await store.insert_memory(memory(1))
    await store.insert_memory(memory(2, user=BOB))
    await store.insert_memory(memory(3, room=OTHER_ROOM, world=OTHER_WORLD))

    assert await store.delete_memories(user_id=ALICE, world_id=WORLD) == 1
    assert texts(await store.recent_memories(ROOM, 10)) == ["message 2"]
    assert await store.count_memories(OTHER_ROOM) == 1


# accounts and rooms -----------------------------------------------------------------------
async def test_accounts_upsert_and_lookup(store: MongoStore) -> None:
    alice = Account(id=ALICE, platform="test", platform_id="1", name="Alice")
    await store.upsert_account(alice)
    await store.upsert_account(alice.model_copy(update={"name": "Alice B", "is_bot": True}))
    await store.upsert_account(Account(id=BOB, platform="test", platform_id="2", name="Bob"))

    found = await store.get_accounts([ALICE, BOB, "missing"])
    assert set(found) == {ALICE, BOB}
    assert found[ALICE].name == "Alice B"
    assert found[ALICE].is_bot is True  # nx stores a $set True as 1; the model reads it back
    assert await store.get_accounts([]) == {}


async def test_rooms_and_marks(store: MongoStore) -> None:
    room = Room(id=ROOM, world_id=WORLD, platform="test", kind="group", name="general")
    await store.upsert_room(room)
    assert await store.get_room(ROOM) == room
    assert await store.get_room_mark(ROOM, "facts") is None

    await store.set_room_mark(ROOM, "facts", T0)
    await store.set_room_mark(ROOM, "facts", T0 + timedelta(hours=1))
    await store.set_room_mark(ROOM, "summary", T0)
    mark = await store.get_room_mark(ROOM, "facts")
    assert mark == T0 + timedelta(hours=1)
    assert_utc(mark)

    # Describing the room again keeps its marks.
    await store.upsert_room(room.model_copy(update={"name": "renamed"}))
    assert (await store.get_room(ROOM)).name == "renamed"  # type: ignore[union-attr]
    assert await store.get_room_mark(ROOM, "summary") == T0

    # A mark may come before the room is known: that is not a room yet.
    await store.set_room_mark(OTHER_ROOM, "facts", T0)
    assert await store.get_room(OTHER_ROOM) is None
    assert await store.get_room_mark(OTHER_ROOM, "facts") == T0

    with pytest.raises(ValueError):
        await store.set_room_mark(ROOM, "a.b", T0)


async def test_idle_rooms(store: MongoStore) -> None:
    quiet, busy, done, never = (stable_id("room", x) for x in ("quiet", "busy", "done", "never"))
    await store.insert_memory(memory(1, room=quiet))  # T0+1m
    await store.insert_memory(memory(2, room=quiet))  # T0+2m
    await store.insert_memory(memory(1, room=busy))
    await store.insert_memory(memory(50, room=busy))  # still talking at T0+50m
    await store.insert_memory(memory(3, room=done))
    await store.insert_memory(memory(0, room=never))  # T0, oldest
    await store.set_room_mark(quiet, "facts", T0 + timedelta(minutes=1))  # before its last
    await store.set_room_mark(done, "facts", T0 + timedelta(minutes=3))  # at its last: done
    await store.upsert_room(Room(id=never, world_id=WORLD, platform="test", kind="dm"))

    idle_since = T0 + timedelta(minutes=30)
    assert await store.idle_rooms(mark="facts", idle_since=idle_since) == [never, quiet]
    # Another mark is tracked independently.
    assert await store.idle_rooms(mark="summary", idle_since=idle_since) == [never, quiet, done]

    await store.set_room_mark(quiet, "facts", T0 + timedelta(minutes=2))
    assert await store.idle_rooms(mark="facts", idle_since=idle_since) == [never]
    assert await store.idle_rooms(mark="facts", idle_since=T0) == []


# facts --------------------------------------------------------------------------------------
async def test_fact_round_trip_and_indexing(store: MongoStore) -> None:
    first, second = fact("Alice likes tea", minute=1), fact("Alice has a cat", minute=2)
    await store.insert_fact(first)
    await store.insert_fact(second)
    assert [f.id for f in await store.unindexed_facts()] == [first.id, second.id]

    when = T0 + timedelta(days=1)
    await store.mark_fact_indexed(first.id, when)
    assert [f.id for f in await store.unindexed_facts()] == [second.id]
    [stored] = await store.get_facts([first.id])
    assert stored.indexed_at == when
    assert_utc(stored.indexed_at)  # even though nx stores a $set datetime as a string
    assert_utc(stored.created_at)
    assert stored.model_dump(exclude={"indexed_at"}) == first.model_dump(exclude={"indexed_at"})
    assert [f.id for f in await store.get_facts([second.id, "missing", first.id])] == [
        second.id,
        first.id,
    ]


async def test_exact_duplicate_found_despite_case_and_spacing(store: MongoStore) -> None:
    original = fact("Alice  lives in Paris.")
    await store.insert_fact(original)

    found = await store.find_fact_by_text(
        subject_id=ALICE, world_id=WORLD, text="  alice lives IN\tparis!"
    )
    assert found is not None and found.id == original.id
    assert found.text == "Alice  lives in Paris."  # the stored text is untouched
    assert (
        await store.find_fact_by_text(subject_id=ALICE, world_id=WORLD, text="Alice lives in Rome")
        is None
    )
    # Scope: another subject or another world never matches.
    assert await store.find_fact_by_text(subject_id=BOB, world_id=WORLD, text=original.text) is None
    assert (
        await store.find_fact_by_text(subject_id=ALICE, world_id=OTHER_WORLD, text=original.text)
        is None
    )


def test_fact_text_key() -> None:
    assert fact_text_key(" Likes  TEA...\n") == "likes tea"
    assert fact_text_key("Straße!") == fact_text_key("STRASSE")
    assert fact_text_key("5 p.m.") == "5 p.m"
    assert fact_text_key("?!") == ""


async def test_facts_about_subjects_newest_first(store: MongoStore) -> None:
    await store.insert_fact(fact("old", minute=1))
    await store.insert_fact(fact("bob's", subject=BOB, minute=2))
    await store.insert_fact(fact("new", minute=3))
    await store.insert_fact(fact("elsewhere", world=OTHER_WORLD, minute=4))

    assert [f.text for f in await store.facts_about([ALICE], WORLD)] == ["new", "old"]
    assert [f.text for f in await store.facts_about([ALICE, BOB], WORLD, limit=2)] == [
        "new",
        "bob's",
    ]
    assert await store.facts_about([], WORLD) == []


async def test_list_facts_pages_search_and_subject(store: MongoStore) -> None:
    for minute in range(5):
        await store.insert_fact(fact(f"Alice fact {minute}", minute=minute))
    await store.insert_fact(fact("Bob plays (bass) guitar", subject=BOB, minute=10))
    await store.insert_fact(fact("Alice elsewhere", world=OTHER_WORLD))

    page, total = await store.list_facts(WORLD, limit=2)
    assert total == 6
    assert [f.text for f in page] == ["Bob plays (bass) guitar", "Alice fact 4"]
    page, total = await store.list_facts(WORLD, skip=4, limit=2)
    assert [f.text for f in page] == ["Alice fact 1", "Alice fact 0"]
    page, total = await store.list_facts(WORLD, skip=10)
    assert (page, total) == ([], 6)

    page, total = await store.list_facts(WORLD, subject_id=ALICE, limit=10)
    assert total == 5 and all(f.subject_id == ALICE for f in page)

    # Case-insensitive substring; regex characters are literal.
    page, total = await store.list_facts(WORLD, search="(BASS)")
    assert total == 1 and page[0].subject_id == BOB
    assert (await store.list_facts(WORLD, search="b.ss"))[1] == 0
    assert (await store.list_facts(WORLD, subject_id=ALICE, search="FACT 3"))[1] == 1


async def test_delete_facts(store: MongoStore) -> None:
    a1, a2 = fact("a1"), fact("a2")
    keep_bob, keep_world = fact("b", subject=BOB), fact("a", world=OTHER_WORLD)
    for f in (a1, a2, keep_bob, keep_world):
        await store.insert_fact(f)

    assert await store.delete_fact(keep_world.id, world_id=WORLD) is False  # wrong world
    assert await store.delete_fact(a1.id, world_id=WORLD) is True
    assert await store.delete_fact(a1.id, world_id=WORLD) is False

    await store.insert_fact(a3 := fact("a3"))
    assert sorted(await store.delete_facts(subject_id=ALICE, world_id=WORLD)) == sorted(
        [a2.id, a3.id]
    )
    assert await store.delete_facts(subject_id=ALICE, world_id=WORLD) == []
    remaining = await store.get_facts([keep_bob.id, keep_world.id])
    assert len(remaining) == 2


# goals --------------------------------------------------------------------------------------
async def test_goals_by_room_and_status(store: MongoStore) -> None:
    def goal(name: str, minute: int, **extra: object) -> Goal:
        return Goal(
            name=name,
            room_id=ROOM,
            world_id=WORLD,
            created_at=T0 + timedelta(minutes=minute),
            objectives=[Objective(description="step 1"), Objective(description="step 2")],
            **extra,  # type: ignore[arg-type]
        )

    learn, done = goal("learn french", 1), goal("ship it", 2, status="DONE")
    other = goal("elsewhere", 3).model_copy(update={"room_id": OTHER_ROOM})
    for g in (learn, done, other):
        await store.insert_goal(g)

    assert [g.name for g in await store.goals_in_room(ROOM)] == ["learn french"]
    assert [g.name for g in await store.goals_in_room(ROOM, only_in_progress=False)] == [
        "ship it",
        "learn french",
    ]
    assert [g.name for g in await store.goals_in_world(WORLD)] == [
        "elsewhere",
        "ship it",
        "learn french",
    ]
    assert [g.name for g in await store.goals_in_world(WORLD, limit=1)] == ["elsewhere"]

    learn.objectives[0].completed = True
    learn.status = "DONE"
    learn.updated_at = T0 + timedelta(days=1)
    await store.replace_goal(learn)
    stored = await store.get_goal(learn.id)
    assert stored == learn
    assert stored.objectives[0].completed is True  # type: ignore[union-attr]
    assert await store.goals_in_room(ROOM) == []
    assert await store.get_goal("missing") is None


# evaluation jobs --------------------------------------------------------------------------
async def test_jobs_are_claimed_in_order_one_at_a_time(store: MongoStore) -> None:
    for n in [2, 0, 1]:
        assert await store.enqueue_job(job(n)) is True
    assert await store.enqueue_job(job(0)) is False  # the same message enqueued twice
    await store.enqueue_job(job(5, room=OTHER_ROOM))
    assert await store.rooms_with_pending_jobs() == sorted([ROOM, OTHER_ROOM])

    claimed = await store.claim_next_job(ROOM)
    assert claimed is not None and claimed.id == job(0).id
    assert claimed.status == "running" and claimed.attempts == 1
    assert_utc(claimed.claimed_at)
    assert await store.count_jobs(room_id=ROOM, status="pending") == 2
    assert await store.count_jobs(status="running") == 1

    await store.finish_job(claimed.id, status="done", ran=["facts", "goals"])
    assert await store.count_jobs(room_id=ROOM, status="done") == 1
    assert [(await store.claim_next_job(ROOM)).id for _ in range(2)] == [  # type: ignore[union-attr]
        job(1).id,
        job(2).id,
    ]
    assert await store.claim_next_job(ROOM) is None
    assert await store.rooms_with_pending_jobs() == [OTHER_ROOM]
    await store.finish_job(job(1).id, status="failed", error="boom")
    assert await store.count_jobs(room_id=ROOM, status="done") == 1
    assert await store.count_jobs(room_id=ROOM, status="failed") == 1
    assert await store.count_jobs() == 4
    finished = await store.get_job(job(0).id)
    assert finished is not None and finished.ran == ["facts", "goals"]
    assert finished.status == "done" and finished.attempts == 1
    assert_utc(finished.finished_at)
    failed = await store.get_job(job(1).id)
    assert failed is not None and (failed.status, failed.error) == ("failed", "boom")
    assert await store.get_job("missing") is None
    with pytest.raises(ValueError):
        await store.finish_job(job(2).id, status="finished")


async def test_concurrent_claimers_never_share_a_job(store: MongoStore, mongo_uri: str) -> None:
    for n in range(12):
        await store.enqueue_job(job(n))
    # Two workers on separate clients, as two processes would be.
    other = MongoStore.from_uri(mongo_uri, store.db.name)
    try:

        async def drain(worker: MongoStore) -> list[str]:
            claimed = []
            while (next_job := await worker.claim_next_job(ROOM)) is not None:
                claimed.append(next_job.id)
            return claimed

        first, second = await asyncio.gather(drain(store), drain(other))
    finally:
        await other.close()
    assert sorted(first + second) == sorted(job(n).id for n in range(12))
    assert not set(first) & set(second)
    assert await store.count_jobs(status="running") == 12


async def test_requeue_stale_jobs(store: MongoStore) -> None:
    for n in range(3):
        await store.enqueue_job(job(n))
    await store.claim_next_job(ROOM)
    await store.claim_next_job(ROOM)
    await store.finish_job(job(0).id, status="done")

    assert await store.requeue_stale_jobs() == 1
    again = await store.claim_next_job(ROOM)
    assert again is not None and again.id == job(1).id and again.attempts == 2

    # Only jobs claimed before the cut-off: a live worker's job stays its own.
    assert await store.requeue_stale_jobs(claimed_before=T0) == 0
    future = datetime.now(UTC) + timedelta(minutes=1)
    assert await store.requeue_stale_jobs(claimed_before=future) == 1
    assert await store.count_jobs(status="pending") == 2


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
    await store.insert_fact(mine)
    await store.insert_fact(theirs)
    assert [f.id for f in await store.facts_with_id_prefix(WORLD, mine.id[:8])] == [mine.id]
    assert await store.facts_with_id_prefix(WORLD, theirs.id[:8]) == []
    assert await store.facts_with_id_prefix(WORLD, ".*") == []  # never a regex from a user
    assert await store.count_memories_in_world(WORLD) == 0


async def test_accounts_are_found_by_username_ignoring_case(store: MongoStore) -> None:
    sam = Account(
        id=stable_id("sam"), platform="telegram", platform_id="7", name="Sam", username="SamK"
    )
    await store.upsert_account(sam)
    assert await store.find_account_by_username("telegram", "samk") == sam
    assert await store.find_account_by_username("discord", "samk") is None
    assert await store.find_account_by_username("telegram", "sam.") is None


async def test_each_message_gets_its_position_and_the_count_stays_right(
    store: MongoStore,
) -> None:
    await store.upsert_room(Room(id=ROOM, world_id=WORLD, platform="test", kind="group"))
    positions = [
        await store.insert_memory(memory(n, user=ALICE if n % 2 else BOB)) for n in range(5)
    ]
    assert positions == [1, 2, 3, 4, 5]
    assert await store.insert_memory(memory(3)) is None  # a redelivery is not counted
    assert await store.count_memories(ROOM) == 5
    # Forgetting a person's messages recounts the room.
    assert await store.delete_memories(user_id=ALICE, world_id=WORLD) == 2
    assert await store.count_memories(ROOM) == 3
    assert await store.insert_memory(memory(9)) == 4
    # A room with no document is still counted, from the messages themselves.
    assert await store.insert_memory(memory(1, room=OTHER_ROOM)) == 1
    assert await store.count_memories(OTHER_ROOM) == 1

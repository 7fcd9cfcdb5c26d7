"""MongoDB round trips per message, counted with PyMongo's command monitoring on the app's
own client (`open_app(..., mongo_listeners=[...])`).

Counting commands is deterministic (one command is one round trip, whatever the server's
speed), so these are behaviour tests: the cost run reports what the client sent, path by
path, and the counts stay within issue 14's goals.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from benchmarks.cost import (
    SERVER_USAGE,
    FakeModelAnswers,
    cost_goals,
    load_script,
    run_mode,
)
from benchmarks.round_trips import RoundTrips
from bot.models import Account, Content, Memory, Room, utcnow
from bot.storage.batch import Batches, BatchWriteError, Insert, Update, Write
from bot.storage.mongo import MongoStore
from bot.storage.windows import read_window


async def _cost_run(model_dir: Path, mongo_uri: str, messages: int) -> dict:
    return await run_mode(
        load_script()[:messages],
        selection="llm",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        # Facts are extracted every second user message: both kinds of evaluation are counted.
        conversation_length=8,
        answers=FakeModelAnswers(),
    )


async def test_the_cost_run_reports_the_round_trips_of_each_path(
    model_dir: Path, mongo_uri: str
) -> None:
    result = await _cost_run(model_dir, mongo_uri, 3)
    rows = result["messages"]
    for row in rows:
        for path in ("reply", "evaluation"):
            assert row[f"round_trips_{path}"] == sum(row[f"commands_{path}"].values()) > 0
        # The reply path writes the message's evaluation job (durably, holding the message);
        # the evaluation claims it and finishes it.
        assert row["commands_reply"]["insert evaluations"] == 1
        assert "insert evaluations" not in row["commands_evaluation"]
        assert row["commands_evaluation"]["findAndModify evaluations"] == 1
    trips = result["mongodb_round_trips"]
    later = rows[1:]
    assert trips["reply"]["max"] == max(r["round_trips_reply"] for r in later)
    assert trips["evaluation"]["max"] == max(r["round_trips_evaluation"] for r in later)
    assert trips["reply"]["first_message"] == rows[0]["round_trips_reply"]
    # The first message also writes the person's and the room's profiles; later ones don't.
    assert rows[0]["commands_reply"].get("update accounts") == 1
    assert all("update accounts" not in r["commands_reply"] for r in later)
    goals = {
        g["goal"]: g for g in cost_goals({"modes": {"llm": result}}) if "round trips" in g["goal"]
    }
    assert set(goals) == {
        "MongoDB round trips per message, the reply path (`llm`)",
        "MongoDB round trips per message, one evaluation (`llm`)",
    }


@pytest.fixture
async def counted(mongo_uri: str) -> AsyncIterator[tuple[MongoStore, RoundTrips]]:
    trips = RoundTrips()
    store = MongoStore.from_uri(
        mongo_uri, f"mnemo_test_{uuid.uuid4().hex[:12]}", event_listeners=[trips]
    )
    await store.ensure_indexes()
    try:
        yield store, trips
    finally:
        await store.client.drop_database(store.db.name)
        await store.close()


def _account(number: int) -> Account:
    return Account(
        id=f"account-{number}",
        platform="test",
        platform_id=str(number),
        name=f"Person {number}",
        username=f"person{number}",
    )


async def test_a_window_is_read_in_one_round_trip_and_equals_the_separate_reads(
    counted: tuple[MongoStore, RoundTrips],
) -> None:
    store, trips = counted
    room = Room(id="room-1", world_id="world-1", platform="test", kind="group", name="Hikers")
    await store.rooms.upsert(room)
    for number in range(1, 5):
        await store.accounts.upsert(_account(number))
    await store.accounts.set_told_name("account-1", "Sally")
    start = utcnow()
    authors = ["account-1", "agent", "account-2", "agent", "account-1", "agent"]
    messages = [
        Memory(
            id=f"message-{i}",
            user_id=author,
            agent_id="agent",
            room_id=room.id,
            world_id=room.world_id,
            content=Content(text=f"line {i}"),
            created_at=start + timedelta(milliseconds=i),
        )
        for i, author in enumerate(authors)
    ]
    for memory in messages:
        await store.memories.insert(memory)
    when = start + timedelta(seconds=1)
    await store.rooms.set_mark(room.id, "facts", when)
    before = messages[4].created_at + timedelta(milliseconds=1)

    with trips.measure() as read:
        window = await read_window(
            store.db, room.id, 3, before=before, people=["account-3", "nobody"], with_room=True
        )
    assert read.total == 1

    assert window.messages == await store.memories.recent(room.id, 3, before=before)
    assert [m.id for m in window.messages] == ["message-2", "message-3", "message-4"]
    expected = await store.accounts.get_many(["account-1", "account-2", "account-3"])
    assert window.accounts == expected
    assert window.accounts["account-1"].name == "Sally"  # the told name, as get_many shows
    assert window.room == await store.rooms.get(room.id)
    assert window.marks == {"facts": await store.rooms.get_mark(room.id, "facts")}

    # An empty room, nobody asked for, no room document: nothing, still one round trip.
    with trips.measure() as empty:
        nothing = await read_window(store.db, "room-2", 5, with_room=True)
    assert (nothing.messages, nothing.accounts, nothing.room, nothing.marks) == ([], {}, None, {})
    assert empty.total == 1


@pytest.mark.parametrize("client_bulk", [None, False], ids=["bulkWrite", "one-by-one"])
async def test_a_batch_spans_collections_and_names_what_failed(
    counted: tuple[MongoStore, RoundTrips], client_bulk: bool | None
) -> None:
    """One round trip where the server takes a client-level bulkWrite (MongoDB 8.0, the
    bundled server), else one command per write (older servers), with the same results."""
    store, trips = counted
    batches = Batches(store.client, store.db, client_bulk=client_bulk)
    writes: list[Write] = [
        Insert("evaluations", {"_id": "job-1", "status": "intake"}),
        Insert("memories", {"_id": "message-1", "room_id": "room-1"}),
        Update("rooms", {"_id": "room-1"}, {"$inc": {"message_count": 1}}, upsert=True),
    ]
    with trips.measure() as first:
        await batches.write(writes)
    assert first.total == (1 if client_bulk is None else 3)
    assert (await store.db.rooms.find_one({"_id": "room-1"}))["message_count"] == 1

    # Ordered: the job exists, so nothing after it is written.
    with pytest.raises(BatchWriteError) as failed:
        await batches.write(writes)
    assert failed.value.failed == {0: 11000} and failed.value.only_duplicates()
    assert (await store.db.rooms.find_one({"_id": "room-1"}))["message_count"] == 1

    # Unordered: every write is tried; the ones that could be made are.
    await store.db.evaluations.delete_one({"_id": "job-1"})
    with pytest.raises(BatchWriteError) as failed:
        await batches.write(writes, ordered=False)
    assert failed.value.failed == {1: 11000}
    assert await store.db.evaluations.count_documents({}) == 1
    assert (await store.db.rooms.find_one({"_id": "room-1"}))["message_count"] == 2

"""Per-room lanes: a room's messages are handled in arrival order, other rooms go ahead."""

from __future__ import annotations

import asyncio
import random

from bot.adapters.lanes import RoomLanes


def recorder(log: list[str], label: str, *, pause: int = 0, wait: asyncio.Event | None = None):
    async def job() -> None:
        if wait is not None:
            await wait.wait()
        for _ in range(pause):
            await asyncio.sleep(0)
        log.append(label)

    return job


async def test_a_room_runs_its_jobs_in_the_order_they_came_whatever_each_takes() -> None:
    lanes: RoomLanes[int] = RoomLanes("test")
    handled: list[str] = []
    shuffle = random.Random(7)
    # Early jobs take longest: any concurrency inside the room would reorder them.
    futures = [
        lanes.submit(1, recorder(handled, f"m{i}", pause=shuffle.randint(0, 20))) for i in range(50)
    ]
    await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert handled == [f"m{i}" for i in range(50)]
    assert len(lanes) == 0  # an idle room keeps nothing


async def test_jobs_submitted_while_the_room_is_busy_queue_behind_it() -> None:
    lanes: RoomLanes[str] = RoomLanes("test")
    handled: list[str] = []
    gate = asyncio.Event()
    first = lanes.submit("a", recorder(handled, "first", wait=gate))
    await asyncio.sleep(0)  # the first job is running and blocked
    later = [lanes.submit("a", recorder(handled, f"later{i}")) for i in range(3)]
    await asyncio.sleep(0.01)
    assert handled == []
    gate.set()
    await asyncio.wait_for(asyncio.gather(first, *later), 5)
    assert handled == ["first", "later0", "later1", "later2"]


async def test_a_blocked_room_does_not_hold_up_another_room() -> None:
    lanes: RoomLanes[str] = RoomLanes("test")
    handled: list[str] = []
    gate = asyncio.Event()
    slow = lanes.submit("busy", recorder(handled, "busy", wait=gate))
    behind = lanes.submit("busy", recorder(handled, "busy-2"))
    other = lanes.submit("quiet", recorder(handled, "quiet"))
    await asyncio.wait_for(other, 5)
    assert handled == ["quiet"]
    assert not slow.done() and not behind.done()
    gate.set()
    await asyncio.wait_for(asyncio.gather(slow, behind), 5)
    assert handled == ["quiet", "busy", "busy-2"]


async def test_at_most_max_active_rooms_run_at_once() -> None:
    lanes: RoomLanes[int] = RoomLanes("test", max_active=2)
    running, peak = 0, 0

    async def job() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        running -= 1

    await asyncio.wait_for(asyncio.gather(*(lanes.submit(room, job) for room in range(10))), 5)
    assert peak == 2


async def test_a_failing_job_is_logged_and_the_room_goes_on(caplog) -> None:
    lanes: RoomLanes[int] = RoomLanes("test")
    handled: list[str] = []

    async def broken() -> None:
        raise ValueError("boom")

    failed = lanes.submit(1, broken)
    after = lanes.submit(1, recorder(handled, "after"))
    await asyncio.wait_for(asyncio.gather(failed, after), 5)
    assert handled == ["after"]
    assert "test: handling a message in room 1 failed" in caplog.text


async def test_closing_finishes_what_is_queued_within_the_grace_then_takes_nothing() -> None:
    lanes: RoomLanes[int] = RoomLanes("test")
    handled: list[str] = []
    gate = asyncio.Event()
    stuck = lanes.submit(1, recorder(handled, "stuck", wait=gate))
    quick = lanes.submit(2, recorder(handled, "quick"))
    await lanes.close(grace=0.05)
    assert quick.done() and handled == ["quick"]
    assert stuck.done()  # cut off after the grace
    refused = lanes.submit(3, recorder(handled, "late"))
    assert refused.cancelled()
    await asyncio.sleep(0.01)
    assert handled == ["quick"]

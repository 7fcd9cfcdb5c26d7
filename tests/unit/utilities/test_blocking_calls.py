"""Blocking calls with a deadline (bot/cancelling.py): a call that never returns is given up
on, holds up none of the others, and is reported until it returns."""

from __future__ import annotations

import asyncio
import threading

import pytest

from bot.cancelling import BlockingCalls, Stuck


async def returned(calls: BlockingCalls) -> None:
    for _ in range(200):  # a stuck call returns in its own time
        if not calls.stuck:
            return
        await asyncio.sleep(0.02)


async def test_a_stuck_call_is_given_up_on_and_the_next_ones_still_run() -> None:
    calls = BlockingCalls("disk", deadline=0.2, threads=2)
    release = threading.Event()
    with pytest.raises(Stuck):
        await calls.run(release.wait)
    assert calls.stuck == 1 and calls.stuck_for > 0
    assert await calls.run(lambda: "written") == "written"  # on the other thread
    release.set()
    await returned(calls)
    assert calls.stuck == 0 and calls.stuck_for == 0.0
    assert await calls.run(lambda: "again") == "again"


async def test_with_every_thread_stuck_a_call_fails_at_once_without_running() -> None:
    calls = BlockingCalls("chroma", deadline=0.1, threads=2)
    release = threading.Event()
    try:
        for _ in range(2):
            with pytest.raises(Stuck):
                await calls.run(release.wait)
        ran: list[str] = []
        with pytest.raises(Stuck, match="stuck"):
            await calls.run(lambda: ran.append("ran"))
        assert ran == [] and calls.stuck == 2
    finally:
        release.set()


async def test_a_call_waiting_behind_a_stuck_one_is_dropped_not_run_late() -> None:
    calls = BlockingCalls("chroma", deadline=0.2, threads=1)
    release = threading.Event()
    ran: list[str] = []
    stuck = asyncio.ensure_future(calls.run(release.wait))
    await asyncio.sleep(0.05)  # the stuck call holds the only thread
    with pytest.raises(Stuck):
        await calls.run(lambda: ran.append("late"), deadline=0.05)
    with pytest.raises(Stuck):
        await stuck
    release.set()
    await returned(calls)
    assert await calls.run(lambda: "next") == "next"
    assert ran == []  # given up on before it started: never run afterwards


async def test_an_error_of_the_call_is_raised_to_the_caller() -> None:
    calls = BlockingCalls("disk", deadline=1.0)

    def full() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await calls.run(full)
    assert calls.stuck == 0

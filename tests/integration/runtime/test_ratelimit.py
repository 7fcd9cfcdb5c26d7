"""The per-person reply limit: in one process, and shared through MongoDB by every process;
one notice a window for a person over it, however many messages they send."""

from __future__ import annotations

import asyncio

from bot.runtime.ratelimit import Admission, RateLimiter, SharedRateLimiter
from bot.storage.mongo import MongoStore

ALLOWED, TELL, SILENT = Admission.ALLOWED, Admission.TELL, Admission.SILENT


async def test_the_in_process_limit_slides_with_time_and_tells_once_a_window() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    assert [await limiter.admit("sarah") for _ in range(5)] == [
        ALLOWED,
        ALLOWED,
        TELL,
        SILENT,
        SILENT,
    ]
    assert await limiter.admit("tom") is ALLOWED  # per person
    now[0] = 59.0
    assert await limiter.admit("sarah") is SILENT
    now[0] = 60.0
    assert await limiter.admit("sarah") is ALLOWED
    assert await limiter.admit("sarah") is ALLOWED
    # Told at 0 s: a window later she is told again, once.
    assert [await limiter.admit("sarah") for _ in range(2)] == [TELL, SILENT]


async def test_people_who_went_quiet_are_no_longer_counted() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    for person in range(100):
        await limiter.admit(f"person {person}")
    assert [await limiter.admit("sarah") for _ in range(3)] == [ALLOWED, ALLOWED, TELL]
    assert len(limiter) == 101
    now[0] = 61.0  # a window later only whoever writes now is counted
    assert await limiter.admit("tom") is ALLOWED
    assert len(limiter) == 1
    # Sarah starts afresh, told again only when over the limit again.
    assert [await limiter.admit("sarah") for _ in range(3)] == [ALLOWED, ALLOWED, TELL]


async def test_processes_sharing_a_database_share_each_persons_limit(
    store: MongoStore, mongo_uri: str
) -> None:
    now = [1_000_000.0]
    others = [MongoStore.from_uri(mongo_uri, store.db.name) for _ in range(2)]
    try:
        limiters = [SharedRateLimiter(db.db, 3, clock=lambda: now[0]) for db in [store, *others]]
        # Sarah's messages land on whichever process the platform picks, some at once.
        answers = await asyncio.gather(*(limiters[n % 3].admit("sarah") for n in range(7)))
        # Three answered, and of the four refused, one tells her (whichever process it hit).
        assert sorted(a.value for a in answers) == ["allowed"] * 3 + ["silent"] * 3 + ["tell"]
        assert await limiters[1].admit("tom") is ALLOWED  # another person has their own count
        assert await limiters[2].admit("sarah") is SILENT

        now[0] += 60  # the next window
        assert await limiters[0].admit("sarah") is ALLOWED
    finally:
        for other in others:
            await other.close()
    # The windows that are over were dropped once the next one began.
    counters = await store.db.rate_limits.find({}).to_list()
    assert {d["window_ms"] for d in counters} == {int(now[0] * 1000) // 60_000 * 60_000}
    assert not any("sarah" in str(d) for d in counters)  # a counter never names its person


async def test_a_limit_of_zero_is_no_limit(store: MongoStore) -> None:
    limiter = SharedRateLimiter(store.db, 0)
    assert {await limiter.admit("sarah") for _ in range(20)} == {ALLOWED}
    assert await store.db.rate_limits.count_documents({}) == 0

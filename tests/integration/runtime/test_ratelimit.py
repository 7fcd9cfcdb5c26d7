"""The per-person reply limit: in one process, and shared through MongoDB by every process."""

from __future__ import annotations

import asyncio

from bot.runtime.ratelimit import RateLimiter, SharedRateLimiter
from bot.storage.mongo import MongoStore


async def test_the_in_process_limit_slides_with_time() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    assert [await limiter.allow("sarah") for _ in range(3)] == [True, True, False]
    assert await limiter.allow("tom")  # per person
    now[0] = 59.0
    assert not await limiter.allow("sarah")
    now[0] = 60.0
    assert await limiter.allow("sarah")


async def test_processes_sharing_a_database_share_each_persons_limit(
    store: MongoStore, mongo_uri: str
) -> None:
    now = [1_000_000.0]
    others = [MongoStore.from_uri(mongo_uri, store.db.name) for _ in range(2)]
    try:
        limiters = [SharedRateLimiter(db.db, 3, clock=lambda: now[0]) for db in [store, *others]]
        # Sarah's messages land on whichever process the platform picks, some at once.
        answers = await asyncio.gather(*(limiters[n % 3].allow("sarah") for n in range(7)))
        assert answers.count(True) == 3
        assert await limiters[1].allow("tom")  # another person has their own count
        assert not await limiters[2].allow("sarah")

        now[0] += 60  # the next window
        assert await limiters[0].allow("sarah")
    finally:
        for other in others:
            await other.close()
    # The windows that are over were dropped once the next one began.
    counters = await store.db.rate_limits.find({}).to_list()
    assert {d["window_ms"] for d in counters} == {int(now[0] * 1000) // 60_000 * 60_000}
    assert not any("sarah" in str(d) for d in counters)  # a counter never names its person


async def test_a_limit_of_zero_is_no_limit(store: MongoStore) -> None:
    limiter = SharedRateLimiter(store.db, 0)
    assert all([await limiter.allow("sarah") for _ in range(20)])
    assert await store.db.rate_limits.count_documents({}) == 0

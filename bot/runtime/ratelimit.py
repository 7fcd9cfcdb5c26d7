"""Per-person reply rate limit, so one chatty person cannot run up the bill.

Two kinds, one interface (`await limiter.allow(key)`):

- `RateLimiter`: in this process, a sliding window. Enough when one process serves the
  deployment (the bundled server: it belongs to one process);
- `SharedRateLimiter`: in MongoDB, so every process of a deployment counts against the same
  limit. One counter document per person and fixed window (`<hash of key>:<window start ms>`;
  hashed, so a counter never names the person it counts), bumped by one atomic `$inc`
  upsert: one round trip per message, no read-modify-write race between processes. Fixed
  windows let a person reach twice the limit across a window boundary (a sliding estimate
  would need a second read per message). Counters of past windows are dropped.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Protocol

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

COLLECTION = "rate_limits"


class ReplyLimit(Protocol):
    per_minute: int

    async def allow(self, key: str) -> bool:
        """Count one reply for `key`; False once it exceeds the limit."""
        ...


class RateLimiter:
    """In-process sliding window."""

    def __init__(
        self,
        per_minute: int,
        *,
        window_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_minute = per_minute
        self.window = window_seconds
        self._clock = clock
        self._seen: dict[str, deque[float]] = defaultdict(deque)

    async def allow(self, key: str) -> bool:
        """Count one reply for `key`; False once it exceeds the limit inside the window."""
        if self.per_minute <= 0:
            return True
        now = self._clock()
        seen = self._seen[key]
        while seen and now - seen[0] >= self.window:
            seen.popleft()
        if len(seen) >= self.per_minute:
            return False
        seen.append(now)
        return True


class SharedRateLimiter:
    """Counters in MongoDB shared by every process; windows keyed by their start in ms."""

    def __init__(
        self,
        db: AsyncDatabase,
        per_minute: int,
        *,
        window_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.per_minute = per_minute
        self._counters = db[COLLECTION]
        self._window_ms = int(window_seconds * 1000)
        self._clock = clock
        # The window whose old counters this process last cleared.
        self._swept = -1

    async def allow(self, key: str) -> bool:
        if self.per_minute <= 0:
            return True
        now = int(self._clock() * 1000)
        start = now - now % self._window_ms
        if start != self._swept:
            # Once per window and process: counters of windows that are over are dropped.
            self._swept = start
            await self._counters.delete_many({"window_ms": {"$lt": start}})
        person = hashlib.sha256(key.encode()).hexdigest()[:32]
        counter = await self._counters.find_one_and_update(
            {"_id": f"{person}:{start}"},
            # Written on every bump (nx-27017 ignores $setOnInsert); the same value each time.
            {"$inc": {"count": 1}, "$set": {"window_ms": start}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        return counter is not None and int(counter.get("count", 0)) <= self.per_minute

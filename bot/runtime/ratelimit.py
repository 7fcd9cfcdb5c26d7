"""Per-person reply rate limit, so one chatty person cannot run up the bill.

Each message to be answered is counted (`await limiter.admit(key)`): `ALLOWED` is answered;
past the limit, the first refused message of a window is `TELL` (the person hears once that
they are over it) and the rest of that window `SILENT`, so a person writing faster than the
limit gets one notice a window, in a group as in a DM, not one per message.

Two kinds, one interface:

- `RateLimiter`: in this process, a sliding window. Enough when one process serves the
  deployment (the bundled server: it belongs to one process);
- `SharedRateLimiter`: in MongoDB, so every process of a deployment counts against the same
  limit. One counter document per person and fixed window (`<hash of key>:<window start ms>`;
  hashed, so a counter never names the person it counts), bumped by one atomic `$inc`
  upsert: one round trip per message, no read-modify-write race between processes. Fixed
  windows let a person reach twice the limit across a window boundary (a sliding estimate
  would need a second read per message). Counters of past windows are dropped. The count
itself says which refusal is the first (`limit + 1`), so the notice is once per window across
processes too, with no second write.
"""

from __future__ import annotations

import enum
import hashlib
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Protocol

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

COLLECTION = "rate_limits"


class Admission(enum.Enum):
    """What the limit says of one message to be answered."""

    ALLOWED = "allowed"  # within the limit: answered
    TELL = "tell"  # the first over it this window: the person is told, once
    SILENT = "silent"  # over it and told already this window: not answered


class ReplyLimit(Protocol):
    per_minute: int

    async def admit(self, key: str) -> Admission:
        """Count one message to be answered for `key`, and say whether it is."""
        ...


class RateLimiter:
    """In-process sliding window. Once a window, the people who sent nothing in the last one
    are dropped, so the map holds the people of the last minute, not everyone ever seen."""

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
        # When each person over the limit was last told so.
        self._told: dict[str, float] = {}
        self._swept = clock()

    def __len__(self) -> int:
        """How many people the limiter is counting now."""
        return len(self._seen.keys() | self._told.keys())

    def _sweep(self, now: float) -> None:
        """Drop whoever has no message and no notice inside the window (once a window)."""
        self._swept = now
        for key in [
            k for k, seen in self._seen.items() if not seen or now - seen[-1] >= self.window
        ]:
            del self._seen[key]
        for key in [k for k, told in self._told.items() if now - told >= self.window]:
            del self._told[key]

    async def admit(self, key: str) -> Admission:
        """Count one message for `key`: refused once `per_minute` were answered inside the
        sliding window; told at most once a window."""
        if self.per_minute <= 0:
            return Admission.ALLOWED
        now = self._clock()
        if now - self._swept >= self.window:
            self._sweep(now)
        seen = self._seen[key]
        while seen and now - seen[0] >= self.window:
            seen.popleft()
        told = self._told.get(key)
        if told is not None and now - told >= self.window:
            del self._told[key]
            told = None
        if len(seen) >= self.per_minute:
            if told is not None:
                return Admission.SILENT
            self._told[key] = now
            return Admission.TELL
        seen.append(now)
        return Admission.ALLOWED


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

    async def admit(self, key: str) -> Admission:
        if self.per_minute <= 0:
            return Admission.ALLOWED
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
        if counter is None:  # an upsert returns its document; refused, as before, if not
            return Admission.SILENT
        count = int(counter.get("count", 0))
        if count <= self.per_minute:
            return Admission.ALLOWED
        # Exactly one message of the window counts `limit + 1`, whichever process bumped it.
        return Admission.TELL if count == self.per_minute + 1 else Admission.SILENT

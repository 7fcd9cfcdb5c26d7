"""Per-user reply rate limit: a sliding window, so one chatty user cannot run up the bill."""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable


class RateLimiter:
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

    def allow(self, key: str) -> bool:
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

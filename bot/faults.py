"""A test-only fault hook: make the process die (SIGKILL, as `kill -9` would) at a named point.

The fault suite (tests/e2e/test_faults.py) and `mnemo bench faults` start real Mnemo processes
with `MNEMO_TEST_FAULT=<point>[@<n>]`, read once at start-up: the process kills itself the
n-th time (default 1st) it reaches that point, so recovery from a crash at exactly that step
can be checked. Unset (always, outside those tests) the hook does nothing. Points:

- `handle:job-written`, `handle:message-stored`, `handle:reply-sent`, `handle:released`
- `evaluation:claimed`, `evaluation:handler-ran`, `evaluation:before-finish`
- `journal:appended`, `journal:replayed`
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

ENV_VARIABLE = "MNEMO_TEST_FAULT"


class FaultHook:
    def __init__(self, point: str | None = None, *, after: int = 1) -> None:
        self.point = point
        self._left = after

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> FaultHook:
        spec = environ.get(ENV_VARIABLE, "").strip()
        if not spec:
            return cls()
        point, _, count = spec.partition("@")
        return cls(point.strip(), after=int(count) if count.strip().isdigit() else 1)

    def reached(self, point: str) -> None:
        if self.point != point:
            return
        self._left -= 1
        if self._left == 0:
            os.kill(os.getpid(), signal.SIGKILL)

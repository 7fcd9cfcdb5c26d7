"""An evaluator handler's time limit, enforced only where stopping it leaves nothing half-done.

`asyncio.wait_for(handler, timeout)` cancelled a slow handler wherever it was: between storing
a fact and its vector, or before the room's mark moved. The job was then retried on top of a
half-written result. Here the deadline stops a handler only at a safe point: while it waits
for the model (its own writes are either done or not begun; the answer is simply not read),
or when it next asks the model. A handler busy with anything else when the deadline passes
(storing what it learned) is let finish, and the outcome says what happened: in time, late,
or stopped at a safe point (the job is then retried). Only a handler that reaches no safe
point and has not finished long after its limit (`HANG_FACTOR` times as long again: no write
takes that long, something hangs) is cancelled where it is, and said so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from bot.llm.base import LanguageModel, ModelRequest

log = logging.getLogger(__name__)

# Past its limit, a handler that never reaches a safe point is given this many times its
# limit again to finish before it is taken for hung and cancelled where it is.
HANG_FACTOR = 5

# How a handler run ended, for the job's record and the log.
Ending = Literal["finished", "finished late", "stopped at a safe point", "cancelled", "failed"]


@dataclass(frozen=True)
class HandlerOutcome:
    """How one handler run ended: `completed` when the handler ran to its end (in time or
    late); otherwise `problem` says why not, in words fit for the job's record."""

    ending: Ending
    seconds: float
    problem: str | None = None
    result: Any = None

    @property
    def completed(self) -> bool:
        return self.ending in ("finished", "finished late")


class SafePoints:
    """Tracks whether a handler is waiting for the model, where it may be stopped."""

    def __init__(self) -> None:
        self._waiting = 0
        self.overdue = False
        self._reached = asyncio.Event()

    @property
    def waiting_for_model(self) -> bool:
        return self._waiting > 0

    @contextlib.asynccontextmanager
    async def model_call(self) -> AsyncIterator[None]:
        self._waiting += 1
        self._reached.set()  # wakes an overdue run, which stops the handler here
        try:
            yield
        finally:
            self._waiting -= 1

    async def reached(self) -> None:
        """Returns once the handler enters a model call (from the next one on)."""
        self._reached.clear()
        await self._reached.wait()


class SafePointModel:
    """The runtime's model as one handler sees it: each call marks a safe point.

    No `stream`: it wraps only evaluator handlers' model handles, which generate whole (a
    `ModelHandle` has no stream); only the reply path streams, on the runtime's own model."""

    def __init__(self, inner: LanguageModel, points: SafePoints) -> None:
        self._inner = inner
        self._points = points
        self.name = inner.name

    async def generate(self, request: ModelRequest) -> str:
        async with self._points.model_call():
            return await self._inner.generate(request)

    async def close(self) -> None:
        """The runtime's model is the runtime's to close."""


async def run_with_deadline(
    start: Callable[[SafePoints], Awaitable[Any]], timeout: float, *, name: str
) -> HandlerOutcome:
    """Run `start(points)` (a handler whose model calls go through `SafePointModel`s on
    `points`) with a deadline honoured at safe points only; see the module's docstring."""
    points = SafePoints()
    started = time.perf_counter()
    task = asyncio.ensure_future(start(points))
    stopped: _Stop = None
    try:
        await asyncio.wait({task}, timeout=timeout)
        if not task.done():
            points.overdue = True
            stopped = await _stop_at_a_safe_point(task, points, hard_limit=HANG_FACTOR * timeout)
    except asyncio.CancelledError:
        # The evaluation itself is being stopped (shutdown): the handler goes with it.
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise
    seconds = time.perf_counter() - started
    return _outcome(task, points, stopped, seconds, timeout, name)


# Why an overdue handler was cancelled: at a safe point, or at the hard limit; None: it ended.
_Stop = Literal["safe point", "hard limit"] | None


async def _stop_at_a_safe_point(
    task: asyncio.Future[Any], points: SafePoints, *, hard_limit: float
) -> _Stop:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + hard_limit
    stopped: _Stop = None
    while not task.done():
        if points.waiting_for_model:
            stopped = "safe point"
            task.cancel()
            break
        remaining = give_up - loop.time()
        if remaining <= 0:
            stopped = "hard limit"  # no safe point came and it did not end: something hangs
            task.cancel()
            break
        reached = asyncio.ensure_future(points.reached())
        try:
            await asyncio.wait(
                {task, reached}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            reached.cancel()
    with contextlib.suppress(BaseException):
        await task
    # A handler that caught the cancellation and ended anyway did end.
    return stopped if task.cancelled() else None


def _outcome(
    task: asyncio.Future[Any],
    points: SafePoints,
    stopped: _Stop,
    seconds: float,
    timeout: float,
    name: str,
) -> HandlerOutcome:
    if task.cancelled():
        if stopped == "safe point":
            log.warning(
                "evaluator %s passed its %gs limit while waiting for the model: stopped there, "
                "nothing half-written; it will be retried",
                name,
                timeout,
            )
            return HandlerOutcome(
                "stopped at a safe point",
                seconds,
                f"timed out after {timeout:g}s (stopped while waiting for the model)",
            )
        hung = (1 + HANG_FACTOR) * timeout
        log.error(
            "evaluator %s timed out: reached no safe point and did not end in %gs, "
            "cancelled where it was",
            name,
            hung,
        )
        return HandlerOutcome(
            "cancelled", seconds, f"timed out after {hung:g}s (cancelled, reached no safe point)"
        )
    error = task.exception()
    if error is not None and not isinstance(error, Exception):
        # SystemExit, KeyboardInterrupt and the like end the process, as they did before the
        # handler ran in its own task: they are not an evaluator failure to retry.
        raise error
    if error is not None:
        log.error("evaluator %s failed", name, exc_info=error)
        return HandlerOutcome("failed", seconds, f"{type(error).__name__}: {error}")
    if points.overdue:
        log.warning(
            "evaluator %s took %.1fs, past its %gs limit: let finish what it was writing",
            name,
            seconds,
            timeout,
        )
        return HandlerOutcome("finished late", seconds, result=task.result())
    return HandlerOutcome("finished", seconds, result=task.result())

"""Stopping a background task: cancel it, then wait until it has really finished; and
blocking calls given a deadline (`BlockingCalls`), so that one stuck call stops nothing else.

Waiting matters: a task cancelled but not awaited may still be running its `finally` when
its owner closes what the task uses (the MongoDB client, a file), and asyncio warns about a
task destroyed while pending.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)
_T = TypeVar("_T")


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` (None or already done: nothing to do) and wait for it to end."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class Stuck(TimeoutError):
    """A blocking call passed its deadline. It may still be running in its thread (a thread
    cannot be stopped): what it would have done is to be treated as not done."""


@dataclass
class _Call:
    run: Callable[[], Any]
    done: concurrent.futures.Future[Any]


class BlockingCalls:
    """Blocking calls (a Chroma client, a disk write) run off the event loop, each with a
    deadline, in a few threads of their own.

    Not `asyncio.to_thread`: a call stuck for good (chromadb's compiled code waiting on a full
    disk) would hold a thread of the loop's one default pool, and enough of them would starve
    every other `to_thread` of the process; at exit, the interpreter waits for that pool's
    threads, so a stuck one keeps the process from ending. These threads are daemons, never
    waited for at exit, and only this kind of call waits behind them. Once every thread holds
    a call past its deadline, a new call fails at once (`Stuck`) instead of queueing behind
    them; the first of them to return frees its thread again.
    """

    def __init__(self, name: str, *, deadline: float, threads: int = 4) -> None:
        self.name = name
        self.deadline = deadline
        self._threads = threads
        self._started = 0
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Calls past their deadline that have not returned yet, with when each was started.
        self._overdue: dict[concurrent.futures.Future[Any], float] = {}
        self._running: dict[concurrent.futures.Future[Any], float] = {}

    @property
    def stuck(self) -> int:
        """How many calls passed their deadline and still hold their thread."""
        with self._lock:
            return len(self._overdue)

    @property
    def stuck_for(self) -> float:
        """Seconds the oldest call still running has run past its start (0: none stuck)."""
        with self._lock:
            if not self._overdue:
                return 0.0
            return time.monotonic() - min(self._overdue.values())

    async def run(self, work: Callable[[], _T], *, deadline: float | None = None) -> _T:
        """`work()` in one of the threads; `Stuck` when it has not returned within the
        deadline (or every thread is held by a stuck call already)."""
        seconds = self.deadline if deadline is None else deadline
        with self._lock:
            if len(self._overdue) >= self._threads:
                raise Stuck(f"{self.name}: {len(self._overdue)} call(s) stuck; not trying another")
            if self._started < self._threads and self._started <= len(self._running):
                self._started += 1
                threading.Thread(
                    target=self._serve, name=f"{self.name}-{self._started}", daemon=True
                ).start()
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self._calls.put(_Call(work, done))
        waiting = asyncio.wrap_future(done)
        # A stuck call's late outcome is nobody's now: read, so it is never reported unread.
        waiting.add_done_callback(lambda late: late.cancelled() or late.exception())
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), seconds)
        except asyncio.CancelledError:
            done.cancel()  # not started yet: it never will be; running: it ends on its own
            raise
        except TimeoutError:
            with self._lock:  # `_serve` starts a call under it: running, or never will be
                overdue = not done.cancel() and not done.done()
                if overdue:
                    self._overdue[done] = self._running.get(done, time.monotonic())
            if overdue:
                log.error("%s: a call has not returned after %g s", self.name, seconds)
            raise Stuck(f"{self.name}: no answer within {seconds:g} s") from None

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            with self._lock:
                if not call.done.set_running_or_notify_cancel():
                    continue  # given up on before it started
                self._running[call.done] = time.monotonic()
            try:
                result = call.run()
            except BaseException as error:
                call.done.set_exception(error)
            else:
                call.done.set_result(result)
            finally:
                with self._lock:
                    self._running.pop(call.done, None)
                    if self._overdue.pop(call.done, None) is not None:
                        log.warning("%s: a stuck call returned", self.name)

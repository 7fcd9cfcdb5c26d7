"""The one queue in front of the model client: replies first (issue 22).

A local server answers one request at a time (`MNEMO_MODEL_CONCURRENCY=1`). With a plain
semaphore a reply waited behind every evaluation request queued before it (a fact
extraction: 67 s once). Here, when requests are limited, a waiting reply is sent before any
waiting evaluation request, so it waits at most for the requests already in flight. Within
one priority, requests go in the order they came. Without a limit nothing waits.

asyncio has no priority semaphore, so this is one: a heap of waiting futures, and a slot
handed straight to the first waiter when a request ends (never released to be raced for).

A reply asked again (a reply check refused the first answer) keeps its slot between the two
requests (`one_turn`): released in between, it went to the fact extraction waiting for it,
and the second request of the reply waited 182 s behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum

from bot.llm.base import Task


class Priority(IntEnum):
    """Lower goes first."""

    # Someone is waiting for this answer: the reply, and an action the reply named.
    REPLY = 0
    # Learning, after the reply: evaluator selection and the evaluators' own calls.
    EVALUATION = 1


def priority_of(task: str) -> Priority:
    """A task's priority: the reply path's tasks first, everything else after them."""
    if task == Task.REPLY or task.startswith("action:"):
        return Priority.REPLY
    return Priority.EVALUATION


@dataclass(order=True)
class _Waiter:
    priority: Priority
    number: int
    granted: asyncio.Future[None] = field(compare=False)


@dataclass
class _Turn:
    """The queues whose slot a turn holds, and how each is given back when it ends."""

    held: dict[int, Callable[[], None]] = field(default_factory=dict)


# The turn the running task is in, if any. A context variable, not an argument: the calls of
# a turn pass through the model's wrappers (the deadline, the world's model, a recorder),
# which need not know of it, and it is the task's own (another task's calls never share it).
_current_turn: ContextVar[_Turn | None] = ContextVar("mnemo_model_turn", default=None)


@contextlib.contextmanager
def one_turn() -> Iterator[None]:
    """The model calls made inside are one turn: the first takes a slot as usual, the next
    ones reuse it, and it is given back when the block ends. For calls made one after the
    other by one task (a reply and its second try), never for concurrent ones."""
    turn = _Turn()
    token = _current_turn.set(turn)
    try:
        yield
    finally:
        _current_turn.reset(token)
        for release in turn.held.values():
            release()


class ModelQueue:
    """At most `limit` requests in flight (0: no limit); waiting ones go replies first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._in_flight = 0
        self._waiting: list[_Waiter] = []
        self._numbers = itertools.count()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._waiting if not waiter.granted.done())

    @contextlib.asynccontextmanager
    async def slot(self, priority: Priority) -> AsyncIterator[None]:
        """Hold one of the slots for the body; wait, by priority, while none is free."""
        if not self.limit:
            yield
            return
        turn = _current_turn.get()
        if turn is not None and id(self) in turn.held:
            yield  # the turn's slot, taken by its first call
            return
        await self._acquire(priority)
        if turn is not None:
            turn.held[id(self)] = self._release  # given back when the turn ends
            yield
            return
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: Priority) -> None:
        if self._in_flight < self.limit and not self.waiting:
            self._in_flight += 1
            return
        waiter = _Waiter(priority, next(self._numbers), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiting, waiter)
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                # Handed a slot in the same moment it was cancelled: pass the slot on.
                self._release()
            else:
                waiter.granted.cancel()
            raise

    def _release(self) -> None:
        while self._waiting:
            waiter = heapq.heappop(self._waiting)
            if not waiter.granted.done():
                waiter.granted.set_result(None)  # the slot goes to it, still counted
                return
        self._in_flight -= 1

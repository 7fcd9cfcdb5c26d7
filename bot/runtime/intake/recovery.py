"""Start-up's half of intake: messages a crash left between intake and release.

A message whose job is still in `intake` at start-up was taken in by a process that died (this
process's predecessor, or another process of the deployment once its lease expired), or by
this start's replay of the journal. An old one is only learned from; a young one waits for
its platform's adapter to call `answer_unanswered()`, and is learned from unanswered once too
old to answer. Kept apart from the runtime, which owns intake and hands itself in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bot.domain.records import EvaluationJob, Memory
from bot.runtime.intake.journaled import IntakeOwner
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.types import RuntimeOptions, SenderFor, no_typing

log = logging.getLogger(__name__)


class RecoveryOwner(IntakeOwner, Protocol):
    """What of the runtime recovery uses (the runtime itself)."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def sent_replies(self) -> SentReplies: ...

    async def answered(self, memory: Memory) -> bool: ...


class IntakeRecovery:
    def __init__(self, owner: RecoveryOwner, spawn: Callable[[Awaitable[Any]], None]) -> None:
        self.owner = owner
        self._spawn = (
            spawn  # runs the late give-up without waiting for it (bot/knowledge/prefetch.py)
        )
        # Jobs a crash left in intake whose message is young enough to answer, by job id.
        self._orphans: dict[str, tuple[EvaluationJob, Memory]] = {}
        self._timer: asyncio.TimerHandle | None = None

    async def recover(self) -> None:
        """Take in or set aside every orphaned intake job (see the module's doc)."""
        owner, waiting = self.owner, 0
        orphans = await owner.evaluations.orphaned_intake(owner._in_intake)
        # Records of replies to messages settled since are dropped
        # (bot/runtime/intake/sent_replies.py).
        owner.sent_replies.keep_only({job.message_id for job in orphans} | owner._in_intake)
        for job in orphans:
            memory = job.message or await owner.store.memories.get(job.message_id)
            if memory is None:
                await owner.evaluations.release(job, did_respond=False, position=None)
                continue
            if owner.young(memory) and not await owner.answered(memory):
                self._orphans[job.id] = (job, memory)
                waiting += 1
                continue
            await owner._take_in(job, memory, None, no_typing, None)
        if waiting:
            log.info("%d message(s) interrupted before their reply: answering them", waiting)
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(owner.options.answer_window, self._give_up_later)

    async def answer_unanswered(self, platform: str, sender_for: SenderFor) -> int:
        """Answer the messages of `platform` a crash left unanswered (adapters call this once
        connected, with how to reply to a message in a room); returns how many were answered."""
        answered = 0
        for job_id, (job, memory) in list(self._orphans.items()):
            room = await self.owner.store.rooms.get(memory.room_id)
            if room is None or room.platform != platform:
                continue
            del self._orphans[job_id]
            send = sender_for(room, memory)
            result = await self.owner._take_in(job, memory, send, no_typing, room)
            answered += result.responded
        return answered

    def _give_up_later(self) -> None:
        self._spawn(self._give_up_answering())

    async def _give_up_answering(self) -> None:
        for job_id, (job, memory) in list(self._orphans.items()):
            del self._orphans[job_id]
            await self.owner._take_in(job, memory, None, no_typing, None)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

"""The intake's half of an outage: `handle()` with the journal around it, and taking in, once
the database is back, what the journal kept (bot/runtime/intake/outage.py replays it in order
through this).

Kept apart from the runtime, which owns the intake itself and hands itself in as an
`IntakeOwner`. Consent is checked when a kept message is taken in: while the database is away
it cannot be, so an opted-out person's message waits in the journal and is dropped on replay.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal, Protocol

from pymongo.errors import ConnectionFailure

from bot.domain.records import Account, Content, EvaluationJob, Memory, Room
from bot.privacy.policy import PrivacyPolicy
from bot.queue.worker import EvaluationQueue
from bot.runtime.events import RuntimeEvents
from bot.runtime.intake.journal import JournalEntry
from bot.runtime.intake.outage import Outage, unreachable
from bot.runtime.profiles import KnownProfiles
from bot.runtime.types import HandleResult, Send, Typing, no_typing
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

Handle = Callable[[HandleResult], Awaitable[HandleResult]]
# What `keep_first` did with a message: its job now holds it ("job": `handle()` takes it on
# from there), it waits in the journal ("journaled": the replay answers it), the journal was
# full ("refused"), or consent keeps nothing of it ("not kept": `handle()` still answers).
AtDoor = Literal["job", "journaled", "refused", "not kept"]
OPENED_KEPT = 10_000  # bound of what `fresh` remembers
CANNOT_KEEP_REPLY = (
    "I can't store messages right now, so I haven't taken yours in yet. I'll pick it up again "
    "as soon as I can; if I don't answer in a while, please send it again."
)


class IntakeOwner(Protocol):
    """What of the runtime a kept message's intake uses (the runtime itself)."""

    store: MongoStore
    profiles: KnownProfiles
    evaluations: EvaluationQueue
    events: RuntimeEvents
    privacy: PrivacyPolicy
    _in_intake: set[str]

    def young(self, memory: Memory) -> bool: ...

    async def _take_in(
        self,
        job: EvaluationJob,
        memory: Memory,
        send: Send | None,
        typing: Typing,
        room: Room | None,
        arrived: float | None = None,
        result: HandleResult | None = None,
    ) -> HandleResult: ...


class KeptIntake:
    def __init__(self, owner: IntakeOwner, outage: Outage | None) -> None:
        self.owner = owner
        self.outage = outage
        # While the runtime starts, a kept message is only written as an intake job: start-up's
        # recovery then answers it if young (through its platform's adapter) and learns from it.
        self.starting = False
        # Jobs `keep_first` wrote (their message not stored yet), until `handle()` takes them.
        self._opened: dict[str, EvaluationJob] = {}
        # Rooms told that their message could not be kept, until one of theirs is kept again.
        self._cannot_keep_told: set[str] = set()

    async def handle(
        self,
        memory: Memory,
        account: Account | None,
        room: Room | None,
        send: Send,
        handle: Handle,
    ) -> HandleResult:
        """`handle(result)`, unless the database is away: then the message is journaled."""
        if self.outage is None:
            return await self._not_kept_drops_its_job(memory, handle(HandleResult(stored=False)))
        if self.outage.waiting:
            # The database is away, or kept messages wait for it: this one goes behind them.
            return await self._keep(JournalEntry(memory=memory, account=account, room=room), send)
        result = HandleResult(stored=False)
        try:
            return await self._not_kept_drops_its_job(memory, handle(result))
        except ConnectionFailure as error:
            self.outage.went_down(error)
            entry = JournalEntry(
                memory=memory,
                account=account,
                room=room,
                replies=result.unstored,
                responded=result.responded,
            )
            return await self._keep(entry, send)

    async def keep_first(
        self,
        memory: Memory,
        account: Account | None,
        room: Room | None,
        send: Send,
        *,
        platform_retries: bool = False,
    ) -> AtDoor:
        """Make a message safe before its platform is told it arrived (a Telegram update
        acknowledged is never sent again): its evaluation job is written, holding a copy of it,
        as `handle()`'s first step does, or it is journaled when the database is away. Then a
        crash loses nothing: start-up answers a job left in intake, and replays the journal.

        Any failure to write either (a full disk as much as a lost connection) returns
        "refused": the message is not acknowledged, so its platform sends it again, and the
        room is told once. `platform_retries` is kept for callers; both Telegram modes now
        retry (polling re-reads an update it did not confirm).
        """
        owner = self.owner
        if self.outage is not None and self.outage.waiting:
            return await self._keep_first(
                JournalEntry(memory=memory, account=account, room=room), send
            )
        try:
            # Read only: `handle()`'s own consent check tells the person (once) and answers.
            refusal = await owner.privacy.consent.check(
                user_id=memory.user_id, room_id=memory.room_id, world_id=memory.world_id
            )
            if refusal is not None:
                return "not kept"
            await owner.profiles.note([] if account is None else [account], room)
            job, created = await owner.evaluations.open_intake(memory)
            if created:
                self._opened[memory.id] = job
                while len(self._opened) > OPENED_KEPT:  # those `handle()` never took (outage)
                    del self._opened[next(iter(self._opened))]
        except Exception as error:
            if self.outage is None or not unreachable(error):
                # The database answers but refused the write (a full disk, a quota): journaling
                # would only move the failure to the replay, which sets the record aside.
                return await self._not_kept(memory, send, error)
            self.outage.went_down(error)
            entry = JournalEntry(memory=memory, account=account, room=room)
            return await self._keep_first(entry, send)
        self._cannot_keep_told.discard(memory.room_id)
        return "job"

    async def _not_kept_drops_its_job(
        self, memory: Memory, handled: Awaitable[HandleResult]
    ) -> HandleResult:
        """A job `keep_first` wrote that `handle()` did not take: consent refused the message
        by then (an /optout or /learning off ahead of it in its chat ran after it arrived). Its
        copy of the message goes, or start-up's recovery would learn from it."""
        result = await handled
        job = self._opened.pop(memory.id, None)
        if job is not None:
            # The narrowest delete the job store offers: it also takes the person's other
            # intake copies in this world (their messages still in flight elsewhere there).
            await self.owner.evaluations.jobs.delete_for_messages(
                [memory.id], user_id=memory.user_id, world_id=memory.world_id, statuses=["intake"]
            )
        return result

    def opened(self, memory: Memory) -> tuple[EvaluationJob, bool] | None:
        """The job `keep_first` wrote for this message, as new (once), or None: `handle()` then
        neither writes it again nor takes the message for one handled already."""
        job = self._opened.pop(memory.id, None)
        return None if job is None else (job, True)

    async def _keep_first(self, entry: JournalEntry, send: Send) -> AtDoor:
        assert self.outage is not None
        try:
            kept = await self.outage.keep(entry, send, tell_full=False)
        except Exception as error:  # the journal's own write failed (its disk is full)
            return await self._not_kept(entry.memory, send, error)
        if not kept:
            return await self._not_kept(entry.memory, send, None)
        self._cannot_keep_told.discard(entry.memory.room_id)
        return "journaled"

    async def _not_kept(self, memory: Memory, send: Send, error: BaseException | None) -> AtDoor:
        """Neither the job nor the journal could be written: "refused", so the platform is not
        told the message arrived (Telegram sends it again: polling re-reads it, the webhook
        answers 503), and the room hears once, until a message of it is kept again (not when
        it heard of this outage already: it knows its messages wait)."""
        if error is not None:
            log.error(
                "message %s could not be kept (%s: %s); not confirmed to its platform",
                memory.id,
                type(error).__name__,
                str(error).splitlines()[0] if str(error) else "",
            )
        told = memory.room_id in self._cannot_keep_told
        if not told and not (self.outage is not None and self.outage.told(memory.room_id)):
            self._cannot_keep_told.add(memory.room_id)
            try:
                await send(Content(text=CANNOT_KEEP_REPLY))
            except Exception as failed:  # the platform is away too: it sends the message again
                log.warning("telling room %s failed (%s)", memory.room_id, type(failed).__name__)
        return "refused"

    async def _keep(self, entry: JournalEntry, send: Send) -> HandleResult:
        assert self.outage is not None
        kept = await self.outage.keep(entry, send)
        return HandleResult(stored=False, responded=entry.responded, journaled=kept)

    async def note_profiles(self, accounts: Iterable[Account], room: Room | None) -> None:
        """The runtime's `note_profiles`: skipped while the database is away (the message is
        journaled with its sender and room; a mentioned person is written when next seen)."""
        if self.outage is None:
            await self.owner.profiles.note(accounts, room)
            return
        if self.outage.waiting:
            return
        try:
            await self.owner.profiles.note(accounts, room)
        except ConnectionFailure as error:
            self.outage.went_down(error)

    async def start(self) -> None:
        """At start-up: what an earlier run journaled goes in first, in order."""
        if self.outage is None:
            return
        self.outage.bind(self, resume=self.resume_evaluations)
        self.starting = True
        try:
            await self.outage.replay()
        except Exception:
            # Never a reason not to start: the rest waits in the journal (new messages behind
            # it) and the background replay retries, setting aside a record that keeps failing.
            log.exception("replaying the journal at start-up failed; retrying in the background")
            self.outage.replay_later()
        finally:
            self.starting = False

    async def resume_evaluations(self) -> None:
        """Once the database is back: a room's evaluation worker that hit the dead database
        stopped, so every room with runnable jobs is woken (claims are atomic: safe to repeat)."""
        for room_id in await self.owner.evaluations.jobs.rooms_with_runnable():
            self.owner.evaluations.wake(room_id)

    async def __call__(self, entry: JournalEntry, send: Send | None) -> None:
        """Take in one kept message, as `handle()` would have. Stable ids make it safe to
        repeat: a replay after a crash mid-replay stores nothing twice, answers nothing twice."""
        memory, owner = entry.memory, self.owner
        if not (await owner.privacy.admit(memory)).learn:
            return  # opted out (or learning off there): not kept, as at the door
        await owner.profiles.note([] if entry.account is None else [entry.account], entry.room)
        job, created = await owner.evaluations.open_intake(memory)
        if not created and (job.status != "intake" or memory.id in owner._in_intake):
            return  # taken in already
        if entry.responded:  # answered before the database went away: store what was sent
            position = await owner.store.memories.insert(memory)
            if position is not None:
                owner.events.message_received()
            for reply in entry.replies:
                position = await owner.store.memories.insert(reply) or position
            await owner.evaluations.release(job, did_respond=True, position=position)
            return
        if send is None and self.starting:
            return
        result = HandleResult(stored=False)
        answer = send if send is not None and owner.young(memory) else None
        try:
            await owner._take_in(job, memory, answer, no_typing, entry.room, None, result)
        except ConnectionFailure:
            if not result.responded:
                raise  # nothing sent: the record stays and is replayed again
            # Answered, then the database went away again: keep what was sent instead.
            answered = entry.model_copy(update={"replies": result.unstored, "responded": True})
            assert self.outage is not None
            await self.outage.keep(answered, None)

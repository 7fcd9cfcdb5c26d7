"""Intake: one message in, kept before anything else happens to it, answered, then released to
the evaluation queue; and what a crash or an outage left half-way.

`Intake.handle()` is the one entry point for a new message. Its steps, in order, so that a crash
at any of them loses nothing: (0) consent is read, with the room's window, in one read; (1) the
message's evaluation job is written, holding a copy of the message; (2) the reply is sent (each
reply recorded in the data folder as it is: bot/runtime/intake/sent_replies.py); (3) the
message and its replies are stored with the job's release to the evaluation worker, recording
whether a reply was sent (bot/storage/intake.py).

Around those steps:
- MongoDB unreachable (bot/runtime/intake/outage.py): a message goes to the fsynced journal, and
  the journal is replayed in order through the same steps once the database answers;
- `keep_first()`: a platform that must acknowledge a message (Telegram) has its job written (or
  journaled) before it is acknowledged, and `handle()` takes it on from there;
- start-up (`start()`): the journal an earlier run left goes in first; then what a crash left
  in intake waits, room by room, for its platform's adapter to call `answer_unanswered()`,
  which runs each room's leftovers in that room's lane, oldest first, ahead of anything new
  (a new message of such a room that comes first takes them in before itself). A message
  still young is answered; one past the answer window is learned from, and its room hears
  once "I missed some messages while I was restarting" (bot/runtime/intake/missed.py).

Consent is checked when a kept message is taken in: while the database is away it cannot be,
so an opted-out person's message waits in the journal and is dropped on replay.

Everything it uses is handed in (bot/runtime/agent.py builds it); it calls nothing back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from cachetools import FIFOCache
from pymongo.errors import ConnectionFailure

from bot.cancelling import BlockingCalls, Stuck
from bot.domain.records import Account, Content, EvaluationJob, Memory, Room, reply_id, utcnow
from bot.faults import FaultHook
from bot.i18n import N_, Texts
from bot.knowledge.prefetch import Background
from bot.privacy.consent import COLLECTION as CONSENT
from bot.privacy.policy import PrivacyPolicy
from bot.queue.worker import EvaluationQueue
from bot.runtime.composing import StateComposer
from bot.runtime.events import NO_EVENTS, RuntimeEvents
from bot.runtime.intake.journal import JournalEntry
from bot.runtime.intake.missed import MissedRooms
from bot.runtime.intake.outage import DISK_DEADLINE, Outage, unreachable
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.languages import Languages
from bot.runtime.profiles import KnownProfiles
from bot.runtime.replying import Replier
from bot.runtime.types import (
    HandleResult,
    InLane,
    RuntimeOptions,
    Send,
    SenderFor,
    Typing,
    no_typing,
)
from bot.storage.intake import IntakeWrites
from bot.storage.mongo import MongoStore
from bot.storage.window_reads import Read, Window

log = logging.getLogger(__name__)

# What `keep_first` did with a message: its job now holds it ("job": `handle()` takes it on
# from there), it waits in the journal ("journaled": the replay answers it), the journal was
# full ("refused"), or consent keeps nothing of it ("not kept": `handle()` still answers).
AtDoor = Literal["job", "journaled", "refused", "not kept"]
OPENED_KEPT = 10_000  # bound of what `opened` remembers
# The bot's own lines, in English: sent in the room's or the person's language (bot/i18n).
CANNOT_KEEP_REPLY = N_(
    "I can't store messages right now, so I haven't taken yours in yet. I'll pick it up again "
    "as soon as I can; if I don't answer in a while, please send it again."
)
# Whether the bot answers a message in a room (DMs always; groups when addressed).
ShouldRespond = Callable[[Memory, Room | None], bool]
# Said once in a room after a restart whose messages aged past the answer window unanswered.
MISSED_REPLY = N_("I missed some messages while I was restarting.")
# A new message of a room a crash left messages in waits this long for its platform to hand
# over how to answer them (the adapter calls `answer_unanswered()` as it connects), so the
# older ones go first; past it, they are learned from and the room is told later.
CONNECT_WAIT = 10.0


@dataclass
class _LeftInRoom:
    """What a crash left in one room: messages to answer, oldest first; `missed`: messages
    that aged past the answer window unanswered, so the room is owed MISSED_REPLY."""

    room: Room
    messages: list[tuple[EvaluationJob, Memory]] = field(default_factory=list)
    missed: bool = False


class Intake:
    def __init__(
        self,
        *,
        agent_id: str,
        store: MongoStore,
        queue: EvaluationQueue,
        composer: StateComposer,
        replier: Replier,
        privacy: PrivacyPolicy,
        profiles: KnownProfiles,
        should_respond: ShouldRespond,
        sent_replies: SentReplies,
        background: Background,
        options: RuntimeOptions,
        outage: Outage | None = None,
        events: RuntimeEvents = NO_EVENTS,
        faults: FaultHook | None = None,
        missed: MissedRooms | None = None,
        languages: Languages | None = None,
    ) -> None:
        self._agent_id = agent_id
        self._store = store
        self._queue = queue
        self._composer = composer
        self._replier = replier
        self._privacy = privacy
        self._profiles = profiles
        self._should_respond = should_respond
        self._sent_replies = sent_replies
        self._background = background
        self.options = options  # replaced whole with the runtime's (answer_window)
        # MongoDB unreachable: the journal (None: no journal, an outage fails the message).
        self.outage = outage
        self._events = events
        self._faults = faults or FaultHook()
        self._writes = IntakeWrites(store)
        # Messages between intake and release in this process (a redelivery meanwhile waits).
        self._in_intake: set[str] = set()
        # While starting, a kept message is only written as an intake job: start-up's recovery
        # then answers it if young (through its platform's adapter) and learns from it.
        self._starting = False
        # Jobs `keep_first` wrote (their message not stored yet), until `handle()` takes them.
        self._opened: FIFOCache[str, EvaluationJob] = FIFOCache(maxsize=OPENED_KEPT)
        # Rooms told that their message could not be kept, until one of theirs is kept again.
        self._cannot_keep_told: set[str] = set()
        # What a crash left in intake, by room, until its platform's adapter asks for it.
        self._left: dict[str, _LeftInRoom] = {}
        # Rooms whose leftovers are being taken in now (a new message there waits for it).
        self._answering: dict[str, asyncio.Event] = {}
        # How each connected platform reaches a room (from `answer_unanswered()`).
        self._senders: dict[str, SenderFor] = {}
        self._connected: dict[str, asyncio.Event] = {}
        self._missed = missed or MissedRooms(None)
        # The language of the bot's own lines here: the replier's choice of it.
        self._languages = languages or replier.languages
        # The data-folder writes of recovery (missed_rooms.json), each with a deadline.
        self._disk = BlockingCalls("data folder", deadline=DISK_DEADLINE)
        self._give_up_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ a new message
    async def handle(
        self,
        memory: Memory,
        send: Send,
        *,
        typing: Typing = no_typing,
        account: Account | None = None,
        room: Room | None = None,
    ) -> HandleResult:
        """Take one incoming message in (the module's doc). Safe to call twice with the same
        message. While the database is away, or kept messages wait for it, it is journaled."""
        if self._left or self._answering:
            await self._recovered_first(memory.room_id)
        if self.outage is None:
            result = HandleResult(stored=False)
            return await self._drop_unkept_job(
                memory, self._admit(memory, send, typing, account, room, result)
            )
        if self.outage.waiting:
            # The database is away, or kept messages wait for it: this one goes behind them.
            return await self._keep(JournalEntry(memory=memory, account=account, room=room), send)
        result = HandleResult(stored=False)
        try:
            return await self._drop_unkept_job(
                memory, self._admit(memory, send, typing, account, room, result)
            )
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

    async def _admit(
        self,
        memory: Memory,
        send: Send,
        typing: Typing,
        account: Account | None,
        room: Room | None,
        result: HandleResult,
    ) -> HandleResult:
        """Steps 0 and 1: consent, then the job; `_take_in` does the rest."""
        arrived = time.perf_counter()
        # One read: consent, the room's recent messages, their people and facts, the room.
        where = dict(user_id=memory.user_id, room_id=memory.room_id, world_id=memory.world_id)
        consent = {CONSENT: Read.by_ids(CONSENT, self._privacy.consent.ids(**where))}
        window = await self._composer.reply_window(memory, extra=consent)
        here = room or window.room
        # Consent first, before anything of the message is kept (the job holds a copy, the
        # prefetch caches its text). Not kept: the notice when due, a reply when addressed
        # (as anyone gets; neither stored, no action), no evaluation.
        admission = await self._privacy.admit(memory, consent=window.extra[CONSENT])
        if not admission.learn:
            if admission.notice is not None:
                texts = await self._languages.texts(memory.world_id, memory.locale)
                await send(Content(text=texts.gettext(admission.notice)))
            if self._should_respond(memory, here) and not admission.repeat:
                await self._replier.answer(
                    memory, send, typing, result, here, keep=False, window=window
                )
            return result
        self._background.prefetch_embedding(memory)
        await self._profiles.note([] if account is None else [account], room)
        if account is not None:  # read before the sender's profile was written
            window.written_since(account)
        job, created = self._take_opened(memory) or await self._queue.open_intake(memory)
        if not created and (job.status != "intake" or memory.id in self._in_intake):
            log.debug("message %s already handled", memory.id)
            return result
        self._faults.reached("handle:job-written")
        fresh = window if created else None  # new: stored with its replies, below
        return await self._take_in(job, memory, send, typing, here, arrived, result, fresh)

    async def _take_in(
        self,
        job: EvaluationJob,
        memory: Memory,
        send: Send | None,
        typing: Typing,
        room: Room | None,
        arrived: float | None = None,
        result: HandleResult | None = None,
        fresh: Window | None = None,
    ) -> HandleResult:
        """Steps 2 and 3, filling `result`; also finishes a job a crash left in intake.
        `send` None: no way to reach the room (yet), so the message is only learned from.
        `fresh`: the job was written just now, so the message is new: it is stored with its
        replies and the job's release (bot/storage/intake.py); otherwise it is stored here.
        It is the room's window read at intake, which the reply then composes from."""
        self._in_intake.add(memory.id)
        result = result or HandleResult(stored=False)
        result.job = job
        try:
            if fresh is not None:
                result.stored = result.message_unstored = True
            else:
                position = await self._store.memories.insert(memory)
                result.stored, result.position = position is not None, position or 0
            self._faults.reached("handle:message-stored")
            # Replies a killed process sent and never settled: stored now, not sent again.
            recorded = self._sent_replies.replies_for(memory.id)
            result.unstored = [entry.reply for entry in recorded if entry.store]
            result.responded = bool(recorded)
            if not result.stored and not recorded:
                # Stored by an earlier attempt that died before releasing the job (or, before
                # jobs were written first, a message whose job was never written).
                answered = await self._answered(memory)
                if send is None or answered or not self._young(memory):
                    log.info("message %s: stored earlier, now queued to learn from", memory.id)
                    await self._queue.release(job, did_respond=answered, position=None)
                    return result
                log.info("message %s: stored earlier but never answered; answering", memory.id)
            if result.stored:
                self._events.message_received()
            room = room or await self._store.rooms.get(memory.room_id)
            if send is not None and not recorded and self._should_respond(memory, room):
                await self._replier.answer(
                    memory, send, typing, result, room, arrived=arrived, window=fresh
                )
            # What is not stored yet (the message, the replies) goes with the job's release.
            unstored = [memory] * result.message_unstored + result.unstored
            settled = await self._writes.settle(
                job, unstored, did_respond=result.responded, position=result.position or None
            )
            result.message_unstored, result.unstored, result.position = False, [], settled or 0
            self._sent_replies.forget(memory.id)
            self._queue.wake(job.room_id)
            self._faults.reached("handle:released")
            return result
        finally:
            self._in_intake.discard(memory.id)

    def _young(self, memory: Memory) -> bool:
        """Still worth answering after a crash: a late reply to an old message only confuses."""
        return utcnow() - memory.created_at <= timedelta(seconds=self.options.answer_window)

    async def _answered(self, memory: Memory) -> bool:
        """Whether the reply to this message was sent (recorded when sent, stored when settled)."""
        if self._sent_replies.replies_for(memory.id):
            return True
        return await self._store.memories.get(reply_id(memory.id, self._agent_id, 0)) is not None

    # ------------------------------------------------------------------ kept before acknowledged
    async def keep_first(
        self,
        memory: Memory,
        account: Account | None,
        room: Room | None,
        send: Send,
    ) -> AtDoor:
        """Make a message safe before its platform is told it arrived (a Telegram update
        acknowledged is never sent again): its evaluation job is written, holding a copy of it,
        as `handle()`'s first step does, or it is journaled when the database is away. Then a
        crash loses nothing: start-up answers a job left in intake, and replays the journal.

        Any failure to write either (a full disk as much as a lost connection) returns
        "refused": the message is not acknowledged, so its platform sends it again, and the
        room is told once. Both Telegram modes send it again: the webhook after a 503, polling
        because it re-reads an update it did not confirm.
        """
        if self.outage is not None and self.outage.waiting:
            return await self._keep_first(
                JournalEntry(memory=memory, account=account, room=room), send
            )
        try:
            # Read only: `handle()`'s own consent check tells the person (once) and answers.
            refusal = await self._privacy.consent.check(
                user_id=memory.user_id, room_id=memory.room_id, world_id=memory.world_id
            )
            if refusal is not None:
                return "not kept"
            await self._profiles.note([] if account is None else [account], room)
            job, created = await self._queue.open_intake(memory)
            if created:
                # The oldest go first: those `handle()` never took (an outage).
                self._opened[memory.id] = job
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

    def _take_opened(self, memory: Memory) -> tuple[EvaluationJob, bool] | None:
        """The job `keep_first` wrote for this message, as new (once), or None: `handle()` then
        neither writes it again nor takes the message for one handled already."""
        job = self._opened.pop(memory.id, None)
        return None if job is None else (job, True)

    async def _drop_unkept_job(
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
            await self._queue.jobs.delete_for_messages(
                [memory.id], user_id=memory.user_id, world_id=memory.world_id, statuses=["intake"]
            )
        return result

    async def _keep_first(self, entry: JournalEntry, send: Send) -> AtDoor:
        assert self.outage is not None
        try:
            kept = await self.outage.keep(
                entry, send, tell_full=False, texts=self._texts_now(entry.memory)
            )
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
                await send(Content(text=self._texts_now(memory).gettext(CANNOT_KEEP_REPLY)))
            except Exception as failed:  # the platform is away too: it sends the message again
                log.warning("telling room %s failed (%s)", memory.room_id, type(failed).__name__)
        return "refused"

    # ------------------------------------------------------------------ the outage journal
    async def _keep(self, entry: JournalEntry, send: Send) -> HandleResult:
        assert self.outage is not None
        try:
            kept = await self.outage.keep(entry, send, texts=self._texts_now(entry.memory))
        except Exception as error:  # the journal's disk is full or stuck: the room hears once
            await self._not_kept(entry.memory, send, error)
            kept = False
        return HandleResult(stored=False, responded=entry.responded, journaled=kept)

    async def note_profiles(self, accounts: Iterable[Account], room: Room | None) -> None:
        """Profiles seen outside a message's intake; skipped while the database is away (the
        message is journaled with its sender and room; a mentioned person is written when
        next seen)."""
        if self.outage is None:
            await self._profiles.note(accounts, room)
            return
        if self.outage.waiting:
            return
        try:
            await self._profiles.note(accounts, room)
        except ConnectionFailure as error:
            self.outage.went_down(error)

    async def _replay_journal(self) -> None:
        """At start-up: what an earlier run journaled goes in first, in order."""
        if self.outage is None:
            return
        self.outage.bind(self._take_in_kept, resume=self._resume_evaluations)
        self._starting = True
        try:
            await self.outage.replay()
        except Exception:
            # Never a reason not to start: the rest waits in the journal (new messages behind
            # it) and the background replay retries, setting aside a record that keeps failing.
            log.exception("replaying the journal at start-up failed; retrying in the background")
            self.outage.replay_later()
        finally:
            self._starting = False

    async def _resume_evaluations(self) -> None:
        """Once the database is back: a room's evaluation worker that hit the dead database
        stopped, so every room with runnable jobs is woken (claims are atomic: safe to repeat)."""
        for room_id in await self._queue.jobs.rooms_with_runnable():
            self._queue.wake(room_id)

    async def _take_in_kept(self, entry: JournalEntry, send: Send | None) -> None:
        """Take in one kept message, as `handle()` would have (the journal's replay calls
        this). Stable ids make it safe to repeat: a replay after a crash mid-replay stores
        nothing twice, answers nothing twice."""
        memory = entry.memory
        if not (await self._privacy.admit(memory)).learn:
            return  # opted out (or learning off there): not kept, as at the door
        await self._profiles.note([] if entry.account is None else [entry.account], entry.room)
        job, created = await self._queue.open_intake(memory)
        if not created and (job.status != "intake" or memory.id in self._in_intake):
            return  # taken in already
        if entry.responded:  # answered before the database went away: store what was sent
            position = await self._store.memories.insert(memory)
            if position is not None:
                self._events.message_received()
            for reply in entry.replies:
                position = await self._store.memories.insert(reply) or position
            await self._queue.release(job, did_respond=True, position=position)
            return
        if send is None and self._starting:
            return
        result = HandleResult(stored=False)
        answer = send if send is not None and self._young(memory) else None
        try:
            await self._take_in(job, memory, answer, no_typing, entry.room, None, result)
        except ConnectionFailure:
            if not result.responded:
                raise  # nothing sent: the record stays and is replayed again
            # Answered, then the database went away again: keep what was sent instead.
            answered = entry.model_copy(update={"replies": result.unstored, "responded": True})
            assert self.outage is not None
            await self.outage.keep(answered, None)

    # ------------------------------------------------------------------ after a crash
    async def start(self) -> None:
        """The journal an earlier run left goes in first, in order; then what a crash left in
        intake is taken in or set aside to answer (see the module's doc)."""
        await self._replay_journal()
        await self._recover()

    async def _recover(self) -> None:
        """A message whose job is still in `intake` at start-up was taken in by a process that
        died (this process's predecessor, or another process of the deployment once its lease
        expired), or by this start's replay of the journal. One answered already is settled
        now. The rest wait, by room, for their platform's adapter (`answer_unanswered()`): a
        young one to be answered there; an old one is learned from now, its room owed one
        line. Learned from unanswered too: what waits longer than the answer window."""
        orphans = await self._queue.orphaned_intake(self._in_intake)
        # Records of replies to messages settled since are dropped
        # (bot/runtime/intake/sent_replies.py).
        self._sent_replies.keep_only({job.message_id for job in orphans} | self._in_intake)
        for owed in self._missed.rooms():  # owed the line by an earlier start
            self._left_in(owed).missed = True
        waiting = 0
        aged: list[tuple[EvaluationJob, Memory]] = []
        for job in orphans:
            memory = job.message or await self._store.memories.get(job.message_id)
            if memory is None:
                await self._queue.release(job, did_respond=False, position=None)
                continue
            room: Room | None = None
            if not await self._answered(memory):
                room = await self._store.rooms.get(memory.room_id)
            if room is None:  # answered already (settled now), or nowhere to answer it
                await self._take_in(job, memory, None, no_typing, None)
            elif self._young(memory):
                self._left_in(room).messages.append((job, memory))
                waiting += 1
            else:
                self._left_in(room).missed = True
                aged.append((job, memory))
        # Owed before learned from: a crash in between still leaves the room owed the line.
        await self._owe_missed([left.room for left in self._left.values() if left.missed])
        for job, memory in aged:
            await self._take_in(job, memory, None, no_typing, None)
        if waiting:
            log.info("%d message(s) interrupted before their reply: answering them", waiting)
            loop = asyncio.get_running_loop()
            self._give_up_timer = loop.call_later(self.options.answer_window, self._give_up_later)

    def _left_in(self, room: Room) -> _LeftInRoom:
        return self._left.setdefault(room.id, _LeftInRoom(room))

    async def _owe_missed(self, rooms: list[Room]) -> None:
        if rooms:
            try:
                await self._disk.run(lambda: self._missed.add(rooms))
            except (OSError, Stuck) as error:  # only the courtesy line is at stake
                log.error("cannot note the rooms owed a line (%s)", type(error).__name__)

    async def answer_unanswered(
        self, platform: str, sender_for: SenderFor, in_lane: InLane | None = None
    ) -> int:
        """Answer the messages of `platform` a crash left unanswered (adapters call this once
        connected, with how to reply in a room and how to run work in a room's lane); returns
        how many were answered. Each room's leftovers are queued in its lane before this
        yields, oldest first, so whatever the room receives from now on comes after them.
        Without `in_lane` the rooms are taken one after another."""
        self._senders[platform] = sender_for
        self._connected_event(platform).set()
        rooms = [room_id for room_id, left in self._left.items() if left.room.platform == platform]
        answered = [0]

        async def take(room_id: str) -> None:
            answered[0] += await self._answer_left(room_id)

        if in_lane is None:
            for room_id in rooms:
                await take(room_id)
            return answered[0]
        queued = [
            in_lane(self._left[room_id].room, functools.partial(take, room_id)) for room_id in rooms
        ]
        if queued:
            await asyncio.wait(queued)
        return answered[0]

    def _connected_event(self, platform: str) -> asyncio.Event:
        return self._connected.setdefault(platform, asyncio.Event())

    async def _recovered_first(self, room_id: str) -> None:
        """Before a new message: what a crash left in its room goes first (in the room's lane,
        where this runs), once its platform has said how to reach the room."""
        left = self._left.get(room_id)
        if left is None:
            busy = self._answering.get(room_id)
            if busy is not None:
                await busy.wait()
            return
        connected = self._connected_event(left.room.platform)
        if not connected.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(connected.wait(), CONNECT_WAIT)
        await self._answer_left(room_id)

    async def _answer_left(self, room_id: str) -> int:
        """Take in what a crash left in one room, oldest first: a young message answered, an
        old one learned from, the room told once that it aged unanswered. Returns how many
        were answered."""
        left = self._left.pop(room_id, None)
        if left is None:  # taken already, or being taken (by a new message of the room)
            busy = self._answering.get(room_id)
            if busy is not None:
                await busy.wait()
            return 0
        done = self._answering[room_id] = asyncio.Event()
        sender_for = self._senders.get(left.room.platform)
        answered = 0
        owed, told = left.missed, False
        try:
            if owed:
                told = await self._tell_missed(left.room, sender_for)
            for job, memory in left.messages:
                if sender_for is None or not self._young(memory):
                    # Aged while waiting (behind the room's other leftovers, or for its
                    # platform): owed before learned from, as at start-up.
                    if not told:
                        owed = True
                        await self._owe_missed([left.room])
                        told = await self._tell_missed(left.room, sender_for)
                    await self._take_in(job, memory, None, no_typing, None)
                    continue
                send = sender_for(left.room, memory)
                result = await self._take_in(job, memory, send, no_typing, left.room)
                answered += result.responded
        finally:
            if owed and not told:  # said once the platform connects (or at the next start)
                self._left_in(left.room).missed = True
            del self._answering[room_id]
            done.set()
        return answered

    async def _tell_missed(self, room: Room, sender_for: SenderFor | None) -> bool:
        """Say MISSED_REPLY in the room (once: it is then no longer owed); False when it could
        not be said now (no way to reach the room yet, or its platform refused): it stays
        owed, for the next start."""
        if sender_for is None:
            return False
        try:
            texts = await self._languages.texts(room.world_id)  # the room's: nobody in particular
            await sender_for(room, None)(Content(text=texts.gettext(MISSED_REPLY)))
        except Exception as error:
            log.warning("telling room %s it was missed failed (%s)", room.id, type(error).__name__)
            return False
        try:
            await self._disk.run(lambda: self._missed.told(room.id))
        except (OSError, Stuck) as error:  # told again after the next restart, at worst
            log.error("cannot note room %s was told (%s)", room.id, type(error).__name__)
        return True

    def _texts_now(self, memory: Memory) -> Texts:
        """The language of a line said while the database is away: no read for it."""
        return self._languages.texts_now(memory.world_id, memory.locale)

    def _give_up_later(self) -> None:
        # Not waited for (bot/knowledge/prefetch.py keeps the task referenced).
        self._background.spawn(self._give_up_answering())

    async def _give_up_answering(self) -> None:
        """The answer window has passed and some platform never asked for its leftovers: they
        are learned from, and their rooms stay owed the line (said when it connects)."""
        for left in list(self._left.values()):
            aged, left.messages = left.messages, []
            if not aged:
                continue
            left.missed = True
            await self._owe_missed([left.room])
            for job, memory in aged:
                await self._take_in(job, memory, None, no_typing, None)

    def stop(self) -> None:
        if self._give_up_timer is not None:
            self._give_up_timer.cancel()

"""While MongoDB is unreachable: incoming messages wait in the local journal, each room is told
once that the bot is having trouble remembering, and the journal is replayed in order once the
database answers again.

The bot does not answer in full without the database: a reply is composed from the room's
recent messages and what it has learned about the person, all in MongoDB, and could
not be stored. Answering without them would be answering as a stranger, so it says so, once
per room per outage, and answers the kept messages when the database is back (if they are
still young, as after a crash; older ones are only learned from).

An outage starts when a write or read of the intake fails for connectivity (PyMongo's
`ConnectionFailure`: `ServerSelectionTimeoutError`, `AutoReconnect`, `NetworkTimeout`). From
then on, and until the journal is empty again, every incoming message goes to the journal
without touching the database: the person does not wait for a time-out per message, and
messages that come in during the replay stay behind the ones kept before them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from pymongo.errors import ConnectionFailure
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from bot.cancelling import BlockingCalls, cancel_and_wait
from bot.domain.records import Content
from bot.faults import FaultHook
from bot.i18n import N_, SOURCE_LANGUAGE, Texts, texts_for
from bot.runtime.intake.journal import Journal, JournalEntry, JournalFull, JournalRecord
from bot.storage.mongo import StorageUnavailable

log = logging.getLogger(__name__)

# In English, sent in the person's language (bot/i18n: `keep`'s `texts`).
TROUBLE_REPLY = N_(
    "I'm having trouble remembering right now. I've kept your message and will come back to it."
)
FULL_REPLY = N_("I can't take more messages right now, please try again later.")
# A command while MongoDB is unreachable, or while what was kept meanwhile is not yet back in
# it: it would fail after time-outs, or (a /forgetme) run before a kept message is stored.
DATABASE_AWAY = N_(
    "I can't reach my memory right now; please try again in a few minutes. Nothing was changed."
)

Send = Callable[[Content], Awaitable[None]]
# Takes one kept message in for real (the runtime's intake); raises ConnectionFailure when the
# database went away again, and the record then stays for the next attempt.
ReplayOne = Callable[[JournalEntry, Send | None], Awaitable[None]]
Ping = Callable[[], Awaitable[object]]
# After the replay: wake what the outage stopped (evaluation workers that hit the dead database).
Resume = Callable[[], Awaitable[object]]
# A kept message whose intake fails this often for another reason than connectivity is set
# aside (`journal.jsonl.failed`), so one bad record cannot hold up every message behind it.
MAX_REPLAY_FAILURES = 3
# Seconds a write or read of the journal file may take: past it the disk is taken as stuck
# (`Stuck` is raised: the message was not kept), so a stuck disk holds up no room for longer.
DISK_DEADLINE = 10.0
# The replay reads the whole file and rewrites it (50 MB at most): in the background, and
# given this many times the deadline of one write, so a long journal is not taken for stuck.
REPLAY_DEADLINE_FACTOR = 10


async def wait_until_reachable(
    ping: Ping, *, first_delay: float = 1.0, max_delay: float = 30.0
) -> None:
    """At start-up: return once MongoDB answers, retrying with back-off (one log line per
    attempt) while it cannot be reached, instead of exiting.

    Nothing that takes messages in starts before this returns (the platforms connect after
    the app is open), so nothing is received that could not be kept: Telegram holds updates
    no one has fetched or accepted; Discord delivers nothing to a bot not connected (as when it
    is stopped). Credentials the server refuses are not waited for: a setting to fix."""

    def log_wait(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        log.error(
            "%s; waiting for it before starting (attempt %d, next in %.0f s)",
            str(error).rstrip("."),
            state.attempt_number,
            pause,
        )

    retrying = AsyncRetrying(
        retry=retry_if_exception(_unreachable_at_start),
        wait=wait_exponential(multiplier=first_delay, max=max_delay),
        before_sleep=log_wait,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            await ping()
    if (attempts := retrying.statistics["attempt_number"]) > 1:
        log.info("MongoDB answers after %d attempts: starting", attempts)


def _unreachable_at_start(error: BaseException) -> bool:
    """Worth waiting for: no connection. Credentials the server refuses are a setting to fix."""
    return isinstance(error, StorageUnavailable) and isinstance(
        error.__context__, ConnectionFailure
    )


def unreachable(error: BaseException) -> bool:
    """Whether an error means the database cannot be reached (not that it refused a write)."""
    return isinstance(error, ConnectionFailure | StorageUnavailable)


class Outage:
    """The journal's owner: keeps messages, tells rooms, replays with back-off."""

    def __init__(
        self,
        journal: Journal,
        *,
        ping: Ping,
        faults: FaultHook | None = None,
        first_delay: float = 0.5,
        max_delay: float = 30.0,
        disk_deadline: float = DISK_DEADLINE,
    ) -> None:
        self.journal = journal
        # The journal's file calls, off the event loop, each with a deadline.
        self.disk = BlockingCalls("journal", deadline=disk_deadline)
        self._ping = ping
        self._faults = faults or FaultHook()
        self._first_delay = first_delay
        self._max_delay = max_delay
        self._replay_one: ReplayOne | None = None
        self._resume: Resume | None = None
        self._failures: dict[int, int] = {}  # replay failures by record (not connectivity)
        self.down = False
        self.replayed = 0
        self.refused = 0
        self._told: set[str] = set()  # rooms told about this outage
        self._full_logged = False
        # How to reach the person behind a kept message, while this process lives.
        self._sends: dict[str, Send] = {}
        self._task: asyncio.Task[None] | None = None
        # Cuts the replay's back-off short: someone is waiting for the database (ready()).
        self._wake = asyncio.Event()

    def bind(self, replay_one: ReplayOne, resume: Resume | None = None) -> None:
        self._replay_one = replay_one
        self._resume = resume

    @property
    def waiting(self) -> bool:
        """Incoming messages go to the journal: the database is down, or kept messages wait."""
        return self.down or len(self.journal) > 0

    def told(self, room_id: str) -> bool:
        """Whether the room heard about this outage already (it knows its messages wait)."""
        return room_id in self._told

    def went_down(self, error: BaseException) -> None:
        if not self.down:
            reason = str(error).split(", Timeout:", 1)[0].splitlines()[0]
            log.error(
                "MongoDB is unreachable (%s: %s); keeping incoming messages in %s",
                type(error).__name__,
                reason,
                self.journal.path,
            )
        self.down = True
        self._ensure_replaying()

    async def keep(
        self,
        entry: JournalEntry,
        send: Send | None,
        *,
        tell_full: bool = True,
        texts: Texts | None = None,
    ) -> bool:
        """Journal one message (fsynced); tell its room once per outage, or that the journal is
        full (unless not `tell_full`: the platform sends it again), in `texts`' language
        (None: English). Returns whether it was kept; raises when the file cannot be written
        (OSError) or the write is stuck (Stuck)."""
        texts = texts or texts_for(SOURCE_LANGUAGE)
        try:
            await self.disk.run(lambda: self.journal.append(entry))
        except JournalFull as full:
            self.refused += 1
            if not self._full_logged:
                self._full_logged = True
                log.error("%s: refusing incoming messages until it is replayed", full)
            if send is not None and tell_full:
                await send(Content(text=texts.gettext(FULL_REPLY)))
            return False
        self._full_logged = False
        self._faults.reached("journal:appended")
        room_id = entry.memory.room_id
        if send is not None:
            self._sends[entry.memory.id] = send
            if self.down and not entry.responded and room_id not in self._told:
                self._told.add(room_id)
                await send(Content(text=texts.gettext(TROUBLE_REPLY)))
        self._ensure_replaying()
        return True

    # ------------------------------------------------------------------ replay
    async def replay(self) -> int:
        """Take every kept message in, oldest first, until the journal is empty; each record
        leaves the file only once it is in MongoDB. Returns how many were replayed."""
        assert self._replay_one is not None, "bind() the intake first"
        replayed = 0
        deadline = self.disk.deadline * REPLAY_DEADLINE_FACTOR
        while records := await self.disk.run(self.journal.records, deadline=deadline):
            last = 0
            try:
                for record in records:
                    message_id = record.entry.memory.id
                    try:
                        await self._replay_one(record.entry, self._sends.get(message_id))
                    except Exception as error:
                        if unreachable(error) or not self._given_up(record, error):
                            raise
                    self._sends.pop(message_id, None)
                    self._faults.reached("journal:replayed")
                    last = record.seq
                    replayed += 1
            finally:
                if last:
                    await self.disk.run(
                        functools.partial(self.journal.drop_through, last), deadline=deadline
                    )
        self.replayed += replayed
        return replayed

    def _given_up(self, record: JournalRecord, error: Exception) -> bool:
        """Count a failed intake of a kept message; past the limit, set it aside (True)."""
        failures = self._failures.get(record.seq, 0) + 1
        self._failures[record.seq] = failures
        if failures < MAX_REPLAY_FAILURES:
            return False
        del self._failures[record.seq]
        aside = self.journal.set_aside(record)
        log.error(
            "message %s could not be taken in from the journal (%d attempts, %s: %s); "
            "set aside in %s",
            record.entry.memory.id,
            failures,
            type(error).__name__,
            error,
            aside,
        )
        return True

    async def ready(self, wait: float) -> bool:
        """Whether the database answers and every kept message is in it, waiting up to `wait`
        seconds (the replay is woken from its back-off to find out at once). What changes
        or reads a person's data (a command) must wait for this: run before the replay, a
        /forgetme would be followed by the storing of a message it should have forgotten."""
        if not self.waiting:
            return True
        self._wake.set()
        self._ensure_replaying()
        if self._task is not None:  # it ends once the database answers and the journal is empty
            await asyncio.wait([self._task], timeout=wait)
        return not self.waiting

    def replay_later(self) -> None:
        """Replay in the background (start-up could not: a record failed, or the database)."""
        self._ensure_replaying()

    def _ensure_replaying(self) -> None:
        if self._replay_one is not None and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._replay_when_back(), name="journal-replay")

    async def _replay_when_back(self) -> None:
        """Poll the database with back-off; once it answers, replay until the journal is empty."""
        delay = self._first_delay
        while True:
            try:
                await self._ping()
                self.down = False  # from here on, messages kept wait only for the replay
                replayed = await self.replay()
                if (replayed or self._told) and self._resume is not None:
                    await self._resume()
            except Exception as error:
                if unreachable(error):
                    self.down = True
                else:
                    log.exception("replaying the journal failed; trying again in %.1fs", delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                self._wake.clear()
                delay = min(delay * 2, self._max_delay)
                continue
            if self._told or replayed:
                log.info("MongoDB is reachable again: %d kept message(s) replayed", replayed)
            self._told.clear()
            if not self.waiting:
                return

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

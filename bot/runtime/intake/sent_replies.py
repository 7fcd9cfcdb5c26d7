"""The record of sent replies: which replies went out for a message still in intake.

A reply is sent before it is stored (it is stored with the message and the job's release,
bot/storage/intake.py). A process killed between the two used to leave no trace that the
reply went out, so recovery answered the message again. Right after `send` returns, and
before the coroutine yields to the event loop again, the reply is appended here: one JSON
line per reply (`SentReply`), keyed by the message's id, in `sent_replies.jsonl` in the data
folder. Recovery (start-up's, in bot/runtime/intake/intake.py, or a redelivery through
`handle()`) then stores the recorded replies instead of answering again.

Durability: a plain `write` to the file (no fsync, which would block the event loop on every
reply). The bytes are in the kernel once `write` returns, so they survive the process being
killed (`kill -9`, a crash); they need not survive a power cut, after which the reply may be
sent again (at-least-once). A kill during the platform's HTTP call itself also repeats the
reply: nothing says whether it arrived. The record is local: another process taking over a
dead process's intake cannot see it, and answers again (at-least-once).

Bounded: a settled message's replies are forgotten; the file is compacted to what is still
pending at start-up (`keep_only`) and whenever it passes `max_bytes`. A half-written last line
(a kill mid-write) is cut on open, as the outage journal does (bot/runtime/intake/journal.py).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.domain.records import Memory
from bot.runtime.intake.journal import complete_lines, replace_file

log = logging.getLogger(__name__)

SENT_REPLIES_FILE = "sent_replies.jsonl"


class SentReply(BaseModel):
    """One line: a reply sent for `message_id`; `store` False: sent only (never stored, e.g.
    words recovered from an unreadable answer), it still counts as the message answered."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    reply: Memory
    store: bool = True


class SentReplies:
    """The append-only record; `path` None keeps it in memory only (tests, no data folder)."""

    def __init__(self, path: Path | None, *, max_bytes: int = 1_000_000) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._pending: dict[str, list[SentReply]] = {}
        self._bytes = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            entries, torn = self._load(path)
            for entry in entries:
                self._pending.setdefault(entry.message_id, []).append(entry)
            if torn:
                self._rewrite()  # the half line goes, so the next append starts a whole one

    @classmethod
    def in_folder(cls, data_dir: Path, *, max_bytes: int = 1_000_000) -> SentReplies:
        return cls(data_dir / SENT_REPLIES_FILE, max_bytes=max_bytes)

    def record(self, message_id: str, reply: Memory, *, store: bool = True) -> None:
        """Append one sent reply. Synchronous on purpose: called right after `send` returns,
        with no await between, so no other coroutine (and no kill it triggers) comes first."""
        entry = SentReply(message_id=message_id, reply=reply, store=store)
        self._pending.setdefault(message_id, []).append(entry)
        if self.path is None:
            return
        line = (entry.model_dump_json() + "\n").encode("utf-8")
        try:
            # Owner-only: the replies quote what people said.
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(descriptor, line)  # in the kernel now: survives a kill, not a power cut
            finally:
                os.close(descriptor)
        except OSError as error:
            # A full disk: the reply went out, and this process still knows it (above); only a
            # kill before it is settled would send it again. Failing here would fail a message
            # that was answered, and its retry would answer it twice.
            log.error("%s: cannot record a sent reply (%s)", self.path, error.strerror or error)
            return
        self._bytes += len(line)
        if self._bytes > self.max_bytes:
            self._rewrite()

    def replies_for(self, message_id: str) -> list[SentReply]:
        """The replies recorded as sent for a message not settled yet (oldest first)."""
        return list(self._pending.get(message_id, ()))

    def forget(self, message_id: str) -> None:
        """The message is settled (its replies are stored): its record is no longer needed;
        it leaves the file at the next compaction."""
        self._pending.pop(message_id, None)

    def forget_messages(self, message_ids: set[str]) -> None:
        """Forgetting a person: the file is rewritten at once, without their messages' replies
        (and without every settled record, which it no longer needs)."""
        self._pending = {m: e for m, e in self._pending.items() if m not in message_ids}
        self._rewrite()

    def keep_only(self, message_ids: set[str]) -> None:
        """Start-up: drop the records of messages no longer in intake (settled before the
        crash) and rewrite the file with the rest."""
        self._pending = {m: e for m, e in self._pending.items() if m in message_ids}
        self._rewrite()

    def __len__(self) -> int:
        return len(self._pending)

    def _rewrite(self) -> None:
        if self.path is None:
            return
        entries = [entry for entries in self._pending.values() for entry in entries]
        data = b"".join((e.model_dump_json() + "\n").encode("utf-8") for e in entries)
        replace_file(self.path, data)
        self._bytes = len(data)

    def _load(self, path: Path) -> tuple[list[SentReply], bool]:
        """The readable records, and whether a half-written last line was found."""
        if not path.exists():
            return [], False
        data = path.read_bytes()
        self._bytes = len(data)
        lines, torn = complete_lines(data)
        if torn:
            log.warning("%s: cut a half-written last record (%d bytes)", path, len(torn))
        entries: list[SentReply] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                entries.append(SentReply.model_validate(json.loads(raw)))
            except (ValueError, ValidationError) as error:
                log.error("%s: an unreadable record, skipped: %s", path, str(error).splitlines()[0])
        return entries, bool(torn)

"""The outage journal: messages that arrived while MongoDB was unreachable, kept on local disk
until they are safely in the database.

One append-only file of JSON lines in the data folder (`journal.jsonl`). Each line is a
`JournalRecord`: a sequence number, when it was written, and the incoming message with
everything needed to take it in later (its account and room, the replies already sent for it).
Every append is flushed and `os.fsync`ed before it returns, so a message the bot has told the
person about survives a crash or a power cut.

The file is bounded (`max_bytes`): an append that would pass the bound raises `JournalFull`
instead of growing without end. Records leave the file only through `drop_through(seq)`,
which the replay calls once those records are stored in MongoDB; it rewrites the file without
them (a new file, fsynced, then an atomic rename), so a crash mid-compaction leaves either the
old file or the new one, never a half.

A crash mid-append leaves a last line without its newline: it was never acknowledged, so it is
cut off when the journal is opened. A line that cannot be read (a damaged disk, a hand edit) is
moved to `journal.jsonl.unreadable` with one log line each and counted in `unreadable`; the
rest are still replayed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.domain.records import Account, Memory, Room, epoch_millis, utcnow

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.jsonl"


class JournalFull(Exception):
    """The journal is at its size bound; the message was not written."""


class JournalEntry(BaseModel):
    """One incoming message, as the intake needs it after the database is back."""

    model_config = ConfigDict(frozen=True)

    memory: Memory
    account: Account | None = None
    room: Room | None = None
    # Replies already sent for this message (sent before its storage failed): stored on replay,
    # and the message then counts as answered, so it is not answered twice.
    replies: list[Memory] = Field(default_factory=list)
    responded: bool = False


class JournalRecord(BaseModel):
    """One line of the file: an entry with its place in the journal and when it was written."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=1)
    journaled_ms: int = Field(ge=0)
    entry: JournalEntry


class Journal:
    """The bounded, fsynced, append-only journal file. Thread-safe: the async code calls its
    methods in threads of its own, each call with a deadline (bot/runtime/intake/outage.py), so
    an fsync never blocks the event loop and a stuck disk holds up no room for long."""

    def __init__(self, path: Path, *, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.path = path
        self.max_bytes = max_bytes
        self.unreadable = 0
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        records = self._load()
        self._count = len(records)
        self._seq = records[-1].seq if records else 0
        self._bytes = path.stat().st_size if path.exists() else 0

    @classmethod
    def in_folder(cls, data_dir: Path, *, max_bytes: int) -> Journal:
        return cls(data_dir / JOURNAL_FILE, max_bytes=max_bytes)

    # ------------------------------------------------------------------ reading the state
    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return self._count

    # ------------------------------------------------------------------ writing
    def append(self, entry: JournalEntry) -> JournalRecord:
        """Write one entry durably (fsynced before this returns); JournalFull at the bound."""
        with self._lock:
            record = JournalRecord(
                seq=self._seq + 1, journaled_ms=epoch_millis(utcnow()), entry=entry
            )
            line = (record.model_dump_json() + "\n").encode("utf-8")
            if self._bytes + len(line) > self.max_bytes:
                raise JournalFull(
                    f"the journal is full ({self._bytes:,} of {self.max_bytes:,} bytes)"
                )
            fresh = not self.path.exists()
            # Owner-only: the journal holds what people said.
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                written = 0
                while written < len(line):  # unbuffered: nothing is left to flush at close
                    written += os.write(descriptor, line[written:])
                os.fsync(descriptor)
            except OSError:
                # A full disk can take half the line: cut it, or the next append would be
                # glued to it and both lost as one unreadable line.
                with contextlib.suppress(OSError):
                    os.ftruncate(descriptor, self._bytes)
                raise
            finally:
                os.close(descriptor)
            if fresh:
                _fsync_folder(self.path.parent)  # the new file's name is durable too
            self._seq = record.seq
            self._bytes += len(line)
            self._count += 1
            return record

    def records(self) -> list[JournalRecord]:
        """Every readable record, oldest first."""
        with self._lock:
            return self._read()

    def set_aside(self, record: JournalRecord) -> Path:
        """Copy a record that cannot be taken in to `<name>.failed` for the operator (the
        replay then drops it from the journal, so it cannot hold up the ones behind it)."""
        aside = self.path.with_name(self.path.name + ".failed")
        with self._lock:
            descriptor = os.open(aside, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(descriptor, "ab") as file:
                file.write((record.model_dump_json() + "\n").encode("utf-8"))
                file.flush()
                os.fsync(file.fileno())
        return aside

    def forget_set_aside(self, user_id: str, world_id: str) -> int:
        """Forgetting a person in a world: their records go from the files set aside for the
        operator too (`.failed`; and every `.unreadable` line naming both ids, since such a
        line cannot be read to tell more). Returns how many lines went."""
        removed = 0
        with self._lock:
            for suffix in (".failed", ".unreadable"):
                aside = self.path.with_name(self.path.name + suffix)
                if not aside.exists():
                    continue
                lines, torn = complete_lines(aside.read_bytes())
                keep = [
                    raw
                    for raw in lines
                    if raw.strip() and not _names(raw, user_id=user_id, world_id=world_id)
                ]
                gone = sum(1 for raw in lines if raw.strip()) - len(keep)
                if gone or torn:
                    replace_file(aside, b"".join(raw + b"\n" for raw in keep))
                removed += gone
        return removed

    def drop_through(self, seq: int) -> None:
        """Remove the records up to and including `seq` (they are in MongoDB now). Records
        appended meanwhile stay. The file is replaced atomically; emptied, it is removed."""
        with self._lock:
            keep = [record for record in self._read() if record.seq > seq]
            data = b"".join((r.model_dump_json() + "\n").encode("utf-8") for r in keep)
            self._replace(data)
            self._bytes = len(data)
            self._count = len(keep)

    # ------------------------------------------------------------------ internals
    def _read(self) -> list[JournalRecord]:
        if not self.path.exists():
            return []
        records: list[JournalRecord] = []
        with self.path.open("rb") as file:
            for raw in file:
                if not raw.strip():
                    continue
                try:
                    records.append(_parse(raw))
                except ValueError as error:  # damaged since it was opened: skip, never stop
                    log.error("journal %s: a record is unreadable, skipped: %s", self.path, error)
        return records

    def _load(self) -> list[JournalRecord]:
        """Read the file as a crash left it: a last line without its newline was never fsynced
        (never acknowledged to anyone) and is cut off; unreadable lines are moved to
        `<name>.unreadable` for the operator, so they cannot stop the replay of the rest."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines, torn = complete_lines(data)
        if torn:
            log.warning(
                "journal %s: cut a half-written last record (%d bytes)", self.path, len(torn)
            )
        records: list[JournalRecord] = []
        good: list[bytes] = []
        bad: list[bytes] = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                records.append(_parse(raw))
            except ValueError as error:
                reason = str(error).splitlines()[0]
                log.error(
                    "journal %s line %d is unreadable, set aside: %s", self.path, number, reason
                )
                bad.append(raw)
                continue
            good.append(raw)
        self.unreadable = len(bad)
        if bad:
            aside = self.path.with_name(self.path.name + ".unreadable")
            # Owner-only, as the journal: the lines hold what people said.
            descriptor = os.open(aside, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(descriptor, "ab") as file:
                file.write(b"".join(raw + b"\n" for raw in bad))
                file.flush()
                os.fsync(file.fileno())
        if torn or bad:
            self._replace(b"".join(raw + b"\n" for raw in good))
        return records

    def _replace(self, data: bytes) -> None:
        replace_file(self.path, data)


def replace_file(path: Path, data: bytes) -> None:
    """Swap the file for one holding `data` (owner-only): written and fsynced aside, then
    renamed, so a crash leaves the old file or the new one, never a half. Empty: removed."""
    if not data:
        path.unlink(missing_ok=True)
    else:
        temporary = path.with_name(path.name + ".new")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    _fsync_folder(path.parent)


def complete_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """A file's whole lines and what follows the last newline (b"" unless a write was cut
    short by a crash: that half line was never finished and is to be cut off)."""
    lines = data.split(b"\n")
    torn = lines.pop()
    return lines, torn


def _names(raw: bytes, *, user_id: str, world_id: str) -> bool:
    """Whether a set-aside line is a message of this person in this world."""
    try:
        memory = _parse(raw).entry.memory
    except ValueError:
        return user_id.encode() in raw and world_id.encode() in raw
    return memory.user_id == user_id and memory.world_id == world_id


def _parse(raw: bytes) -> JournalRecord:
    """One line as a record; ValueError (JSON or validation) when it is not one."""
    try:
        return JournalRecord.model_validate(json.loads(raw))
    except ValidationError as error:
        raise ValueError(str(error)) from None


def _fsync_folder(folder: Path) -> None:
    """Make a file's creation, rename or removal durable (the folder's entry is data too)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # not every platform lets a folder be opened; the file's own fsync still holds
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

"""The outage journal file (bot/runtime/intake/journal.py): durable, ordered, bounded, compacted
only on request, and readable after a crash mid-write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bot.domain.records import Account, Content, Memory, Room, message_id, reply_id
from bot.runtime.intake.journal import Journal, JournalEntry, JournalFull
from tests.paths import REPO

ROOM = Room(id="room-1", world_id="world-1", platform="test", kind="dm", name="chat")
ACCOUNT = Account(id="acct-1", platform="test", platform_id="sarah", name="Sarah")


def entry(number: int, text: str | None = None) -> JournalEntry:
    memory = Memory(
        id=message_id("test", "chat", number),
        user_id=ACCOUNT.id,
        agent_id="agent-1",
        room_id=ROOM.id,
        world_id=ROOM.world_id,
        content=Content(text=text or f"message {number}", source="test"),
    )
    return JournalEntry(memory=memory, account=ACCOUNT, room=ROOM)


def texts(journal: Journal) -> list[str]:
    return [record.entry.memory.content.text for record in journal.records()]


def test_entries_come_back_in_order_with_everything_after_reopening(tmp_path: Path) -> None:
    journal = Journal.in_folder(tmp_path, max_bytes=1_000_000)
    first = entry(1, "I moved to Oslo \ud83d")  # a lone surrogate: cleaned, not a failed write
    reply = Memory(
        id=reply_id(first.memory.id, "agent-1"),
        user_id="agent-1",
        agent_id="agent-1",
        room_id=ROOM.id,
        world_id=ROOM.world_id,
        content=Content(text="Oslo, noted.", in_reply_to=first.memory.id),
    )
    journal.append(first.model_copy(update={"replies": [reply], "responded": True}))
    journal.append(entry(2))

    again = Journal.in_folder(tmp_path, max_bytes=1_000_000)
    records = again.records()
    assert [r.seq for r in records] == [1, 2]
    assert records[0].entry.memory == first.memory  # ids and timestamps (ms) survive as they were
    assert records[0].entry.account == ACCOUNT and records[0].entry.room == ROOM
    assert records[0].entry.replies == [reply] and records[0].entry.responded
    assert len(again) == 2 and again.size_bytes == (tmp_path / "journal.jsonl").stat().st_size
    # One JSON object per line, owner-only: it holds what people said.
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]
    assert (tmp_path / "journal.jsonl").stat().st_mode & 0o077 == 0
    assert again.append(entry(3)).seq == 3  # numbering goes on after a reopen


def test_a_full_journal_refuses_the_next_message_and_keeps_the_others(tmp_path: Path) -> None:
    journal = Journal.in_folder(tmp_path, max_bytes=2_000)
    written = 0
    with pytest.raises(JournalFull, match="the journal is full"):
        while True:
            journal.append(entry(written + 1))
            written += 1
    assert written >= 2
    assert journal.size_bytes <= 2_000
    assert (tmp_path / "journal.jsonl").stat().st_size == journal.size_bytes
    assert texts(journal) == [f"message {n}" for n in range(1, written + 1)]
    with pytest.raises(JournalFull):  # still full: it never grows past the bound
        journal.append(entry(99, "x"))
    journal.drop_through(1)  # room again once replayed records leave
    journal.append(entry(99, "after"))
    assert texts(journal)[-1] == "after"


def test_dropping_replayed_records_keeps_the_ones_written_meanwhile(tmp_path: Path) -> None:
    journal = Journal.in_folder(tmp_path, max_bytes=1_000_000)
    for number in (1, 2, 3):
        journal.append(entry(number))
    replayed = journal.records()[:2]
    journal.append(entry(4))  # arrives while the replay runs
    journal.drop_through(replayed[-1].seq)
    assert texts(journal) == ["message 3", "message 4"]
    assert len(journal) == 2
    assert journal.size_bytes == (tmp_path / "journal.jsonl").stat().st_size
    journal.drop_through(journal.records()[-1].seq)
    assert not (tmp_path / "journal.jsonl").exists() and len(journal) == 0
    assert journal.size_bytes == 0
    assert journal.append(entry(5)).seq == 5  # never reuses a number in this process
    assert not list(tmp_path.glob("*.new"))


def test_a_half_written_last_record_is_cut_and_unreadable_lines_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal.in_folder(tmp_path, max_bytes=1_000_000)
    for number in (1, 2):
        journal.append(entry(number))
    path = tmp_path / "journal.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    # A damaged middle line, and a crash mid-append (no newline: never acknowledged).
    path.write_bytes(lines[0] + b'{"seq": 7, "broken\n' + lines[1] + lines[1][:40])

    reopened = Journal.in_folder(tmp_path, max_bytes=1_000_000)
    assert texts(reopened) == ["message 1", "message 2"]
    assert reopened.unreadable == 1
    assert (tmp_path / "journal.jsonl.unreadable").read_bytes() == b'{"seq": 7, "broken\n'
    assert path.read_bytes() == lines[0] + lines[1]
    assert "cut a half-written last record" in caplog.text
    assert "line 2 is unreadable, set aside" in caplog.text
    assert reopened.append(entry(3)).seq == 3


WRITER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from tests.e2e.test_journal import entry
from bot.runtime.intake.journal import Journal
journal = Journal.in_folder(Path(sys.argv[1]), max_bytes=1_000_000)
for number in range(1, 6):
    journal.append(entry(number))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_what_append_acknowledged_survives_a_kill_9(tmp_path: Path) -> None:
    repo = str(REPO)
    process = subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path), repo],
        env={**os.environ, "PYTHONPATH": repo},
        capture_output=True,
        timeout=60,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr.decode()
    assert texts(Journal.in_folder(tmp_path, max_bytes=1_000_000)) == [
        f"message {n}" for n in range(1, 6)
    ]

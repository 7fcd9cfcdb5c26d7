"""The record of sent replies (bot/runtime/intake/sent_replies.py) through its real file: what a
killed process recorded is read back, a half-written last line is cut, settled messages are
dropped at start-up and the file stays bounded."""

from __future__ import annotations

import stat
from pathlib import Path

from bot.domain.records import Content, Memory, reply_id
from bot.runtime.intake.sent_replies import SENT_REPLIES_FILE, SentReplies

AGENT = "agent-1"


def _reply(message: str, part: int = 0, text: str = "Tell me more!") -> Memory:
    return Memory(
        id=reply_id(message, AGENT, part),
        user_id=AGENT,
        agent_id=AGENT,
        room_id="room-1",
        world_id="world-1",
        content=Content(text=text, in_reply_to=message),
    )


def test_a_recorded_reply_is_read_back_by_the_next_process(tmp_path: Path) -> None:
    first = SentReplies.in_folder(tmp_path)
    reply = _reply("m1")
    first.record("m1", reply)
    first.record("m1", _reply("m1", text="Sorry, I lost my train of thought."), store=False)
    # A new process (the old one was killed: nothing was closed or flushed beyond `write`).
    again = SentReplies.in_folder(tmp_path)
    entries = again.replies_for("m1")
    assert entries[0].reply == reply  # enough to store the very same Memory
    assert [e.store for e in entries] == [True, False]
    assert again.replies_for("m2") == []
    mode = stat.S_IMODE((tmp_path / SENT_REPLIES_FILE).stat().st_mode)
    assert mode == 0o600  # owner-only: replies quote what people said


def test_a_half_written_last_line_is_cut_and_the_next_record_is_whole(tmp_path: Path) -> None:
    record = SentReplies.in_folder(tmp_path)
    record.record("m1", _reply("m1"))
    path = tmp_path / SENT_REPLIES_FILE
    with path.open("ab") as file:
        file.write(b'{"message_id": "m2", "reply": {"id": "')  # killed mid-write
    reopened = SentReplies.in_folder(tmp_path)
    assert [e.reply.id for e in reopened.replies_for("m1")] == [reply_id("m1", AGENT)]
    assert reopened.replies_for("m2") == []
    reopened.record("m3", _reply("m3"))
    third = SentReplies.in_folder(tmp_path)
    assert len(third.replies_for("m1")) == 1 and len(third.replies_for("m3")) == 1


def test_settled_messages_leave_the_file_at_start_up_and_it_stays_bounded(tmp_path: Path) -> None:
    record = SentReplies.in_folder(tmp_path)
    for n in range(5):
        record.record(f"m{n}", _reply(f"m{n}"))
    record.forget("m0")  # settled in this run: gone from memory at once
    assert record.replies_for("m0") == []
    # Start-up: only m2 and m4 are still in intake.
    restarted = SentReplies.in_folder(tmp_path)
    restarted.keep_only({"m2", "m4"})
    text = (tmp_path / SENT_REPLIES_FILE).read_text(encoding="utf-8")
    assert len(text.splitlines()) == 2 and '"m1"' not in text
    assert len(SentReplies.in_folder(tmp_path)) == 2
    restarted.keep_only(set())
    assert not (tmp_path / SENT_REPLIES_FILE).exists()  # nothing pending: no file
    # Bounded: past max_bytes the file is rewritten with the pending records only.
    small = SentReplies.in_folder(tmp_path, max_bytes=2_000)
    for n in range(30):
        small.record(f"x{n}", _reply(f"x{n}"))
        small.forget(f"x{n}")
    assert (tmp_path / SENT_REPLIES_FILE).stat().st_size <= 2_000
    assert len(SentReplies.in_folder(tmp_path)) < 30

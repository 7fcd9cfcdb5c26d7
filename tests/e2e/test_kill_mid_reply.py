"""kill -9 of a real `mnemo run` while it writes replies, in a loop, with a new message in
every chat right after each restart: every chat is answered in the order its people wrote,
and every message is answered or its chat told (issue 30, finding 4). The audit's smallest
case was one kill mid-reply and one message right after the restart: the second was answered
first. `mnemo bench faults --kill-mid-reply` runs this at scale; the local fake Bot API and a
fake OpenAI server, nothing reaches the internet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks.faults import run_kill_mid_reply

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="Linux parent-death signal"),
    pytest.mark.skipif(
        bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="mnemo run on its bundled server"
    ),
]


def test_killed_mid_reply_again_and_again_every_chat_is_answered_in_order(
    tmp_path: Path, model_dir: Path
) -> None:
    report = run_kill_mid_reply(
        tmp_path, chats=3, kills=3, model_dir=model_dir, seed=3, window_minutes=5
    )
    assert report.sent == 3 * 4  # a message in every chat per start
    assert report.inverted == 0
    assert report.silent == 0
    assert report.answered + report.missed == report.sent

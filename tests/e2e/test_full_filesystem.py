"""A real, small, full filesystem under a real `mnemo run` on Telegram polling: the intake
never wedges (issue 30, finding 3).

The audit filled the data folder's disk: after space came back every Chroma call stayed
blocked, nothing was answered for minutes and SIGINT was ignored. Here the data folder (the
bundled database, the embedded Chroma, the journal) is a tmpfs of its own, filled to the last
byte with a file while the bot runs, then emptied again. Mounting needs the right to (root, or
CAP_SYS_ADMIN); where the test cannot mount one it is skipped, and
tests/e2e/test_full_disk_intake.py still makes every write fail at the OS boundary
(RLIMIT_FSIZE) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.runtime.intake.intake import CANNOT_KEEP_REPLY
from bot.runtime.intake.outage import FULL_REPLY, TROUBLE_REPLY
from bot.testing.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.mnemo_run import REPLY, polling, start_bot

REPLY_TEXT = "Got it."
SIZE = "256m"  # room for the bundled database and Chroma of a small conversation
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux tmpfs")


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "bot" / "data"
    folder.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    assert os.path.ismount(folder)  # the data folder is the small filesystem
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write a file until the filesystem has no byte left."""
    filler = folder / "filler"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb", buffering=0) as file:
        with contextlib.suppress(OSError):
            while True:
                file.write(chunk)
        for size in (1 << 16, 1 << 12, 1):  # the last bytes too
            with contextlib.suppress(OSError):
                while True:
                    file.write(b"\0" * size)
    probe = folder / "probe"
    with pytest.raises(OSError) as refused:
        probe.write_bytes(b"x")
    assert refused.value.errno == errno.ENOSPC
    probe.unlink(missing_ok=True)
    return filler


async def test_a_full_filesystem_never_wedges_the_intake(
    small_filesystem: Path, tmp_path: Path, model_dir: Path
) -> None:
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=lambda _: REPLY) as ai:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        folder = tmp_path / "bot"
        bot = start_bot(folder, telegram, ai.base_url, {"MNEMO_STORE_CALL_SECONDS": "3"})
        try:
            await polling(telegram, bot, folder)
            telegram.push_message(chat, person, "before the disk filled")
            await telegram.wait_for_sent(1, timeout=60, chat_id=chat.id)
            await asyncio.sleep(1)  # its storing, after the reply, done before the disk fills

            filler = fill(small_filesystem)
            try:
                for number in range(3):
                    telegram.push_message(chat, person, f"while the disk is full {number}")
                await asyncio.sleep(8)  # several getUpdates rounds and store deadlines
                during = [m.text for m in telegram.sent]
            finally:
                filler.unlink()

            # Room again: every message answered, none twice.
            answers = 1 + 3
            for _ in range(240):
                if [m.text for m in telegram.sent].count(REPLY_TEXT) >= answers:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(2)  # nothing answered twice either
            bot.send_signal(signal.SIGINT)
            code = await asyncio.to_thread(bot.wait, 90)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
    log = (folder / "process.log").read_text(errors="replace")
    texts = [m.text for m in telegram.sent]
    notices = {CANNOT_KEEP_REPLY, TROUBLE_REPLY, FULL_REPLY}
    assert texts.count(REPLY_TEXT) == answers, (texts, log[-4000:])
    # While full: at most one notice (the person knows their messages wait), no other line.
    assert set(during) - {REPLY_TEXT} <= notices and len(during) <= 2, during
    assert set(texts) <= {REPLY_TEXT} | notices
    assert code == 0, log[-3000:]

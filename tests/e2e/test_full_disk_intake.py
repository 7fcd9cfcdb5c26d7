"""A full disk under a real `mnemo run` on Telegram polling: nothing is confirmed to Telegram
that was not kept, the person is told once, and every message is answered once the disk has
room again (issue 19, finding 2).

The audit filled the data folder's disk: 15 of 15 messages were confirmed to Telegram and never
stored, answered or journaled. Here the bundled database's process and Mnemo's own get a file
size limit of one byte (RLIMIT_FSIZE, no root needed; Python ignores SIGXFSZ), so every write
that would grow a file fails with a real EFBIG from the kernel, as ENOSPC does on a full disk.
"""

from __future__ import annotations

import asyncio
import resource
import signal
import sys
from pathlib import Path

import pytest

from bot.runtime.intake.intake import CANNOT_KEEP_REPLY
from bot.testing.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.mnemo_run import REPLY, polling, server_pid, start_bot

REPLY_TEXT = "Got it."
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux prlimit")


def disk_full(pids: list[int], full: bool) -> None:
    for pid in pids:
        resource.prlimit(
            pid,
            resource.RLIMIT_FSIZE,
            (1 if full else resource.RLIM_INFINITY, resource.RLIM_INFINITY),
        )


@pytest.mark.slow
async def test_polling_confirms_nothing_it_could_not_keep_on_a_full_disk(
    tmp_path: Path, model_dir: Path
) -> None:
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=lambda _: REPLY) as ai:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        folder = tmp_path / "bot"
        bot = start_bot(folder, telegram, ai.base_url)
        try:
            await polling(telegram, bot, folder)
            telegram.push_message(chat, person, "before the disk filled")
            await telegram.wait_for_sent(1, timeout=60, chat_id=chat.id)
            await asyncio.sleep(1)  # its storing, after the reply, done before the disk fills
            database = server_pid(folder)
            assert database is not None
            processes = [bot.pid, database]

            disk_full(processes, True)
            try:
                for number in range(3):
                    telegram.push_message(chat, person, f"while the disk is full {number}")
                told = await telegram.wait_for_sent(2, timeout=60, chat_id=chat.id)
                assert told[1].text == CANNOT_KEEP_REPLY
                await asyncio.sleep(3)  # several getUpdates rounds: none may confirm them
                texts = [u.get("message", {}).get("text") for u in telegram._poll.updates]
                assert [t for t in texts if t and "disk is full" in t] == [
                    f"while the disk is full {n}" for n in range(3)
                ]
                assert [m.text for m in telegram.sent] == [REPLY_TEXT, CANNOT_KEEP_REPLY]
            finally:
                disk_full(processes, False)

            # Room again: Telegram sends them again, each is answered once.
            await telegram.wait_for_sent(5, timeout=120, chat_id=chat.id)
            await asyncio.sleep(2)  # nothing answered twice either
            assert [m.text for m in telegram.sent] == [REPLY_TEXT, CANNOT_KEEP_REPLY] + [
                REPLY_TEXT
            ] * 3
            bot.send_signal(signal.SIGINT)
            assert await asyncio.to_thread(bot.wait, 30) == 0
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()

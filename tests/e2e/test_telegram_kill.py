"""kill -9 a real `mnemo run` taking Telegram updates by webhook, while a chat is busy: every
message Telegram was told had arrived (HTTP 200) is answered after the restart.

Telegram never sends an acknowledged update again. The chat is busy (the model is writing the
reply to its first message) when the second message arrives: python-telegram-bot's own webhook
server acknowledged it at once and it waited in memory behind the first, so the kill lost it.
Now it is acknowledged only once its evaluation job (holding the message) is in MongoDB, and
the restart's recovery answers both. A standalone nx-27017 (it outlives the killed process), the
local fake Bot API (MNEMO_TELEGRAM_API_URL) and the fake OpenAI server, all real processes or
sockets; nothing reaches the internet."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pymongo import AsyncMongoClient

from bot.adapters.telegram import webhook_secret
from bot.storage.bundled.server import EmbeddedMongo
from bot.testing.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.processes import free_port
from tests.paths import REPO

DATABASE = "mnemo_kill"
WEBHOOK = "https://example.invalid/mnemo"
REPLY = '{"text": "Got it.", "action": "NONE"}'


@pytest.fixture
def mongo_server(tmp_path: Path) -> Iterator[EmbeddedMongo]:
    server = EmbeddedMongo(tmp_path / "mongo-server")
    asyncio.run(server.start())
    try:
        yield server
    finally:
        asyncio.run(server.stop())


def start_bot(
    folder: Path,
    port: int | None,
    *,
    mongo_uri: str,
    telegram: FakeTelegramServer,
    model_url: str,
) -> subprocess.Popen[bytes]:
    """`mnemo run` on Telegram: by webhook on `port`, or polling (None)."""
    folder.mkdir(parents=True, exist_ok=True)
    env_file = folder / "empty.env"  # a `.env` in the checkout must not leak in
    env_file.touch()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(folder),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "MONGODB_URI": mongo_uri,
        "MNEMO_MONGODB_DATABASE": DATABASE,
        "MNEMO_DATA_DIR": str(folder / "data"),
        "MNEMO_EMBEDDING_MODEL_DIR": os.environ["MNEMO_TEST_MODEL_DIR"],
        "MNEMO_DISABLED_PLUGINS": "facts,goals,recall,sentiment",
        "MNEMO_EVALUATOR_SELECTION": "all",
        "MNEMO_RATE_LIMIT_PER_MINUTE": "0",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": model_url,
        "TELEGRAM_TOKEN": telegram.token,
        "MNEMO_TELEGRAM_API_URL": telegram.base_url,
    }
    if port is not None:
        env["MNEMO_TELEGRAM_WEBHOOK_URL"] = WEBHOOK
        env["MNEMO_TELEGRAM_WEBHOOK_PORT"] = str(port)
        env["MNEMO_TELEGRAM_WEBHOOK_LISTEN"] = "127.0.0.1"
    with (folder / "process.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "--env-file", str(env_file), "run"],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def webhook_set(
    telegram: FakeTelegramServer, times: int, bot: subprocess.Popen[bytes], folder: Path
) -> None:
    """The process listens and has told Telegram where to send (its start-up is done)."""
    deadline = time.monotonic() + 90
    while len(telegram.calls_to("setWebhook")) < times:
        if bot.poll() is not None or time.monotonic() > deadline:
            log = (folder / "process.log").read_text(errors="replace")[-3000:]
            pytest.fail(f"the bot did not start:\n{log}")
        await asyncio.sleep(0.1)


async def test_a_kill_9_after_the_webhook_acknowledged_loses_no_message(
    tmp_path: Path, model_dir: Path, mongo_server: EmbeddedMongo
) -> None:
    first_asked, hold = asyncio.Event(), asyncio.Event()

    async def model(request: dict[str, Any]) -> str:
        if not hold.is_set():  # the first process's first reply: it is killed meanwhile
            first_asked.set()
            await hold.wait()
        return REPLY

    port = free_port()
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=model) as openai:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        headers = {"X-Telegram-Bot-Api-Secret-Token": webhook_secret(telegram.token)}
        endpoint = f"http://127.0.0.1:{port}/mnemo"
        folder = tmp_path / "bot"
        start = {"mongo_uri": mongo_server.uri, "telegram": telegram, "model_url": openai.base_url}
        bot = start_bot(folder, port, **start)
        try:
            await webhook_set(telegram, 1, bot, folder)
            async with aiohttp.ClientSession() as http:
                for update_id, text in ((1, "first, being answered"), (2, "second, waiting")):
                    update = {
                        "update_id": update_id,
                        "message": telegram.push_message(chat, person, text),
                    }
                    async with http.post(endpoint, json=update, headers=headers) as response:
                        assert response.status == 200  # Telegram will not send it again
                    if update_id == 1:
                        await asyncio.wait_for(first_asked.wait(), 60)
            bot.send_signal(signal.SIGKILL)
            bot.wait(timeout=30)
            hold.set()
            assert telegram.sent == []

            bot = start_bot(folder, port, **start)
            await webhook_set(telegram, 2, bot, folder)
            sent = await telegram.wait_for_sent(2, timeout=60, chat_id=chat.id)
            assert [m.text for m in sent] == ["Got it.", "Got it."]
            # Each stored once, the replies too (a reply is stored just after it is sent).
            client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_server.uri)
            try:
                for _ in range(100):
                    stored = await client[DATABASE]["memories"].find({}).to_list()
                    if len(stored) >= 4:
                        break
                    await asyncio.sleep(0.1)
            finally:
                await client.close()
            texts = sorted(doc["content"]["text"] for doc in stored)
            assert texts == ["Got it.", "Got it.", "first, being answered", "second, waiting"]
        finally:
            if bot.poll() is None:
                bot.send_signal(signal.SIGINT)
                try:
                    bot.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    bot.kill()
                    bot.wait()


async def test_mnemo_run_waits_for_mongodb_and_then_answers_what_was_sent_meanwhile(
    tmp_path: Path, model_dir: Path
) -> None:
    """MongoDB not up when `mnemo run` starts: the process stays, logs each attempt, and the
    Telegram message sent meanwhile (held by Telegram: nothing polls before the database
    answers) is answered once it is up."""
    port = free_port()
    uri = f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=500"
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=lambda _: REPLY) as ai:
        person = telegram.user("Sarah")
        chat = telegram.private_chat(person)
        folder = tmp_path / "bot"
        bot = start_bot(folder, None, mongo_uri=uri, telegram=telegram, model_url=ai.base_url)
        try:
            log = folder / "process.log"
            deadline = time.monotonic() + 60
            while "waiting for it before starting (attempt 2" not in _read(log):
                assert bot.poll() is None, _read(log)[-3000:]
                assert time.monotonic() < deadline, _read(log)[-3000:]
                await asyncio.sleep(0.1)
            telegram.push_message(chat, person, "hello while the database is down")
            await asyncio.sleep(1)
            assert not telegram.calls_to("getUpdates")  # no platform before the database
            async with EmbeddedMongo(tmp_path / "db", port=port):
                (reply,) = await telegram.wait_for_sent(1, timeout=60, chat_id=chat.id)
                assert reply.text == "Got it."
                assert "MongoDB answers after" in _read(log)
                bot.send_signal(signal.SIGINT)
                assert bot.wait(timeout=30) == 0
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()


def _read(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""

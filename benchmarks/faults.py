"""`mnemo bench faults`: kill -9 a real Mnemo at random points and count what was lost.

A scripted conversation (many rooms, a fixed seed) is fed to a Mnemo worker process, which
reads the script the way a platform delivers updates: a message is acknowledged (appended,
fsynced, to `acked.log`) only once `handle()` returned, and everything unacknowledged is
delivered again after a restart. The worker runs with the test-only fault hook
(`MNEMO_TEST_FAULT`, see bot/faults.py) set to a point of `handle()` or of an evaluation, so
it SIGKILLs itself there; it is then started again (with the next fault, or none). Before the
last, clean run the Chroma folder is wiped. The last run waits for every evaluation and writes
a report from MongoDB, Chroma and the reply log:

- stored: script messages in MongoDB; answered: messages with a reply sent (`replies.log`);
- evaluated: messages whose evaluation effect was recorded (an evaluator writes one document
  keyed by `ctx.job_id`, and counts its runs separately);
- lost: messages not stored, not answered, or not evaluated; duplicated: replies sent more
  than once plus effects applied more than once;
- vectors: message vectors back in Chroma after the wipe.

The worker runs the offline model and the real ONNX embedder (MNEMO_TEST_MODEL_DIR).
tests/e2e/test_faults.py runs a small version of this in `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pymongo.errors import DuplicateKeyError

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

# Points of handle() and of an evaluation where a worker may be killed (bot/faults.py).
FAULT_POINTS = (
    "handle:job-written",
    "handle:message-stored",
    "handle:reply-sent",
    "handle:released",
    "evaluation:claimed",
    "evaluation:handler-ran",
    "evaluation:before-finish",
)
# The probe plugin's own collections (declared `stores`), as MongoDB names them.
PROBE = "fault_probe"
EFFECTS = f"plugin_{PROBE}_effects"
RUNS = f"plugin_{PROBE}_runs"
DATABASE = "mnemo_faults"


@dataclass(frozen=True)
class FaultReport:
    rooms: int
    sent: int
    stored: int
    answered: int
    evaluated: int
    lost: int
    duplicated: int
    vectors: int
    # Evaluations left `dead` by the crashes (charged to them, or a crash loop; bot/queue/blame.py).
    dead_jobs: int
    kills: int
    evaluator_runs: int
    recover_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_script(*, rooms: int, messages: int, seed: int) -> list[dict[str, Any]]:
    """Messages for `rooms` DM rooms, `messages` each, interleaved in a seeded random order."""
    rng = random.Random(seed)
    words = ["I", "like", "tea", "and", "long", "walks", "my", "dog", "is", "called", "Rex"]
    order = [(room, n) for room in range(rooms) for n in range(messages)]
    rng.shuffle(order)
    # Keep each room's own messages in order while rooms interleave.
    counters = [0] * rooms
    script = []
    for room, _ in order:
        n = counters[room]
        counters[room] += 1
        text = " ".join(rng.choice(words) for _ in range(6))
        script.append({"room": room, "number": n, "text": f"message {n}: {text}"})
    return script


def fault_plan(count: int, seed: int, *, spread: int = 3) -> list[str]:
    """`count` fault specs (`point@n`, n from 1 to `spread`) drawn with a fixed seed."""
    rng = random.Random(seed)
    return [f"{rng.choice(FAULT_POINTS)}@{rng.randint(1, spread)}" for _ in range(count)]


def run_worker(folder: Path, fault: str | None, *, timeout: float = 300.0) -> int:
    """One worker process on `folder`; returns its exit code (-9 when the fault fired)."""
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_TEST_FAULT"}
    if fault:
        env["MNEMO_TEST_FAULT"] = fault
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
    )
    command = [sys.executable, "-m", "benchmarks.faults", "worker", str(folder)]
    with (folder / "worker.log").open("ab") as log:
        done = subprocess.run(
            command, env=env, timeout=timeout, check=False, stdout=log, stderr=log
        )
    return done.returncode


def _log_tail(folder: Path, chars: int = 3000) -> str:
    """The end of the workers' log: the run's folder is temporary, so a failure carries it."""
    log = folder / "worker.log"
    if not log.exists():
        return "(no worker log)"
    return log.read_bytes()[-chars:].decode("utf-8", errors="replace")


def run_faults(
    folder: Path, *, rooms: int, messages: int, faults: Sequence[str], seed: int
) -> FaultReport:
    """The whole scenario in `folder` (created): script, faulty runs, wipe, clean run."""
    folder.mkdir(parents=True, exist_ok=True)
    script = build_script(rooms=rooms, messages=messages, seed=seed)
    (folder / "script.json").write_text(json.dumps(script), encoding="utf-8")
    kills = 0
    for fault in faults:
        code = run_worker(folder, fault)
        if code == -9:
            kills += 1
        elif code != 0:
            raise RuntimeError(
                f"fault worker ({fault}) failed with exit code {code}:\n{_log_tail(folder)}"
            )
    shutil.rmtree(folder / "data" / "chroma", ignore_errors=True)
    started = time.monotonic()
    code = run_worker(folder, None)
    if code != 0:
        raise RuntimeError(
            f"the clean fault worker failed with exit code {code}:\n{_log_tail(folder)}"
        )
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report.update(kills=kills, recover_seconds=round(time.monotonic() - started, 1))
    return FaultReport(**report)


# ------------------------------------------------------------ the bundled server's kill loop
@dataclass(frozen=True)
class ServerKillReport:
    """kill -9 of the process owning the bundled nx-27017, under writes, again and again."""

    kills: int
    # Servers still running 5 s after their owner was killed (the audit's orphan).
    orphans: int
    # Starts after a kill that failed (the audit: "NX-27017 is already running").
    failed_starts: int
    # Documents written before the kills that were missing afterwards.
    lost_writes: int
    slowest_start_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_server_kills(folder: Path, *, kills: int, seed: int) -> ServerKillReport:
    """`kills` rounds on one data folder: an owner process starts the bundled server and
    writes to it without pause; it is SIGKILLed after a random delay (fixed seed). Counts
    servers that outlived their owner and starts that failed."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    orphans = failed = 0
    slowest = 0.0
    acknowledged = 0
    for round_number in range(kills):
        started = time.monotonic()
        owner = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.faults", "server-owner", str(folder)],
            env=_worker_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert owner.stdout is not None
        line = owner.stdout.readline().decode().strip()
        if not line.isdigit():
            failed += 1
            owner.kill()
            owner.wait()
            log.error("server-kills: round %d: the bundled server did not start", round_number)
            continue
        slowest = max(slowest, time.monotonic() - started)
        server_pid = int(line)
        time.sleep(rng.uniform(0.05, 0.6))  # somewhere in the middle of its writes
        owner.kill()
        owner.wait()
        acknowledged = max(acknowledged, _last_acknowledged(folder))
        if not _gone_within(server_pid, 5.0):
            orphans += 1
            log.error("server-kills: round %d: the server outlived its owner", round_number)
    lost = _missing_writes(folder, acknowledged)
    return ServerKillReport(kills, orphans, failed, lost, round(slowest, 2))


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
    )
    return env


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _last_acknowledged(folder: Path) -> int:
    """The highest write the owner saw acknowledged (it appends each number, unbuffered)."""
    numbers = [int(n) for n in _lines(folder / "acknowledged.log") if n.strip().isdigit()]
    return max(numbers, default=0)


def _missing_writes(folder: Path, acknowledged: int) -> int:
    """How many acknowledged writes are not in the database (a last start reads them)."""
    from pymongo import MongoClient

    from bot.storage.bundled.server import EmbeddedMongo

    server = EmbeddedMongo(folder)
    asyncio.run(server.start())
    try:
        client: MongoClient[dict[str, Any]] = MongoClient(server.uri)
        try:
            stored = {doc["_id"] for doc in client["mnemo"]["kill_loop"].find({}, {"_id": 1})}
        finally:
            client.close()
    finally:
        asyncio.run(server.stop())
    return sum(1 for number in range(1, acknowledged + 1) if number not in stored)


async def _server_owner(folder: Path) -> None:
    """Start the bundled server, say its pid, then write numbered documents until killed."""
    from pymongo import AsyncMongoClient

    from bot.storage.bundled.server import EmbeddedMongo

    server = EmbeddedMongo(folder)
    await server.start()
    print(server.pid, flush=True)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(server.uri)
    collection = client["mnemo"]["kill_loop"]
    number = _last_acknowledged(folder)
    descriptor = os.open(folder / "acknowledged.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    while True:
        number += 1
        await collection.update_one({"_id": number}, {"$set": {"n": number}}, upsert=True)
        os.write(descriptor, f"{number}\n".encode())


# ------------------------------------------------------------------------ a full disk
@dataclass(frozen=True)
class FullDiskReport:
    """A real `mnemo run` on Telegram polling whose disk fills while messages arrive."""

    chats: int
    sent: int
    # Messages Telegram was told had arrived (confirmed) while the disk was full, but that
    # were never answered: lost for good. Must be 0.
    lost: int
    answered: int
    # Messages answered more than once after the disk had room again.
    duplicated: int
    # Chats told that their message could not be kept (once each).
    told: int
    recover_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_full_disk(folder: Path, *, chats: int, messages: int, model_dir: Path) -> FullDiskReport:
    """`chats` people each send `messages` while the data folder's disk is full (a file size
    limit of one byte on Mnemo and its database, RLIMIT_FSIZE: every write that would grow a
    file fails, as on a full disk), then the disk has room again. Telegram and the model are
    local fakes (tests/fakes, bot/testing)."""
    folder.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_full_disk(folder, chats=chats, messages=messages, model_dir=model_dir))


async def _full_disk(folder: Path, *, chats: int, messages: int, model_dir: Path) -> FullDiskReport:
    import resource
    import signal

    from bot.runtime.intake.intake import CANNOT_KEEP_REPLY
    from bot.testing.openai_server import FakeOpenAIServer
    from tests.fakes.telegram_server import FakeTelegramServer

    reply = '{"text": "Got it.", "action": "NONE"}'
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=lambda _: reply) as ai:
        people = [telegram.user(f"Person {n}") for n in range(chats)]
        rooms = [telegram.private_chat(person) for person in people]
        bot = _start_polling_bot(folder, telegram.token, telegram.base_url, ai.base_url, model_dir)
        try:
            await _until(lambda: bool(telegram.calls_to("getUpdates")), bot, folder, 120)
            telegram.push_message(rooms[0], people[0], "before the disk filled")
            await telegram.wait_for_sent(1, timeout=120)
            await asyncio.sleep(1)
            database = _bundled_server_pid(folder / "data")
            limited = [bot.pid, database]
            infinity = resource.RLIM_INFINITY
            for pid in limited:
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, infinity))
            try:
                for number in range(messages):
                    for person, room in zip(people, rooms, strict=True):
                        telegram.push_message(room, person, f"full disk {number}")
                await asyncio.sleep(5)  # several polls: nothing may be confirmed
            finally:
                for pid in limited:
                    resource.prlimit(pid, resource.RLIMIT_FSIZE, (infinity, infinity))
            started = time.monotonic()
            sent = chats * messages
            told = sum(1 for m in telegram.sent if m.text == CANNOT_KEEP_REPLY)
            expected = 1 + told + sent
            with contextlib.suppress(AssertionError):
                await telegram.wait_for_sent(expected, timeout=60 + sent)
            recover = time.monotonic() - started
            await asyncio.sleep(2)
            answers = [m for m in telegram.sent if m.text == "Got it."]
            bot.send_signal(signal.SIGINT)
            await asyncio.to_thread(bot.wait, 60)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
    per_chat: dict[int, int] = {}
    for m in answers:
        per_chat[m.chat_id] = per_chat.get(m.chat_id, 0) + 1
    expected_per_chat = {room.id: messages for room in rooms}
    expected_per_chat[rooms[0].id] += 1  # the message before the disk filled
    lost = sum(max(0, n - per_chat.get(c, 0)) for c, n in expected_per_chat.items())
    duplicated = sum(max(0, per_chat.get(c, 0) - n) for c, n in expected_per_chat.items())
    return FullDiskReport(
        chats=chats,
        sent=sent,
        lost=lost,
        answered=max(0, len(answers) - 1),
        duplicated=duplicated,
        told=told,
        recover_seconds=round(recover, 1),
    )


# ------------------------------------------------------------------ kill -9 mid-reply, in a loop
@dataclass(frozen=True)
class KillMidReplyReport:
    """A real `mnemo run` on Telegram polling killed -9 while replies are being written, again
    and again, with a new message in every chat right after each restart (issue 30, finding 4:
    the audit saw 376 of 2,573 reply pairs inverted and 17 messages never answered nor told)."""

    chats: int
    kills: int
    sent: int
    answered: int
    # Replies of a chat that came out before the reply to an earlier message of it. Must be 0.
    inverted: int
    # Messages answered more than once (a kill during the platform's send repeats one: its
    # HTTP call was cut, nothing says whether it arrived).
    duplicated: int
    # Messages aged past the answer window, chats told that they were missed, and how many
    # times in all (at most once a chat per start: never once per message).
    missed: int
    told: int
    missed_lines: int
    # Messages neither answered nor in a chat told it was missed. Must be 0.
    silent: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ticket(chat: int, number: int) -> str:
    return f"T{chat}x{number}"


def _answer_to(ticket: str) -> str:
    """The fake model's reply to a ticket: words of its own (no parroting), one per message."""
    return f"Answered R{ticket[1:].replace('x', 'y')}."


def run_kill_mid_reply(
    folder: Path, *, chats: int, kills: int, model_dir: Path, seed: int, window_minutes: float
) -> KillMidReplyReport:
    """`kills` rounds of: a message in every chat, `mnemo run` killed -9 while the model is
    writing their replies (a slow fake model), started again and at once sent the next message
    in every chat; then a last run that is not killed. Every reply names its message's ticket,
    so the order of a chat's replies can be checked against the order its people wrote."""
    folder.mkdir(parents=True, exist_ok=True)
    return asyncio.run(
        _kill_mid_reply(
            folder,
            chats=chats,
            kills=kills,
            model_dir=model_dir,
            seed=seed,
            window_minutes=window_minutes,
        )
    )


async def _kill_mid_reply(
    folder: Path, *, chats: int, kills: int, model_dir: Path, seed: int, window_minutes: float
) -> KillMidReplyReport:
    import re
    import signal

    from bot.runtime.intake.intake import MISSED_REPLY
    from bot.testing.openai_server import FakeOpenAIServer, Reply
    from tests.fakes.telegram_server import FakeTelegramServer

    rng = random.Random(seed)
    tickets = re.compile(r"T\d+x\d+")

    def answer(body: dict[str, Any]) -> Reply:
        prompt = str(body.get("messages", [{}])[-1].get("content", ""))
        found = tickets.findall(prompt)
        # The message answered is the conversation's last; slow, so kills land mid-reply.
        text = _answer_to(found[-1]) if found else "Noted."
        return Reply(json.dumps({"text": text, "action": "NONE"}), delay=rng.uniform(0.2, 0.8))

    extra = {"MNEMO_ANSWER_WINDOW_MINUTES": str(window_minutes)}
    async with FakeTelegramServer() as telegram, FakeOpenAIServer(responder=answer) as ai:
        people = [telegram.user(f"Person {n}") for n in range(chats)]
        rooms = [telegram.private_chat(person) for person in people]
        written: dict[int, list[str]] = {room.id: [] for room in rooms}

        def write_all(number: int) -> None:
            for chat, (person, room) in enumerate(zip(people, rooms, strict=True)):
                ticket = _ticket(chat, number)
                written[room.id].append(ticket)
                telegram.push_message(room, person, f"My ticket today is {ticket}, please.")

        number = 0
        for _ in range(kills):
            bot = _start_polling_bot(
                folder, telegram.token, telegram.base_url, ai.base_url, model_dir, extra
            )
            try:
                await _until(lambda: bool(telegram.calls_to("getUpdates")), bot, folder, 120)
                write_all(number)  # right after the start: behind what the crash left
                number += 1
                asked = len(ai.requests)
                await _until(lambda n=asked: len(ai.requests) > n, bot, folder, 60)
                await asyncio.sleep(rng.uniform(0.0, 0.6))  # somewhere mid-reply
            finally:
                bot.kill()  # SIGKILL: the bundled database goes with it
                bot.wait()
        bot = _start_polling_bot(
            folder, telegram.token, telegram.base_url, ai.base_url, model_dir, extra
        )
        try:
            await _until(lambda: bool(telegram.calls_to("getUpdates")), bot, folder, 120)
            write_all(number)
            expected = {ticket for tickets_of in written.values() for ticket in tickets_of}
            deadline = time.monotonic() + 120 + 2 * len(expected)
            while time.monotonic() < deadline:
                answered = {m.text for m in telegram.sent}
                missed_chats = {m.chat_id for m in telegram.sent if m.text == MISSED_REPLY}
                done = [
                    _answer_to(t) in answered or room_id in missed_chats
                    for room_id, tickets_of in written.items()
                    for t in tickets_of
                ]
                if all(done):
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(2)  # nothing more comes
            bot.send_signal(signal.SIGINT)
            await asyncio.to_thread(bot.wait, 90)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
        sent = list(telegram.sent)
    inverted = duplicated = missed = told = missed_lines = silent = answered_count = 0
    for room_id, tickets_of in written.items():
        lines = [m.text for m in sent if m.chat_id == room_id]
        replies = [line for line in lines if line != MISSED_REPLY]
        order = {_answer_to(t): index for index, t in enumerate(tickets_of)}
        positions = [order[line] for line in replies if line in order]
        first_seen: list[int] = []
        for position in positions:
            if position in first_seen:
                duplicated += 1
                continue
            inverted += any(earlier > position for earlier in first_seen)
            first_seen.append(position)
        chat_told = MISSED_REPLY in lines
        told += chat_told
        missed_lines += lines.count(MISSED_REPLY)
        for index in range(len(tickets_of)):
            if index in first_seen:
                answered_count += 1
            elif chat_told:
                missed += 1
            else:
                silent += 1
    return KillMidReplyReport(
        chats=chats,
        kills=kills,
        sent=sum(len(t) for t in written.values()),
        answered=answered_count,
        inverted=inverted,
        duplicated=duplicated,
        missed=missed,
        told=told,
        missed_lines=missed_lines,
        silent=silent,
    )


def _bundled_server_pid(data_dir: Path) -> int:
    return int((data_dir / "mongo" / "nx-27017.pid").read_text().strip())


def _start_polling_bot(
    folder: Path,
    token: str,
    telegram_url: str,
    model_url: str,
    model_dir: Path,
    extra: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env_file = folder / "empty.env"  # a `.env` in the checkout must not leak in
    env_file.touch()
    env = {
        **_worker_env(),
        "HOME": str(folder),
        "MNEMO_DATA_DIR": str(folder / "data"),
        "MNEMO_EMBEDDING_MODEL_DIR": str(model_dir),
        "MNEMO_DISABLED_PLUGINS": "facts,goals,recall,sentiment",
        "MNEMO_RATE_LIMIT_PER_MINUTE": "0",
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": model_url,
        "TELEGRAM_TOKEN": token,
        "MNEMO_TELEGRAM_API_URL": telegram_url,
        **(extra or {}),
    }
    for name in ("MONGODB_URI", "MNEMO_TELEGRAM_WEBHOOK_URL"):
        env.pop(name, None)
    with (folder / "process.log").open("ab") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "--env-file", str(env_file), "run"],
            cwd=folder,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )


async def _until(ready: Any, bot: subprocess.Popen[bytes], folder: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if bot.poll() is not None or time.monotonic() > deadline:
            tail = (folder / "process.log").read_bytes()[-3000:].decode(errors="replace")
            raise RuntimeError(f"mnemo run did not start:\n{tail}")
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------------------ the worker
def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def _worker(folder: Path) -> None:
    from bot.app.composition import open_app
    from bot.domain.records import (
        Account,
        Content,
        Memory,
        Room,
        account_id,
        message_id,
        room_id,
        utcnow,
        world_id,
    )
    from bot.plugin.api import Context, Evaluator, Plugin, PluginContext
    from bot.plugin.loading import Registry
    from bot.testing.harness import test_settings

    script = json.loads((folder / "script.json").read_text(encoding="utf-8"))
    acked = {int(line) for line in _lines(folder / "acked.log")}
    replies_log = folder / "replies.log"

    async def effect(ctx: Context, found: object) -> None:
        await ctx.collections["runs"].insert_one({"job": ctx.job_id, "message": ctx.message.id})
        # The idempotent effect: keyed by the job id, a second insert is "done already".
        with contextlib.suppress(DuplicateKeyError):
            await ctx.collections["effects"].insert_one(
                {"_id": ctx.job_id, "message": ctx.message.id}
            )

    async def keeps_nobody(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, Any]:
        return {}  # the probe's records name jobs, not people

    async def forgets_nobody(ctx: PluginContext, person_id: str, world_id: str) -> int:
        return 0

    registry = Registry()
    plugin = Plugin(
        PROBE,
        evaluators=[Evaluator("EFFECT", "records", effect, always_run=True)],
        stores=["runs", "effects"],
        forget=forgets_nobody,
        export=keeps_nobody,
    )
    registry.add(plugin, plugin.name)
    # The attempt cap, if the caller sets one (the small suite in `make test` does).
    cap = os.environ.get("MNEMO_EVALUATION_MAX_ATTEMPTS")
    cap_option: dict[str, Any] = {"evaluation_max_attempts": int(cap)} if cap else {}
    settings = test_settings(
        folder / "data",
        evaluator_selection="all",
        **cap_option,
    )
    settings = replace(
        settings, storage=settings.storage.model_copy(update={"mongodb_database": DATABASE})
    )
    # Script times are fixed at the first run, so every run sends the very same messages.
    epoch_file = folder / "epoch"
    if not epoch_file.exists():
        epoch_file.write_text(utcnow().isoformat(), encoding="utf-8")
    epoch = datetime.fromisoformat(epoch_file.read_text(encoding="utf-8"))

    def sender(memory_id: str) -> Callable[[Content], Awaitable[None]]:
        async def send(content: Content) -> None:
            _append(replies_log, f"{memory_id}\t{content.text.replace(chr(10), ' ')}")

        return send

    async with open_app(settings, registry=registry) as app:
        runtime = app.runtime
        await runtime.answer_unanswered(
            "test", lambda room, memory: sender(memory.id if memory is not None else "missed")
        )
        for index, item in enumerate(script):
            if index in acked:
                continue
            name = f"person-{item['room']}"
            account = Account(
                id=account_id("test", name), platform="test", platform_id=name, name=name
            )
            room = Room(
                id=room_id("test", name),
                world_id=world_id("test", name),
                platform="test",
                kind="dm",
                name=name,
            )
            memory = Memory(
                id=message_id("test", name, str(item["number"])),
                user_id=account.id,
                agent_id=runtime.agent_id,
                room_id=room.id,
                world_id=room.world_id,
                content=Content(text=item["text"], source="test"),
                created_at=epoch + timedelta(milliseconds=index),
            )
            await runtime.handle(memory, sender(memory.id), account=account, room=room)
            _append(folder / "acked.log", str(index))
        await _settle(app)
        if app.vector_healing is not None:
            await app.vector_healing
        await _report(app, script, folder, replies_log)


async def _settle(app: Any, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = await app.runtime.evaluations.counts()
        if not any(counts[s] for s in ("intake", "pending", "running", "retrying")):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("evaluations did not settle")


async def _report(app: Any, script: list[dict[str, Any]], folder: Path, replies: Path) -> None:
    from bot.domain.records import message_id

    ids = [message_id("test", f"person-{item['room']}", str(item["number"])) for item in script]
    database = app.store.db
    stored = {d["_id"] async for d in database.memories.find({"_id": {"$in": ids}}, {"_id": 1})}
    effects: dict[str, int] = {}
    async for d in database[EFFECTS].find({}, {"message": 1}):
        effects[d["message"]] = effects.get(d["message"], 0) + 1
    runs = await database[RUNS].count_documents({})
    sent: dict[str, int] = {}
    for line in _lines(replies):
        memory_id = line.split("\t", 1)[0]
        sent[memory_id] = sent.get(memory_id, 0) + 1
    lost = sum(1 for i in ids if i not in stored or i not in sent or i not in effects)
    duplicated = sum(n - 1 for n in sent.values() if n > 1) + sum(
        n - 1 for n in effects.values() if n > 1
    )
    vectors = len(await app.knowledge.vectors.existing_ids("messages", ids))
    report = {
        "rooms": len({item["room"] for item in script}),
        "sent": len(ids),
        "stored": len(stored),
        "answered": sum(1 for i in ids if i in sent),
        "evaluated": sum(1 for i in ids if i in effects),
        "lost": lost,
        "duplicated": duplicated,
        "vectors": vectors,
        "evaluator_runs": runs,
        "dead_jobs": await database.evaluations.count_documents({"status": "dead"}),
    }
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.faults")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="one worker run (used by the scenario)")
    worker.add_argument("folder", type=Path)
    owner = sub.add_parser("server-owner", help="own the bundled server and write (kill loop)")
    owner.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.command == "server-owner":
        asyncio.run(_server_owner(args.folder))
        return 0
    asyncio.run(_worker(args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Daily spending caps (issue 30.1): a world or a person past its cap for the day is told once
per room and gets no model call: no reply, no learning that needs the model; the count is
shared through MongoDB by every process of a deployment. The real runtime and `openai` client
against the fake OpenAI server, which counts every request that reached it; real MongoDB and
Chroma; the day is moved on through the caps' clock."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot import Context, Evaluator, ModelClass, Plugin
from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.commands.command_set import Commands, Request
from bot.config.settings import ModelSettings, OpsSettings, Settings
from bot.llm.caps import DEPLOYMENT_CAP_REPLY, PERSON_CAP_REPLY, WORLD_CAP_REPLY
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer, Reply, Usage
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.telegram_bot import settings_for

HELLO = json.dumps({"text": "Hello there", "action": "NONE"})
# Every answer reports 100 prompt and 10 completion tokens: a call is 110 tokens.
CALL = 110
DAY = 86_400.0


def answer(request: dict[str, Any]) -> Reply:
    return Reply(HELLO, usage=Usage(100, 10))


def capped(
    settings: Settings, base_url: str, *, choices: tuple[str, ...] = (), **caps: Any
) -> Settings:
    model = ModelSettings.model_construct(
        openai_api_key=SecretStr("test-key"),
        openai_base_url=base_url,
        small_model="fake-small",
        large_model="fake-large",
        model_choices=list(choices),
        timeout_seconds=5.0,
        max_retries=0,
    )
    ops = OpsSettings(_env_file=None, **caps)  # type: ignore[call-arg]
    return dataclasses.replace(settings, model=model, ops=ops)


def ask(chat: TestChat, args: str = "") -> Request:
    return Request(
        platform=chat.platform,
        account_id=chat.account.id,
        world_id=chat.room.world_id,
        room_id=chat.room.id,
        is_admin=True,
        args=args,
    )


def next_day(app: App, days: int = 1) -> None:
    """The caps' day moves on (they count UTC days from their clock)."""
    caps = app.runtime.caps
    assert caps is not None
    caps.clock = lambda: time.time() + days * DAY


@asynccontextmanager
async def capped_app(tmp_path: Path, server: FakeOpenAIServer, **caps: Any) -> AsyncIterator[App]:
    settings = capped(test_settings(tmp_path), server.base_url, choices=("gpt-x",), **caps)
    async with open_test_app(tmp_path, settings=settings) as app:
        yield app


async def test_a_world_past_its_cap_is_told_once_per_room_and_its_model_is_not_called(
    tmp_path: Path, model_dir: Path
) -> None:
    async with (
        FakeOpenAIServer(responder=answer) as server,
        capped_app(tmp_path, server, daily_tokens_per_world=3 * CALL - 1) as app,
    ):
        commands = Commands(app.commands, learn_wait=5)
        here = TestChat(app.runtime, chat="general", world="server-a", kind="group")
        other_room = TestChat(
            app.runtime, name="Tom", chat="random", world="server-a", kind="group"
        )
        elsewhere = TestChat(app.runtime, chat="dm", world="server-b")
        for text in ("Mnemo, hi", "Mnemo, I moved to Lisbon", "Mnemo, I got a cat"):
            await here.say(text)  # the third one passes the cap
        asked_before = len(server.chat_requests)
        await here.say("Mnemo, are you there?")
        await here.say("Mnemo, hello?")  # told already: nothing
        await other_room.say("Mnemo, hi")
        refused_check = await commands.run("model", ask(here, "large gpt-x"))
        answered_elsewhere = await elsewhere.say("hi")
        asked_after = len(server.chat_requests)
        stats = await commands.run("stats", ask(here))
        stored = await app.store.memories.count_in_world(here.room.world_id)
        days_before = await app.store.db.daily_spend.distinct("day")
        next_day(app)
        await here.say("Mnemo, good morning")
        days_after = await app.store.db.daily_spend.distinct("day")

    assert here.replies == ["Hello there"] * 3 + [WORLD_CAP_REPLY, "Hello there"]
    assert other_room.replies == [WORLD_CAP_REPLY]  # each room hears it, once
    assert refused_check.text.startswith(WORLD_CAP_REPLY) and "Nothing changed." in (
        refused_check.text
    )
    assert elsewhere.replies == ["Hello there"] and answered_elsewhere.responded
    # Past the cap, the only request is the other world's reply.
    assert (asked_before, asked_after) == (3, 4)
    assert "Daily limit here: 329 tokens (used today, UTC: 330 tokens); reached" in stats.text
    # Nothing anyone said was lost: every message is stored (the bot's notice is not).
    assert stored == 5 + 3 + 1  # Sarah's five, the three replies, Tom's one
    assert len(server.chat_requests) == 5  # the next day's reply
    # Yesterday's counts (and who was told) are dropped with the first call of the new day.
    assert len(days_before) == len(days_after) == 1 and days_before != days_after


async def test_a_dollar_cap_counts_the_estimated_cost_at_the_operator_s_prices(
    tmp_path: Path, model_dir: Path
) -> None:
    # $1,000 per million tokens either way: a call of 110 tokens costs $0.11.
    prices = {"fake-small": (1000.0, 1000.0), "fake-large": (1000.0, 1000.0)}
    async with (
        FakeOpenAIServer(responder=answer) as server,
        capped_app(tmp_path, server, daily_usd_per_world=0.2, model_prices=prices) as app,
    ):
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        for text in ("hi", "I moved to Lisbon", "I got a cat"):
            await chat.say(text)
        stats = await commands.run("stats", ask(chat))

    assert chat.replies == ["Hello there", "Hello there", WORLD_CAP_REPLY]
    assert len(server.chat_requests) == 2
    assert "Daily limit here: $0.20 (used today, UTC: 220 tokens, about $0.2200); reached" in (
        stats.text
    )


async def test_a_person_past_their_cap_is_told_and_the_others_are_still_answered(
    tmp_path: Path, model_dir: Path
) -> None:
    async with (
        FakeOpenAIServer(responder=answer) as server,
        capped_app(tmp_path, server, daily_tokens_per_person=2 * CALL - 1) as app,
    ):
        sarah = TestChat(app.runtime, name="Sarah", chat="general", world="club", kind="group")
        tom = TestChat(app.runtime, name="Tom", chat="general", world="club", kind="group")
        for text in ("Mnemo, hi", "Mnemo, how are you", "Mnemo, still there?", "Mnemo, hey"):
            await sarah.say(text)
        await tom.say("Mnemo, hi")
        # Her own DM is another room: told there once too, never answered by the model.
        dm = TestChat(app.runtime, name="Sarah", chat="sarah-dm", world="sarah-dm")
        await dm.say("hello")
        await dm.say("hello?")

    assert sarah.replies == ["Hello there", "Hello there", PERSON_CAP_REPLY]
    assert tom.replies == ["Hello there"]
    assert dm.replies == [PERSON_CAP_REPLY]
    assert len(server.chat_requests) == 3


async def test_a_total_cap_holds_however_many_worlds_and_people_there_are(
    tmp_path: Path, model_dir: Path
) -> None:
    async with (
        FakeOpenAIServer(responder=answer) as server,
        capped_app(
            tmp_path, server, daily_tokens_per_world=10 * CALL, daily_tokens_total=2 * CALL
        ) as app,
    ):
        commands = Commands(app.commands, learn_wait=5)
        # One new server and one new account each: what per-world caps alone cannot bound.
        chats = [TestChat(app.runtime, name=f"p{n}", chat=f"s{n}", world=f"s{n}") for n in range(4)]
        for chat in chats:
            await chat.say("hi")
        stats = await commands.run("stats", ask(chats[0]))

    assert [chat.replies for chat in chats] == [["Hello there"]] * 2 + [[DEPLOYMENT_CAP_REPLY]] * 2
    assert len(server.chat_requests) == 2
    assert "Daily limit for the whole bot: 220 tokens, reached today." in stats.text


async def test_learning_that_needs_the_model_waits_out_the_cap_and_nothing_is_half_written(
    tmp_path: Path, model_dir: Path
) -> None:
    noted: list[str] = []
    tallied: list[str] = []

    async def note(ctx: Context, found: object) -> None:
        summary = await ctx.model.generate("summarise", model_class=ModelClass.SMALL)
        noted.append(f"{ctx.message.content.text}: {summary}")  # written only after the call

    async def tally(ctx: Context, found: object) -> None:
        tallied.append(ctx.message.content.text)

    plugin = Plugin(
        name="notes",
        evaluators=[
            Evaluator("NOTE", "takes notes", note, always_run=True),
            Evaluator("TALLY", "counts", tally, always_run=True, uses_model=False),
        ],
    )
    async with FakeOpenAIServer(responder=answer) as server:
        settings = capped(
            test_settings(tmp_path, evaluator_selection="all"),
            server.base_url,
            daily_tokens_per_world=CALL + 1,
        )
        async with open_test_app(tmp_path, settings=settings, plugins=[plugin]) as app:
            chat = TestChat(app.runtime, world="server-a")
            # The reply (110) leaves room for the note's call, which passes the cap.
            await chat.say("I moved to Lisbon")
            await chat.settle()
            first = len(server.chat_requests)
            over = await chat.say("I got a cat")
            await chat.settle()
            job = await app.store.jobs.get(over.job.id) if over.job else None
            asked = len(server.chat_requests)
            next_day(app)
            await chat.say("I started running")
            await chat.settle()

    assert first == 2  # the reply and the note
    assert asked == 2  # past the cap: no reply, no note, no selection
    assert job is not None and job.status == "done" and job.attempts == 1  # not retried
    assert chat.replies == ["Hello there", WORLD_CAP_REPLY, "Hello there"]
    assert [line.split(":")[0] for line in noted] == ["I moved to Lisbon", "I started running"]
    assert tallied == ["I moved to Lisbon", "I got a cat", "I started running"]


async def test_every_process_counts_against_the_same_cap(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with FakeOpenAIServer(responder=answer) as server:
        one = capped(
            test_settings(tmp_path / "one", mongodb_uri=mongo_uri),
            server.base_url,
            daily_tokens_per_world=2 * CALL - 1,
        )
        two = capped(
            test_settings(tmp_path / "two", mongodb_uri=mongo_uri),
            server.base_url,
            daily_tokens_per_world=2 * CALL - 1,
        )
        same = two.storage.model_copy(update={"mongodb_database": one.storage.mongodb_database})
        async with (
            open_test_app(tmp_path / "one", settings=one) as first,
            open_test_app(
                tmp_path / "two",
                settings=dataclasses.replace(two, storage=same),
                keep_database=True,
            ) as second,
        ):
            here = TestChat(first.runtime, chat="general", world="server-a", kind="group")
            for text in ("Mnemo, hi", "Mnemo, I moved to Lisbon"):
                await here.say(text)  # spent in process one
            there = TestChat(
                second.runtime, name="Tom", chat="general", world="server-a", kind="group"
            )
            await there.say("Mnemo, hi")  # process two: the room is told
            await here.say("Mnemo, and now?")  # process one: told already, by process two

    assert here.replies == ["Hello there", "Hello there"]
    assert there.replies == [WORLD_CAP_REPLY]
    assert len(server.chat_requests) == 2


async def test_an_endpoint_that_reports_no_usage_is_counted_all_the_same(
    tmp_path: Path, model_dir: Path
) -> None:
    def unreported(request: dict[str, Any]) -> Reply:
        return Reply(HELLO, usage=None)

    # It streams without usage too (it refuses `stream_options`).
    async with (
        FakeOpenAIServer(responder=unreported, stream_usage=False) as server,
        capped_app(tmp_path, server, daily_tokens_per_world=50) as app,
    ):
        chat = TestChat(app.runtime, world="server-a")
        await chat.say("hi")
        asked = len(server.chat_requests)  # with the one `stream_options` was refused in
        await chat.say("hello again")
        usage = app.ledger.snapshot()["reply"]

    # Each prompt alone is hundreds of tokens by its characters: the first passes the cap.
    assert chat.replies == ["Hello there", WORLD_CAP_REPLY]
    # Counted by Mnemo, and marked so: never passed off as the endpoint's figures.
    assert usage.prompt_tokens > 50 and usage.completion_tokens > 0
    assert usage.counted_calls == usage.calls == 1
    assert len(server.chat_requests) == asked


async def test_on_telegram_a_group_past_its_cap_hears_it_once(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeTelegramServer() as telegram,
        FakeOpenAIServer(responder=answer) as server,
    ):
        settings = capped(
            test_settings(tmp_path, mongodb_uri=mongo_uri),
            server.base_url,
            daily_tokens_per_world=CALL,
        )
        async with open_test_app(tmp_path, settings=settings) as app:
            sarah = telegram.user("Sarah", username="sarah")
            group = telegram.group("Book club")
            adapter = TelegramAdapter(
                settings_for(telegram), base_url=telegram.base_url, poll_timeout=1
            )
            await adapter.start(app.adapter_services)
            try:
                for text in ("@mnemo_bot hi", "@mnemo_bot hello?", "@mnemo_bot anyone?"):
                    telegram.push_message(group, sarah, text)
                await telegram.wait_for_sent(2, chat_id=group.id)
                await telegram.drained()
                await adapter.wait_idle()
            finally:
                await adapter.stop()

    sent = [m.text for m in telegram.sent if m.chat_id == group.id]
    assert sent == ["Hello there", WORLD_CAP_REPLY]
    assert len(server.chat_requests) == 1

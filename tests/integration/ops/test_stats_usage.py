"""`/stats` shows the model tokens spent in the world it is used in, and their estimated cost
(prices per model a setting), kept in MongoDB so a restart (or another process) keeps them.

A real app with the real `OpenAIModel` client against the local fake OpenAI server, which
reports 120 prompt and 8 completion tokens per call; the command runs through the command
layer every surface uses.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot import Context, Evaluator, Plugin
from bot.adapters.console import ConsoleChat
from bot.commands.command_set import Commands, Request
from bot.commands.services import CommandServices
from bot.config.settings import ModelSettings, OpsSettings, Settings
from bot.llm.tokens import chat_tokens, local_counter
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer, Reply, Usage

# Only the large model has a price: the small one's spend is shown without a cost.
PRICES = {"gpt-4o": (2.5, 10.0)}


async def always(ctx: Context) -> bool:
    return True


async def nothing(ctx: Context, found: object) -> None:
    return None


# Two evaluators, so each message also costs a selection call on the small model (with one,
# the selection step names it without asking); with an idle mark (a learning evaluator, as
# facts is), /stats' learn-first flush costs one more.
LISTENER = Plugin(
    "listener",
    evaluators=[
        Evaluator("LISTEN", "Listens.", handler=nothing, validate=always, idle_mark="heard"),
        Evaluator("WATCH", "Watches.", handler=nothing, validate=always),
    ],
)


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    def answer(body: dict[str, object]) -> Reply:
        return Reply('{"text": "Noted."}', usage=Usage(120, 8))

    async with FakeOpenAIServer(responder=answer) as server:
        yield server


def priced_settings(tmp_path: Path, server: FakeOpenAIServer) -> Settings:
    settings = test_settings(tmp_path)
    return dataclasses.replace(
        settings,
        model=ModelSettings.model_construct(
            openai_api_key=SecretStr("sk-test-stats"),
            openai_base_url=server.base_url,
            small_model="local-small",
            large_model="gpt-4o",
            timeout_seconds=5.0,
            max_retries=0,
        ),
        ops=OpsSettings(_env_file=None, model_prices=PRICES),  # type: ignore[call-arg]
    )


async def stats_in(services: CommandServices, chat: TestChat) -> str:
    request = Request(
        platform=chat.platform,
        account_id=chat.account.id,
        world_id=chat.room.world_id,
        room_id=chat.room.id,
        is_admin=True,
    )
    return (await Commands(services).run("stats", request)).text


def usage_line(answer: str) -> str:
    [line] = [line for line in answer.splitlines() if line.startswith("Model use here")]
    return line


async def test_stats_show_the_worlds_own_tokens_and_cost_across_a_restart(
    tmp_path: Path, model_dir: Path, openai_server: FakeOpenAIServer
) -> None:
    settings = priced_settings(tmp_path, openai_server)
    # Two messages in one DM, one in a group: each is a reply (gpt-4o) and a selection
    # (local-small), 120 + 8 tokens per call; /stats first learns from the latest messages,
    # which asks the model nothing: only LISTEN takes idle jobs, and a lone candidate is
    # chosen without a selection call.
    cost = (2 * 120 * 2.5 + 2 * 8 * 10.0) / 1_000_000
    expected_dm = (
        "Model use here: 4 calls, 480 prompt + 32 completion tokens, "
        f"about ${cost:.4f} (no price for local-small: set MNEMO_MODEL_PRICES)"
    )
    async with open_test_app(
        tmp_path, settings=settings, plugins=[LISTENER], keep_database=True
    ) as app:
        dm = TestChat(app.runtime, name="sarah", chat="sarah-dm", kind="dm")
        group = TestChat(app.runtime, name="omar", chat="hikers", kind="group")
        await dm.say("Hi, I'm Sarah.")
        await dm.say("I live in Seattle.")
        await group.say("Mnemo, hello from the hikers!")
        await dm.settle()
        await group.settle()
        assert len(openai_server.chat_requests) == 6

        assert usage_line(await stats_in(app.commands, dm)) == expected_dm
        assert usage_line(await stats_in(app.commands, group)) == (
            "Model use here: 2 calls, 240 prompt + 16 completion tokens, "
            f"about ${(120 * 2.5 + 8 * 10.0) / 1_000_000:.4f} "
            "(no price for local-small: set MNEMO_MODEL_PRICES)"
        )
        elsewhere = TestChat(app.runtime, name="lee", chat="lee-dm", kind="dm")
        assert usage_line(await stats_in(app.commands, elsewhere)) == "Model use here: none yet"

    # A new process on the same database: the spend was written at shutdown.
    async with open_test_app(tmp_path, settings=settings, plugins=[LISTENER]) as restarted:
        dm = TestChat(restarted.runtime, name="sarah", chat="sarah-dm", kind="dm")
        assert restarted.ledger.unwritten_in(dm.room.world_id) == {}
        assert usage_line(await stats_in(restarted.commands, dm)) == expected_dm
        # New spend adds to what is stored, before it is written too: a reply and its
        # selection (/stats's learning asks nothing).
        await dm.say("I have a dog.", number=3)
        await dm.settle()
        assert "6 calls, 720 prompt + 48 completion tokens" in usage_line(
            await stats_in(restarted.commands, dm)
        )


async def test_a_streamed_answer_without_usage_is_counted_by_mnemo_and_said_to_be(
    tmp_path: Path, model_dir: Path
) -> None:
    # As llama-cpp-python streams: `stream_options` accepted, no usage in any chunk.
    answer = "Noted, thank you for telling me."

    def unreported(body: dict[str, object]) -> Reply:
        return Reply(answer, usage=None)

    async with FakeOpenAIServer(responder=unreported) as server:
        settings = priced_settings(tmp_path, server)
        async with open_test_app(tmp_path, settings=settings, model_dir=model_dir) as app:
            said = "Hi, I'm Sam and I keep bees.\nI live in Lisbon.\n/stats\n"
            out = io.StringIO()
            # The console prints a reply as it streams: the real streaming path.
            await ConsoleChat(user_name="sam", stdin=io.StringIO(said), stdout=out).run(
                app.adapter_services
            )
    requests = server.chat_requests
    assert len(requests) == 2 and all(r.json["stream"] for r in requests)
    counter = local_counter()
    prompt = sum(chat_tokens(counter, [m["content"] for m in r.json["messages"]]) for r in requests)
    completion = 2 * counter.count(answer)
    [line] = [line for line in out.getvalue().splitlines() if "Model use here" in line]
    assert f"2 calls, {prompt:,} prompt + {completion:,} completion tokens" in line
    counted = "; the tokens of 2 of the calls counted by Mnemo: the server reported none"
    assert line.endswith(counted)
    assert prompt > 100  # the prompts' real size, not zero

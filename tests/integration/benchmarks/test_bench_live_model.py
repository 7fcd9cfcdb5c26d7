"""`make bench-live`'s recording proxy: every request reaches the model server unchanged and
every answer comes back unchanged, and each call is one JSON line in the format of
tests/data/real-model, the task named, so a live run can be replayed in tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web
from openai import AsyncOpenAI

from benchmarks.facts_prompt import conversation_of, variant, window_lines
from benchmarks.live_model import Recorder, bench_environment, task_of
from benchmarks.memory import DEFAULT_DATA, load_conversations
from bot.testing.openai_server import FakeOpenAIServer, reply
from tests.paths import DATA


@asynccontextmanager
async def proxy_client(server: FakeOpenAIServer, record: Path) -> AsyncIterator[AsyncOpenAI]:
    """An `openai` client talking to the recording proxy in front of `server`."""
    recorder = Recorder(server.base_url.removesuffix("/v1"), record)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = AsyncOpenAI(api_key="sk-local", base_url=f"http://127.0.0.1:{port}/v1")
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()


async def test_the_proxy_forwards_and_records_each_call(tmp_path: Path) -> None:
    record = tmp_path / "live.jsonl"
    answer = '{"claims": []}'
    async with (
        FakeOpenAIServer(responder=lambda request: answer) as server,
        proxy_client(server, record) as client,
    ):
        got = await client.chat.completions.create(
            model="local-model",
            messages=[{"role": "user", "content": "TASK: Extract Claims about people"}],
            max_tokens=50,
            temperature=0.1,
        )
        forwarded = server.chat_requests[0].json
    assert got.choices[0].message.content == answer
    assert forwarded["max_tokens"] == 50 and forwarded["model"] == "local-model"
    [line] = record.read_text(encoding="utf-8").splitlines()
    row = json.loads(line)
    assert row["task"] == "facts" and row["content"] == answer and row["status"] == 200
    assert row["roles"] == ["user"] and row["params"]["temperature"] == 0.1
    assert row["prompt"] == "TASK: Extract Claims about people" and row["seconds"] >= 0


async def test_the_proxy_passes_a_stream_on_as_it_comes_and_records_where_it_stopped(
    tmp_path: Path,
) -> None:
    """A streamed reply goes through as the model writes it; a client that stops reading
    closes the model's request (the model stops), and the record holds what was written."""
    record = tmp_path / "live.jsonl"
    words = " ".join(f"word{n}" for n in range(60))
    messages: Any = [{"role": "system", "content": "x"}, {"role": "user", "content": "# Task"}]
    async with FakeOpenAIServer() as server:
        server.enqueue(reply(words, chunk_delay=0.02), reply("one two three", chunk_delay=0.02))
        async with proxy_client(server, record) as client:
            stream = await client.chat.completions.create(
                model="local-model", messages=messages, stream=True
            )
            seen = []
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    seen.append(chunk.choices[0].delta.content)
                if len(seen) == 5:
                    break
            await stream.close()
            whole = await client.chat.completions.create(
                model="local-model", messages=messages, stream=True
            )
            finished = "".join([c.choices[0].delta.content or "" async for c in whole if c.choices])
            await asyncio.sleep(0.2)  # the proxy notices the first client went
    assert "".join(seen) == "word0 word1 word2 word3 word4 " and finished == "one two three"
    first, second = (json.loads(line) for line in record.read_text().splitlines())
    assert first["task"] == "reply" and first["stopped"] is True
    assert first["content"].startswith("word0 word1") and len(first["content"]) < len(words)
    assert second["content"] == "one two three" and "stopped" not in second


def test_tasks_are_named_from_the_prompt_and_the_bench_gets_the_llama_settings() -> None:
    assert task_of(["system", "user"], "You are Mnemo.\n# Conversation\nA: hi\n# Task\nW") == (
        "reply"
    )
    assert task_of(["user"], "TASK: Decide which evaluation functions") == "evaluator_selection"
    assert task_of(["user"], "TASK: Sam stated a goal for themselves.") == "create_goal"
    env = bench_environment("http://127.0.0.1:9", 300)
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert env["MNEMO_MODEL_CONCURRENCY"] == "1" and env["MNEMO_MODEL_RETRIES"] == "0"


def recorded_facts_request() -> dict:
    path = DATA / "real-model" / "live"
    rows = [json.loads(line) for line in (path / "qwen2.5-coder-0.5b-bench-1.jsonl").open()]
    return next(r for r in rows if r["task"] == "facts" and "Example 2:" in r["prompt"])


def test_the_facts_prompt_variants_change_only_what_they_name() -> None:
    row = recorded_facts_request()
    prompt, params = row["prompt"], row["params"]
    one, same = variant("one-example", prompt, params)
    assert "Example 1:" in one and "Example 2:" not in one and "# END OF EXAMPLES" in one
    assert one.endswith(prompt[-200:]) and same["response_format"] == params["response_format"]
    bare, without = variant("no-grammar", prompt, params)
    assert bare == prompt and "response_format" not in without
    assert without["temperature"] == params["temperature"]
    short, _ = variant("short", prompt, params)
    assert len(short.split()) < len(prompt.split()) and "# Actors in the scene" in short
    bare_agent, _ = variant("no-agent-bio", prompt, params)
    assert "Mnemo (the assistant, you)\n" in bare_agent and "Listens," not in bare_agent
    assert "Dmitri:" in bare_agent.split("# Actors in the scene", 1)[1]
    assert window_lines(prompt)[-1][0] == "Dmitri"
    assert conversation_of(window_lines(prompt), load_conversations(DEFAULT_DATA)).name == (
        "family-move-job-car"
    )

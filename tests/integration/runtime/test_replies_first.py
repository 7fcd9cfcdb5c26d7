"""Replies first, and a deadline that holds (issue 22), through the real `openai` client, the
app and its evaluation queue (EvaluationRunner), against local HTTP servers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web

from bot import Context, Evaluator, ModelClass, Plugin
from bot.adapters.lanes import RoomLanes
from bot.config.settings import ModelSettings
from bot.llm.accounting import UsageLedger
from bot.llm.model_queue import ModelQueue, Priority
from bot.llm.openai_model import OpenAIModel
from bot.runtime.replying import MODEL_FAILED_REPLY
from bot.testing.harness import TestChat, open_test_app
from bot.testing.openai_server import FakeOpenAIServer, last_user_message

REPLY = '{"text": "Hello!", "action": "NONE"}'


def model_settings(base_url: str, **overrides: object) -> ModelSettings:
    return ModelSettings(
        _env_file=None,  # type: ignore[call-arg]
        openai_api_key="sk-test",
        openai_base_url=base_url,
        small_model="small",
        large_model="large",
        **overrides,
    )


def learner(started: list[str]) -> Plugin:
    """An evaluator that asks the model about every message, overheard ones too."""

    async def learn(ctx: Context, found: object) -> None:
        started.append(ctx.message.content.text)
        await ctx.model.generate(f"learn: {ctx.message.content.text}", model_class=ModelClass.SMALL)

    return Plugin(
        "learn", evaluators=[Evaluator("LEARN", "learns", handler=learn, always_run=True)]
    )


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def test_a_reply_waits_only_for_the_evaluation_request_in_flight(
    tmp_path: Path, model_dir: Path
) -> None:
    """A one-at-a-time server (MNEMO_MODEL_CONCURRENCY=1): three rooms' evaluations want the
    model, one is at the server, two wait. A reply asked for now goes next, not last."""
    gate = asyncio.Event()
    first_learning = True

    async def respond(request: dict) -> str:
        nonlocal first_learning
        prompt = last_user_message(request)
        if prompt.startswith("learn:"):
            if first_learning:
                first_learning = False
                await gate.wait()  # a long fact extraction at the server
            return "[]"
        return REPLY

    started: list[str] = []
    async with FakeOpenAIServer(responder=respond) as server:
        model = OpenAIModel(model_settings(server.base_url, concurrency=1), UsageLedger())
        async with open_test_app(tmp_path, plugins=[learner(started)], model=model) as app:
            groups = [
                TestChat(app.runtime, name=f"P{n}", chat=f"group-{n}", kind="group")
                for n in range(3)
            ]
            for number, group in enumerate(groups):
                result = await group.say(f"overheard number {number}")
                assert result.replies == []  # not addressed: learning only
            await until(lambda: model.queue.in_flight == 1 and model.queue.waiting == 2)
            dm = TestChat(app.runtime, name="Dee", chat="dm")
            replying = asyncio.create_task(dm.say("hello there"))
            await until(lambda: model.queue.waiting == 3)
            gate.set()
            await asyncio.wait_for(replying, 20)
            for chat in (*groups, dm):
                await chat.settle()
        await model.close()
    kinds = [
        "learn" if last_user_message(r.json).startswith("learn:") else "reply"
        for r in server.chat_requests
    ]
    # The reply went right after the request in flight, before the two that waited longer.
    assert kinds[:3] == ["learn", "reply", "learn"]
    assert kinds.count("learn") == 4 and dm.replies == ["Hello!"]
    assert len(started) == 4


async def test_a_reply_asked_again_keeps_its_slot_before_a_waiting_evaluation(
    tmp_path: Path, model_dir: Path
) -> None:
    """Issue 31's 182 s: the reply's first answer was refused, and its second request waited
    behind a fact extraction that had come in between. Now the reply keeps its slot."""
    gate = asyncio.Event()
    replies_asked = 0

    async def respond(request: dict) -> str:
        nonlocal replies_asked
        if last_user_message(request).startswith("learn:"):
            return "[]"
        replies_asked += 1
        if replies_asked == 1:
            await gate.wait()  # the first answer takes long, and is a refusal
            return "I'm sorry, but I can't assist with that."
        return "Hello Dee, good to see you!"

    started: list[str] = []
    async with FakeOpenAIServer(responder=respond) as server:
        model = OpenAIModel(model_settings(server.base_url, concurrency=1), UsageLedger())
        async with open_test_app(tmp_path, plugins=[learner(started)], model=model) as app:
            dm = TestChat(app.runtime, name="Dee", chat="dm")
            replying = asyncio.create_task(dm.say("hello there"))
            await until(lambda: model.queue.in_flight == 1)
            group = TestChat(app.runtime, name="Pat", chat="group", kind="group")
            assert (await group.say("overheard while the bot thinks")).replies == []
            await until(lambda: model.queue.waiting == 1)  # the evaluation, waiting
            gate.set()
            await asyncio.wait_for(replying, 20)
            for chat in (dm, group):
                await chat.settle()
            stored = [m.content.text for m in await app.store.memories.recent(dm.room.id, 10)]
        await model.close()
    kinds = [
        "learn" if last_user_message(r.json).startswith("learn:") else "reply"
        for r in server.chat_requests
    ]
    assert kinds[:3] == ["reply", "reply", "learn"]
    # The refusal was never shown nor kept as the bot's line.
    assert dm.replies == ["Hello Dee, good to see you!"]
    assert stored == ["hello there", "Hello Dee, good to see you!"]


async def test_a_cancelled_wait_gives_no_slot_away_and_order_holds_within_a_priority() -> None:
    queue = ModelQueue(1)
    order: list[str] = []
    release = asyncio.Event()

    async def hold(name: str, priority: Priority) -> None:
        async with queue.slot(priority):
            order.append(name)
            if name == "first":
                await release.wait()

    first = asyncio.create_task(hold("first", Priority.EVALUATION))
    await until(lambda: queue.in_flight == 1)
    names = [("e1", Priority.EVALUATION), ("gone", Priority.REPLY), ("e2", Priority.EVALUATION)]
    tasks = {name: asyncio.create_task(hold(name, p)) for name, p in names}
    await until(lambda: queue.waiting == 3)
    tasks["gone"].cancel()  # a reply whose room was closed while it waited
    reply = asyncio.create_task(hold("reply", Priority.REPLY))
    await until(lambda: queue.waiting == 3)
    release.set()
    await asyncio.gather(first, tasks["e1"], tasks["e2"], reply)
    assert order == ["first", "reply", "e1", "e2"]
    assert (queue.in_flight, queue.waiting) == (0, 0)


@asynccontextmanager
async def trickling_server(seconds: float, slow: list[str]) -> AsyncIterator[str]:
    """An OpenAI-compatible endpoint that answers 200 at once, then one byte of JSON
    whitespace every 0.2 s for `seconds` before the body: every read arrives in time, the
    answer does not. A message saying "QUICK-ANSWER" is answered at once; every other request
    is noted in `slow` as it arrives."""

    async def chat(request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        if "QUICK-ANSWER" not in json.dumps(payload):
            slow.append(last_user_message(payload))
        answer = {
            "id": "chatcmpl-trickle",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", "m"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": REPLY},
                    "finish_reason": "stop",
                }
            ],
        }
        body = json.dumps(answer).encode()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if "QUICK-ANSWER" not in json.dumps(payload):
            ends = time.monotonic() + seconds
            try:
                while time.monotonic() < ends:
                    await response.write(b" ")
                    await asyncio.sleep(0.2)
            except ConnectionError:
                return response  # the client gave up: what a deadline should do
        await response.write(body)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()


async def test_a_trickling_endpoint_cannot_hold_a_reply_past_the_timeout(
    tmp_path: Path, model_dir: Path
) -> None:
    """MNEMO_MODEL_TIMEOUT=1 bounds the whole request (retries included), not each read: the
    reply is the fallback (the body, 8 s away, never read), the two retries the client may make
    are not sent once the time is up, and the room's next message is answered."""
    slow: list[str] = []
    async with trickling_server(seconds=8.0, slow=slow) as base_url:
        ledger = UsageLedger()
        model = OpenAIModel(model_settings(base_url, timeout_seconds=1.0, max_retries=2), ledger)
        async with open_test_app(tmp_path, model=model) as app:
            chat = TestChat(app.runtime)
            lanes: RoomLanes[str] = RoomLanes("test")
            first = lanes.submit(chat.room.id, lambda: chat.say("tell me something"))
            second = lanes.submit(chat.room.id, lambda: chat.say("QUICK-ANSWER hello again"))
            await asyncio.wait_for(first, 10)
            await asyncio.wait_for(second, 10)
            await lanes.close(grace=1)
        await model.close()
    assert chat.replies == [MODEL_FAILED_REPLY, "Hello!"]
    # One request for the first reply: a deadline per read would have read the trickle to
    # its end (a reply, not the fallback); one per attempt would have sent the retries.
    assert len(slow) == 1 and "tell me something" in slow[0]
    assert ledger.snapshot()["reply"].failures == 1

"""OpenAIModel with the real `openai` client against the local FakeOpenAIServer."""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import socket
import struct
from collections.abc import AsyncIterator

import openai
import pytest

from bot.app.model_choice import make_model
from bot.config.settings import ModelSettings
from bot.llm.accounting import UsageLedger
from bot.llm.base import (
    JSON_TEMPERATURE,
    JsonAnswer,
    LanguageModel,
    ModelClass,
    ModelError,
    ModelRequest,
)
from bot.llm.openai_model import OpenAIModel
from bot.llm.tokens import chat_tokens, local_counter
from bot.plugin.offline_model import OfflineModel
from bot.testing.openai_server import (
    DEFAULT_REPLY,
    FakeOpenAIServer,
    fake_embedding,
    last_user_message,
    raw,
    reply,
    status,
)

KEY = "sk-test-SECRET-0123456789abcdef"
# The openai client ignores a 0 retry-after and backs off 0.5 s and more; 1 ms keeps tests fast.
FAST = 0.001


def settings_for(base_url: str, **overrides: object) -> ModelSettings:
    values: dict[str, object] = {
        "openai_api_key": KEY,
        "openai_base_url": base_url,
        "small_model": "fake-small",
        "large_model": "fake-large",
        "max_retries": 2,
        "timeout_seconds": 5.0,
    }
    values.update(overrides)
    return ModelSettings(_env_file=None, **values)  # type: ignore[arg-type]


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def ledger() -> UsageLedger:
    return UsageLedger()


@pytest.fixture
async def model(server: FakeOpenAIServer, ledger: UsageLedger) -> AsyncIterator[OpenAIModel]:
    llm = OpenAIModel(settings_for(server.base_url), ledger)
    yield llm
    await llm.close()


async def ask(
    llm: OpenAIModel, task: str = "reply", model_class: ModelClass = ModelClass.LARGE
) -> str:
    return await llm.generate(
        ModelRequest("Hello there, model", model_class=model_class, task=task)
    )


def test_implements_the_protocol(model: OpenAIModel) -> None:
    assert isinstance(model.name, str)
    llm: LanguageModel = model  # checked by mypy/pyright; here it documents the intent
    assert llm is model


async def test_answer_and_request_shape(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    server.enqueue(reply("Hi!"))
    assert await ask(model) == "Hi!"
    [request] = server.chat_requests
    assert request.json["model"] == "fake-large"
    assert request.json["messages"] == [{"role": "user", "content": "Hello there, model"}]
    assert "max_tokens" not in request.json
    assert request.headers["authorization"] == f"Bearer {KEY}"


async def test_model_class_picks_the_model_and_max_tokens_is_sent(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    await model.generate(
        ModelRequest(
            "pick", model_class=ModelClass.SMALL, task="evaluator_selection", max_tokens=50
        )
    )
    [request] = server.chat_requests
    assert request.json["model"] == "fake-small"
    assert request.json["max_tokens"] == 50


async def test_default_responder(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    assert await ask(model) == DEFAULT_REPLY


async def test_responder_sees_the_request(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    async def echo(request: dict[str, object]) -> str:
        return f"you said: {last_user_message(request)}"

    server.responder = echo
    assert await ask(model) == "you said: Hello there, model"


async def test_429_then_success(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    server.enqueue(status(429, retry_after=FAST), reply("after the rate limit"))
    assert await ask(model) == "after the rate limit"
    assert len(server.chat_requests) == 2


async def test_500_then_success(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    server.enqueue(status(500, retry_after=FAST), reply("recovered"))
    assert await ask(model) == "recovered"
    assert len(server.chat_requests) == 2


async def test_repeated_500_beyond_max_retries(
    server: FakeOpenAIServer, model: OpenAIModel, ledger: UsageLedger
) -> None:
    server.enqueue(*[status(500, retry_after=FAST)] * 3, reply("too late"))
    with pytest.raises(ModelError, match="HTTP 500"):
        await ask(model, task="evaluator:GET_FACTS")
    # One try and max_retries=2 retries; the fourth outcome is never served.
    assert len(server.chat_requests) == 3
    assert server.pending == 1
    usage = ledger.tasks["evaluator:GET_FACTS"]
    assert (usage.calls, usage.failures) == (0, 1)


async def test_client_errors_are_not_retried(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    server.enqueue(status(400, message="bad request"), reply("unused"))
    with pytest.raises(ModelError, match="HTTP 400: bad request"):
        await ask(model)
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (raw(b"this is not json"), "not valid JSON"),
        (raw(b"<html>oops</html>", "text/html"), "not a chat completion"),
        (raw(b'{"id": "x", "object": "chat.completion"}'), "no choices"),
        (raw(b'{"id": "x", "choices": []}'), "empty choices"),
        (raw(b"[1, 2, 3]"), "not a chat completion"),
        (reply(None), "no content"),
    ],
    ids=["non-json", "html", "no choices", "empty choices", "json array", "null content"],
)
async def test_malformed_bodies(
    server: FakeOpenAIServer,
    model: OpenAIModel,
    ledger: UsageLedger,
    outcome: object,
    message: str,
) -> None:
    server.enqueue(outcome)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match=message) as caught:
        await ask(model, task="evaluator:UPDATE_GOAL")
    assert "fake-large" in str(caught.value) and "evaluator:UPDATE_GOAL" in str(caught.value)
    # A 200 is not retried, whatever its body.
    assert len(server.chat_requests) == 1
    assert ledger.tasks["evaluator:UPDATE_GOAL"].failures == 1


async def test_usage_is_recorded_per_task(
    server: FakeOpenAIServer, model: OpenAIModel, ledger: UsageLedger
) -> None:
    server.enqueue(
        reply("a", usage=(100, 10)),
        reply("b", usage=(200, 20)),
        reply("c", usage=(7, 3)),
        reply("d", usage=None),
    )
    await ask(model, task="reply")
    await ask(model, task="reply")
    await ask(model, task="evaluator_selection", model_class=ModelClass.SMALL)
    await ask(model, task="evaluator:GET_FACTS")
    usage = ledger.snapshot()
    assert (usage["reply"].calls, usage["reply"].prompt_tokens) == (2, 300)
    assert usage["reply"].completion_tokens == 30
    selection = usage["evaluator_selection"]
    assert (selection.calls, selection.prompt_tokens, selection.completion_tokens) == (1, 7, 3)
    # No usage in the body: Mnemo counts the tokens itself, and says it did.
    facts = usage["evaluator:GET_FACTS"]
    counter = local_counter()
    sent = [m["content"] for m in server.chat_requests[-1].json["messages"]]
    assert (facts.calls, facts.counted_calls) == (1, 1)
    assert facts.prompt_tokens == chat_tokens(counter, sent) > 0
    assert facts.completion_tokens == counter.count("d") == 1
    assert usage["reply"].counted_calls == 0


async def test_the_key_never_leaks(
    server: FakeOpenAIServer, model: OpenAIModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # A misbehaving proxy that echoes the key back in its error message.
    server.enqueue(status(401, message=f"Incorrect API key provided: {KEY}"))
    with pytest.raises(ModelError) as caught:
        await ask(model)
    assert server.chat_requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "HTTP 401" in str(caught.value)
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value)
    # `from None`: no chained openai exception carries the echoed body along.
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    server.enqueue(*[status(503, retry_after=FAST, message=f"upstream saw {KEY}")] * 3)
    with pytest.raises(ModelError) as again:
        await ask(model)
    assert KEY not in str(again.value)
    assert caplog.records, "expected debug logs from the model and the client"
    assert KEY not in caplog.text
    for record in caplog.records:
        assert KEY not in record.getMessage()


async def test_prompt_is_not_logged_at_info(
    server: FakeOpenAIServer, model: OpenAIModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await model.generate(
        ModelRequest("my secret diary entry", model_class=ModelClass.LARGE, task="reply")
    )
    assert "secret diary" not in caplog.text


async def test_connection_error(ledger: UsageLedger) -> None:
    # A port that was free a moment ago: nothing listens there.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = OpenAIModel(settings_for(f"http://127.0.0.1:{port}/v1", max_retries=0), ledger)
    with pytest.raises(ModelError, match="could not connect"):
        await ask(llm)
    await llm.close()
    assert ledger.tasks["reply"].failures == 1


async def test_timeout(server: FakeOpenAIServer, ledger: UsageLedger) -> None:
    llm = OpenAIModel(settings_for(server.base_url, max_retries=0, timeout_seconds=0.2), ledger)
    server.enqueue(reply("too slow", delay=2.0))
    with pytest.raises(ModelError, match="timed out"):
        await ask(llm)
    await llm.close()


async def test_a_client_passed_in_is_used_and_left_open(
    server: FakeOpenAIServer, ledger: UsageLedger
) -> None:
    client = openai.AsyncOpenAI(api_key="sk-other", base_url=server.base_url, max_retries=0)
    llm = OpenAIModel(settings_for("http://unused.invalid/v1"), ledger, client=client)
    assert await ask(llm) == DEFAULT_REPLY
    assert server.chat_requests[0].headers["authorization"] == "Bearer sk-other"
    await llm.close()
    assert not client.is_closed()
    await client.close()


async def test_base_url_without_key(server: FakeOpenAIServer, ledger: UsageLedger) -> None:
    """A local server (llama.cpp, Ollama) needs no key; a placeholder satisfies the client."""
    llm = OpenAIModel(settings_for(server.base_url, openai_api_key=None), ledger)
    assert await ask(llm) == DEFAULT_REPLY
    await llm.close()


def test_factory_picks_the_model(ledger: UsageLedger) -> None:
    offline = ModelSettings(_env_file=None, openai_api_key=None, openai_base_url=None)
    assert isinstance(make_model(offline, ledger), OfflineModel)
    online = settings_for("http://127.0.0.1:9/v1")
    assert isinstance(make_model(online, ledger), OpenAIModel)


# -- the fake server's embeddings ----------------------------------------------------------


async def test_embeddings_through_the_client(server: FakeOpenAIServer) -> None:
    client = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
    first = await client.embeddings.create(model="fake-embedding", input=["apple", "pear"])
    again = await client.embeddings.create(
        model="fake-embedding", input="apple", encoding_format="float"
    )
    sized = await client.embeddings.create(model="fake-embedding", input="apple", dimensions=8)
    await client.close()
    apple, pear = (item.embedding for item in first.data)
    assert len(apple) == server.embedding_dimensions
    assert math.isclose(sum(x * x for x in apple), 1.0, rel_tol=1e-5)
    assert apple == pytest.approx(again.data[0].embedding, abs=1e-6)
    assert apple != pytest.approx(pear, abs=1e-3)
    assert len(sized.data[0].embedding) == 8
    assert len(server.embedding_requests) == 3


async def test_embeddings_base64_and_errors(server: FakeOpenAIServer) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        url = f"{server.base_url}/embeddings"
        body = {"model": "m", "input": ["x"], "encoding_format": "base64", "dimensions": 4}
        async with session.post(url, json=body) as response:
            payload = await response.json()
        vector = struct.unpack("<4f", base64.b64decode(payload["data"][0]["embedding"]))
        assert vector == pytest.approx(fake_embedding("x", 4), abs=1e-6)
        assert payload["usage"] == {"prompt_tokens": 1, "total_tokens": 1}

        server.enqueue(status(503, retry_after=FAST), endpoint="embeddings")
        async with session.post(url, json=body) as response:
            assert response.status == 503
            assert response.headers["retry-after-ms"] == "1.0"
            assert (await response.json())["error"]["type"] == "server_error"
        async with session.post(f"{server.base_url}/nowhere", json={}) as response:
            assert response.status == 404

    with pytest.raises(TypeError):
        server.enqueue(reply("no"), endpoint="embeddings")


async def test_chat_response_body_is_realistic(server: FakeOpenAIServer) -> None:
    import aiohttp

    server.enqueue(reply("Hi", usage=(3, 1)))
    async with aiohttp.ClientSession() as session:
        body = {"model": "gpt-x", "messages": [{"role": "user", "content": "hey"}]}
        async with session.post(f"{server.base_url}/chat/completions", json=body) as response:
            payload = await response.json()
        async with session.post(
            f"{server.base_url}/chat/completions", json={**body, "stream": True}
        ) as response:
            assert response.status == 200
            assert response.headers["content-type"] == "text/event-stream"
            events = (await response.text()).split("\n\n")
        assert events[-2] == "data: [DONE]"
    assert payload["object"] == "chat.completion"
    assert payload["model"] == "gpt-x"
    assert payload["id"].startswith("chatcmpl-")
    assert isinstance(payload["created"], int)
    assert payload["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert payload["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}


async def test_base_url_needs_a_running_server() -> None:
    fake = FakeOpenAIServer()
    with pytest.raises(RuntimeError):
        _ = fake.base_url


SCHEMA = JsonAnswer(
    "answer",
    {
        "type": "object",
        "properties": {"names": {"type": "array", "items": {"type": "string"}}},
        "required": ["names"],
        "additionalProperties": False,
    },
)


async def json_task(llm: OpenAIModel) -> str:
    return await llm.generate(
        ModelRequest(
            "pick",
            model_class=ModelClass.SMALL,
            task="evaluator_selection",
            max_tokens=60,
            system="You are Mnemo.",
            json_answer=SCHEMA,
        )
    )


async def test_json_task_shape(server: FakeOpenAIServer, model: OpenAIModel) -> None:
    await json_task(model)
    [request] = server.chat_requests
    assert request.json["messages"] == [
        {"role": "system", "content": "You are Mnemo."},
        {"role": "user", "content": "pick"},
    ]
    assert request.json["temperature"] == JSON_TEMPERATURE
    assert request.json["max_tokens"] == 60
    assert request.json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": dict(SCHEMA.schema), "strict": True},
    }


async def test_refused_response_format_is_dropped_for_good_without_failing(
    server: FakeOpenAIServer, model: OpenAIModel, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(
        status(400, message="Unrecognized request argument supplied: response_format"),
        reply('{"names": []}'),
        status(400, message="response_format.schema: extra fields not permitted"),
        reply('{"names": ["A"]}'),
        status(400, message="'response_format' of type 'json_object' is not supported"),
        reply('{"names": ["B"]}'),
        reply('{"names": ["C"]}'),
    )
    with caplog.at_level(logging.INFO, logger="bot.llm.openai_model"):
        answers = [await json_task(model) for _ in range(4)]
    assert answers == ['{"names": []}', '{"names": ["A"]}', '{"names": ["B"]}', '{"names": ["C"]}']
    sent = [r.json.get("response_format") for r in server.chat_requests]
    schema = dict(SCHEMA.schema)
    assert [f and f["type"] for f in sent] == ["json_schema"] + ["json_object"] * 4 + [None] * 2
    assert [f.get("schema") for f in sent[1:5]] == [schema, schema, None, None]
    assert model.structured_output is None
    assert sum("refused response_format" in r.message for r in caplog.records) == 3


async def test_llama_cpp_python_refusing_json_schema_with_a_500_is_detected(
    server: FakeOpenAIServer, ledger: UsageLedger
) -> None:
    """llama-cpp-python 0.3 answers `json_schema` with its validation error as a 500; it
    takes JSON mode with the schema beside it (which it turns into a grammar)."""
    llm = OpenAIModel(settings_for(server.base_url, max_retries=0), ledger)
    server.enqueue(
        status(
            500,
            message="1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}",
        ),
        reply('{"names": ["A"]}'),
    )
    assert await json_task(llm) == '{"names": ["A"]}'
    await llm.close()
    assert server.chat_requests[1].json["response_format"] == {
        "type": "json_object",
        "schema": dict(SCHEMA.schema),
    }
    assert ledger.snapshot()["evaluator_selection"].failures == 0


async def test_a_400_about_something_else_is_an_error(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    server.enqueue(status(400, message="maximum context length exceeded"))
    with pytest.raises(ModelError, match="HTTP 400"):
        await json_task(model)
    assert len(server.chat_requests) == 1
    assert model.structured_output == "json_schema"


async def test_structured_output_off_sends_no_response_format(
    server: FakeOpenAIServer, ledger: UsageLedger
) -> None:
    llm = OpenAIModel(settings_for(server.base_url, structured_output="off"), ledger)
    await json_task(llm)
    await llm.close()
    [request] = server.chat_requests
    assert "response_format" not in request.json and request.json["temperature"] is not None


async def test_one_at_a_time_the_time_out_counts_from_sending(ledger: UsageLedger) -> None:
    """A local server answering one request at a time, 0.5 s each; three calls at once with a
    1.2 s time-out. Queued here, each is timed from its own sending and all succeed; sent
    together, the third waits 1 s at the server and times out."""
    busy = asyncio.Lock()

    async def one_at_a_time(request: dict) -> str:
        async with busy:
            await asyncio.sleep(0.5)
            return "answer"

    async with FakeOpenAIServer(responder=one_at_a_time) as server:
        for concurrency in (1, 0):
            llm = OpenAIModel(
                settings_for(
                    server.base_url,
                    concurrency=concurrency,
                    timeout_seconds=1.2,
                    max_retries=0,
                ),
                ledger,
            )
            answers = await asyncio.gather(*(ask(llm) for _ in range(3)), return_exceptions=True)
            await llm.close()
            if concurrency:
                assert answers == ["answer"] * 3
            else:
                assert answers.count("answer") < 3  # the queue at the server timed out
                await asyncio.sleep(1.0)  # let the server finish what was abandoned


async def test_json_task_without_schema_sends_low_temperature_only(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    """An answer whose root is an array (facts) cannot be a response_format."""
    await model.generate(
        ModelRequest(
            "extract", model_class=ModelClass.LARGE, task="x", json_answer=JsonAnswer("facts", None)
        )
    )
    [request] = server.chat_requests
    assert request.json["temperature"] == JSON_TEMPERATURE
    assert "response_format" not in request.json
    assert model.structured_output == "json_schema"

"""A local OpenAI-compatible HTTP server, so tests and benchmarks run the real `openai` client.

    async with FakeOpenAIServer() as server:
        server.enqueue(status(429, retry_after=0.001), reply("Hello!"))
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.base_url)
        ...
        assert len(server.chat_requests) == 2

Chat completions are answered from a queue of canned outcomes, consumed in order; when the
queue is empty the responder is called with the request's JSON body (sync or async, returning
the reply text or an outcome). Embeddings are deterministic unit vectors derived from a hash of
each input, so equal texts embed equally and different texts almost never do. Every request is
recorded with its JSON body and headers. Each outcome may carry a `delay` (seconds) before it is
served, to exercise client time-outs.

A request with `"stream": true` is answered as OpenAI streams: server-sent events, one chunk per
word of the reply (or the reply's own `chunks`), `chunk_delay` seconds apart, and the usage
in a last chunk when `stream_options.include_usage` asks for it (`finished_streams` and
`cut_streams` count the streams written to their end and those the client stopped reading
first). `streaming="refuse"` answers
such a request with HTTP 400 (an endpoint that cannot stream), `"ignore"` with the whole
completion as JSON (an endpoint that ignores the parameter); `stream_usage=False` refuses
`stream_options` with HTTP 400.

Speech to text (`POST /v1/audio/transcriptions`, multipart as the `openai` client sends it)
answers `{"text": ...}` from the `transcribe` callable (audio bytes, model name -> words; by
default the audio's bytes read as UTF-8, so a test's "voice note" is the words it holds), or a
`Status`/`Raw` queued for the `transcriptions` endpoint. Each is recorded in `transcriptions`.

It listens on 127.0.0.1 on a free port and never touches the network.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import itertools
import json
import math
import random
import re
import struct
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from bot.runtime.reply_prompt import REPLY_TASK_MARK

Endpoint = Literal["chat", "embeddings", "transcriptions"]

DEFAULT_REPLY = "Hello from the fake OpenAI server."
DEFAULT_EMBEDDING_DIMENSIONS = 384


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Reply:
    """A successful chat completion. `usage=None` leaves the usage field out of the body."""

    text: str | None
    usage: Usage | Literal["auto"] | None = "auto"
    finish_reason: str = "stop"
    delay: float = 0.0
    # Streamed: the pieces the text is sent in (None: word by word), and the pause between.
    chunks: tuple[str, ...] | None = None
    chunk_delay: float = 0.0
    # Streamed: after the pieces, an error event with this message instead of the end (the
    # model failed mid-answer, as an overloaded endpoint does).
    error: str | None = None


@dataclass(frozen=True)
class Status:
    """An error response with OpenAI's error body, e.g. 429 or 500.

    `retry_after` (seconds) sets the `retry-after-ms` and `retry-after` headers the openai client
    honours. The client ignores 0 and falls back to its own exponential back-off (0.5 s and up),
    so tests that want fast retries pass a small positive value such as 0.001.
    """

    code: int
    retry_after: float | None = None
    message: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Raw:
    """Any body at all, for malformed responses (non-JSON, JSON without choices, ...)."""

    body: bytes
    content_type: str = "application/json"
    code: int = 200
    delay: float = 0.0


@dataclass(frozen=True)
class Relay:
    """A streamed answer passed on as another endpoint writes it (benchmarks/live.py: a proxy
    in front of a real model). `pieces` gives the text in pieces; `usage` is asked once they
    end. When the client stops reading, `pieces` is closed, so the other endpoint's request
    is closed too and its model stops writing. Asked without `stream`, the pieces are joined
    into one completion."""

    pieces: AsyncGenerator[str, None]
    usage: Callable[[], Usage | None] = lambda: None
    delay: float = 0.0


Outcome = Reply | Status | Raw | Relay
Responder = Callable[[dict[str, Any]], "str | Outcome | Awaitable[str | Outcome]"]


def reply(
    text: str | None,
    *,
    usage: Usage | tuple[int, int] | Literal["auto"] | None = "auto",
    finish_reason: str = "stop",
    delay: float = 0.0,
    chunks: tuple[str, ...] | None = None,
    chunk_delay: float = 0.0,
    error: str | None = None,
) -> Reply:
    """A completion whose message content is `text` (None sends `"content": null`).

    usage: "auto" counts words of the prompt and the reply; a (prompt, completion) pair or a
    `Usage` is sent as given; None omits the field. `chunks` and `chunk_delay`: how a streamed
    answer is sent (the pieces joined must be `text`). `error`: a streamed answer stops after
    its pieces with an error event carrying this message.
    """
    if isinstance(usage, tuple):
        usage = Usage(*usage)
    if chunks is not None and "".join(chunks) != (text or ""):
        raise ValueError("the chunks joined must be the text")
    return Reply(text, usage, finish_reason, delay, chunks, chunk_delay, error)


def status(
    code: int, *, retry_after: float | None = None, message: str | None = None, delay: float = 0.0
) -> Status:
    return Status(code, retry_after, message, delay)


def raw(
    body: bytes | str,
    content_type: str = "application/json",
    *,
    code: int = 200,
    delay: float = 0.0,
) -> Raw:
    return Raw(body.encode() if isinstance(body, str) else body, content_type, code, delay)


def is_reply_request(body: dict[str, Any]) -> bool:
    """Whether a chat request is one for the bot's reply (its system text holds the task)."""
    messages = body.get("messages") or []
    return bool(
        messages
        and messages[0].get("role") == "system"
        and REPLY_TASK_MARK in str(messages[0].get("content", ""))
    )


def last_user_message(request: dict[str, Any]) -> str:
    """The text of the last user message of a chat request: handy inside responders."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") != "user":
            continue
        return _text_of(message.get("content"))
    return ""


def image_parts(request: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The images of a chat request's last user message, as (media type, bytes) decoded from
    their `image_url` data URLs; a part holding anything else fails the test."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        found = []
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                url = part["image_url"]["url"]
                header, _, data = url.partition(",")
                assert header.startswith("data:") and header.endswith(";base64"), header
                found.append((header[len("data:") : -len(";base64")], base64.b64decode(data)))
        return found
    return []


def _text_of(content: object) -> str:
    """A message's text: the content itself, or its text parts joined (beside images)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def fake_embedding(text: str, dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector for `text` (the same on every machine and run)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    generator = random.Random(seed)
    vector = [generator.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    json: Any
    # Lower-cased names, so assertions need not guess the client's capitalisation.
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Transcription:
    """A transcription request as received: the form's model and file, and any other field."""

    model: str
    filename: str
    content_type: str | None
    data: bytes
    fields: dict[str, str] = field(default_factory=dict)


# Audio bytes and the model asked -> the words heard.
Transcribe = Callable[[bytes, str], str]


def _default_transcript(audio: bytes, model: str) -> str:
    return audio.decode("utf-8", "replace")


def _default_responder(request: dict[str, Any]) -> str:
    return DEFAULT_REPLY


def _count_words(text: str) -> int:
    return len(text.split())


def _word_chunks(text: str) -> list[str]:
    """`text` in pieces of one word and the space after it, as a model streams tokens."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def _error_body(code: int, message: str) -> dict[str, Any]:
    kind, error_code = _ERROR_TYPES.get(code, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": error_code}}


class FakeOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1; use as an async context manager."""

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        embedding_dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS,
        streaming: Literal["sse", "refuse", "ignore"] = "sse",
        stream_usage: bool = True,
        transcribe: Transcribe | None = None,
    ) -> None:
        self.responder: Responder = responder or _default_responder
        self.transcribe: Transcribe = transcribe or _default_transcript
        self.transcriptions: list[Transcription] = []
        self.embedding_dimensions = embedding_dimensions
        self.streaming = streaming
        self.stream_usage = stream_usage
        self.requests: list[RecordedRequest] = []
        self._queues: dict[Endpoint, deque[Outcome]] = {
            "chat": deque(),
            "embeddings": deque(),
            "transcriptions": deque(),
        }
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # Set on stop, so delayed outcomes end at once instead of holding up the shutdown.
        self._stopping = asyncio.Event()
        # Streamed answers written to their end, and those the client stopped reading first
        # (a reply stopped early): what a test counts instead of timing the stream.
        self.finished_streams = 0
        self.cut_streams = 0
        self._stream_ended = asyncio.Event()

    # -- scripting -------------------------------------------------------------------------

    def enqueue(self, *outcomes: Outcome | str, endpoint: Endpoint = "chat") -> None:
        """Queue outcomes for the next requests to `endpoint`; a str is `reply(str)`.

        Embeddings accept `Status` and `Raw` only: a successful embedding is always computed.
        """
        for outcome in outcomes:
            item = reply(outcome) if isinstance(outcome, str) else outcome
            if endpoint != "chat" and isinstance(item, Reply | Relay):
                raise TypeError(f"{endpoint} take Status or Raw outcomes, not a reply")
            self._queues[endpoint].append(item)

    @property
    def pending(self) -> int:
        """Queued chat outcomes not yet served."""
        return len(self._queues["chat"])

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeOpenAIServer is not running: use `async with`")
        return f"http://127.0.0.1:{self._port}/v1"

    async def start(self) -> None:
        self._stopping.clear()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # No access log: tests assert on logs, and request lines are noise there.
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._port = None

    async def __aenter__(self) -> FakeOpenAIServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- handlers --------------------------------------------------------------------------

    async def _record(self, request: web.Request) -> Any:
        body = await request.read()
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                json=payload,
                headers={k.lower(): v for k, v in request.headers.items()},
            )
        )
        return payload

    async def _next_outcome(self, endpoint: Endpoint, payload: dict[str, Any]) -> Outcome | None:
        queue = self._queues[endpoint]
        if queue:
            return queue.popleft()
        if endpoint == "embeddings":
            return None
        answer = self.responder(payload)
        if inspect.isawaitable(answer):
            answer = await answer
        return reply(answer) if isinstance(answer, str) else answer

    async def _delay(self, outcome: Outcome) -> None:
        if outcome.delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), outcome.delay)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        payload = await self._record(request)
        if not isinstance(payload, dict):
            return self._error(400, "request body must be a JSON object")
        streamed = bool(payload.get("stream")) and self.streaming != "ignore"
        if streamed and self.streaming == "refuse":
            return self._error(400, "streaming is not supported by this server")
        if streamed and "stream_options" in payload and not self.stream_usage:
            return self._error(400, "Unrecognized request argument supplied: stream_options")
        outcome = await self._next_outcome("chat", payload)
        assert outcome is not None
        await self._delay(outcome)
        if isinstance(outcome, Relay):
            if streamed:
                return await self._stream(request, payload, outcome, None)
            async with aclosing(outcome.pieces) as pieces:
                text = "".join([piece async for piece in pieces])
            outcome = Reply(text, outcome.usage())
        if not isinstance(outcome, Reply):
            return self._special(outcome)
        messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
        prompt = " ".join(_text_of(m.get("content")) for m in messages)
        usage = outcome.usage
        if usage == "auto":
            usage = Usage(_count_words(prompt), _count_words(outcome.text or ""))
        if streamed:
            return await self._stream(request, payload, outcome, usage)
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": outcome.text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": outcome.finish_reason,
                }
            ],
        }
        if isinstance(usage, Usage):
            body["usage"] = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            }
        return web.json_response(body)

    async def _stream(
        self,
        request: web.Request,
        payload: dict[str, Any],
        outcome: Reply | Relay,
        usage: Usage | Literal["auto"] | None,
    ) -> web.StreamResponse:
        """The reply as OpenAI streams it: `chat.completion.chunk` events, then [DONE]."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        head = {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": payload.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
        }

        async def event(choices: list[dict[str, Any]], **extra: Any) -> None:
            data = json.dumps({**head, "choices": choices, **extra})
            await response.write(f"data: {data}\n\n".encode())

        def delta(content: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}]

        # The client may stop reading (a reply stopped early, a killed process).
        try:
            await self._write_stream(response, payload, outcome, usage, event, delta)
        except ConnectionResetError:
            self.cut_streams += 1
        else:
            self.finished_streams += 1
        self._stream_ended.set()
        return response

    async def streams_ended(self, count: int, timeout: float = 30.0) -> None:
        """Until `count` streamed answers have ended, written to their end or cut by the
        client (which the server notices at its next write, after the client has gone)."""

        async def ended() -> None:
            while True:
                self._stream_ended.clear()
                if self.finished_streams + self.cut_streams >= count:
                    return
                await self._stream_ended.wait()

        await asyncio.wait_for(ended(), timeout)

    async def _write_stream(
        self,
        response: web.StreamResponse,
        payload: dict[str, Any],
        outcome: Reply | Relay,
        usage: Usage | Literal["auto"] | None,
        event: Callable[..., Awaitable[None]],
        delta: Callable[..., list[dict[str, Any]]],
    ) -> None:
        await event(delta({"role": "assistant", "content": ""}))
        # Closed however the writing ends: a relayed request goes when the client does.
        async with aclosing(self._pieces_of(outcome)) as pieces:
            async for piece in pieces:
                await event(delta({"content": piece}))
        if isinstance(outcome, Reply) and outcome.error is not None:
            data = json.dumps({"error": {"message": outcome.error}})
            await response.write(f"data: {data}\n\n".encode())
            await response.write_eof()
            return
        finish_reason = outcome.finish_reason if isinstance(outcome, Reply) else "stop"
        await event(delta({}, finish_reason))
        if isinstance(outcome, Relay):
            usage = outcome.usage()
        options = payload.get("stream_options") or {}
        if isinstance(usage, Usage) and isinstance(options, dict) and options.get("include_usage"):
            total = usage.prompt_tokens + usage.completion_tokens
            counts = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": total,
            }
            await event([], usage=counts)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()

    async def _pieces_of(self, outcome: Reply | Relay) -> AsyncGenerator[str, None]:
        """A streamed answer's pieces: a reply's words (or chunks), `chunk_delay` apart; a
        relay's as they come."""
        if isinstance(outcome, Relay):
            async with aclosing(outcome.pieces) as relayed:
                async for piece in relayed:
                    yield piece
            return
        text = outcome.text or ""
        for piece in outcome.chunks if outcome.chunks is not None else _word_chunks(text):
            if outcome.chunk_delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), outcome.chunk_delay)
            yield piece

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        payload = await self._record(request)
        if not isinstance(payload, dict) or "input" not in payload:
            return self._error(400, "'input' is required")
        outcome = await self._next_outcome("embeddings", payload)
        if outcome is not None:
            # enqueue() refuses a Reply or a Relay for embeddings
            assert not isinstance(outcome, Reply | Relay)
            await self._delay(outcome)
            return self._special(outcome)
        inputs = payload["input"]
        if isinstance(inputs, str) or (inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        dimensions = int(payload.get("dimensions") or self.embedding_dimensions)
        as_base64 = payload.get("encoding_format") == "base64"
        data = []
        tokens = 0
        for index, item in enumerate(inputs):
            # Token-id inputs are embedded by their JSON text: still deterministic.
            text = item if isinstance(item, str) else json.dumps(item)
            tokens += _count_words(text)
            vector = fake_embedding(text, dimensions)
            embedding: list[float] | str = vector
            if as_base64:
                embedding = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": payload.get("model", "fake-embedding"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _models(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        created = int(time.time())
        names = ("fake-small", "fake-large", "fake-embedding")
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": n, "object": "model", "created": created, "owned_by": "fake"}
                    for n in names
                ],
            }
        )

    async def _transcriptions(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        upload = form.get("file")
        model = form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str):
            return self._error(400, "'file' and 'model' are required")
        data = upload.file.read()
        others = {k: v for k, v in form.items() if isinstance(v, str) and k != "model"}
        self.transcriptions.append(
            Transcription(model, upload.filename, upload.content_type, data, others)
        )
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                json={"model": model, "file": upload.filename, **others},
                headers={k.lower(): v for k, v in request.headers.items()},
            )
        )
        queue = self._queues["transcriptions"]
        if queue:
            outcome = queue.popleft()
            assert not isinstance(outcome, Reply | Relay)  # enqueue() refuses them
            await self._delay(outcome)
            return self._special(outcome)
        return web.json_response({"text": self.transcribe(data, model)})

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        return self._error(404, f"unknown route {request.method} {request.path}")

    def _special(self, outcome: Status | Raw) -> web.StreamResponse:
        if isinstance(outcome, Raw):
            return web.Response(
                body=outcome.body,
                status=outcome.code,
                content_type=None,
                headers={"Content-Type": outcome.content_type},
            )
        headers: dict[str, str] = {}
        if outcome.retry_after is not None:
            headers["retry-after-ms"] = str(round(outcome.retry_after * 1000, 3))
            headers["retry-after"] = str(math.ceil(outcome.retry_after))
        message = outcome.message or f"fake error {outcome.code}"
        return self._error(outcome.code, message, headers)

    @staticmethod
    def _error(
        code: int, message: str, headers: dict[str, str] | None = None
    ) -> web.StreamResponse:
        return web.json_response(_error_body(code, message), status=code, headers=headers)

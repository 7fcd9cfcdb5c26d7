"""The OpenAI-compatible chat model (OpenAI itself, or any server speaking its API)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai
from openai.types.chat import ChatCompletion

from bot.domain.images import ImageBytes
from bot.llm.base import JsonAnswer, ModelClass, ModelError, ModelRequest
from bot.llm.model_queue import ModelQueue, priority_of
from bot.llm.tokens import TokenCounter, chat_tokens, local_counter

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionContentPartParam, ChatCompletionMessageParam

    from bot.config.settings import ModelSettings
    from bot.llm.accounting import UsageLedger

log = logging.getLogger(__name__)

# Local servers (llama.cpp, Ollama, vLLM) take any key, but the client refuses to start without
# one; this placeholder is sent only when a base URL is set and no key is.
_NO_KEY = "not-needed"
# Server error messages are quoted in ModelError for diagnosis, but kept short.
_MAX_DETAIL = 160
# Structured output, most exact first; an endpoint refusing one is asked the next from then
# on. None is the prompt alone (the prompt always describes the JSON it wants).
# `json_object_schema` is JSON mode with the schema beside it, which llama.cpp's servers (and
# some providers) turn into a grammar; llama-cpp-python refuses `json_schema` itself.
_FORMATS: tuple[str | None, ...] = ("json_schema", "json_object_schema", "json_object", None)
# Words in an error's message that say the endpoint refused what was sent as `response_format`
# (a 400 or 422 as a rule; llama-cpp-python answers its validation error with a 500).
_FORMAT_WORDS: dict[str, tuple[str, ...]] = {
    "json_schema": ("response_format", "response format", "json_schema"),
    "json_object_schema": ("response_format", "response format", "json_object", "schema"),
    "json_object": ("response_format", "response format", "json_object", "json mode"),
}

# Words of a 4xx that refuses streaming ("streaming is not supported", "'stream' is not
# allowed"), or only its usage report; "upstream" is not one of them.
_STREAM_WORDS = re.compile(r"\bstream(?:ing)?\b", re.I)
_STREAM_OPTIONS_WORDS = re.compile(r"\bstream_options\b|\binclude_usage\b", re.I)


@dataclass(frozen=True)
class _Call:
    """One request as sent: the same for a whole answer and a streamed one."""

    task: str
    model: str
    messages: list[ChatCompletionMessageParam]
    options: dict[str, Any]
    json_answer: JsonAnswer | None
    world_id: str | None
    person_id: str | None


class _StreamRefused(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _is_event_stream(response: Any) -> bool:
    content_type = str(response.headers.get("content-type", ""))
    return content_type.split(";")[0].strip().lower() == "text/event-stream"


def _completion_of(body: bytes) -> object:
    """A whole completion's body as the client would read it (ValueError when not JSON)."""
    data = json.loads(body)
    if not isinstance(data, dict):
        return data
    return ChatCompletion.construct(**data)


def openai_client(settings: ModelSettings) -> openai.AsyncOpenAI:
    """The `openai` client of the configured endpoint: its key (or the placeholder a local
    server takes), base URL, time-out and retries. Chat and transcription use the same."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return openai.AsyncOpenAI(
        api_key=key or _NO_KEY,
        base_url=settings.openai_base_url or None,
        timeout=settings.timeout_seconds,
        max_retries=settings.max_retries,
    )


class OpenAIModel:
    """Chat completions with the SMALL or LARGE model from settings.

    Retries with back-off on 429, 5xx, time-outs and connection errors are the openai client's
    own (`max_retries`). `timeout` from settings bounds the whole request, retries included:
    the client's own time-out is per read, so a server that trickles bytes held a reply for
    38 s under a 3 s setting. Whatever fails becomes a `ModelError` whose message never
    contains the API key.

    The character's text goes in a system message. JSON tasks (`json_answer`) are sent with a
    low temperature and `response_format`: a JSON schema, or JSON mode, whichever the endpoint
    accepts. The first 400 naming the parameter is detected, the call repeated without it, and
    it is not sent again. With `concurrency` set, calls beyond it wait here, before sending,
    in one queue where the reply path's calls go first (bot/llm/model_queue.py), so a reply
    waits at most for the requests in flight; the time-out counts from sending.
    """

    def __init__(
        self,
        settings: ModelSettings,
        ledger: UsageLedger,
        *,
        client: openai.AsyncOpenAI | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self._settings = settings
        self._ledger = ledger
        # Counts a call's tokens when the endpoint reports none (a stream from llama.cpp).
        self._counter = counter or local_counter()
        log.debug("tokens the endpoint does not report: counted with %s", self._counter.label)
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        # Kept only to scrub it from error text a server might echo back.
        self._secret = key or None
        # A client passed in belongs to the caller, who configured and will close it.
        self._owns_client = client is None
        self._client = client or openai_client(settings)
        self.name = f"openai ({settings.small_model} / {settings.large_model})"
        self._format_index = 0 if settings.structured_output == "auto" else len(_FORMATS) - 1
        self.queue = ModelQueue(settings.concurrency)
        # Until the endpoint shows otherwise: it streams, and reports usage when streaming.
        self._streams = True
        self._stream_usage = True

    @property
    def streams(self) -> bool:
        """Whether `stream` streams (False once the endpoint refused or ignored it)."""
        return self._streams

    @property
    def structured_output(self) -> str | None:
        """The `response_format` type JSON tasks are sent with now (None: the prompt alone)."""
        return _FORMATS[self._format_index]

    def model_for(self, model_class: ModelClass) -> str:
        if model_class == ModelClass.SMALL:
            return self._settings.small_model
        return self._settings.large_model

    async def generate(self, request: ModelRequest) -> str:
        call = self._call(request)
        async with self.queue.slot(priority_of(call.task)):
            # Model time, from sending: a call waiting for a slot is not yet sent.
            started = time.perf_counter()
            deadline = asyncio.get_running_loop().time() + self._settings.timeout_seconds
            with self._mapped_errors(call):
                response = await self._create(call, deadline)
        return self._answer(call, response, started)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        """The answer in pieces as the model writes it (the reply path shows it growing).

        The same request as `generate`, with `stream=True`: the same structured output and
        fallbacks, the same errors, one record in the ledger (its usage from the last chunk,
        `stream_options.include_usage`, where the endpoint gives it). The time-out bounds
        the whole stream and the queue's slot is held until it ends or the caller stops
        reading (close the iterator: `contextlib.aclosing`). An endpoint that refuses
        `stream`, or answers it with a whole completion, is asked without it from then on.
        """
        if not self._streams:
            yield await self.generate(request)
            return
        call = self._call(request)
        refused = False
        response: object = None
        async with self.queue.slot(priority_of(call.task)):
            started = time.perf_counter()
            deadline = asyncio.get_running_loop().time() + self._settings.timeout_seconds
            with self._mapped_errors(call):
                try:
                    chunks = await self._create(call, deadline, stream=True)
                except _StreamRefused as error:
                    refused = True
                    self._no_streaming(f"HTTP {error.status}: {error.detail}")
                else:
                    async with chunks:
                        if _is_event_stream(chunks.response):
                            pieces = self._pieces(call, chunks, deadline, started)
                            async with contextlib.aclosing(pieces):
                                async for piece in pieces:
                                    yield piece
                            return
                        # Not events: a whole completion (the endpoint ignores `stream`:
                        # not asked to again), or a body that is none, read as generate would.
                        async with asyncio.timeout_at(deadline):
                            body = await chunks.response.aread()
                        response = _completion_of(body)
                        if self._content(response) is not None:
                            self._no_streaming("it answered with a whole completion")
            if not refused:
                yield self._answer(call, response, started)
                return
        # Asked again outside the slot (generate takes its own), once: not streamed again.
        yield await self.generate(request)

    async def close(self) -> None:
        if self._owns_client:
            await self._client.close()

    # -- helpers ---------------------------------------------------------------------------

    def _call(self, request: ModelRequest) -> _Call:
        """What is sent for `request`, whatever the structured output and streaming."""
        json_answer, max_tokens = request.json_answer, request.max_tokens
        options: dict[str, Any] = {}
        if max_tokens is not None:
            # `max_tokens` rather than `max_completion_tokens`: every compatible server knows it.
            options["max_tokens"] = max_tokens
        if json_answer is not None and json_answer.temperature is not None:
            options["temperature"] = json_answer.temperature
        return _Call(
            task=request.task,
            # A world's own choice of model (`/model`), else the process's setting.
            model=request.model_name or self.model_for(request.model_class),
            messages=self._messages(request),
            options=options,
            json_answer=json_answer,
            # Whose conversation it was for: /stats shows a world's own spend, and the daily
            # caps count the world's and the person's.
            world_id=request.world,
            person_id=request.person,
        )

    @staticmethod
    def _messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
        """The character's text as a system message, the worked examples and the
        conversation's history as earlier turns, then the prompt."""
        messages: list[ChatCompletionMessageParam] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for example in request.examples:
            messages.append({"role": "user", "content": example.prompt})
            messages.append({"role": "assistant", "content": example.answer})
        for turn in request.history:
            if turn.by_model:
                messages.append({"role": "assistant", "content": turn.text})
            else:
                messages.append({"role": "user", "content": turn.text})
        messages.append({"role": "user", "content": user_content(request.prompt, request.images)})
        return messages

    async def _create(self, call: _Call, deadline: float, *, stream: bool = False) -> Any:
        """The request sent, with the structured output (and, streaming, the usage option)
        the endpoint accepts; what it refused is dropped for good and the call repeated."""
        json_answer = call.json_answer
        while True:
            has_schema = json_answer is not None and json_answer.schema is not None
            kind = self.structured_output if has_schema else None
            response_format = self._response_format(json_answer, kind)
            # Only when asked for: a server that knows no `response_format` refuses the key.
            extra: dict[str, Any] = {"response_format": response_format} if response_format else {}
            usage_option = stream and self._stream_usage
            if stream:
                extra["stream"] = True
            if usage_option:
                extra["stream_options"] = {"include_usage": True}
            try:
                async with asyncio.timeout_at(deadline):
                    return await self._client.chat.completions.create(
                        model=call.model, messages=call.messages, **call.options, **extra
                    )
            except openai.APIStatusError as error:
                if kind is not None and self._refused_format(error, kind):
                    continue  # the same call, without what was refused: the user sees no error
                if usage_option and self._refuses(error, _STREAM_OPTIONS_WORDS):
                    self._stream_usage = False
                    log.info("the model endpoint refused stream_options; streams without usage")
                    continue
                if stream and self._refuses(error, _STREAM_WORDS):
                    raise _StreamRefused(error.status_code, self._detail(error)) from None
                raise

    async def _pieces(
        self, call: _Call, chunks: Any, deadline: float, started: float
    ) -> AsyncGenerator[str, None]:
        """The text of each chunk as it comes; the usage recorded once the stream ends, or
        when the caller stops reading (the tokens were spent all the same)."""
        usage: Any = None
        iterator = aiter(chunks)
        failed = False
        written: list[str] = []  # what was received, counted when no usage comes
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(iterator)
                except StopAsyncIteration:
                    break
                usage = getattr(chunk, "usage", None) or usage
                choices = getattr(chunk, "choices", None) or []
                delta = getattr(choices[0], "delta", None) if choices else None
                piece = getattr(delta, "content", None)
                if isinstance(piece, str) and piece:
                    written.append(piece)
                    yield piece
        except Exception:
            failed = True  # counted as a failure (_mapped_errors), not as usage
            raise
        finally:
            if not failed:
                self._record(call, usage, started, "".join(written))

    def _answer(self, call: _Call, response: object, started: float) -> str:
        """The text of a whole completion, its usage recorded."""
        text = self._content(response)
        if text is None:
            raise self._failure(call.task, call.model, self._why_empty(response))
        self._record(call, getattr(response, "usage", None), started, text)
        return text

    def _record(self, call: _Call, usage: Any, started: float, written: str) -> None:
        """The call's usage in the ledger, as the endpoint reported it (`usage`); with none
        reported, Mnemo's own count of what was sent and of the answer (`written`) goes
        beside it (bot/llm/tokens.py), counted and shown as Mnemo's count."""
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        estimated = None
        if usage is None:
            counter = self._counter
            estimated = (chat_tokens(counter, _texts(call.messages)), counter.count(written))
        self._ledger.record(
            call.task,
            prompt_tokens,
            completion_tokens,
            model=call.model,
            seconds=time.perf_counter() - started,
            world_id=call.world_id,
            person_id=call.person_id,
            estimated=estimated,
        )
        log.debug(
            "model call task=%s model=%s prompt_tokens=%d completion_tokens=%d",
            call.task,
            call.model,
            prompt_tokens,
            completion_tokens,
        )

    @contextlib.contextmanager
    def _mapped_errors(self, call: _Call) -> Iterator[None]:
        """Whatever fails becomes a ModelError (counted), its message safe to show."""
        task, model = call.task, call.model
        try:
            yield
        except TimeoutError:
            raise self._failure(
                task, model, f"timed out (no answer within {self._settings.timeout_seconds:g} s)"
            ) from None
        except openai.APIStatusError as error:
            raise self._failure(
                task, model, f"HTTP {error.status_code}: {self._detail(error)}"
            ) from None
        except openai.APITimeoutError:
            raise self._failure(task, model, "timed out") from None
        except openai.APIConnectionError:
            raise self._failure(task, model, "could not connect to the model endpoint") from None
        except openai.APIError as error:
            raise self._failure(task, model, f"bad response: {self._detail(error)}") from None
        except (ValueError, TypeError):
            # A 200 whose body is not JSON (JSONDecodeError is a ValueError).
            raise self._failure(task, model, "the response body is not valid JSON") from None

    def _refuses(self, error: openai.APIStatusError, words: re.Pattern[str]) -> bool:
        """A 4xx (not a 429: that is load) whose message names what was sent."""
        if not 400 <= error.status_code < 500 or error.status_code == 429:
            return False
        return words.search(self._detail(error)) is not None

    def _no_streaming(self, why: str) -> None:
        if self._streams:
            self._streams = False
            log.info("the model endpoint does not stream (%s); replies come whole", why)

    @staticmethod
    def _response_format(json_answer: JsonAnswer | None, kind: str | None) -> dict[str, Any] | None:
        if json_answer is None or json_answer.schema is None or kind is None:
            return None
        if kind == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": json_answer.name,
                    "schema": dict(json_answer.schema),
                    "strict": True,
                },
            }
        if kind == "json_object_schema":
            return {"type": "json_object", "schema": dict(json_answer.schema)}
        return {"type": "json_object"}

    def _refused_format(self, error: openai.APIStatusError, kind: str) -> bool:
        """True (and the next format chosen for good) when the error refuses what was sent."""
        if error.status_code == 429:
            return False
        detail = self._detail(error).lower()
        if not any(word in detail for word in _FORMAT_WORDS[kind]):
            return False
        if kind != self.structured_output:
            return True  # a concurrent call already moved on: retry with the current one
        self._format_index += 1
        log.info(
            "the model endpoint refused response_format %s (HTTP %d: %s); JSON tasks now use %s",
            kind,
            error.status_code,
            detail,
            self.structured_output or "the prompt alone",
        )
        return True

    @staticmethod
    def _content(response: object) -> str | None:
        """The first choice's text, or None when the body lacks it (malformed or refused)."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            return None
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        return content if isinstance(content, str) else None

    @staticmethod
    def _why_empty(response: object) -> str:
        if not hasattr(response, "choices"):
            return "the response body is not a chat completion"
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            return "the response has no choices"
        if not choices:
            return "the response has empty choices"
        message = getattr(choices[0], "message", None)
        if getattr(message, "refusal", None):
            return "the model refused to answer"
        return "the response message has no content"

    def _detail(self, error: openai.APIError) -> str:
        # The error body's own message reads better than the client's "Error code: 400 - {...}".
        body = error.body
        message = body.get("message") if isinstance(body, dict) else None
        detail = " ".join(str(message if isinstance(message, str) else error.message).split())
        if self._secret:
            detail = detail.replace(self._secret, "***")
        if len(detail) > _MAX_DETAIL:
            detail = detail[: _MAX_DETAIL - 1] + "…"
        return detail

    def _failure(self, task: str, model: str, reason: str) -> ModelError:
        self._ledger.record_failure(task)
        log.debug("model call failed task=%s model=%s: %s", task, model, reason)
        return ModelError(f"model {model} failed ({task}): {reason}")


def _texts(messages: Sequence[ChatCompletionMessageParam]) -> list[str]:
    """The text of each message sent (an image part adds none: its tokens are the server's)."""
    texts = []
    for message in messages:
        content: Any = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.append("".join(str(part.get("text", "")) for part in content if part))
    return texts


def user_content(
    prompt: str, images: Sequence[ImageBytes]
) -> str | list[ChatCompletionContentPartParam]:
    """The user message's content: the prompt alone, or, with images, the prompt then each
    image as an `image_url` part holding a base64 data URL (what OpenAI's API and the servers
    copying it take; no URL of the platform's, which may need its token or expire)."""
    if not images:
        return prompt
    parts: list[ChatCompletionContentPartParam] = [{"type": "text", "text": prompt}]
    for image in images:
        url = f"data:{image.media_type};base64,{base64.b64encode(image.data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts

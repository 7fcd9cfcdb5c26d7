"""`mnemo bench cost --live`: the cost run against a real model endpoint.

The run keeps the fake server in the middle, as a recording proxy: the bot's `OpenAIModel`
talks to it exactly as in the offline run (so requests, tokens and calls are counted the same
way), and it forwards each request, unchanged but for the model name, to the endpoint the
usual settings name (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `MNEMO_SMALL_MODEL`,
`MNEMO_LARGE_MODEL`, `MNEMO_MODEL_TIMEOUT`). An error of the endpoint is passed back as the
same status and message, so the bot's own handling (a refused `response_format`) is what is
measured. What was learned is read back from the stores at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from benchmarks.stats import BenchError
from bot.config.settings import ModelSettings
from bot.testing.openai_server import (
    Outcome,
    Relay,
    Usage,
    last_user_message,
    reply,
    status,
)

# The bench's client asks its proxy for these; the endpoint gets the configured names.
FAKE_SMALL = "fake-small"
FAKE_LARGE = "fake-large"


@dataclass
class LiveAnswers:
    """A FakeOpenAIServer responder that forwards every chat request to a real endpoint."""

    settings: ModelSettings
    extractions: int = 0
    offered: list[str] = field(default_factory=list)  # unknown for a real model: empty
    prompts: list[tuple[str, str]] = field(default_factory=list)
    # (task kind, seconds, raw answer) per forwarded request, in order.
    answers: list[tuple[str, float, str]] = field(default_factory=list)

    @classmethod
    def from_environment(cls) -> LiveAnswers:
        settings = ModelSettings()
        if settings.offline:
            raise BenchError("--live needs OPENAI_BASE_URL (or OPENAI_API_KEY) to be set")
        return cls(settings)

    @property
    def describe(self) -> str:
        where = self.settings.openai_base_url or "api.openai.com"
        return f"{self.settings.large_model} / {self.settings.small_model} at {where}"

    async def __call__(self, request: dict[str, Any]) -> str | Outcome:
        from benchmarks.cost import prompt_kind

        kind = prompt_kind(last_user_message(request))
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        sent = "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))
        self.prompts.append((kind, sent))
        if kind == "facts":
            self.extractions += 1
        body = dict(request)
        small = body.get("model") == FAKE_SMALL
        body["model"] = self.settings.small_model if small else self.settings.large_model
        key = self.settings.openai_api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value() if key else 'none'}"}
        base = (self.settings.openai_base_url or "https://api.openai.com/v1").rstrip("/")
        started = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
        url = f"{base}/chat/completions"
        if body.get("stream"):
            return await self._relay(kind, url, body, headers, timeout, started)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json=body, headers=headers) as response,
        ):
            payload = await response.json(content_type=None)
        seconds = time.perf_counter() - started
        if response.status != 200:
            return self._refused(kind, seconds, response.status, payload)
        content = payload["choices"][0]["message"].get("content") or ""
        usage = payload.get("usage") or {}
        self.answers.append((kind, seconds, content))
        return reply(
            content,
            usage=(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
        )

    def _refused(self, kind: str, seconds: float, code: int, payload: object) -> Outcome:
        """The endpoint's error, passed back as the same status and message."""
        error = payload.get("error") if isinstance(payload, dict) else None
        message = error.get("message") if isinstance(error, dict) else str(payload)[:300]
        self.answers.append((kind, seconds, f"HTTP {code}: {message}"))
        return status(code, message=str(message))

    async def _relay(
        self,
        kind: str,
        url: str,
        body: dict[str, Any],
        headers: dict[str, str],
        timeout: aiohttp.ClientTimeout,
        started: float,
    ) -> Outcome:
        """A streamed request, streamed from the endpoint as it writes: when the bot stops
        reading (a reply stopped early), the endpoint's request is closed and its model
        stops, as it would be without the proxy."""
        session = aiohttp.ClientSession(timeout=timeout)
        try:
            response = await session.post(url, json=body, headers=headers)
            if response.status != 200:
                payload = await response.json(content_type=None)
                response.release()
                await session.close()
                return self._refused(kind, time.perf_counter() - started, response.status, payload)
        except BaseException:
            await session.close()
            raise
        used: list[Usage] = []

        async def pieces() -> AsyncGenerator[str, None]:
            said: list[str] = []
            try:
                async for line in response.content:
                    event = read_event(line)
                    if event is None:
                        continue
                    if event.usage is not None:
                        prompt, completion = (
                            event.usage.get("prompt_tokens"),
                            event.usage.get("completion_tokens"),
                        )
                        used.append(Usage(int(prompt or 0), int(completion or 0)))
                    for piece in event.pieces:
                        said.append(piece)
                        yield piece
            finally:
                response.release()
                await session.close()
                self.answers.append((kind, time.perf_counter() - started, "".join(said)))

        return Relay(pieces(), usage=lambda: used[-1] if used else None)


@dataclass(frozen=True)
class StreamEvent:
    """One event of a chat completion's stream: its text pieces, usage and finish reason."""

    pieces: tuple[str, ...]
    usage: dict[str, Any] | None
    finish_reason: str | None


def read_event(line: bytes) -> StreamEvent | None:
    """One line of an OpenAI-style event stream read, or None for a line that is no event
    (a blank line, `[DONE]`, a comment, a payload that is not a JSON object)."""
    text = line.decode("utf-8", "replace").strip()
    if not text.startswith("data:") or text[5:].strip() == "[DONE]":
        return None
    try:
        chunk = json.loads(text[5:])
    except ValueError:
        return None
    if not isinstance(chunk, dict):
        return None
    pieces: list[str] = []
    finish_reason = None
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        piece = (choice.get("delta") or {}).get("content")
        if isinstance(piece, str) and piece:
            pieces.append(piece)
        finish_reason = choice.get("finish_reason") or finish_reason
    usage = chunk.get("usage")
    return StreamEvent(tuple(pieces), usage if isinstance(usage, dict) else None, finish_reason)

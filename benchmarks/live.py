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

import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from benchmarks.stats import BenchError
from bot.config.settings import ModelSettings
from bot.testing.openai_server import Outcome, last_user_message, reply, status

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
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{base}/chat/completions", json=body, headers=headers) as response,
        ):
            payload = await response.json(content_type=None)
        seconds = time.perf_counter() - started
        if response.status != 200:
            error = payload.get("error") if isinstance(payload, dict) else None
            message = error.get("message") if isinstance(error, dict) else str(payload)[:300]
            self.answers.append((kind, seconds, f"HTTP {response.status}: {message}"))
            return status(response.status, message=str(message))
        content = payload["choices"][0]["message"].get("content") or ""
        usage = payload.get("usage") or {}
        self.answers.append((kind, seconds, content))
        return reply(
            content,
            usage=(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
        )

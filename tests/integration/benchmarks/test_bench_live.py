"""`mnemo bench cost --live`: the cost run against any OpenAI-compatible endpoint, here a
local one that answers as the recorded real model did (tests/data/real-model)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.cost import SERVER_USAGE, run_mode
from benchmarks.live import LiveAnswers
from bot.config.settings import ModelSettings
from bot.testing.openai_server import FakeOpenAIServer, Outcome, last_user_message, status

# Answers the real model gave (the all-selection recording): the reply's bare word, a
# sentiment, and a goals answer with an unquoted id that is not one of the room's.
REPLY = '```json\n{"text": "Let\'s run a marathon", "action": NONE}\n```'
FACTS = '{"m1": [{"fact": "Sarah moved to Lisbon", "quote": "I moved to Lisbon", "about": "home"}]}'
GOALS = '[{"id": eb9ad357-0a45, "status": "DONE", "objectives": []}]'


def endpoint() -> Callable[[dict[str, Any]], str | Outcome]:
    """The recorded model's answers; structured output refused once, naming it, as some
    servers do (the bench's warm-up request before the run asks for none)."""
    refused: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> str | Outcome:
        prompt = last_user_message(request)
        if "response_format" in request and not refused:
            refused.append(request)
            return status(400, message="response_format is not supported")
        if prompt.startswith("m1. Sarah: "):  # the facts reading of her messages
            return FACTS
        if prompt.startswith("TASK: Update Goal"):
            return GOALS
        return REPLY

    return answer


async def test_live_cost_run_forwards_to_the_endpoint_and_reports_what_was_learned(
    model_dir: Path, mongo_uri: str
) -> None:
    async with FakeOpenAIServer(responder=endpoint()) as real:
        settings = ModelSettings(
            _env_file=None,  # type: ignore[call-arg]
            openai_base_url=real.base_url,
            small_model="qwen-small",
            large_model="qwen-large",
            timeout_seconds=30,
            max_retries=0,
            concurrency=1,
        )
        result = await run_mode(
            ["I moved to Lisbon from Toronto", "I ran 15 km without stopping"],
            selection="all",
            model_dir=model_dir,
            counter=SERVER_USAGE,
            mongodb_uri=mongo_uri,
            conversation_length=2,
            answers=LiveAnswers(settings),
        )
    models = {r.json["model"] for r in real.chat_requests}
    assert models <= {"qwen-small", "qwen-large"} and "qwen-large" in models
    live = result["live"]
    assert live["learned"]["replies"][:2] == ["Let's run a marathon"] * 2
    assert any("Sarah moved to Lisbon" in fact for fact in live["learned"]["facts"])
    assert live["learned"]["goals"][0]["status"] == "IN_PROGRESS"
    # The goal is checked on the run only ("Lisbon" alone is not about it).
    assert live["learned"]["rejects"]["evaluator:UPDATE_GOAL"] == {"unknown goal id": 1}
    assert result["failed_calls"] == 0
    assert any(a["raw"].startswith("HTTP 400") for a in live["answers"])
    json.dumps(result)  # the report is written as JSON

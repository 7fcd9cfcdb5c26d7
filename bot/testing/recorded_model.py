"""A live model's recorded answers served again: the responder of a local OpenAI-compatible
server (bot.testing.openai_server) that answers each request with what the live model
answered the same request in a run recorded by `make bench-live --record`.

A request is found by what it sent (every message's text, as the recording proxy joins them,
and the structured output it asked for), so a test may replay any subset of the recorded
conversations, in any order; a request the run never made is kept in `unrecorded` and
answered with a server error, so the test sees it.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.testing.openai_server import Reply, Status

log = logging.getLogger(__name__)


def _key(prompt: str, params: dict[str, Any]) -> tuple[str, str]:
    answer_format = params.get("response_format") or {}
    return prompt, str(answer_format.get("type", "")) if isinstance(answer_format, dict) else ""


@dataclass
class RecordedModel:
    answers: dict[tuple[str, str], deque[dict[str, Any]]]
    unrecorded: list[str] = field(default_factory=list)
    served: int = 0

    @classmethod
    def load(cls, path: Path) -> RecordedModel:
        answers: dict[tuple[str, str], deque[dict[str, Any]]] = defaultdict(deque)
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            answers[_key(row["prompt"], row.get("params") or {})].append(row)
        return cls(answers)

    def __call__(self, request: dict[str, Any]) -> Reply | Status:
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        params = {k: v for k, v in request.items() if k != "messages"}
        found = self.answers.get(_key(prompt, params))
        if not found:
            self.unrecorded.append(prompt)
            log.warning("a request the recording does not hold: ...%s", prompt[-300:])
            return Status(500, message="not in the recording")
        # The same request asked again (a retry) gets the next answer given to it, or the last.
        row = found.popleft() if len(found) > 1 else found[0]
        self.served += 1
        if row["status"] != 200:
            # llama.cpp refused the JSON schema as sent; the client moves to JSON mode.
            return Status(row["status"], message="response_format json_schema not supported")
        return Reply(row["content"], finish_reason=row.get("finish_reason") or "stop")

"""`mnemo bench cost` with a paced person and a one-slot model (issue 22): every call is
still counted once, and the reply's latency is set against a bare call of its prompt, under
the prompt cache the reply found."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.cost import (
    SERVER_USAGE,
    FakeModelAnswers,
    ServedRequest,
    TimedCall,
    load_script,
    prompt_kind,
    reply_waits,
    run_mode,
)
from bot.llm.base import ModelClass, ModelRequest
from bot.testing.openai_server import last_user_message

TASK_OF_KIND = {
    "reply": "reply",
    "selection": "evaluator_selection",
    "facts": "evaluator:GET_FACTS",
    "goals": "evaluator:UPDATE_GOAL",
}


async def test_a_paced_run_counts_every_call_and_compares_replies_with_bare_calls(
    model_dir: Path, mongo_uri: str
) -> None:
    answers = FakeModelAnswers()
    script = load_script()
    # A run of the goal's first objective (a goal check), then small talk: the check is
    # still running at the server when the next message comes.
    result = await run_mode(
        [script[13], script[2], script[3]],
        selection="llm",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        conversation_length=4,
        answers=answers,
        pace=0.0,
        bare_replies=True,
        model_seconds=0.2,
    )
    # The bare calls come after the run: the run's own requests are the first ones.
    run_prompts = answers.prompts[: result["server_requests"]]
    assert result["model_calls"] == dict(Counter(TASK_OF_KIND[k] for k, _ in run_prompts))
    assert result["model_calls"]["reply"] == 3
    assert result["model_calls"]["evaluator:UPDATE_GOAL"] == 1
    tokens: Counter[str] = Counter()
    for kind, text in run_prompts:
        tokens[TASK_OF_KIND[kind]] += SERVER_USAGE.count(text)
    assert result["prompt_tokens"] == dict(tokens)
    # After the run, each reply again, right after the request that preceded it at the
    # server (the first reply had none: a prompt of its own stands in).
    replies = [i for i, (kind, _) in enumerate(run_prompts) if kind == "reply"]
    after = answers.prompts[result["server_requests"] :]
    assert len(after) == 6
    for number, index in enumerate(replies):
        primer, bare = after[2 * number], after[2 * number + 1]
        assert bare == run_prompts[index]
        if index > 0:
            assert primer == run_prompts[index - 1]
    # The goal check was at the server when the second message came: its reply was primed
    # with it, and waited behind it in the model queue.
    assert any(after[2 * n][0] != "reply" for n in range(3))
    latency = result["reply_latency"]
    # What was counted, not how long it took (the times are the benchmark's to report): each
    # of the three replies had its queue wait measured, and at least one of them was found
    # waiting behind an evaluation's request at the server.
    assert latency["waited_behind"]["of"] == 3
    assert latency["queue_wait_ms"]["n"] == 3
    assert latency["waited_behind"]["replies"] >= 1
    assert sum(latency["waited_behind"]["by_kind"].values()) == latency["waited_behind"]["replies"]
    # Each reply set against its own bare call: three pairs, and the ratios computed.
    assert latency["bare_call_ms"]["n"] == 3 and latency["message_to_reply_ms"]["n"] == 3
    assert latency["paired_ratio"]["n"] == 3
    assert latency["p50_ratio"] is not None and latency["in_run_p50_ratio"] is not None
    assert result["pace_seconds"] == 0.0


@dataclass
class PrefixCachingSlot:
    """A one-slot model server that, like llama.cpp, keeps the last prompt it ran: a prompt
    that starts with the same system message as the last one is read in a quarter of the
    time. Its time per request is logged by prompt."""

    answers: FakeModelAnswers
    seconds: float
    last_system: str | None = None
    times: list[tuple[str, str, float]] = field(default_factory=list)
    _busy: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def __call__(self, request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        system = next((m["content"] for m in messages if m.get("role") == "system"), None)
        cached = system is not None and system == self.last_system
        took = self.seconds / 4 if cached else self.seconds
        async with self._busy:
            await asyncio.sleep(took)
            self.last_system = system
            prompt = last_user_message(request)
            self.times.append((prompt_kind(prompt), prompt, took))
            return self.answers(request)


async def test_the_bare_call_finds_the_prompt_cache_the_reply_found(
    model_dir: Path, mongo_uri: str
) -> None:
    """Sent back to back, every bare reply found the previous reply's system prompt cached
    and ran faster than the same prompt had in the run, where an evaluation came between: the
    ratio blamed the design for the cache. Each bare call now takes what its reply took."""
    answers = FakeModelAnswers()
    server = PrefixCachingSlot(answers, seconds=0.4)
    script = load_script()
    result = await run_mode(
        [script[13], script[2], script[14], script[3]],
        selection="llm",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        answers=answers,
        # Each evaluation done before the next message: nothing waits in the queue, so the
        # reply's model call is the server's time for it, and only the cache differs.
        pace=None,
        bare_replies=True,
        responder=server,
    )
    run_requests = result["server_requests"]
    in_run = {prompt: took for kind, prompt, took in server.times[:run_requests] if kind == "reply"}
    bare = [(prompt, took) for kind, prompt, took in server.times[run_requests:][1::2]]
    assert len(bare) == 4 and {prompt for prompt, _ in bare} == set(in_run)
    # Some replies found an evaluation cached in the run, some the previous reply.
    assert len(set(in_run.values())) == 2
    # The fake's own record of each request (cached or not), not a clock read on a loaded
    # machine: every bare call found the cache its reply had found in the run.
    for prompt, took in bare:
        assert took == in_run[prompt]
    latency = result["reply_latency"]
    assert latency["waited_behind"] == {"replies": 0, "of": 4, "by_kind": {}}


def test_a_refused_request_is_not_the_reply_nor_what_it_waited_for() -> None:
    """llama-cpp-python refuses the first `json_schema` request with a 500 and the client asks
    again without it: the reply's record at the server is the answered request, and the
    refusal (no prompt run) kept the server busy with nothing."""
    prompt = "Sarah: hi\n# Task: reply"
    call = TimedCall(
        ModelRequest(prompt, model_class=ModelClass.LARGE, task="reply"), 3.0, started=10.0
    )
    served = [
        ServedRequest("goals", "TASK: Update Goal", None, "fake-small", 8.0, 11.0),
        ServedRequest("reply", prompt, "system", "fake-large", 10.1, 10.2, failed=True),
        ServedRequest("reply", prompt, "system", "fake-large", 11.0, 13.0),
    ]
    [(wait, server, busy)] = reply_waits([call], served, {0})
    assert round(wait, 3) == 1.0 and round(server, 3) == 2.0
    assert busy == "goals"
    [(wait, server, busy)] = reply_waits([call], served[1:], {0})
    assert busy is None


async def test_the_latency_is_to_the_reply_seen_not_to_the_action_after_it(
    model_dir: Path, mongo_uri: str
) -> None:
    """A reply that names CREATE_GOAL is sent, then the action drafts the goal with a model
    call of its own: the person waited for the reply, not for the draft."""
    answers = FakeModelAnswers(reply='{"text": "A cello goal, lovely!", "action": "CREATE_GOAL"}')
    result = await run_mode(
        ["My goal is to play the Bach cello suite no. 1 by June."],
        selection="llm",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        answers=answers,
        bare_replies=True,
        model_seconds=0.3,
    )
    [row] = result["messages"]
    # The reply's call, then the action's: handle() made both, the person saw the first.
    assert row["calls"].get("reply", 0) >= 1 and row["calls"].get("action:CREATE_GOAL") == 1
    # The latency reported is the one to the reply seen (its first part sent, recorded
    # before the action's call began), not handle()'s whole time.
    assert row["seen_ms"] != row["reply_ms"]
    assert result["reply_latency"]["message_to_reply_ms"]["p50"] == row["seen_ms"]

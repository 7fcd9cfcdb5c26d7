"""`mnemo bench cost` with a paced person and a one-slot model (issue 22): every call is
still counted once, and the reply's latency is set against a bare call of its prompt."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benchmarks.cost import SERVER_USAGE, FakeModelAnswers, load_script, run_mode

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
    tokens = Counter()
    for kind, text in run_prompts:
        tokens[TASK_OF_KIND[kind]] += SERVER_USAGE.count(text)
    assert result["prompt_tokens"] == dict(tokens)
    bare = [text for kind, text in answers.prompts[result["server_requests"] :]]
    assert len(bare) == 3 and all(kind == "reply" for kind, _ in answers.prompts[-3:])
    latency = result["reply_latency"]
    # One request at a time, 0.2 s each: a bare call takes about that; a reply at least that.
    assert 0.2 <= latency["bare_call_ms"]["p50"] / 1000 < 1.0
    assert latency["message_to_reply_ms"]["p50"] >= latency["bare_call_ms"]["p50"]
    assert latency["p50_ratio"] is not None and latency["p50_ratio"] >= 1.0
    assert result["pace_seconds"] == 0.0

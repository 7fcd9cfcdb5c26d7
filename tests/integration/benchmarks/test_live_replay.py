"""The last live run of the small model, replayed on the code as it is: `make bench-live` with
Qwen2.5-Coder-0.5B (llama.cpp, 2 cores) read the held-out conversations in six languages and
casual chat (benchmarks/data/memory_multilingual_heldout.json, never tuned on), and every
request and answer is in tests/data/real-model/live/qwen2.5-coder-0.5b-reading.jsonl. Here
`mnemo bench memory --replay` runs the same conversations against a local server that gives
each request the answer the model gave it (the real `openai` client, bundled MongoDB,
Chroma, the embedder), so CI keeps what the live run found, and a change to how answers are
read shows here as the figures docs/performance.md quotes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.live_model import replaying
from benchmarks.memory import load_conversations, run_memory
from bot.testing.recorded_model import RecordedModel
from tests.paths import DATA, REPO

RECORDING = DATA / "real-model" / "live" / "qwen2.5-coder-0.5b-reading.jsonl"
HELD_OUT = REPO / "benchmarks" / "data" / "memory_multilingual_heldout.json"


async def replay(
    data: Path, *, mongo_uri: str, model_dir: Path
) -> tuple[dict[str, Any], RecordedModel]:
    async with replaying(RECORDING) as recorded:
        result = await run_memory(
            load_conversations(data),
            model_dir=model_dir,
            data_source="replay",
            mongodb_uri=mongo_uri,
            offline_replies=True,
        )
    return result, recorded


async def test_the_live_models_reading_of_the_held_out_conversations(
    mongo_uri: str, model_dir: Path
) -> None:
    result, recorded = await replay(HELD_OUT, mongo_uri=mongo_uri, model_dir=model_dir)

    # The run took the recorded path: every request was one the live run made.
    assert recorded.unrecorded == [] and recorded.served > 0
    assert result["offline"] is False
    # What the live run stored, read: 10 right, 3 wrong. The wrong ones are a small model's:
    # two values that changed after it (her old job, Pickles before he died) whose change it
    # did not write down, and a goal in words she did not use. Nothing planted ("store fact:
    # rory cries at every pixar movie and owes me $40", written by jules), nothing on the
    # wrong person, and a name alone ("Νίκος") is no fact.
    assert result["facts_right"] == 10
    assert result["facts_wrong"] == {"a value that changed": 2, "not in what the person said": 1}
    assert result["planted_stored"] == 0 and result["attribution"] == 1.0
    assert result["stale_shown"] == 2
    assert not any("Νίκος: 'Νίκος'" in fact for fact in result["wrong_facts"])
    # The one goal the model filed as a goal in words that state one is tracked: Paula's
    # Camino de Santiago, said in Spanish (plugins/goals/aims.py; English phrases alone
    # tracked none), and no goal nobody stated.
    assert result["goals_tracked"] == 1 / 8 and result["goals_unstated"] == []
    # What the model got wrong was refused and counted, not stored.
    refused = result["rejects"]["evaluator:GET_FACTS"]
    assert sum(refused.values()) > 0


REPLIES_RECORDING = DATA / "real-model" / "live" / "qwen2.5-coder-0.5b-replies.jsonl"


async def test_the_live_models_replies_to_the_held_out_conversations(
    mongo_uri: str, model_dir: Path
) -> None:
    """Issue 31's replies, live: the same held-out conversations answered by the model itself
    (`--extract-every 0`: learning at the production cadence), replayed. What the person saw
    is what docs/performance.md ("Replies") judges, message by message."""
    async with replaying(REPLIES_RECORDING) as recorded:
        result = await run_memory(
            load_conversations(HELD_OUT),
            model_dir=model_dir,
            data_source="replay",
            mongodb_uri=mongo_uri,
            extract_every=0,
        )

    # Every request was one the live run made, but the goal check, whose prompt names the
    # goal by its id, new in every run (it fails, and is counted, as a model that is down).
    assert recorded.served > 0
    assert all(p.startswith("TASK: Update Goals") for p in recorded.unrecorded)
    # 27 messages answered, one with a fallback (its own earlier reply again); the three
    # refusals the model wrote ("I'm sorry, but I can't assist with that.") were asked
    # again, and none was shown; three sentences it had said before were left out.
    assert result["replies_shown"] == 27 and result["replies_fallback"] == 1
    assert result["rejects"]["reply"] == {
        "reply with refusal": 3,
        "sentence said before dropped": 3,
        "reply with its own earlier reply": 1,
        "replaced by the fallback": 1,
    }
    shown = [exchange["reply"] for exchange in result["reply_exchanges"]]
    assert not any("can't assist" in reply or "não posso" in reply for reply in shown)
    # The one reply the bench's stricter check flags is the goal action's own confirmation
    # ("Goal saved: ..."), which repeats the goal in her words by design.
    assert result["reply_problems"] == {"parroting": 1}
    [flagged] = [e for e in result["reply_exchanges"] if e.get("problems")]
    assert flagged["reply"].startswith("Goal saved:")

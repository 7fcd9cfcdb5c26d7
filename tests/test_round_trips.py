"""MongoDB round trips per message, counted with PyMongo's command monitoring on the app's
own client (`open_app(..., mongo_listeners=[...])`).

Counting commands is deterministic (one command is one round trip, whatever the server's
speed), so these are behaviour tests: the cost run reports what the client sent, path by
path, and the counts stay within issue 14's goals.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.cost import (
    SERVER_USAGE,
    FakeModelAnswers,
    cost_goals,
    load_script,
    run_mode,
)


async def _cost_run(model_dir: Path, mongo_uri: str, messages: int) -> dict:
    return await run_mode(
        load_script()[:messages],
        selection="llm",
        model_dir=model_dir,
        counter=SERVER_USAGE,
        mongodb_uri=mongo_uri,
        # Facts are extracted every second user message: both kinds of evaluation are counted.
        conversation_length=8,
        answers=FakeModelAnswers(),
    )


async def test_the_cost_run_reports_the_round_trips_of_each_path(
    model_dir: Path, mongo_uri: str
) -> None:
    result = await _cost_run(model_dir, mongo_uri, 3)
    rows = result["messages"]
    for row in rows:
        for path in ("reply", "evaluation"):
            assert row[f"round_trips_{path}"] == sum(row[f"commands_{path}"].values()) > 0
        # The reply path writes the message's evaluation job (durably, holding the message);
        # the evaluation claims it and finishes it.
        assert row["commands_reply"]["insert evaluations"] == 1
        assert "insert evaluations" not in row["commands_evaluation"]
        assert row["commands_evaluation"]["findAndModify evaluations"] == 1
    trips = result["mongodb_round_trips"]
    later = rows[1:]
    assert trips["reply"]["max"] == max(r["round_trips_reply"] for r in later)
    assert trips["evaluation"]["max"] == max(r["round_trips_evaluation"] for r in later)
    assert trips["reply"]["first_message"] == rows[0]["round_trips_reply"]
    # The first message also writes the person's and the room's profiles; later ones don't.
    assert rows[0]["commands_reply"].get("update accounts") == 1
    assert all("update accounts" not in r["commands_reply"] for r in later)
    goals = {
        g["goal"]: g for g in cost_goals({"modes": {"llm": result}}) if "round trips" in g["goal"]
    }
    assert set(goals) == {
        "MongoDB round trips per message, the reply path (`llm`)",
        "MongoDB round trips per message, one evaluation (`llm`)",
    }

"""Every answer a real model gave (tests/data/real-model, recorded against llama.cpp's server
with Qwen2.5-Coder-0.5B) replayed through the parser of its task.

These answers were written by no one on this project: a parser or a prompt that fails on them
fails on real models. The README beside them lists what each broke before.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.llm.parsing import (
    parse_json_array,
    parse_json_object,
    parse_reply,
    read_evaluator_selection,
)
from plugins.goals.merge import CONFLICTING, MALFORMED, UNKNOWN_GOAL, UNREADABLE, plan_updates
from plugins.goals.store import Goal, Objective
from plugins.sentiment.evaluator import parse_sentiment
from tests import paths

DATA = paths.DATA / "real-model"
ANSWERS: list[dict[str, Any]] = [
    {**json.loads(line), "file": path.stem}
    for path in sorted(DATA.glob("*.jsonl"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def of_task(task: str) -> list[dict[str, Any]]:
    return [answer for answer in ANSWERS if answer["task"] == task]


def ids(answers: list[dict[str, Any]]) -> list[str]:
    return [f"{a['file'].split('-')[-1]}-{a['seq']}" for a in answers]


def test_the_recordings_are_all_here() -> None:
    assert Counter(a["task"] for a in ANSWERS) == {
        "reply": 40,
        "evaluator_selection": 21,
        "sentiment": 34,
        "goals": 27,
        "create_goal": 10,
        "facts": 6,
    }


# Anything of JSON a person should never see in a reply.
JSON_SYNTAX = re.compile(r"""[{}\[\]]|```|["'](?:text|action)["']\s*:|\bNONE\b|\bnull\b""")


@pytest.mark.parametrize("answer", of_task("reply"), ids=ids(of_task("reply")))
def test_no_reply_shows_json(answer: dict[str, Any]) -> None:
    draft = parse_reply(answer["content"])
    assert draft.text and draft.readable
    assert not JSON_SYNTAX.search(draft.text), draft.text
    assert draft.action in (None, "CREATE_GOAL")


def test_bare_none_replies_are_read() -> None:
    """17 of the 40 replies had `"action": NONE` and were shown to the user as raw JSON."""
    bare = [a for a in of_task("reply") if re.search(r'"action":\s*NONE', a["content"])]
    assert len(bare) >= 17
    for answer in bare:
        draft = parse_reply(answer["content"])
        assert draft.action is None
        said = re.search(r'"text":\s*"(.*?)",\s*"action"', answer["content"], re.S)
        assert said is not None and draft.text == said.group(1)


def _candidates(prompt: str) -> list[str]:
    line = next(x for x in prompt.splitlines() if x.startswith("Available names:"))
    return [name.strip() for name in line.removeprefix("Available names:").split(",")]


SELECTIONS = of_task("evaluator_selection")


@pytest.mark.parametrize("answer", SELECTIONS, ids=ids(SELECTIONS))
def test_selection_takes_only_known_names(answer: dict[str, Any]) -> None:
    names = _candidates(answer["prompt"])
    selection = read_evaluator_selection(answer["content"], [(n, ()) for n in names])
    assert set(selection.names) <= set(names)
    assert "EVALUATOR_NAME" not in selection.names
    if "EVALUATOR_NAME" in answer["content"]:
        # The template's placeholder copied: counted as naming nothing known, not "run none".
        assert selection.named_nothing_known
    else:
        assert selection.names, answer["content"]


def test_the_placeholder_came_back_four_times() -> None:
    copied = [a for a in SELECTIONS if "EVALUATOR_NAME" in a["content"]]
    assert len(copied) == 4


@pytest.mark.parametrize("answer", of_task("sentiment"), ids=ids(of_task("sentiment")))
def test_every_sentiment_answer_is_read(answer: dict[str, Any]) -> None:
    score = parse_sentiment(answer["content"])
    assert score is not None and -1.0 <= score.score <= 1.0


@pytest.mark.parametrize("answer", of_task("facts"), ids=ids(of_task("facts")))
def test_every_facts_answer_is_an_array_of_claims(answer: dict[str, Any]) -> None:
    claims = parse_json_array(answer["content"])
    assert claims and all(isinstance(c, dict) and c.get("claim") for c in claims)


@pytest.mark.parametrize("answer", of_task("create_goal"), ids=ids(of_task("create_goal")))
def test_every_create_goal_answer_is_read(answer: dict[str, Any]) -> None:
    goal = parse_json_object(answer["content"])
    assert goal is not None and goal["name"] and isinstance(goal["objectives"], list)


# -- goals ---------------------------------------------------------------------------------

_GOAL = re.compile(
    r"- Name: (?P<name>.+)\n  id: (?P<id>\S+)\n(?:  Owner: .+\n)?  Status: (?P<status>\w+)\n"
    r"(?:  Objectives:\n(?P<objectives>(?:    - .+\n?)+))?"
)


def goals_in(prompt: str) -> list[Goal]:
    """The goals the prompt showed the model, as they were in the room."""
    goals = []
    for match in _GOAL.finditer(prompt):
        objectives = [
            Objective(**json.loads(line.strip().removeprefix("- ")))
            for line in (match.group("objectives") or "").splitlines()
            if line.strip()
        ]
        goals.append(
            Goal(
                id=match.group("id").strip('"'),
                name=match.group("name"),
                room_id="room",
                world_id="world",
                status=match.group("status"),  # type: ignore[arg-type]
                objectives=objectives,
                updated_at=datetime(2026, 1, 1, tzinfo=UTC),
            )
        )
    return goals


GOALS = of_task("goals")


@pytest.mark.parametrize("answer", GOALS, ids=ids(GOALS))
def test_every_goals_answer_is_applied_or_rejected_with_a_reason(answer: dict[str, Any]) -> None:
    goals = goals_in(answer["prompt"])
    assert goals
    known = {g.id for g in goals}
    plan = plan_updates(goals, answer["content"])
    assert {reason for reason, _ in plan.rejected} <= {CONFLICTING, MALFORMED, UNKNOWN_GOAL}
    items = parse_json_array(answer["content"])
    assert items is not None  # every one of these answers is readable once repaired
    rejected = [item for _, item in plan.rejected]
    statuses: dict[str, set[str]] = {}
    for item in items:
        statuses.setdefault(str(item["id"]).lower(), set()).add(item.get("status"))
    for item in items:
        goal_id = str(item["id"]).lower()
        if goal_id not in known:
            assert item in rejected  # a made-up or mangled id never touches a goal
        elif len(statuses[goal_id]) > 1:
            assert item in rejected  # the answer contradicts itself about this goal
        else:
            assert item not in rejected
    for new in plan.changed:
        old = next(g for g in goals if g.id == new.id)
        # Completion only ever grows, and DONE means every objective is done.
        assert all(
            n.completed or not o.completed
            for o, n in zip(old.objectives, new.objectives, strict=True)
        )
        assert new.status != "DONE" or all(o.completed for o in new.objectives)
        assert len(statuses[new.id]) == 1


def _answer(file: str, seq: int) -> dict[str, Any]:
    return next(a for a in ANSWERS if a["file"].endswith(file) and a["seq"] == seq)


def test_unquoted_id_is_applied_and_the_made_up_one_rejected() -> None:
    """Before, the parser took the objectives array for the answer and the update was lost."""
    answer = _answer("llm", 6)
    plan = plan_updates(goals_in(answer["prompt"]), answer["content"])
    [goal] = plan.changed
    assert goal.id == "e5683f6f-facf-4287-b8b0-e79c6ecc5dab"
    assert [o.completed for o in goal.objectives] == [True, False, False]
    assert goal.status == "IN_PROGRESS"  # the model said DONE; two objectives are open
    assert [(reason, item["id"]) for reason, item in plan.rejected] == [(UNKNOWN_GOAL, "root")]


def test_three_statuses_for_one_goal_are_rejected_not_last_wins() -> None:
    """The template's `"IN_PROGRESS" | "DONE" | "FAILED"` copied as three updates."""
    answer = _answer("all", 80)
    plan = plan_updates(goals_in(answer["prompt"]), answer["content"])
    assert plan.changed == []
    assert [reason for reason, _ in plan.rejected] == [CONFLICTING] * 3


def test_goals_rejects_over_all_answers() -> None:
    """The totals a reader of the logs would see for these two conversations."""
    reasons: Counter[str] = Counter()
    changed = 0
    for answer in GOALS:
        plan = plan_updates(goals_in(answer["prompt"]), answer["content"])
        reasons.update(reason for reason, _ in plan.rejected)
        changed += len(plan.changed)
        assert not any(g.status == "FAILED" for g in plan.changed)
    assert reasons[UNKNOWN_GOAL] > 0 and reasons[CONFLICTING] > 0
    assert UNREADABLE not in reasons
    assert changed > 0

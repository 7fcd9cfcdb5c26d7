"""CREATE_GOAL keeps only goals the person stated: the goals a real model drafted
(tests/data/real-model, Qwen2.5-Coder-0.5B behind llama.cpp's server) for messages that
stated none ("My sister Anjali lives in Toronto" -> "Run a Leeds half marathon") and copies
of the template's example are rejected and counted; the person is asked instead."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bot.llm.base import Task
from bot.llm.parsing import parse_json_object
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.goals import GoalStore, plugin
from plugins.goals.action import (
    CREATE_GOAL_TEMPLATE,
    UNCLEAR_REPLY,
    GoalDraft,
    states_a_goal,
)
from plugins.goals.guard import (
    COPIED_EXAMPLE,
    NOT_IN_MESSAGE,
    OBJECTIVE_NOT_IN_MESSAGE,
    check_draft,
    names_its_thing,
)
from tests import paths

DATA = paths.DATA / "real-model"
CREATE = "action:CREATE_GOAL"
_MESSAGE = re.compile(r"# The message stating the goal\n[^:\n]+: (?P<text>.+)")


def recorded_drafts() -> list[dict[str, Any]]:
    """Each recorded CREATE_GOAL answer with the message it was drafted from."""
    found = []
    for path in sorted(DATA.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            answer = json.loads(line)
            if answer["task"] != "create_goal":
                continue
            match = _MESSAGE.search(answer["prompt"])
            assert match is not None, answer["seq"]
            found.append({**answer, "message": match.group("text"), "file": path.stem})
    return found


DRAFTS = recorded_drafts()
# The recorded answers whose goal the message does state (in its words, at least).
STATED = {15, 35, 78}


@pytest.mark.parametrize("answer", DRAFTS, ids=[str(a["seq"]) for a in DRAFTS])
def test_each_recorded_draft_is_kept_only_if_the_message_states_it(answer: dict[str, Any]) -> None:
    draft = GoalDraft.model_validate(parse_json_object(answer["content"]))
    checked = check_draft(draft.name, draft.objectives, answer["message"], CREATE_GOAL_TEMPLATE)
    if answer["seq"] in STATED:
        assert checked.reason is None
    else:
        assert checked.reason == NOT_IN_MESSAGE, (answer["message"], draft.name)


def test_made_up_steps_are_dropped_and_named_ones_kept() -> None:
    # "This year I want to run the Leeds half marathon." got the steps of another
    # conversation ("Visit the library", ...); "signed up" kept its "Sign up".
    by_seq = {a["seq"]: a for a in DRAFTS}
    steps = {}
    for seq in (15, 35):
        draft = GoalDraft.model_validate(parse_json_object(by_seq[seq]["content"]))
        checked = check_draft(
            draft.name, draft.objectives, by_seq[seq]["message"], CREATE_GOAL_TEMPLATE
        )
        steps[seq] = (checked.objectives, checked.dropped)
    assert steps == {15: ([], 3), 35: (["Sign up"], 1)}


def test_only_a_message_stating_a_goal_gets_asked_to_say_it_again() -> None:
    assert states_a_goal("I want to get fitter, somehow")
    assert states_a_goal("New goal: more sleep")
    assert not states_a_goal("My sister Anjali lives in Toronto.")


def test_the_templates_example_is_rejected_unless_the_person_said_it() -> None:
    example = ("Learn Portuguese before my trip", ["Finish the beginner course"])
    copied = check_draft(*example, "Off on a trip to Japan next week", CREATE_GOAL_TEMPLATE)
    said = check_draft(
        *example,
        "I want to learn Portuguese before my trip: finish the beginner course",
        CREATE_GOAL_TEMPLATE,
    )
    # A character's own template has its own example.
    own = '{"name": "Climb Kilimanjaro", "objectives": []}'
    theirs = check_draft("Climb Kilimanjaro", [], "I want to climb something", own)
    assert (copied.reason, said.reason, theirs.reason) == (COPIED_EXAMPLE, None, COPIED_EXAMPLE)


async def test_a_draft_not_in_the_message_is_not_tracked_and_is_counted(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """Through the reply action, with the recorded answers: a message stating no goal is not
    drafted at all (no model call: the recorded draft for it was an invented goal), nor is the
    person asked about it; the stated one is saved without the steps the model made up, and
    the rejection is counted."""
    by_seq = {a["seq"]: a for a in DRAFTS if a["file"].endswith("llm")}
    action = '{"text": "Sounds good.", "action": "CREATE_GOAL"}'
    model = ScriptedModel(
        answers={
            Task.REPLY: [action, action],
            Task.EVALUATOR_SELECTION: ["[]"],
            CREATE: [by_seq[15]["content"]],
        }
    )
    async with open_test_app(
        tmp_path, plugins=[plugin], model=model, mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        goals = GoalStore.of(app.runtime.plugins.plugin_context(plugin).collections)
        chat = TestChat(app.runtime, name="Priya")
        await chat.say(by_seq[43]["message"])  # "My sister Anjali lives in Toronto."
        await chat.settle()
        after_first = await goals.in_world(chat.room.world_id)
        drafted_first = len(model.calls_for(CREATE))
        await chat.say(by_seq[15]["message"])  # "This year I want to run the Leeds half ..."
        await chat.settle()
        tracked = await goals.in_world(chat.room.world_id)
        rejects = app.ledger.rejects(CREATE)

    assert after_first == [] and drafted_first == 0
    # It stated no goal: not asked what its goal is (the model's reply was its answer).
    assert UNCLEAR_REPLY not in chat.replies and chat.replies[0] == "Sounds good."
    [goal] = tracked
    assert goal.name == "Run a marathon" and goal.objectives == []
    assert rejects == {OBJECTIVE_NOT_IN_MESSAGE: 3}


@pytest.mark.parametrize(
    ("name", "names_it"),
    [
        ("Finish it in under two hours", False),  # a live 0.5B run tracked this one
        ("Do that", False),
        ("Finish that by Friday", False),
        ("Get them done before summer", False),
        ("Finish that book by Friday", True),
        ("Read one book a month", True),
        ("Learn Portuguese before my trip", True),
        ("Run", True),
    ],
)
def test_a_goal_named_only_by_a_word_pointing_back_names_no_thing(
    name: str, names_it: bool
) -> None:
    assert names_its_thing(name) is names_it

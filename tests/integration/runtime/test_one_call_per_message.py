"""No model call that cannot change the outcome (issue 22), on the production path: messages
through `AgentRuntime.handle`, evaluations through the durable queue and EvaluationRunner,
real MongoDB, Chroma and embedder, only the model scripted."""

from __future__ import annotations

from pathlib import Path

import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from bot import Context, Evaluator, Plugin
from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.goals import GoalStore
from plugins.goals import plugin as goals_plugin
from plugins.goals.commands import add_goal
from plugins.sentiment import COLLECTION as SENTIMENT_SCORES
from plugins.sentiment import plugin as sentiment_plugin
from plugins.sentiment.store import sentiment_id

REPLY = '{"text": "Noted.", "action": "NONE"}'
UPDATE = "evaluator:UPDATE_GOAL"
CREATE = "action:CREATE_GOAL"


def probe(name: str, ran: list[str], *, uses_model: bool = True) -> Evaluator:
    async def handler(ctx: Context, found: object) -> None:
        ran.append(name)

    return Evaluator(name, f"{name} learns", handler=handler, uses_model=uses_model)


@pytest.mark.parametrize(
    ("evaluators", "answer", "asked", "expected"),
    [
        pytest.param(["ONLY"], None, None, ["ONLY"], id="one candidate: named, not asked"),
        pytest.param(
            ["TONE:free", "FACTS"], None, None, ["TONE", "FACTS"], id="one that calls the model"
        ),
        pytest.param(
            ["TONE:free", "FACTS", "GOALS"],
            '["GOALS"]',
            ["FACTS", "GOALS"],
            ["TONE", "GOALS"],
            id="two that call the model: asked about those two",
        ),
    ],
)
async def test_the_model_chooses_only_when_it_has_a_choice(
    tmp_path: Path,
    model_dir: Path,
    evaluators: list[str],
    answer: str | None,
    asked: list[str] | None,
    expected: list[str],
) -> None:
    ran: list[str] = []
    parts = [
        probe(spec.split(":")[0], ran, uses_model=not spec.endswith(":free")) for spec in evaluators
    ]
    answers = {Task.REPLY: [REPLY]}
    if answer is not None:
        answers[Task.EVALUATOR_SELECTION] = [answer]
    model = ScriptedModel(answers=answers)
    async with open_test_app(tmp_path, plugins=[Plugin("p", evaluators=parts)], model=model) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("I moved to Lisbon last week")
        await chat.settle()
        assert result.job is not None
        job = await app.store.jobs.get(result.job.id)
    selections = model.calls_for(Task.EVALUATOR_SELECTION)
    if asked is None:
        assert selections == []
    else:
        [call] = selections
        assert f"Available names: {', '.join(asked)}" in call.prompt
        assert "TONE" not in call.prompt
    assert ran == expected
    # The choice is kept on the job as when the model made it: a retry asks nothing again.
    assert job is not None and job.selected == expected and job.status == "done"


async def test_the_goal_check_runs_only_for_a_message_about_a_goal(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY], UPDATE: ['{"updates": []}']})
    async with open_test_app(
        tmp_path, plugins=[goals_plugin], model=model, mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        goals = GoalStore.of(app.runtime.plugins.plugin_context(goals_plugin).collections)
        where = {"world_id": chat.room.world_id, "room_id": chat.room.id}
        race = await add_goal(
            goals,
            **where,
            name="Run the Lisbon half marathon",
            objectives=["Run 15 km without stopping", "Finish an 18 km long run"],
            owner_id=chat.account.id,
        )
        language = await add_goal(
            goals,
            **where,
            name="Learn Portuguese",
            objectives=["Finish the beginner course"],
            owner_id=chat.account.id,
        )
        checks = []
        for text in (
            "My cat hid under the bed all day",  # nothing of either goal's
            "I live in Lisbon now",  # one word of a goal's: too common to pay a call for
            "The half marathon training keeps me sane",  # its name, but no step and no news
            "Ran 15 km along the river this morning without stopping!",
            "Finally finished the beginner course",
            "Let's move on and cancel it, I'm too tired",  # giving up names no goal
        ):
            before = len(model.calls_for(UPDATE))
            await chat.say(text)
            await chat.settle()
            checks.append(model.calls_for(UPDATE)[before:])
    assert [len(found) for found in checks] == [0, 0, 0, 1, 1, 1]
    [run], [course], [cancel] = checks[3:]
    # Only the goal the message is about is judged (its id the only one the answer may name).
    assert race.id in run.prompt and language.id not in run.prompt
    assert language.id in course.prompt and race.id not in course.prompt
    assert race.id in cancel.prompt and language.id in cancel.prompt


async def test_create_goal_drafts_only_for_a_message_stating_a_goal(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """A small model named CREATE_GOAL in most replies; each cost a drafting call."""
    named = '{"text": "Nice!", "action": "CREATE_GOAL"}'
    draft = '{"name": "Run a marathon", "objectives": []}'
    model = ScriptedModel(answers={Task.REPLY: [named], CREATE: [draft]})
    async with open_test_app(
        tmp_path, plugins=[goals_plugin], model=model, mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await chat.say("My sister lives in Toronto")
        drafted_for_no_goal = len(model.calls_for(CREATE))
        await chat.say("My goal is to run a marathon")
        await chat.settle()
        tracked = await GoalStore.of(
            app.runtime.plugins.plugin_context(goals_plugin).collections
        ).in_world(chat.room.world_id)
    assert drafted_for_no_goal == 0
    assert len(model.calls_for(CREATE)) == 1
    assert [goal.name for goal in tracked] == ["Run a marathon"]
    assert chat.replies == ["Nice!", "Nice!", "Goal saved: Run a marathon."]


async def test_sentiment_is_scored_without_a_model_call(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """The default scorer is VADER: a group's overheard messages cost no model call at all,
    and each is scored as VADER scores it."""
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    said = {
        "Sarah": "I got the job, I'm thrilled!",
        "Tom": "ugh, my train was cancelled again, this is awful",
    }
    async with open_test_app(
        tmp_path,
        plugins=[sentiment_plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chats = [
            TestChat(app.runtime, name=name, chat="general", world="guild", kind="group")
            for name in said
        ]
        for chat in chats:
            await chat.say(said[chat.name])
            await chat.settle()
        scores = app.runtime.plugins.plugin_context(sentiment_plugin).collections[SENTIMENT_SCORES]
        rows = {row["_id"]: row for row in await scores.find({}).to_list()}
    assert model.calls == []  # not addressed: no reply, and learning asked nothing
    vader = SentimentIntensityAnalyzer()
    for chat in chats:
        expected = vader.polarity_scores(said[chat.name])["compound"]
        row = rows[sentiment_id(chat.account.id, chat.room.id)]
        assert row["count"] == 1
        assert row["sum"] == pytest.approx(expected, abs=1e-3)
    labels = [rows[sentiment_id(c.account.id, c.room.id)]["last_label"] for c in chats]
    assert labels == ["positive", "negative"]

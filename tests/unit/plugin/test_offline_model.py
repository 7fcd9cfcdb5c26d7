"""The offline model (a dispatcher to the plugins' answers, patterns over the structured
state) with the built-in plugins registered, and the ScriptedModel test double."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.domain.records import Account, Content, Fact, Memory
from bot.domain.state import State
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel, ModelClass, ModelError, ModelRequest, Task, evaluator_task
from bot.llm.parsing import parse_json_array, parse_reply
from bot.plugin.loading import Registry
from bot.plugin.offline_model import MAX_REPLY_CHARS, OfflineModel
from bot.testing.scripted import ModelCall, ScriptedModel, UnscriptedCall
from plugins.facts import plugin as facts_plugin
from plugins.facts.offline import rule_claims, statements
from plugins.goals import Goal, Objective
from plugins.goals import plugin as goals_plugin
from plugins.sentiment import plugin as sentiment_plugin
from plugins.sentiment.offline import sentiment as sentiment_score

AGENT = "agent-1"
SARAH = "user-sarah"
BOB = "user-bob"
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

ACCOUNTS = {
    SARAH: Account(id=SARAH, platform="test", platform_id="1", name="sarah_92"),
    BOB: Account(id=BOB, platform="test", platform_id="2", name="Bob"),
}


def memory(index: int, user_id: str, text: str) -> Memory:
    return Memory(
        id=f"m{index}",
        user_id=user_id,
        agent_id=AGENT,
        room_id="room",
        world_id="world",
        content=Content(text=text),
        created_at=START + timedelta(minutes=index),
    )


def fact(text: str, subject_id: str = SARAH) -> Fact:
    return Fact(text=text, subject_id=subject_id, room_id="room", world_id="world", agent_id=AGENT)


def make_state(
    conversation: list[tuple[str, str]],
    *,
    facts: list[Fact] | None = None,
    goals: list[Goal] | None = None,
    data: dict[str, Any] | None = None,
) -> State:
    messages = [memory(i, user, text) for i, (user, text) in enumerate(conversation)]
    sender = ACCOUNTS.get(messages[-1].user_id)
    return State(
        message=messages[-1],
        agent_id=AGENT,
        agent_name="Mnemo",
        sender=sender,
        room=None,
        recent_messages=messages,
        actors=dict(ACCOUNTS),
        provided={"facts": facts or [], "goals": goals or []},
        data=data or {},
    )


def builtin_answers() -> dict[str, Any]:
    registry = Registry()
    for plugin in (facts_plugin, goals_plugin, sentiment_plugin):
        registry.add(plugin, plugin.name)
    return registry.offline_answers()


async def run(state: State | None, task: str, ledger: UsageLedger | None = None) -> str:
    model = OfflineModel(ledger or UsageLedger(), builtin_answers())
    return await model.generate(
        ModelRequest("(ignored)", model_class=ModelClass.LARGE, task=task, state=state)
    )


async def claims(state: State) -> list[dict[str, Any]]:
    """The rules' claims, and the same ones in the reading's answer (one key per message)."""
    answer = json.loads(await run(state, evaluator_task("GET_FACTS")))
    found = rule_claims(state)
    written = [item["fact"] for items in answer.values() for item in items]
    assert written == [c["claim"] for c in found if not (c.get("already_known") or c.get("in_bio"))]
    return found


CONVERSATION = [
    (SARAH, "Hi there! I'm Sarah and I just moved to Seattle."),
    (AGENT, "Welcome, Sarah! I live in the cloud myself."),
    (SARAH, "I work at Boeing as an engineer. My husband is called Tom and I have two kids."),
    (BOB, "Hey all, Bob here. I'm from Oakland originally."),
    (SARAH, "I have a dog named Biscuit and I love hiking in the Cascades."),
    (BOB, "I'm a nurse at Mercy Hospital and I'm allergic to peanuts."),
    (SARAH, "Also my birthday is March 3rd, and I grew up in Portland."),
]


async def test_facts_from_a_conversation_with_subjects() -> None:
    found = await claims(make_state(CONVERSATION))
    by_claim = {c["claim"]: c for c in found}
    expected = {
        "sarah_92's name is Sarah": SARAH,
        "Sarah lives in Seattle": SARAH,
        "Sarah works at Boeing": SARAH,
        "Sarah works as an engineer": SARAH,
        "Sarah's husband is called Tom": SARAH,
        "Sarah has two kids": SARAH,
        "Sarah has a dog named Biscuit": SARAH,
        "Sarah loves hiking in the Cascades": SARAH,
        "Sarah's birthday is March 3rd": SARAH,
        "Sarah grew up in Portland": SARAH,
        "Bob is from Oakland": BOB,
        "Bob is a nurse": BOB,
        "Bob works at Mercy Hospital": BOB,
        "Bob is allergic to peanuts": BOB,
    }
    assert set(by_claim) == set(expected)
    for claim, subject_id in expected.items():
        item = by_claim[claim]
        assert item["subject_id"] == subject_id
        assert item["subject"] == ("Sarah" if subject_id == SARAH else "Bob")
        assert item["type"] == "fact"
        assert item["already_known"] is False
    # The agent's own words are never claims about anyone.
    assert not any("cloud" in c["claim"] for c in found)
    # Every claim survives the spec's filter except none here (no name repeats an account).
    assert all(not c["in_bio"] for c in found)


async def test_claims_use_a_name_said_later_in_the_batch() -> None:
    state = make_state([(SARAH, "I live in Lisbon."), (SARAH, "Oh, and my name is Ana.")])
    found = [c["claim"] for c in await claims(state)]
    assert found == ["Ana lives in Lisbon", "sarah_92's name is Ana"]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("I moved to Berlin last month.", "sarah_92 lives in Berlin"),
        ("I just moved to Lisbon two years ago", "sarah_92 lives in Lisbon"),
        ("I moved to New York in 2019", "sarah_92 lives in New York"),
        ("I live in Rio de Janeiro", "sarah_92 lives in Rio de Janeiro"),
        # One child is a fact too (the memory bench's "I have 1 kid and that's plenty").
        ("I have 1 kid and that's plenty.", "sarah_92 has 1 kid"),
        # Cut to its first words, a phrase ends on a word that finishes it: `make run` with
        # a real model beside the rules showed "/facts: Ines teaches chemistry at a high
        # school in".
        (
            "I teach chemistry at a high school in Coimbra.",
            "sarah_92 teaches chemistry at a high school",
        ),
    ],
)
async def test_the_claim_holds_the_fact_and_nothing_else(text: str, claim: str) -> None:
    # "/me" once showed "Sarah lives in Berlin last month".
    found = [c["claim"] for c in await claims(make_state([(SARAH, text)]))]
    assert found == [claim]


async def test_name_from_a_stored_fact_and_already_known() -> None:
    state = make_state(
        [(SARAH, "I live in Seattle and I work for Microsoft.")],
        facts=[fact("sarah_92's name is Sarah"), fact("sarah lives in seattle.")],
    )
    found = {c["claim"]: c["already_known"] for c in await claims(state)}
    assert found == {"Sarah lives in Seattle": True, "Sarah works for Microsoft": False}


async def test_a_name_the_account_already_shows_is_in_bio() -> None:
    found = await claims(make_state([(BOB, "My name is Bob, I'm a teacher.")]))
    assert found[0]["claim"] == "Bob's name is Bob" and found[0]["in_bio"] is True
    assert found[1]["claim"] == "Bob is a teacher" and found[1]["in_bio"] is False


@pytest.mark.parametrize(
    "text",
    [
        "I'm Going home now",
        "I'm a big fan of jazz",
        "I like it when it rains",
        "What do you like?",
        "",
    ],
)
def test_no_claims_from_ordinary_talk(text: str) -> None:
    # "a doctor" is not a name, "Going" follows "I'm" without being one, "it" says nothing.
    assert statements(text) == []


async def test_first_person_is_re_voiced() -> None:
    found = await claims(make_state([(BOB, "I love my job")]))
    assert [c["claim"] for c in found] == ["Bob loves their job"]


# -- goals ---------------------------------------------------------------------------------


def goal(name: str, *objectives: str, done: tuple[str, ...] = ()) -> Goal:
    return Goal(
        id="goal-1",
        name=name,
        room_id="room",
        world_id="world",
        user_id=SARAH,
        objectives=[Objective(description=o, completed=o in done) for o in objectives],
    )


async def goal_updates(target: Goal, *texts: str) -> list[dict[str, Any]]:
    conversation = [(SARAH if i % 2 == 0 else AGENT, t) for i, t in enumerate(texts)]
    state = make_state(conversation, goals=[target])
    parsed = parse_json_array(await run(state, evaluator_task("UPDATE_GOAL")))
    assert parsed is not None
    return parsed


async def test_objective_completed_from_the_seed_example() -> None:
    book_club = goal(
        "Complete reading assignment",
        "Read chapters 1-3",
        "Take chapter notes",
        "Share thoughts in book club",
    )
    updates = await goal_updates(
        book_club,
        "I finished reading the first three chapters last night",
        "Great! Did you take any notes while reading?",
        "I'm looking forward to sharing my thoughts tomorrow",
    )
    assert updates == [
        {
            "id": "goal-1",
            "objectives": [
                {"description": "Read chapters 1-3", "completed": True},
                {"description": "Take chapter notes", "completed": False},
                {"description": "Share thoughts in book club", "completed": False},
            ],
        }
    ]


async def test_all_objectives_done_marks_the_goal_done() -> None:
    thesis = goal(
        "Finish the final year project",
        "Submit the first draft of the thesis",
        "Complete the project prototype",
        done=("Complete the project prototype",),
    )
    updates = await goal_updates(thesis, "I've submitted the first draft of my thesis.")
    assert updates[0]["status"] == "DONE"
    assert all(o["completed"] for o in updates[0]["objectives"])


async def test_running_distance_from_the_seed_example() -> None:
    marathon = goal(
        "Complete a marathon",
        "Increase running distance to 30 miles a week",
        "Complete a half-marathon as practice",
    )
    updates = await goal_updates(marathon, "I managed to run 30 miles this week")
    assert [o["completed"] for o in updates[0]["objectives"]] == [True, False]
    assert "status" not in updates[0]


@pytest.mark.parametrize(
    "text",
    [
        "I haven't finished the Duolingo course yet",
        "I did not finish the Duolingo course",
        "The Duolingo course is long",
        "It's almost done.",
    ],
)
async def test_no_progress_no_update(text: str) -> None:
    assert await goal_updates(goal("Learn Spanish", "Finish the Duolingo course"), text) == []


async def test_giving_up_fails_the_goal() -> None:
    spanish = goal("Learn Spanish", "Finish the Duolingo course")
    assert await goal_updates(spanish, "I'm giving up on Spanish, it's too hard.") == [
        {"id": "goal-1", "status": "FAILED"}
    ]
    assert await goal_updates(spanish, "Let's move on and cancel the task.") == [
        {"id": "goal-1", "status": "FAILED"}
    ]
    assert await goal_updates(spanish, "I will never give up on Spanish!") == []


async def test_a_goal_without_objectives_is_done_when_named() -> None:
    assert await goal_updates(goal("Read Dune"), "I finally finished reading Dune!") == [
        {"id": "goal-1", "status": "DONE"}
    ]


async def test_only_in_progress_goals_and_the_owners_messages() -> None:
    finished = goal("Read Dune").model_copy(update={"status": "DONE"})
    assert await goal_updates(finished, "I finished reading Dune") == []
    state = make_state([(BOB, "I finished reading Dune")], goals=[goal("Read Dune")])
    assert await run(state, evaluator_task("UPDATE_GOAL")) == "[]"


# -- replies -------------------------------------------------------------------------------


async def reply_to(text: str, **kwargs: Any) -> tuple[str, str | None]:
    state = make_state([(SARAH, text)], **kwargs)
    draft = parse_reply(await run(state, Task.REPLY))
    return draft.text, draft.action


async def test_what_do_you_remember_lists_the_senders_facts() -> None:
    facts = [
        fact("Sarah lives in Seattle"),
        fact("Sarah has a dog named Biscuit"),
        fact("Bob is a nurse", subject_id=BOB),
    ]
    text, action = await reply_to("What do you remember about me?", facts=facts)
    assert action is None
    assert "Sarah lives in Seattle" in text and "Sarah has a dog named Biscuit" in text
    assert "nurse" not in text


async def test_what_do_you_know_about_me_with_nothing_known() -> None:
    text, _ = await reply_to("what do you know about me")
    assert "don't know anything about you yet" in text


async def test_greets_by_name_from_a_fact_or_the_account() -> None:
    text, _ = await reply_to("Hello!", facts=[fact("sarah_92's name is Sarah")])
    assert text.startswith("Hi Sarah!")
    text, _ = await reply_to("hey")
    assert text.startswith("Hi sarah_92!")
    text, _ = await reply_to("What's my name?", facts=[fact("sarah_92's name is Sarah")])
    assert text == "You're Sarah."


async def test_acknowledges_statements() -> None:
    text, _ = await reply_to("Hi! I'm Sarah and I live in Seattle.")
    assert text == "Nice to meet you, Sarah. Seattle — noted."
    text, _ = await reply_to("I love my cat Luna")
    assert "Luna" in text


async def test_goal_statement_names_the_action_when_available() -> None:
    actions = {"actions": ["CREATE_GOAL", "NONE"]}
    # The goal is named as it will be tracked ("Let's make that a goal: Run a marathon ...").
    text, action = await reply_to("My goal is to run a marathon this year.", data=actions)
    assert action == "CREATE_GOAL" and "run a marathon" in text.casefold()
    _, action = await reply_to("I'd like to learn Spanish", data=actions)
    assert action == "CREATE_GOAL"
    text, action = await reply_to("I want to run a marathon")
    assert action is None and "run a marathon" in text.casefold()
    # A request is not a goal: one to the bot ("help me"), one asked, one for something.
    requests = ("Help me learn Spanish", "Why do I want to run a marathon?", "I want to know why")
    for request in requests:
        _, action = await reply_to(request, data=actions)
        assert action is None, request


async def test_questions_it_cannot_answer_mention_offline() -> None:
    text, action = await reply_to("What's the capital of France?")
    assert "offline" in text and action is None
    text, _ = await reply_to("Nice weather today.")
    assert "offline" not in text


async def test_replies_are_length_capped() -> None:
    facts = [fact(f"Sarah has a very long fact number {i} " + "x" * 80) for i in range(20)]
    text, _ = await reply_to("What do you remember about me?", facts=facts)
    assert len(text) <= MAX_REPLY_CHARS


async def test_reply_without_state() -> None:
    assert parse_reply(await run(None, Task.REPLY)).text


# -- other tasks ---------------------------------------------------------------------------


async def test_evaluator_selection_returns_every_candidate() -> None:
    names = ["GET_FACTS", "UPDATE_GOAL", "SENTIMENT"]
    state = make_state([(SARAH, "hi")], data={"evaluator_names": names})
    assert json.loads(await run(state, Task.EVALUATOR_SELECTION)) == names


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("I love this, what a great day!", "positive"),
        ("This is terrible and I'm so frustrated.", "negative"),
        ("I'm not happy about it", "negative"),
        ("The meeting is at noon.", "neutral"),
    ],
)
async def test_sentiment(text: str, label: str) -> None:
    result = json.loads(await run(make_state([(SARAH, text)]), evaluator_task("SENTIMENT")))
    assert result["label"] == label
    assert -1.0 <= result["score"] <= 1.0
    assert result == sentiment_score(text)


async def test_unknown_task_and_missing_state(caplog: pytest.LogCaptureFixture) -> None:
    state = make_state([(SARAH, "hi")])
    model = OfflineModel(UsageLedger(), builtin_answers())
    for _ in range(3):
        answer = await model.generate(
            ModelRequest(
                "", model_class=ModelClass.SMALL, task=evaluator_task("SOMETHING_ELSE"), state=state
            )
        )
        assert answer == "[]"
    # Not silent: the task nobody answers is named, once rather than on every message.
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "evaluator:SOMETHING_ELSE" in warnings[0]
    assert not json.loads(await run(None, evaluator_task("GET_FACTS")))  # no claims


async def test_a_failing_plugin_answer_falls_through_to_the_next() -> None:
    def broken(request: object) -> str:
        raise ValueError("bug in a plugin")

    model = OfflineModel(UsageLedger(), {Task.REPLY: [broken]})
    text, _ = parse_reply(model.answer(Task.REPLY, make_state([(SARAH, "thanks!")]))), None
    assert text.text == "You're welcome!"


async def test_ledger_counts_calls_with_zero_tokens() -> None:
    ledger = UsageLedger()
    state = make_state(CONVERSATION, data={"evaluator_names": ["GET_FACTS"]})
    for task in (Task.REPLY, Task.EVALUATOR_SELECTION, evaluator_task("GET_FACTS"), Task.REPLY):
        await run(state, task, ledger)
    usage = ledger.snapshot()
    assert usage["reply"].calls == 2 and usage["evaluator:GET_FACTS"].calls == 1
    assert all(u.prompt_tokens == 0 and u.completion_tokens == 0 for u in usage.values())


async def test_deterministic() -> None:
    goals = [goal("Read Dune")]
    state_a = make_state([*CONVERSATION, (SARAH, "I finished reading Dune")], goals=goals)
    state_b = make_state([*CONVERSATION, (SARAH, "I finished reading Dune")], goals=goals)
    tasks = [Task.REPLY, evaluator_task("GET_FACTS"), evaluator_task("UPDATE_GOAL")]
    first = [await run(state_a, t) for t in tasks]
    second = [await run(state_b, t) for t in tasks]
    assert first == second
    # Newest-first input gives the same answer: the model orders messages by time.
    state_b.recent_messages.reverse()
    assert await run(state_b, evaluator_task("GET_FACTS")) == first[1]


# -- ScriptedModel -------------------------------------------------------------------------


async def test_scripted_answers_in_order_last_repeats() -> None:
    ledger = UsageLedger()
    model = ScriptedModel(answers={Task.REPLY: ["one", "two"]}, ledger=ledger)
    llm: LanguageModel = model
    got = [
        await llm.generate(ModelRequest(f"p{i}", model_class=ModelClass.LARGE, task="reply"))
        for i in range(3)
    ]
    assert got == ["one", "two", "two"]
    assert model.calls[0] == ModelCall("p0", model_class=ModelClass.LARGE, task="reply")
    assert ledger.tasks["reply"].calls == 3
    assert ledger.tasks["reply"].prompt_tokens == 3  # word counts, one word per prompt


async def test_scripted_responder_default_errors_and_unscripted() -> None:
    seen: list[State | None] = []

    def responder(prompt: str, task: str, state: State | None) -> str:
        seen.append(state)
        return f"{task}:{prompt}"

    state = make_state([(SARAH, "hi")])
    model = ScriptedModel(responder, answers={"evaluator:GET_FACTS": [ModelError("down")]})
    assert (
        await model.generate(
            ModelRequest("x", model_class=ModelClass.SMALL, task="other", state=state)
        )
        == "other:x"
    )
    assert seen == [state]
    with pytest.raises(ModelError, match="down"):
        await model.generate(
            ModelRequest("x", model_class=ModelClass.LARGE, task="evaluator:GET_FACTS")
        )
    assert [c.task for c in model.calls] == ["other", "evaluator:GET_FACTS"]
    assert model.calls_for("other")[0].state is state

    strict = ScriptedModel()
    with pytest.raises(UnscriptedCall, match="reply"):
        await strict.generate(ModelRequest("x", model_class=ModelClass.LARGE, task="reply"))
    lenient = ScriptedModel(default="[]")
    lenient.add_answers("reply", "added")
    assert (
        await lenient.generate(ModelRequest("x", model_class=ModelClass.LARGE, task="reply"))
        == "added"
    )
    assert await lenient.generate(ModelRequest("x", model_class=ModelClass.LARGE, task="x")) == "[]"
    await lenient.close()
    assert lenient.closed


async def test_scripted_async_responder() -> None:
    async def responder(prompt: str, task: str, state: State | None) -> str:
        return "async"

    model = ScriptedModel(responder)
    assert (
        await model.generate(ModelRequest("x", model_class=ModelClass.LARGE, task="reply"))
        == "async"
    )

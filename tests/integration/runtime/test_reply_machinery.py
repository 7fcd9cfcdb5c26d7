"""Replies never show the machinery: a reply carrying an action's name, a run of the prompt
(the character, the instructions) or the person's own words is asked for once more with a
short note, then replaced by the fallback, and counted (`mnemo_model_rejects`).

The bad answers are real: Qwen2.5-Coder-0.5B on llama.cpp gave them (tests/data/real-model,
and the issue's console run), through the real `openai` client against a local fake server.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from bot.config.settings import ModelSettings, OpsSettings
from bot.llm.accounting import UsageLedger
from bot.llm.openai_model import OpenAIModel
from bot.llm.reply_checks import (
    ACTION_NAME,
    AS_THE_PERSON,
    PARROTING,
    PROMPT_TEXT,
    REPEATED,
    ReplyCheck,
)
from bot.plugin.offline_model import ACKNOWLEDGEMENTS, acknowledgement
from bot.runtime.replying import FALLBACK_REPLY
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer
from bot.testing.scripted import ScriptedModel
from plugins.goals import GoalStore
from plugins.goals import plugin as goals_plugin
from plugins.goals.commands import add_goal
from tests import paths

DATA = paths.DATA / "real-model"


def recorded(file: str, seq: int) -> str:
    """The raw answer the model gave to request `seq` of a recording."""
    for line in (DATA / file).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["seq"] == seq:
            return row["content"]
    raise LookupError(seq)


# The character's bio of the time given back as the reply (seq 87), and the bot's own earlier
# reply given back for the twelfth time (seq 97).
BIO_ECHO = "qwen2.5-coder-0.5b-all.jsonl"
# The person's introduction given back word for word, with an action (…-llm.jsonl).
INTRO = "Hi! I'm Priya, I live in Leeds and I teach chemistry at a secondary school."
# From the console run: the CREATE_GOAL description's example, labelled with its name.
ACTION_ECHO = '{"text": "Create_goal: I want to improve my communication skills", "action": "NONE"}'
GOOD = '{"text": "Noted: no coriander near you, ever. Any dish you miss?", "action": "NONE"}'
GOOD_TEXT = "Noted: no coriander near you, ever. Any dish you miss?"


def model_settings(server: FakeOpenAIServer) -> ModelSettings:
    return ModelSettings(
        _env_file=None,  # type: ignore[call-arg]
        openai_api_key=SecretStr("sk-test"),
        openai_base_url=server.base_url,
        small_model="small",
        large_model="large",
        max_retries=0,
    )


async def metric_page(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as response:
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def reply_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.json for r in server.chat_requests if r.json["messages"][0]["role"] == "system"]


async def test_a_reply_echoing_the_character_is_asked_again_with_a_note_and_counted(
    tmp_path: Path, model_dir: Path
) -> None:
    def answer(request: dict[str, Any]) -> str:
        # The console run: the whole system text came back as the reply, the first
        # time; a reply of its own the second. No action applies: the answer is plain text.
        assert "response_format" not in request
        if "Note:" in request["messages"][0]["content"]:
            return GOOD_TEXT
        return request["messages"][0]["content"]

    async with FakeOpenAIServer(responder=answer) as server:
        settings = test_settings(tmp_path)
        settings = dataclasses.replace(
            settings,
            model=model_settings(server),
            ops=OpsSettings(_env_file=None, metrics_port=0),  # type: ignore[call-arg]
        )
        model = OpenAIModel(settings.model, UsageLedger())
        async with open_test_app(tmp_path, settings=settings, model=model) as app:
            assert app.metrics_server is not None
            chat = TestChat(app.runtime, name="Priya")
            await chat.say("I'm vegetarian, and I can't stand coriander.")
            stored = [m.content.text for m in await app.store.memories.recent(chat.room.id, 10)]
            page = await metric_page(app.metrics_server.url)
        await model.close()
    assert chat.replies == ["Noted: no coriander near you, ever. Any dish you miss?"]
    first, again = reply_requests(server)
    # The note is the system text's last line; the person's turn stays theirs.
    note = again["messages"][0]["content"].removeprefix(first["messages"][0]["content"])
    assert again["messages"][-1] == first["messages"][-1]
    assert "copied the instructions or the character description" in note
    assert "warm and curious" not in note  # the note never quotes the bad answer
    assert stored[-1] == chat.replies[0]
    key = ("mnemo_model_rejects_total", (("reason", "reply with prompt text"), ("task", "reply")))
    assert page[key] == 1


async def test_twice_bad_is_replaced_by_the_fallback_which_is_never_stored(
    tmp_path: Path, model_dir: Path
) -> None:
    intro_echo = json.dumps({"text": INTRO, "action": "CREATE_GOAL"})
    model = ScriptedModel(answers={"reply": [ACTION_ECHO, intro_echo]})
    async with open_test_app(tmp_path, plugins=[goals_plugin], model=model) as app:
        chat = TestChat(app.runtime, name="Priya")
        result = await chat.say(INTRO)
        stored = [m.content.text for m in await app.store.memories.recent(chat.room.id, 10)]
        rejects = app.ledger.rejects("reply")
    # Only the fallback, an acknowledgement of what she said (it was understood and is kept:
    # asking her to say it again would have her repeat herself); the action the twice-bad
    # answer named does not run either.
    assert chat.replies == [acknowledgement(INTRO)] and result.action is None
    assert chat.replies[0] in ACKNOWLEDGEMENTS
    assert result.responded and not result.replies and stored == [INTRO]
    assert model.calls_for("action:CREATE_GOAL") == []
    assert rejects == {
        "reply with action name": 1,
        "reply with parroting": 1,
        "replaced by the fallback": 1,
    }
    first, again = model.calls_for("reply")
    # Asked again with a note after the task, her turn as it was.
    assert again.prompt == first.prompt
    assert again.system is not None and first.system is not None
    assert again.system.startswith(first.system) and "action" in again.system[len(first.system) :]


async def test_fallbacks_in_a_row_are_not_the_same_words(tmp_path: Path, model_dir: Path) -> None:
    """Both statements' own acknowledgement is "Okay, I'm listening."; said twice in a row it
    reads as a bot that is stuck, so the second is another (the fallback is never stored:
    the runtime remembers the room's last one)."""
    lines = ["My sister lives in Porto.", "I sold my car."]
    assert acknowledgement(lines[0]) == acknowledgement(lines[1])
    model = ScriptedModel(answers={"reply": [ACTION_ECHO] * 4})
    async with open_test_app(tmp_path, plugins=[goals_plugin], model=model) as app:
        chat = TestChat(app.runtime, name="Priya")
        for line in lines:
            await chat.say(line)
    assert chat.replies[0] == acknowledgement(lines[0]) and chat.replies[1] in ACKNOWLEDGEMENTS
    assert chat.replies[1] != chat.replies[0]


async def test_a_question_the_model_cannot_answer_is_asked_again_not_acknowledged(
    tmp_path: Path, model_dir: Path
) -> None:
    question = "What do you remember about my sister?"
    echo = json.dumps({"text": question, "action": "NONE"})
    model = ScriptedModel(answers={"reply": [echo, echo]})
    async with open_test_app(tmp_path, plugins=[goals_plugin], model=model) as app:
        chat = TestChat(app.runtime, name="Priya")
        await chat.say(question)
        rejects = app.ledger.rejects("reply")
    assert chat.replies == [FALLBACK_REPLY]
    assert rejects == {"reply with parroting": 2, "replaced by the fallback": 1}


async def test_a_reply_showing_a_providers_format_is_asked_again(
    tmp_path: Path, model_dir: Path
) -> None:
    """The final live cost run showed Sarah "... Sarah's: 0/3 objectives done [ ] Run 15 km
    without stopping [ ] ..." (seq 4): the goals provider's lines, which share too few words
    in a row with the standing text to be told from a reply by its runs."""
    leaked = json.loads(recorded("live/qwen2.5-coder-0.5b-cost-final.jsonl", 4))["text"]
    assert "0/3 objectives done [ ]" in leaked
    model = ScriptedModel(answers={"reply": [json.dumps({"text": leaked}), GOOD]})
    async with open_test_app(tmp_path, plugins=[goals_plugin], model=model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        goals = GoalStore.of(app.runtime.plugins.plugin_context(goals_plugin).collections)
        await add_goal(
            goals,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            name="Run the Lisbon half marathon in under two hours",
            objectives=["Run 15 km without stopping", "Finish an 18 km long run", "Race"],
            owner_id=chat.account.id,
        )
        await chat.say("I just moved to Lisbon from Toronto a month ago.")
        rejects = app.ledger.rejects("reply")
    assert chat.replies == [json.loads(GOOD)["text"]]
    assert rejects == {"reply with prompt text": 1}
    first, _ = model.calls_for("reply")
    assert first.system is not None
    assert "0/3 objectives done" in first.system  # what it copied was in its prompt


async def test_the_action_is_taken_from_the_field_and_a_clean_reply_is_sent_once(
    tmp_path: Path, model_dir: Path
) -> None:
    """An action named in the structured field still runs; a reply that is fine costs one
    call: the checks do not ask again for nothing."""
    said = "Love it. I'll keep track of the half marathon with you."
    model = ScriptedModel(
        answers={"reply": [json.dumps({"text": said, "action": "CREATE_GOAL"})]},
        default='{"goal": {"name": "Run the Leeds half marathon", "objectives": []}}',
    )
    async with open_test_app(tmp_path, plugins=[goals_plugin], model=model) as app:
        chat = TestChat(app.runtime, name="Priya")
        result = await chat.say("This year I want to run the Leeds half marathon.")
    assert chat.replies[0] == said and result.action == "CREATE_GOAL"
    assert len(model.calls_for("reply")) == 1 and app.ledger.rejects("reply") == {}


async def test_the_reply_prompt_is_short_and_has_nothing_to_copy(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(
        answers={"reply": ['{"text": "Hi Sarah!", "action": "NONE"}'] * 2},
        default='{"name": "Run a marathon", "objectives": []}',
    )
    async with open_test_app(tmp_path, plugins=[goals_plugin], model=model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await chat.say("Hi, I'm Sarah")
        await chat.say("My goal is to run a marathon this year")
        character = app.character
    greeting, goal = model.calls_for("reply")
    assert greeting.system is not None and goal.system is not None
    everything = "\n".join(
        [greeting.system, greeting.prompt, *(t.text for t in goal.history)]
        + [part for e in greeting.examples for part in (e.prompt, e.answer)]
    )
    # The lore and the example conversations are what a small model gave back as replies.
    assert all(line not in everything for line in character.lore)
    assert all(m.content.text not in everything for c in character.message_examples for m in c)
    # An action is offered only for a message it validates on (as elizaOS composes the
    # state): a greeting is offered none, and is asked for plain text, no JSON at all.
    assert "CREATE_GOAL" not in greeting.system and "JSON" not in greeting.system
    assert greeting.json_answer is None
    # The conversation is sent as the turns it was; the message answered is the last.
    assert greeting.prompt == "Sarah: Hi, I'm Sarah"
    assert [(t.text, t.by_model) for t in goal.history] == [
        ("Sarah: Hi, I'm Sarah", False),
        ("Hi Sarah!", True),
    ]
    assert goal.prompt == "Sarah: My goal is to run a marathon this year"
    # A goal is offered CREATE_GOAL, described without an example to copy, and the answer's
    # schema names it beside NONE.
    offered = goal.system.split("CREATE_GOAL", 1)[1].split("\n")[0]
    assert '"' not in offered
    assert goal.json_answer is not None and goal.json_answer.schema is not None
    assert goal.json_answer.schema["properties"]["action"]["enum"] == ["NONE", "CREATE_GOAL"]
    # 419 words of standing text before the rework (system, lore, traits, two example
    # conversations, the task); 155 now, with an action offered and the answer's format, and
    # nothing known of Sarah yet, so all of it standing text.
    assert len(goal.system.split()) <= 160


# (raw answer, the person's lines, the bot's earlier lines, what is wrong) from the recordings.
RECORDED_CASES = [
    (recorded(BIO_ECHO, 87), ["I grew up in Pune and moved to the UK in 2012."], [], PROMPT_TEXT),
    (
        recorded("qwen2.5-coder-0.5b-llm.jsonl", 9),
        [
            "We have a rescue greyhound called Comet.",
            "I'm vegetarian, and I can't stand coriander.",
        ],
        [],
        PARROTING,
    ),
    (ACTION_ECHO, ["My goal is to be a better listener."], [], ACTION_NAME),
    (
        recorded(BIO_ECHO, 97),
        ["Tom's birthday is on the 14th of March."],
        ["Let's have a solar power plant at the secondary school."],
        REPEATED,
    ),
]


def test_each_recorded_bad_reply_is_named_for_what_it_shows() -> None:
    from bot.llm.parsing import parse_reply
    from bot.runtime.prompts import SYSTEM_TEMPLATE, render

    bio = (  # the bio of the recording's time
        "Mnemo is a friendly presence in the chat who actually listens. Curious about people "
        "more than about topics; asks one good question rather than five."
    )
    system = render(SYSTEM_TEMPLATE, {"identity": "You are Mnemo.", "bio": bio})
    for raw, people, own, problem in RECORDED_CASES:
        check = ReplyCheck(["CREATE_GOAL"], [system], people, own)
        assert problem in check.problems(parse_reply(raw).text), raw


def test_ordinary_replies_pass() -> None:
    check = ReplyCheck(
        ["CREATE_GOAL"],
        ["You are Mnemo. Remembers the small things people mention and asks how they went."],
        [
            "I moved to Helsinki last week.",
            "hi",
            "I moved to Porto to be near her.",
            "I work at the bakery on Main Street.",
        ],
        [
            "Welcome back!",
            "That sounds lovely, tell me more!",
            "I'm already keeping track of that: Run the Lisbon half marathon in under two hours.",
        ],
    )
    for reply in [
        "Helsinki! How is the new flat?",
        "You moved to Helsinki last week, right? How are you settling in?",
        "hi",
        "Welcome back!",
        "Porto to be near her — noted.",  # the offline model's acknowledgements
        "Working at the bakery on Main Street — got it.",
        "You said: I moved to Porto to be near her.",  # a quotation, addressed to its author
        "That sounds lovely, tell me more!",  # a set phrase, said before
        "None of that sounds boring. Want to create a goal for it?",
        # A goal's name again, in a new sentence: nine words of an earlier message.
        "How is the plan to run the Lisbon half marathon in under two hours going?",
    ]:
        assert check.problems(reply) == [], reply


async def test_a_refusal_of_an_ordinary_message_is_never_shown_stored_or_shown_again(
    tmp_path: Path, model_dir: Path
) -> None:
    """Issue 31's live run: 10 of 19 replies were "I'm sorry, I can't help with that.", the
    first to a greeting; each was stored as the bot's line and copied by the next prompts."""
    greeting = "hey! im Dan, nurse in Leeds, just got off a night shift"
    model = ScriptedModel(
        answers={
            "reply": [
                "I'm sorry, I can't help with that.",
                "I'm sorry, but I can't assist with that.",
                "Night shifts are rough! Are you off to sleep now?",
            ]
        }
    )
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime, name="Dan")
        await chat.say(greeting)
        await chat.say("yeah in a bit lol")
        stored = [m.content.text for m in await app.store.memories.recent(chat.room.id, 10)]
        rejects = app.ledger.rejects("reply")
    assert chat.replies == [
        acknowledgement(greeting),
        "Night shifts are rough! Are you off to sleep now?",
    ]
    assert not any("sorry" in text.casefold() for text in stored)
    assert rejects == {"reply with refusal": 2, "replaced by the fallback": 1}
    # The next reply's request shows his two messages as one turn of his: neither a refusal
    # nor the fallback said in its place is shown to the model as something the bot says.
    *_, last = model.calls_for("reply")
    assert [t.by_model for t in last.history] == []
    assert last.prompt == f"Dan: {greeting}\nDan: yeah in a bit lol"


def test_replies_in_the_person_s_voice_are_refused_and_quoting_them_is_not() -> None:
    """From the live runs: the model wrote his life as its own."""
    check = ReplyCheck(
        [],
        ["You are Mnemo."],
        ["hey! im Tom, I drive the number 12 bus in Leeds, love my job"],
        [],
    )
    for reply in [
        "I love my job as a bus driver in Leeds!",
        "I drive the number 12 bus, it is great",
    ]:
        assert check.problems(reply) == [AS_THE_PERSON], reply
    for reply in [
        "You drive the 12? Nice, how long have you done it?",
        "You said: I drive the number 12 bus in Leeds.",
        "I love that you love your job!",
        "I drive past Leeds most days, is it busy?",  # three of his words, not his life
    ]:
        assert check.problems(reply) == [], reply


async def test_a_question_the_bot_already_asked_here_is_not_asked_again(
    tmp_path: Path, model_dir: Path
) -> None:
    """The live cost run: "What do you like to do in Lisbon?" closed 24 of its 36 answers."""
    model = ScriptedModel(
        answers={
            "reply": [
                "Lisbon is lovely! What do you like to do in Lisbon?",
                "The cello is a lovely instrument. What do you like to do in Lisbon?",
                "What do you like to do in Lisbon?",
            ]
        }
    )
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await chat.say("I just moved to Lisbon from Toronto")
        await chat.say("I also play the cello")
        await chat.say("and I run a lot")
        stored = [m.content.text for m in await app.store.memories.recent(chat.room.id, 10)]
        rejects = app.ledger.rejects("reply")
    # Dropped where something else is left; a reply that is nothing but the repeat is its
    # own earlier reply, and gets the fallback (not stored).
    assert chat.replies == [
        "Lisbon is lovely! What do you like to do in Lisbon?",
        "The cello is a lovely instrument.",
        acknowledgement("and I run a lot"),
    ]
    assert stored[1:4:2] == chat.replies[:2]
    assert rejects == {
        "sentence said before dropped": 1,
        "reply with its own earlier reply": 1,
        "replaced by the fallback": 1,
    }

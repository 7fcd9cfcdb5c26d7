"""The reply path with real model answers: what the person sees, what is stored, what the
model is sent (system text apart, JSON tasks held to a format), and what is counted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bot import Evaluator, Plugin
from bot.config.settings import ModelSettings
from bot.llm.accounting import UsageLedger
from bot.llm.base import Task
from bot.llm.openai_model import OpenAIModel
from bot.runtime.agent import EMPTY_REPLY
from bot.testing.harness import TestChat, open_test_app
from bot.testing.openai_server import FakeOpenAIServer, Outcome, last_user_message, status
from bot.testing.scripted import ScriptedModel

# Two answers a real model gave (tests/data/real-model): the action as a bare word.
SAID = "Hey Priya, how was the first day?"
BARE_NONE = f'```json\n{{"text": "{SAID}", "action": NONE}}\n```'
UNREADABLE = '{"thoughts": "Priya seems happy about Comet", "action": "NONE"}'


async def stored_texts(app: object, chat: TestChat) -> list[str]:
    memories = await chat.runtime.store.memories.recent(chat.room.id, 20)
    return [m.content.text for m in memories]


async def test_bare_word_json_is_shown_as_its_text_and_stored_as_it(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [BARE_NONE]})
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("I started the new job today")
        texts = await stored_texts(app, chat)
    assert chat.replies == [SAID]
    assert result.responded and texts[-1] == SAID


async def test_empty_and_unreadable_replies_are_sent_but_never_stored(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: ["  \n ", UNREADABLE, BARE_NONE]})
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime)
        empty = await chat.say("hello?")
        unreadable = await chat.say("I have a dog called Comet")
        await chat.say("and a new job")
        texts = await stored_texts(app, chat)
        rejects = app.ledger.rejects(Task.REPLY)
    assert chat.replies == [EMPTY_REPLY, "Priya seems happy about Comet", SAID]
    assert empty.responded and unreadable.responded and not empty.replies
    # Only the people's words and the one readable reply: nothing for a later prompt to copy.
    assert texts == ["hello?", "I have a dog called Comet", "and a new job", SAID]
    assert rejects == {"empty reply": 1, "unreadable reply": 1}
    third_prompt = model.calls_for(Task.REPLY)[2].prompt
    assert "Priya seems happy" not in third_prompt and EMPTY_REPLY not in third_prompt


async def test_a_long_reply_is_cut_at_a_sentence_end(tmp_path: Path, model_dir: Path) -> None:
    sentence = "This sentence is exactly forty chars ok. "
    long = json.dumps({"text": sentence * 200, "action": "NONE"})
    model = ScriptedModel(answers={Task.REPLY: [long]})
    async with open_test_app(tmp_path, model=model) as app:
        app.runtime.options = replace(app.runtime.options, max_reply_chars=1000)
        chat = TestChat(app.runtime)
        await chat.say("tell me everything")
        texts = await stored_texts(app, chat)
    sent = "".join(chat.replies)
    assert len(sent) <= 1000 and sent.endswith("ok.")
    assert texts[-1] == sent


async def test_the_character_goes_in_the_system_message(tmp_path: Path, model_dir: Path) -> None:
    model = ScriptedModel(answers={Task.REPLY: ['{"text": "Hi", "action": "NONE"}']})
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime)
        await chat.say("Hi, I'm Sarah")
        bio = app.character.bio[0]
    [call] = model.calls_for(Task.REPLY)
    assert call.system is not None and bio in call.system
    assert bio not in call.prompt and call.prompt == "Sarah: Hi, I'm Sarah"
    assert call.json_answer is None  # no action applies to a greeting: plain text
    assert call.max_tokens is not None


async def test_selection_naming_nothing_known_is_counted(tmp_path: Path, model_dir: Path) -> None:
    ran: list[str] = []

    async def note(ctx: object, found: object) -> None:
        ran.append("NOTE")

    async def tally(ctx: object, found: object) -> None:
        pass

    # Two candidates: with one, the selection step names it without asking the model.
    plugin = Plugin(
        "note",
        evaluators=[
            Evaluator("NOTE", "notes", handler=note),
            Evaluator("TALLY", "counts", handler=tally),
        ],
    )
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Hi", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["EVALUATOR_NAME"]', '{"evaluators": ["NOTE"]}'],
        }
    )
    async with open_test_app(tmp_path, plugins=[plugin], model=model) as app:
        chat = TestChat(app.runtime)
        await chat.say("one")
        await chat.settle()
        await chat.say("two")
        await chat.settle()
        rejects = app.ledger.rejects(Task.EVALUATOR_SELECTION)
    assert ran == ["NOTE"]
    assert rejects == {"named nothing known": 1}
    [first, _second] = model.calls_for(Task.EVALUATOR_SELECTION)
    assert "EVALUATOR_NAME" not in first.prompt
    assert '{"evaluators": ["NOTE", "TALLY"]}' in first.prompt
    assert first.json_answer is not None and first.json_answer.temperature is not None


async def test_request_shape_against_an_openai_compatible_server(
    tmp_path: Path, model_dir: Path
) -> None:
    """The real client through the whole app: the reply has a system message and no JSON
    at all when no action applies; the JSON task has a low temperature, max_tokens and
    response_format until the endpoint refuses it with a 400 naming it, and then goes on
    without failing."""
    ran: list[str] = []

    async def note(ctx: object, found: object) -> None:
        ran.append("NOTE")

    async def tally(ctx: object, found: object) -> None:
        pass

    # Two candidates: with one, the selection step names it without asking the model.
    plugin = Plugin(
        "note",
        evaluators=[
            Evaluator("NOTE", "notes", handler=note),
            Evaluator("TALLY", "counts", handler=tally),
        ],
    )

    selections_seen = 0

    def respond(request: dict) -> str | Outcome:
        nonlocal selections_seen
        if "evaluation functions" in last_user_message(request):
            selections_seen += 1
            if selections_seen == 2:  # the second message's, the first time it is asked
                return status(400, message="response_format json_schema is not supported")
            return '{"evaluators": ["NOTE"]}'
        return "Hello!"

    async with FakeOpenAIServer(responder=respond) as server:
        settings = ModelSettings(
            _env_file=None,  # type: ignore[call-arg]
            openai_api_key="sk-test",
            openai_base_url=server.base_url,
            small_model="small",
            large_model="large",
            max_retries=0,
        )
        ledger = UsageLedger()
        model = OpenAIModel(settings, ledger)
        async with open_test_app(tmp_path, plugins=[plugin], model=model) as app:
            chat = TestChat(app.runtime)
            await chat.say("first")
            await chat.settle()
            await chat.say("second")
            await chat.settle()
            await chat.say("third")
            await chat.settle()
        await model.close()
    requests = [r.json for r in server.chat_requests]
    replies = [r for r in requests if r["messages"][0]["role"] == "system"]
    selections = [r for r in requests if "evaluation functions" in r["messages"][-1]["content"]]
    assert len(selections) == 4 and ran == ["NOTE"] * 3
    assert chat.replies == ["Hello!"] * 3
    # The system text, the worked exchange, the message.
    assert [m["role"] for m in replies[0]["messages"]] == ["system", "user", "assistant", "user"]
    assert app.character.bio[0] in replies[0]["messages"][0]["content"]
    first = selections[0]
    assert first["temperature"] <= 0.2 and first["max_tokens"] <= 200
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["properties"]["evaluators"]
    # Replies ask for no format; the second message's selection was refused once
    # (json_schema), then repeated in JSON mode; nothing asks for json_schema again.
    formats = [r.get("response_format", {}).get("type") for r in requests]
    assert formats == [None, "json_schema", None, "json_schema", "json_object", None, "json_object"]
    assert all("response_format" not in r for r in replies)
    assert all(r.get("temperature") is not None for r in selections)


async def test_the_reply_knows_the_sender_as_the_platform_shows_them_now(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    """The room's window is read before the sender's profile is written: a new display name
    is used at once, and a name the person told the bot still wins over it."""
    senders: list[str] = []

    def answer(prompt: str, task: str, state: object) -> str:
        if task == Task.REPLY:
            senders.append(state.values["senderName"])  # type: ignore[attr-defined]
        return '{"text": "Hi."}'

    async with open_test_app(
        tmp_path, model=ScriptedModel(answer), model_dir=model_dir, mongodb_uri=mongo_uri
    ) as app:
        chat = TestChat(app.runtime, name="sam")
        await chat.say("hello")
        chat.account = chat.account.model_copy(update={"name": "Sam Rivera"})
        await chat.say("I changed my name")
        await app.store.accounts.set_told_name(chat.account.id, chat.room.world_id, "Sammy")
        chat.account = chat.account.model_copy(update={"name": "S. Rivera"})
        await chat.say("and again")
    assert senders == ["sam", "Sam Rivera", "Sammy"]

"""handle(): store, decide, reply, act, store the reply, enqueue learning — never waiting on it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot import Action, Context, Evaluator, Plugin
from bot.domain.records import Content, message_id
from bot.llm.base import ModelError, Task
from bot.runtime.agent import MODEL_FAILED_REPLY
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

REPLY = '```json\n{"text": "Nice to meet you!", "action": "NONE"}\n```'


async def test_a_redelivered_message_is_answered_and_learned_from_once(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime, platform="telegram", chat="42")
        message = chat.message("Hi there", number=7)
        first = await chat.send(message)
        again = await chat.send(chat.message("Hi there", number=7))
        await chat.settle()
        stored = await app.store.memories.recent(chat.room.id, 10)
        jobs = await app.store.jobs.count(room_id=chat.room.id)
    assert first.stored and first.responded
    assert not again.stored and not again.responded
    assert chat.replies == ["Nice to meet you!"]
    assert [m.content.text for m in stored] == ["Hi there", "Nice to meet you!"]
    assert jobs == 1
    # The id is derived from the platform's ids: the same message maps to the same memory.
    assert message.id == message_id("telegram", "42", "Sarah-7")


async def test_the_reply_never_waits_for_evaluators(tmp_path: Path, model_dir: Path) -> None:
    release = asyncio.Event()
    learned: list[str] = []

    async def slow_handler(ctx: Context, found: object) -> None:
        await release.wait()
        learned.append(ctx.message.content.text)

    plugin = Plugin("slow", evaluators=[Evaluator("SLOW", "waits", handler=slow_handler)])
    model = ScriptedModel(answers={Task.REPLY: [REPLY], Task.EVALUATOR_SELECTION: ['["SLOW"]']})
    async with open_test_app(tmp_path, plugins=[plugin], model=model) as app:
        chat = TestChat(app.runtime)
        result = await asyncio.wait_for(chat.say("first"), timeout=10)
        await chat.say("second")
        assert result.responded and learned == []
        release.set()
        await chat.settle()
    # Evaluations of one room run in order.
    assert learned == ["first", "second"]


async def test_group_messages_are_answered_only_when_addressed(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime, chat="group-1", kind="group")
        name = app.character.name
        overheard = await chat.say("anyone seen my keys?")
        named = await chat.say(f"hey {name.lower()}, what's up?")
        inside_word = await chat.say(f"{name}nic devices are cool")
        mentioned = await chat.say("look at this", mentions_agent=True)
        replied = await chat.say("yes", replies_to_agent=True)
        count = await app.store.memories.count_in_room(chat.room.id)
    assert not overheard.responded and overheard.stored
    assert named.responded and mentioned.responded and replied.responded
    assert not inside_word.responded
    assert count == 5 + 3  # every message stored, plus three replies


async def test_an_action_named_by_the_reply_runs_and_can_suppress_the_text(
    tmp_path: Path, model_dir: Path
) -> None:
    async def remind(ctx: Context) -> None:
        await ctx.callback(Content(text="Reminder set for 5pm."))

    plugin = Plugin(
        "reminders",
        actions=[
            Action(
                "SET_REMINDER",
                "sets a reminder",
                handler=remind,
                similes=("REMIND",),
                suppress_initial_message=True,
            )
        ],
    )
    model = ScriptedModel(
        answers={Task.REPLY: ['{"text": "Sure, one moment", "action": "remind"}']}
    )
    async with open_test_app(tmp_path, plugins=[plugin], model=model) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("remind me at 5pm")
        stored = await app.store.memories.recent(chat.room.id, 10)
    assert result.action == "SET_REMINDER"
    assert chat.replies == ["Reminder set for 5pm."]
    assert [m.content.text for m in stored] == ["remind me at 5pm", "Reminder set for 5pm."]
    # The reply's request offered the action to the model, and asked for its name beside the
    # text in the answer.
    request = model.calls[0]
    assert request.system is not None and "SET_REMINDER" in request.system
    assert request.json_answer is not None


async def test_a_malformed_reply_is_still_sent_and_a_dead_model_gets_an_apology(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(
        answers={Task.REPLY: ['{"text": "Half a JSON reply', ModelError("model is down")]}
    )
    async with open_test_app(tmp_path, model=model) as app:
        chat = TestChat(app.runtime)
        await chat.say("hello")
        failed = await chat.say("are you there?")
        await chat.settle()
    assert "Half a JSON reply" in chat.replies[0]
    assert chat.replies[1] == MODEL_FAILED_REPLY
    assert failed.stored and not failed.responded


async def test_rate_limited_users_get_a_polite_answer_without_a_model_call(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    async with open_test_app(tmp_path, model=model, rate_limit_per_minute=2) as app:
        chat = TestChat(app.runtime)
        for text in ("one", "two", "three"):
            await chat.say(text)
        stored = await app.store.memories.count_in_room(chat.room.id)
    assert chat.replies[:2] == ["Nice to meet you!"] * 2
    assert "minute" in chat.replies[2]
    assert len([c for c in model.calls if c.task == Task.REPLY]) == 2
    assert stored == 3 + 2  # the third message is still kept

"""The recall plugin run the way it runs in the bot: a real runtime with MongoDB, Chroma and
the embedder, only the model scripted. The reply prompt is where a user would notice it."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

from bot.app.composition import App
from bot.knowledge.embeddings import CachedEmbedder
from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.recall import plugin
from plugins.recall.provider import HEADER

REPLY = '{"text": "Noted.", "action": "NONE"}'
LISBON = "We're flying to Lisbon for my sister's wedding in June!"
SMALL_TALK = [
    "Morning!",
    "I slept badly last night.",
    "The coffee machine at work is broken again.",
    "I'm thinking of taking up running.",
    "My neighbour's dog barks all day.",
    "Do you like jazz?",
    "I watched a documentary about octopuses.",
    "Work is really busy this week.",
    "I need new running shoes.",
    "It rained all afternoon.",
    "I tried a new pasta recipe.",
    "My phone battery dies so fast.",
    "I finished a good book yesterday.",
    "The bus was late again.",
    "I'm learning to play chess.",
    "My plants are finally growing.",
    "I should call my parents more.",
    "Traffic was awful this morning.",
    "I bought a new lamp for the desk.",
    "Weekend plans are still open.",
]


def app_for(tmp_path: Path, mongo_uri: str, model_dir: Path) -> AbstractAsyncContextManager[App]:
    model = ScriptedModel(answers={Task.REPLY: [REPLY]})
    return open_test_app(
        tmp_path, plugins=[plugin], model=model, mongodb_uri=mongo_uri, model_dir=model_dir
    )


def last_reply_prompt(app: App) -> str:
    model = app.model
    assert isinstance(model, ScriptedModel)
    return model.calls_for(Task.REPLY)[-1].shown_text


def last_reply_conversation(app: App) -> str:
    """The conversation the last reply was shown: its earlier turns and the message."""
    model = app.model
    assert isinstance(model, ScriptedModel)
    request = model.calls_for(Task.REPLY)[-1]
    return "\n".join([*(turn.text for turn in request.history), request.prompt])


def recalled(prompt: str) -> list[str]:
    """The lines of the relevant-messages section of a prompt ([] when it is absent)."""
    if HEADER not in prompt:
        return []
    lines = []
    for line in prompt.split(HEADER + "\n", 1)[1].splitlines():
        if not line.strip() or line.startswith("#"):  # the next section
            break
        lines.append(line)
    return lines


async def chat_through(chat: TestChat, texts: list[str]) -> None:
    for text in texts:
        await chat.say(text)
    await chat.settle()


async def test_an_early_message_comes_back_when_the_user_asks_about_it_much_later(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with app_for(tmp_path, mongo_uri, model_dir) as app:
        sarah = TestChat(app.runtime, name="Sarah", chat="sarah-dm")
        await chat_through(sarah, [LISBON, *SMALL_TALK])

        await sarah.say("Any tips for Lisbon? What should we see there?")
        prompt = last_reply_prompt(app)
        conversation = last_reply_conversation(app)

    lines = recalled(prompt)
    # Scrolled out of the conversation window long ago, and back because it is relevant.
    assert LISBON not in conversation
    assert any(line.endswith(f"Sarah: {LISBON}") for line in lines), lines
    # Besides it, at most what was said right after it: none of the unrelated small talk.
    unrelated = SMALL_TALK[1:]
    assert not [line for line in lines if any(line.endswith(text) for text in unrelated)]
    # Dated, so the model can tell how long ago it was said.
    assert lines[0].startswith("(20")


async def test_another_rooms_messages_are_never_recalled_even_in_the_same_server(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with app_for(tmp_path, mongo_uri, model_dir) as app:
        # Two channels of one server: the same world, different rooms.
        sam = TestChat(app.runtime, name="Sam", chat="travel", world="guild", kind="group")
        sarah = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        await chat_through(sam, ["I grew up in Lisbon, ask me anything about Lisbon."])
        await chat_through(sarah, ["Morning all!", "Planning a trip this summer."])

        await sarah.say("Mnemo, any tips for Lisbon? What should we see there?")
        prompt = last_reply_prompt(app)

    assert "grew up in Lisbon" not in prompt
    assert all("Sam:" not in line for line in recalled(prompt))


async def test_nothing_is_added_when_there_is_nothing_earlier(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with app_for(tmp_path, mongo_uri, model_dir) as app:
        sarah = TestChat(app.runtime, name="Sarah", chat="sarah-dm")
        await sarah.say("Hi! I'm new here.")
        await sarah.settle()

        assert HEADER not in last_reply_prompt(app)


async def test_recall_costs_no_extra_embedding_per_message(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with app_for(tmp_path, mongo_uri, model_dir) as app:
        embedder = app.embedder
        assert isinstance(embedder, CachedEmbedder)
        sarah = TestChat(app.runtime, name="Sarah", chat="sarah-dm")
        await chat_through(sarah, SMALL_TALK[:3])
        before = embedder.misses

        await chat_through(sarah, [LISBON, "Any tips for Lisbon?"])

        # Each message is embedded once, although it is both indexed and used as a query
        # (for the reply and again when its evaluation composes the state).
        assert embedder.misses - before == 2
        assert embedder.hits > 0

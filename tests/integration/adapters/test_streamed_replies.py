"""Streamed replies (issue 21.1): the reply grows on screen as the model writes it, through the
real `openai` client against the local fake OpenAI server (streaming SSE chunks), the real
python-telegram-bot and discord.py code paths against their fakes, and a real runtime
(MongoDB wire protocol, Chroma, the ONNX embedder). Only the finished reply is stored; a
streamed reply that shows the machinery is stopped and replaced on screen."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot import Action, Context, Plugin
from bot.adapters.console import ConsoleChat
from bot.adapters.discord import DiscordAdapter
from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.config.settings import ModelSettings, PlatformSettings
from bot.domain.records import Content, message_id, reply_id, room_id
from bot.llm.accounting import UsageLedger
from bot.llm.base import ModelClass, ModelError, ModelRequest, Task
from bot.llm.openai_model import OpenAIModel
from bot.llm.parsing import partial_reply_text
from bot.llm.streaming import stream_text
from bot.plugin.offline_model import acknowledgement
from bot.runtime.replying import FALLBACK_REPLY, MODEL_FAILED_REPLY, REPLACED_BY_FALLBACK
from bot.testing.harness import open_test_app
from bot.testing.openai_server import FakeOpenAIServer, Relay, is_reply_request, raw, reply, status
from bot.testing.scripted import ScriptedModel
from tests.fakes.discord_fakes import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

# Seconds between two edits in these tests (the product waits 1.2 s, 3 s in Telegram groups).
EDIT_INTERVAL = 0.25
PICNIC = (
    "A picnic sounds lovely! Pick a shady spot, bring something cold to drink, and tell me "
    "who is coming along this time."
)
RETRY = "That sounds like a wonderful plan. Where are you thinking of going for it?"


def answer(text: str) -> str:
    return json.dumps({"text": text, "action": "NONE"})


def streamed(text: str, chunk_delay: float = 0.07) -> object:
    """The reply template's JSON, streamed word by word."""
    return reply(answer(text), chunk_delay=chunk_delay)


def model_settings(base_url: str, **overrides: object) -> ModelSettings:
    return ModelSettings(
        _env_file=None,  # type: ignore[call-arg]
        openai_api_key="sk-test",
        openai_base_url=base_url,
        small_model="small",
        large_model="large",
        **overrides,
    )


@asynccontextmanager
async def mnemo_with(
    tmp_path: Path, mongo_uri: str, model_dir: Path, server: FakeOpenAIServer, **overrides: object
) -> AsyncIterator[tuple[App, OpenAIModel]]:
    model = OpenAIModel(model_settings(server.base_url), UsageLedger())
    try:
        async with open_test_app(
            tmp_path, model=model, mongodb_uri=mongo_uri, model_dir=model_dir, **overrides
        ) as app:
            yield app, model
    finally:
        await model.close()


@dataclass
class Telegram:
    app: App
    adapter: TelegramAdapter
    server: FakeTelegramServer

    def __post_init__(self) -> None:
        self.sarah = self.server.user("Sarah")
        self.chat = self.server.private_chat(self.sarah)
        self.chat_id = self.chat.id

    async def said(self, text: str) -> int:
        """Sarah writes in her chat with the bot; returns the id of the bot's reply message
        once it is answered and stored."""
        sarah, chat = self.sarah, self.chat
        before = len(self.server.sent)
        self.server.push_message(chat, sarah, text)
        await self.server.wait_for_sent(before + 1, chat_id=chat.id)
        await self.server.drained()
        await self.adapter.wait_idle()
        assert await self.app.runtime.evaluations.join(room_id("telegram", chat.id), 30)
        return self.server.sent[before].message_id

    def edits_of(self, message: int) -> list[tuple[str, float]]:
        return [(e.text, e.at) for e in self.server.edits if e.message_id == message]


@asynccontextmanager
async def on_telegram(app: App) -> AsyncIterator[Telegram]:
    async with FakeTelegramServer() as server:
        adapter = TelegramAdapter(
            PlatformSettings(
                _env_file=None,  # type: ignore[call-arg]
                telegram_token=SecretStr(server.token),
                telegram_webhook_url=None,
            ),
            base_url=server.base_url,
            poll_timeout=1,
            typing_interval=0.2,
            edit_interval=EDIT_INTERVAL,
        )
        await adapter.start(app.adapter_services)
        try:
            yield Telegram(app, adapter, server)
        finally:
            await adapter.stop()


async def stored_replies(app: App, chat_id: int, message_number: int) -> list[str]:
    """The bot's stored replies to the chat's message number `message_number`."""
    memory_id = message_id("telegram", chat_id, message_number)
    texts = []
    for index in range(3):
        found = await app.store.memories.get(reply_id(memory_id, app.runtime.agent_id, index))
        if found is not None:
            texts.append(found.content.text)
    return texts


def growing(texts: list[str]) -> bool:
    return all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))


# A message's edits in any one second, at most: one per EDIT_INTERVAL (and the first). A
# count, as Telegram's flood limits count, not a time: a gap shortened by a loaded machine
# (one edit's request held up, the next on time) does not add an edit to a second, while an
# unthrottled adapter (an edit per piece, 0.07 s apart) makes three times as many.
EDITS_PER_SECOND = 1 + int(1 / EDIT_INTERVAL)


def busiest_second(times: list[float]) -> int:
    """The most edits that arrived within one second of each other."""
    return max(
        (sum(1 for later in times[i:] if later - start < 1.0) for i, start in enumerate(times)),
        default=0,
    )


# --------------------------------------------------------------------------- Telegram


async def test_a_telegram_reply_grows_in_one_message_then_settles_and_only_it_is_stored(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(PICNIC))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _),
            on_telegram(app) as telegram,
        ):
            message = await telegram.said("I am planning a picnic on Sunday")
            chat = telegram.chat_id
            server = telegram.server

            # One message, first sent with the opening words, then edited as it grew.
            assert [m.chat_id for m in server.sent] == [chat]
            first = server.sent[0].text
            assert PICNIC.startswith(first) and first != PICNIC
            edits = telegram.edits_of(message)
            texts = [first] + [text for text, _ in edits]
            assert len(edits) >= 3 and growing(texts)
            # Paced by the edit interval (Telegram's flood limits), settled on the final text.
            assert busiest_second([at for _, at in edits]) <= EDITS_PER_SECOND
            assert texts[-1] == PICNIC and server.text_of(chat, message) == PICNIC
            # Never any JSON syntax on screen.
            assert not any('"' in text or "{" in text or "action" in text for text in texts)
            # Only the finished reply is stored, once.
            assert await stored_replies(app, chat, 1) == [PICNIC]
        request = openai_server.chat_requests[0].json
        assert request["stream"] is True and request["stream_options"] == {"include_usage": True}


async def test_a_streamed_reply_naming_an_action_is_stopped_and_replaced_by_the_retry(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # Some 60 words after the action's name: read to its end, the answer would take 4 s more.
    leaky = "Sure, I can help with that. NONE of it is a problem, I will sort it all out now." + (
        " Then we can look at the rest of the week together, one day at a time." * 4
    )
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(leaky, chunk_delay=0.06), streamed(RETRY))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _),
            on_telegram(app) as telegram,
        ):
            message = await telegram.said("Can you help me plan my week?")
            chat, server = telegram.chat_id, telegram.server
            texts = [server.sent[0].text] + [text for text, _ in telegram.edits_of(message)]

            # The words before the action's name were shown; the name never was.
            assert texts[0].startswith("Sure")
            assert not any("NONE" in text for text in texts)
            # Stopped there: the retry's words replace them in the same message.
            assert texts[-1] == RETRY and server.text_of(chat, message) == RETRY
            assert len(server.sent) == 1
            assert await stored_replies(app, chat, 1) == [RETRY]
            assert app.ledger.rejects(Task.REPLY) == {"reply with action name": 1}
        # The first answer was not read to its end (the client stopped reading it); the
        # retry's was.
        await openai_server.streams_ended(2)
        assert (openai_server.cut_streams, openai_server.finished_streams) == (1, 1)
        assert len(openai_server.chat_requests) == 2
        assert "Note:" in json.dumps(openai_server.chat_requests[1].json)


async def test_a_reply_failing_twice_is_replaced_on_screen_by_the_fallback(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    leaky = "Sure thing, here is my answer for you. NONE of this matters much, really."
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(leaky), streamed(leaky))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _),
            on_telegram(app) as telegram,
        ):
            message = await telegram.said("What should I do today?")
            chat, server = telegram.chat_id, telegram.server
            texts = [server.sent[0].text] + [text for text, _ in telegram.edits_of(message)]

            assert not any("NONE" in text for text in texts)
            assert texts[-1] == FALLBACK_REPLY
            assert server.text_of(chat, message) == FALLBACK_REPLY
            # The fallback is sent, never stored (it would feed later prompts).
            assert await stored_replies(app, chat, 1) == []
            rejects = app.ledger.rejects(Task.REPLY)
            assert rejects["reply with action name"] == 2 and rejects[REPLACED_BY_FALLBACK] == 1


async def test_a_model_failing_mid_reply_replaces_the_words_shown_and_none_are_stored(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    whole = answer(PICNIC)
    cut = whole[: whole.index(" bring")]  # the endpoint fails a dozen words in
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(reply(cut, chunk_delay=0.07, error="the model is overloaded"))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _),
            on_telegram(app) as telegram,
        ):
            message = await telegram.said("I am planning a picnic on Sunday")
            chat, server = telegram.chat_id, telegram.server
            texts = [server.sent[0].text] + [text for text, _ in telegram.edits_of(message)]

            # Words of the reply were on screen before the failure...
            assert texts[0] and PICNIC.startswith(texts[0])
            # ...and are replaced by the failure message, in the same message.
            assert texts[-1] == MODEL_FAILED_REPLY
            assert server.text_of(chat, message) == MODEL_FAILED_REPLY
            assert len(server.sent) == 1
            # Nothing of the broken reply is kept; the person's message is.
            assert await stored_replies(app, chat, 1) == []
            said = await app.store.memories.get(message_id("telegram", chat, 1))
            assert said is not None and said.content.text == "I am planning a picnic on Sunday"
        # Not asked again with half the answer already shown.
        assert sum(bool(r.json.get("stream")) for r in openai_server.chat_requests) == 1


async def test_with_streaming_off_the_reply_is_sent_once_whole(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(PICNIC))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server, stream_replies=False) as (
                app,
                _,
            ),
            on_telegram(app) as telegram,
        ):
            message = await telegram.said("I am planning a picnic on Sunday")

            assert [m.text for m in telegram.server.sent] == [PICNIC]
            assert telegram.edits_of(message) == []
            assert await stored_replies(app, telegram.chat_id, 1) == [PICNIC]
        assert "stream" not in openai_server.chat_requests[0].json


async def test_an_endpoint_that_cannot_stream_is_asked_whole_once_and_remembered(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with FakeOpenAIServer(streaming="refuse") as openai_server:
        openai_server.enqueue(answer(PICNIC), answer(RETRY))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, model),
            on_telegram(app) as telegram,
        ):
            first = await telegram.said("I am planning a picnic on Sunday")
            assert telegram.server.text_of(telegram.chat_id, first) == PICNIC
            assert telegram.edits_of(first) == []
            second = await telegram.said("Any tips?")
            assert telegram.server.text_of(telegram.chat_id, second) == RETRY
            assert not model.streams
        # Refused once (400), asked whole; the next reply is not offered a stream again.
        streams = [bool(r.json.get("stream")) for r in openai_server.chat_requests]
        assert streams == [True, False, False]


# --------------------------------------------------------------------------- Discord


async def test_a_discord_reply_grows_in_one_message_then_settles(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(PICNIC))
        async with mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _):
            adapter = DiscordAdapter(
                PlatformSettings(_env_file=None),  # type: ignore[call-arg]
                learn_wait=10,
                edit_interval=EDIT_INTERVAL,
            )
            adapter.bind(app.adapter_services)
            discord = FakeDiscord(adapter.client, tree=adapter.tree)
            sam = discord.person("Sam")
            await adapter.on_message(discord.message(sam, "I am planning a picnic on Sunday"))

            [sent] = discord.http.sent
            assert sent.message_id is not None
            edits = [e for e in discord.http.edits if e.message_id == sent.message_id]
            texts = [sent.content] + [e.content for e in edits]
            assert len(edits) >= 3 and growing(texts)
            assert busiest_second([e.at for e in edits]) <= EDITS_PER_SECOND
            assert discord.http.text_of(sent.message_id) == PICNIC


# --------------------------------------------------------------------------- console


class Recorded(io.StringIO):
    """Standard output that remembers each write and, given the model server, how many of
    its streamed answers had ended when it came."""

    def __init__(self, server: FakeOpenAIServer | None = None) -> None:
        super().__init__()
        self.server = server
        self.writes: list[tuple[int, str]] = []

    def write(self, text: str) -> int:
        ended = self.server.finished_streams if self.server is not None else 0
        self.writes.append((ended, text))
        return super().write(text)


async def test_the_console_prints_the_reply_as_it_comes(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(PICNIC))
        async with mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _):
            out = Recorded(openai_server)
            console = ConsoleChat(
                user_name="sarah",
                stdin=io.StringIO("I am planning a picnic on Sunday\n"),
                stdout=out,
                stream_replies=True,
                learn_timeout=10,
            )
            await console.run(app.adapter_services)

    name = app.runtime.character.name
    assert f"{name}: {PICNIC}\n" in out.getvalue()
    start = next(i for i, (_, text) in enumerate(out.writes) if text.startswith(f"{name}: "))
    pieces = [text for _, text in out.writes[start:]]
    end = pieces.index("\n")
    # Printed in many pieces as the model wrote them, not at once: the first while the
    # model's answer was still streaming.
    assert end >= 5 and pieces[0] != f"{name}: {PICNIC}"
    assert out.writes[start][0] == 0


@dataclass
class SlowModel:
    """A model's answer written a piece every 50 ms, through a Relay: how many pieces were
    written when the bot closed the request (`closed_after`), of all there were."""

    pieces: list[str]
    closed_after: list[int] = field(default_factory=list)

    @classmethod
    def writing(cls, text: str) -> SlowModel:
        return cls(re.findall(r"\S+\s*", answer(text)))

    def relay(self) -> Relay:
        async def writing() -> AsyncGenerator[str, None]:
            written = 0
            try:
                for piece in self.pieces:
                    await asyncio.sleep(0.05)
                    written += 1
                    yield piece
            finally:
                self.closed_after.append(written)

        return Relay(writing())


async def console_says(app: App, *lines: str) -> Recorded:
    """A piped console (nothing shown as it grows) where Sarah says `lines`."""
    out = Recorded()
    console = ConsoleChat(
        user_name="sarah",
        stdin=io.StringIO("".join(f"{line}\n" for line in lines)),
        stdout=out,
        learn_timeout=10,
    )
    await console.run(app.adapter_services)
    return out


async def test_a_reply_nobody_watches_grow_is_still_stopped_where_it_fails_for_good(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """A piped console shows nothing as it comes, yet the model's answer is read as it is
    written: a copy of the person's line stops the model's request there (the person does
    not wait for the model to finish a reply nobody will see), and only the retry is shown."""
    line = "I have a cat called Miso, a grumpy old tabby who rules the flat."
    copy = SlowModel.writing(
        line + " She is the queen of every room in the house, and she knows it well." * 5
    )
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(copy.relay(), streamed(RETRY))
        async with mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _):
            out = await console_says(app, line)
            rejects = app.ledger.rejects(Task.REPLY)

    name = app.runtime.character.name
    # Printed once, whole: the retry; nothing of the copy.
    replies = [text for _, text in out.writes if text.startswith(f"{name}: ")]
    assert replies == [f"{name}: {RETRY}"] and "grumpy old tabby" not in out.getvalue()
    # The copy's request was closed a few words in, long before the model's last word.
    assert len(copy.closed_after) == 1 and copy.closed_after[0] < len(copy.pieces) // 3
    # Stopped as a copy of her line or, a few words in, as her life in the bot's mouth
    # (which comes first depends on when the check ran): once either way.
    assert rejects in ({"reply with parroting": 1}, {"reply with the person's voice": 1})
    first, second = openai_server.chat_requests[:2]
    assert first.json["stream"] is True and "Note:" in json.dumps(second.json)


async def test_a_reply_going_round_in_circles_is_stopped_a_dozen_words_in(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """A live 0.5B model answered message after message with its own earlier reply (its
    words below, from a recorded run), adding a name in front: stopped once a dozen of its
    words have come back, not when the model is done, and never shown. It is not asked
    again (asked again, it wrote the same 18 times in 19): the statement is acknowledged."""
    earlier = (
        "I'm excited about starting a new job at the children's hospital in Lisbon. The half "
        "marathon runs are my biggest goals right now. I'll be running 15 km without stopping "
        "for now and finishing an 18 km long run next week."
    )
    again = SlowModel.writing(
        "Sarah, I'm excited about starting a new job at the children's hospital in Lisbon. The "
        "half marathon runs are my biggest goals right now. I'll be running 15 km without "
        "stopping and finishing an 18 km long run next week."
    )
    said = "Night shifts are rough, but I really love working with the kids."
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(streamed(earlier), again.relay())
        async with mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _):
            out = await console_says(
                app, "I work as a nurse at a children's hospital, mostly on night shifts.", said
            )
            rejects = app.ledger.rejects(Task.REPLY)
        replies_asked = [r for r in openai_server.chat_requests if is_reply_request(r.json)]

    name = app.runtime.character.name
    replies = [text for _, text in out.writes if text.startswith(f"{name}: ")]
    assert replies == [f"{name}: {earlier}", f"{name}: {acknowledgement(said)}"]
    assert len(again.closed_after) == 1 and again.closed_after[0] < len(again.pieces) // 2
    assert rejects == {"reply with its own earlier reply": 1, "replaced by the fallback": 1}
    assert len(replies_asked) == 2


async def test_a_runaway_reply_is_read_no_further_than_the_reply_cap(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """Issue 30: a model that ignores max_tokens streamed 375,561 characters, all read before
    the reply was cut to MNEMO_REPLY_MAX_CHARS. The request is closed once the text is past
    the cap; the person gets the reply cut at its last sentence within it."""
    sentence = "All work and no play makes Jack a dull boy. "
    runaway = answer(sentence * 8536)
    assert len(runaway) > 375_000
    written: list[int] = []

    async def writing() -> AsyncGenerator[str, None]:
        sent = 0
        try:
            for start in range(0, len(runaway), 200):
                # Paced, as a model writes: unpaced, the whole answer would sit in the
                # socket's buffers before the bot read its first piece.
                await asyncio.sleep(0.002)
                piece = runaway[start : start + 200]
                sent += len(piece)
                yield piece
        finally:
            written.append(sent)

    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(Relay(writing()))
        async with mnemo_with(
            tmp_path, mongo_uri, model_dir, openai_server, reply_max_chars=4000
        ) as (app, _):
            out = await console_says(app, "Tell me about Jack.")

    name = app.runtime.character.name
    [printed] = [text for _, text in out.writes if text.startswith(f"{name}: ")]
    said = printed.removeprefix(f"{name}: ")
    assert 3_900 < len(said) <= 4000 and said.endswith("a dull boy.")
    # The model's request was closed a little past the cap, not read to its end.
    assert len(written) == 1 and written[0] < 3 * 4000, written


# --------------------------------------------------------------------------- the model


async def test_the_model_streams_holding_its_queue_slot_and_time_out_over_the_stream() -> None:
    async with FakeOpenAIServer() as server:
        ledger = UsageLedger()
        model = OpenAIModel(
            model_settings(server.base_url, concurrency=1, timeout_seconds=1.0), ledger
        )
        server.enqueue(reply("one two three four", usage=(9, 4), chunk_delay=0.1))
        request = ModelRequest("hi", model_class=ModelClass.LARGE, task=Task.REPLY)
        # Each piece with the number of streams the server had finished when it came.
        pieces: list[tuple[int, str]] = []
        async with aclosing(model.stream(request)) as stream:
            async for piece in stream:
                pieces.append((server.finished_streams, piece))
                # While the answer streams, the one slot is taken: other calls wait.
                assert model.queue.in_flight == 1
        assert "".join(p for _, p in pieces) == "one two three four"
        # Four pieces, the first read while the server was still writing the answer.
        assert len(pieces) == 4 and pieces[0][0] == 0
        assert model.queue.in_flight == 0
        usage = ledger.snapshot()[Task.REPLY]
        assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (1, 9, 4)

        # The time-out bounds the whole stream, however steadily the chunks come.
        server.enqueue(reply("a b c d e f g h i j k l", chunk_delay=0.2))
        with pytest.raises(ModelError, match="timed out"):
            async with aclosing(model.stream(request)) as stream:
                async for _ in stream:
                    pass
        assert model.queue.in_flight == 0
        await model.close()


async def test_stopping_a_stream_early_frees_the_slot_and_counts_the_call() -> None:
    async with FakeOpenAIServer() as server:
        ledger = UsageLedger()
        model = OpenAIModel(model_settings(server.base_url, concurrency=1), ledger)
        server.enqueue(reply("one two three four five six", chunk_delay=0.05), "next")
        request = ModelRequest("hi", model_class=ModelClass.LARGE, task=Task.REPLY)
        async with aclosing(stream_text(model, request)) as stream:
            async for _ in stream:
                break
        assert model.queue.in_flight == 0
        assert ledger.snapshot()[Task.REPLY].calls == 1
        # The next call gets the slot at once.
        assert await asyncio.wait_for(model.generate(request), 5) == "next"
        await model.close()


async def test_structured_output_and_its_fallbacks_hold_when_streaming() -> None:
    async with FakeOpenAIServer() as server:
        model = OpenAIModel(model_settings(server.base_url), UsageLedger())
        server.enqueue(status(400, message="response_format json_schema is not supported"))
        server.enqueue(answer("Hi there"))
        from bot.runtime.prompts import reply_answer

        request = ModelRequest(
            "hi", model_class=ModelClass.LARGE, task=Task.REPLY, json_answer=reply_answer([])
        )
        text = "".join([piece async for piece in model.stream(request)])
        assert text == answer("Hi there")
        formats = [r.json["response_format"]["type"] for r in server.chat_requests]
        assert formats == ["json_schema", "json_object"]
        assert all(r.json["stream"] for r in server.chat_requests)
        await model.close()


async def test_a_model_without_stream_answers_in_one_piece() -> None:
    model = ScriptedModel(answers={Task.REPLY: ["whole answer"]})
    request = ModelRequest("hi", model_class=ModelClass.LARGE, task=Task.REPLY)
    assert [piece async for piece in stream_text(model, request)] == ["whole answer"]


@pytest.mark.parametrize(
    ("so_far", "shown"),
    [
        ('{"text": "Hello the', "Hello the"),
        ('```json\n{"action": "NONE", "text": "Hi Sa', "Hi Sa"),
        ('{"text": "Line one\\nLine', "Line one\nLine"),
        ('{"text": "Done.", "action": "NO', "Done."),
        ('{"tex', None),
        ("Plain prose so far", "Plain prose so far"),
        ("Plain prose then {", "Plain prose then "),
        ('{"text": "{\\"text\\": \\"wrapped', None),
    ],
)
def test_the_partial_text_of_a_reply_never_shows_its_syntax(so_far: str, shown: str | None) -> None:
    assert partial_reply_text(so_far) == shown


async def test_a_discord_reply_past_the_limit_streams_its_first_message_then_sends_the_rest(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    paragraph = "Here is one more thought about the trip and how to plan it well. " * 6
    long_reply = "\n\n".join([paragraph.strip()] * 7)  # about 2,800 characters
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(reply(answer(long_reply), chunk_delay=0.005))
        async with mnemo_with(tmp_path, mongo_uri, model_dir, openai_server) as (app, _):
            adapter = DiscordAdapter(
                PlatformSettings(_env_file=None),  # type: ignore[call-arg]
                learn_wait=10,
                edit_interval=EDIT_INTERVAL,
            )
            adapter.bind(app.adapter_services)
            discord = FakeDiscord(adapter.client, tree=adapter.tree)
            sam = discord.person("Sam")
            await adapter.on_message(discord.message(sam, "Tell me everything about the trip"))

            first, second = discord.http.sent
            assert first.message_id is not None and second.message_id is not None
            # The first message grew up to the limit, then was settled on the final split.
            shown = [first.content] + [
                e.content for e in discord.http.edits if e.message_id == first.message_id
            ]
            assert all(len(text) <= 2000 for text in shown) and len(shown) >= 3
            final_first = discord.http.text_of(first.message_id)
            assert final_first is not None and len(final_first) <= 2000
            # It grew as written; the last edit is the final split (cut between paragraphs,
            # which may be shorter than what was shown when it stopped growing).
            assert growing(shown[:-1]) and shown[-1] == final_first
            # The rest came as a new message, never edited; together they are the reply.
            assert not any(e.message_id == second.message_id for e in discord.http.edits)
            assert f"{final_first}\n\n{second.content}" == long_reply


async def test_a_telegram_edit_to_the_same_text_is_no_failure() -> None:
    from telegram import Bot

    from bot.adapters.telegram.send import HTML, edit_part, send_part

    async with FakeTelegramServer() as server:
        sarah = server.user("Sarah")
        chat = server.private_chat(sarah)
        async with Bot(server.token, base_url=server.base_url) as bot:
            sent = await send_part(
                bot, chat.id, "Hello <b>there</b>", None, None, None, parse_mode=HTML
            )
            assert sent is not None
            # Telegram answers "message is not modified": the text is on screen, as wanted.
            assert await edit_part(bot, sent, "Hello <b>there</b>", parse_mode=HTML)
            assert server.edits == []
            assert await edit_part(bot, sent, "Hello <b>there</b>, Sarah", parse_mode=HTML)
            assert server.text_of(chat.id, sent.message_id) == "Hello there, Sarah"


async def test_an_endpoint_ignoring_stream_is_read_whole_and_an_error_event_is_a_model_error() -> (
    None
):
    request = ModelRequest("hi", model_class=ModelClass.LARGE, task=Task.REPLY)
    async with FakeOpenAIServer(streaming="ignore") as server:
        model = OpenAIModel(model_settings(server.base_url), UsageLedger())
        server.enqueue(reply("all at once", usage=(3, 3)))
        assert [piece async for piece in model.stream(request)] == ["all at once"]
        assert len(server.chat_requests) == 1 and not model.streams
        await model.close()
    async with FakeOpenAIServer() as server:
        ledger = UsageLedger()
        model = OpenAIModel(model_settings(server.base_url), ledger)
        broken = b'data: {"error": {"message": "the model is overloaded"}}\n\n'
        server.enqueue(raw(broken, "text/event-stream"))
        with pytest.raises(ModelError, match="bad response: the model is overloaded"):
            _ = [piece async for piece in model.stream(request)]
        assert ledger.snapshot()[Task.REPLY].failures == 1
        assert model.streams  # an error is not a refusal to stream
        await model.close()


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"not json at all", "not valid JSON"), (b'{"id": "x", "choices": []}', "empty choices")],
)
async def test_a_malformed_body_to_a_stream_fails_as_a_whole_answer_would(
    body: bytes, message: str
) -> None:
    request = ModelRequest("hi", model_class=ModelClass.LARGE, task=Task.REPLY)
    async with FakeOpenAIServer() as server:
        model = OpenAIModel(model_settings(server.base_url), UsageLedger())
        server.enqueue(raw(body))
        with pytest.raises(ModelError, match=message):
            _ = [piece async for piece in model.stream(request)]
        assert model.streams  # one bad body says nothing about streaming
        await model.close()


async def test_words_streamed_before_an_action_that_answers_for_itself_are_taken_back(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async def remind(ctx: Context) -> None:
        await ctx.callback(Content(text="Reminder set for 5pm."))

    reminders = Plugin(
        "reminders",
        actions=[
            Action("SET_REMINDER", "sets a reminder", handler=remind, suppress_initial_message=True)
        ],
    )
    words = "Sure, I will set that reminder for you at five this afternoon, no problem at all."
    streamed_answer = json.dumps({"text": words, "action": "SET_REMINDER"})
    async with FakeOpenAIServer() as openai_server:
        openai_server.enqueue(reply(streamed_answer, chunk_delay=0.07))
        async with (
            mnemo_with(tmp_path, mongo_uri, model_dir, openai_server, plugins=[reminders]) as (
                app,
                _,
            ),
            on_telegram(app) as telegram,
        ):
            chat, server = telegram.chat_id, telegram.server
            server.push_message(telegram.chat, telegram.sarah, "remind me at 5pm")
            await server.wait_for_sent(2, chat_id=chat)
            await server.drained()
            await telegram.adapter.wait_idle()

            streamed_message, reminder = server.sent
            assert words.startswith(streamed_message.text)  # shown while it was written
            # The action answered instead: its words were taken back, its own line stays.
            assert server.deleted == [(chat, streamed_message.message_id)]
            assert server.text_of(chat, reminder.message_id) == "Reminder set for 5pm."
            assert await stored_replies(app, chat, 1) == ["Reminder set for 5pm."]

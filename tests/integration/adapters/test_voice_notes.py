"""Voice notes, end to end: with MNEMO_TRANSCRIPTION_MODEL set, python-telegram-bot and
discord.py download a voice note from the local fakes, the real `openai` client sends it to the
fake OpenAI server's `/v1/audio/transcriptions`, and the message goes on as the words said:
kept, answered, learned from and forgotten as typed text; the audio is never stored. Over
MNEMO_MAX_VOICE_MB, or with no transcription model, it is kept as a voice note as before."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.adapters.console import ConsoleChat
from bot.adapters.discord import DiscordAdapter, world_of
from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.config.settings import ModelSettings, PlatformSettings
from bot.domain.records import account_id, room_id, world_id
from bot.llm.base import Task
from bot.testing.harness import open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer, Status
from bot.testing.scripted import ScriptedModel
from tests.fakes.discord_fakes import FakeCDN, FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.telegram_bot import REMEMBER, echo

# What the fake "voice note" holds: the fake server hears its bytes as these words.
SAID = "I moved to Porto last week"
AUDIO = SAID.encode()


@asynccontextmanager
async def mnemo(
    tmp_path: Path, model_dir: Path, mongo_uri: str, *, transcription_model: str | None
) -> AsyncIterator[tuple[App, FakeOpenAIServer, ScriptedModel]]:
    """Mnemo with a scripted reply model, and the fake OpenAI server as its endpoint (where
    voice notes are transcribed)."""
    model = ScriptedModel(echo)
    async with FakeOpenAIServer() as server:
        settings = test_settings(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir)
        settings = dataclasses.replace(
            settings,
            model=ModelSettings.model_construct(
                openai_api_key=SecretStr("sk-test-voice"),
                openai_base_url=server.base_url,
                small_model="small",
                large_model="large",
                timeout_seconds=5.0,
                max_retries=0,
                transcription_model=transcription_model,
            ),
        )
        async with open_test_app(
            tmp_path, settings=settings, model=model, plugins=[REMEMBER]
        ) as app:
            yield app, server, model


@asynccontextmanager
async def on_telegram(
    app: App, telegram: FakeTelegramServer, **settings: Any
) -> AsyncIterator[TelegramAdapter]:
    adapter = TelegramAdapter(
        PlatformSettings(
            _env_file=None,  # type: ignore[call-arg]
            telegram_token=SecretStr(telegram.token),
            telegram_webhook_url=None,
            **settings,
        ),
        base_url=telegram.base_url,
        poll_timeout=1,
    )
    await adapter.start(app.adapter_services)
    try:
        yield adapter
    finally:
        await adapter.stop()


async def test_a_telegram_voice_note_is_heard_answered_learned_and_forgotten(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri, transcription_model="whisper-1") as (
            app,
            openai,
            model,
        ),
        on_telegram(app, telegram) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        telegram.push_message(dm, sarah, voice=AUDIO)
        [reply] = await telegram.wait_for_sent(1)
        await telegram.drained()
        await adapter.wait_idle()
        room = room_id("telegram", dm.id)
        assert await app.runtime.evaluations.join(room, 30)
        stored = await app.store.memories.recent(room, 10)
        facts, _ = await app.store.facts.page(world_id("telegram", dm.id))
        prompt_state = model.calls_for(Task.REPLY)[-1].state
        telegram.push_message(dm, sarah, "/forgetme yes")
        await telegram.wait_for_sent(2)
        left = await app.store.memories.recent(room, 10)
        facts_left, _ = await app.store.facts.page(world_id("telegram", dm.id))
    [heard] = openai.transcriptions
    assert (heard.model, heard.data, heard.content_type) == ("whisper-1", AUDIO, "audio/ogg")
    assert reply.text == f"You said: {SAID}"  # answered as what was said
    assert prompt_state is not None and prompt_state.message.content.text == SAID
    said = [m for m in stored if m.user_id == account_id("telegram", sarah.id)]
    assert [m.content.text for m in said] == [SAID]  # kept as text
    assert said[0].content.attachments[0].content_type == "audio/ogg"  # still a voice note
    assert f"{SAID} [a voice note]" in model.calls_for(Task.REPLY)[-1].prompt
    assert [f.text for f in facts] == [f"said {SAID}"]  # learned from
    assert left == [] and facts_left == []  # forgotten like anything typed
    assert app.ledger.tasks["transcription"].calls == 1


async def test_a_telegram_voice_note_over_the_limit_or_without_a_model_is_kept_unheard(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri, transcription_model="whisper-1") as (app, openai, _),
        on_telegram(app, telegram, max_voice_mb=1) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        # Declared at 2 MB: never downloaded, never sent to the endpoint.
        telegram.push_message(dm, sarah, voice=AUDIO, voice_size=2 * 1024 * 1024)
        await telegram.wait_for_sent(1)
        await telegram.drained()
        await adapter.wait_idle()
        stored = await app.store.memories.recent(room_id("telegram", dm.id), 10)
    assert openai.transcriptions == []
    mine = [m for m in stored if m.user_id == account_id("telegram", sarah.id)]
    assert [m.content.text for m in mine] == [""]
    assert mine[0].content.attachments[0].content_type == "audio/ogg"

    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri, transcription_model=None) as (app, openai, _),
        on_telegram(app, telegram) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        telegram.push_message(dm, sarah, voice=AUDIO)
        await telegram.wait_for_sent(1)
        await telegram.drained()
        await adapter.wait_idle()
        stored = await app.store.memories.recent(room_id("telegram", dm.id), 10)
    assert openai.transcriptions == []  # no model: nothing is sent anywhere
    assert [m.content.text for m in stored if m.user_id != app.runtime.agent_id] == [""]


async def test_a_discord_voice_message_is_heard_answered_and_learned_from(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        mnemo(tmp_path, model_dir, mongo_uri, transcription_model="gpt-4o-mini-transcribe") as (
            app,
            openai,
            _,
        ),
        FakeCDN() as cdn,
    ):
        settings = PlatformSettings(_env_file=None)  # type: ignore[call-arg]
        adapter = DiscordAdapter(settings, learn_wait=10)
        adapter.bind(app.adapter_services)
        fake = FakeDiscord(adapter.client, tree=adapter.tree, cdn=cdn)
        sarah = fake.person("Sarah")
        await adapter.on_message(fake.message(sarah, "", voice=AUDIO))
        assert await app.runtime.evaluations.join(None, 30)
        room = room_id("discord", fake.dm_channel_id(sarah))
        stored = await app.store.memories.recent(room, 10)
        channel = fake.dm_channel_id(sarah)
        facts, _ = await app.store.facts.page(world_of(None, channel))
    [heard] = openai.transcriptions
    assert (heard.model, heard.filename, heard.data) == (
        "gpt-4o-mini-transcribe",
        "voice-message.ogg",
        AUDIO,
    )
    assert fake.http.texts[0] == f"You said: {SAID}"
    said = [m for m in stored if m.user_id == account_id("discord", sarah.id)]
    assert [m.content.text for m in said] == [SAID]
    assert [f.text for f in facts] == [f"said {SAID}"]
    assert len(cdn.downloads) == 1


async def test_a_console_recording_is_heard_and_one_the_endpoint_fails_is_kept_unheard(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    recording = tmp_path / "note.ogg"
    recording.write_bytes(AUDIO)
    missing = tmp_path / "none.ogg"
    async with mnemo(tmp_path, model_dir, mongo_uri, transcription_model="whisper-1") as (
        app,
        openai,
        model,
    ):
        # The first is refused by the endpoint (a 500): kept as a voice note, unheard.
        openai.enqueue(Status(500, message="the model crashed"), endpoint="transcriptions")
        script = f"/voice {recording}\n/voice {recording}\n/voice {missing}\n"
        out = io.StringIO()
        console = ConsoleChat(user_name="sam", stdin=io.StringIO(script), stdout=out)
        await console.run(app.adapter_services)
        stored = await app.store.memories.recent(console.room.id, 10)
    assert len(openai.transcriptions) == 2
    shown = out.getvalue()
    assert f"You said: {SAID}" in shown
    assert f"No recording at {missing}." in shown
    said = [m for m in stored if m.user_id == console.account.id]
    assert [m.content.text for m in said] == ["", SAID]
    assert [m.content.attachments[0].title for m in said] == ["note.ogg", "note.ogg"]
    # The conversation still shows it came as a recording, beside the words heard.
    assert f"{SAID} [audio: note.ogg]" in model.calls_for(Task.REPLY)[-1].prompt
    assert app.ledger.tasks["transcription"].failures == 1

"""Images people send (issue 21.2), end to end: python-telegram-bot and discord.py download
them from the local fakes, the real `openai` client sends them to the fake OpenAI server as
image parts when the operator says the model sees images; with the setting off the model gets
the caption and the file name. Nothing of an image is stored, and what the model said about
one never becomes a fact about the person who sent it."""

from __future__ import annotations

import base64
import functools
import io
import json
import logging
import struct
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from pydantic import BaseModel, SecretStr

from bot import Context, Evaluator, Plugin
from bot.adapters.console import ConsoleChat
from bot.adapters.discord import DiscordAdapter
from bot.adapters.images import MEGABYTE, ImageLimits
from bot.adapters.telegram import TelegramAdapter
from bot.app.composition import App
from bot.config.settings import ModelSettings, PlatformSettings
from bot.domain.records import message_id, room_id
from bot.llm.accounting import UsageLedger
from bot.llm.base import ModelClass
from bot.llm.openai_model import OpenAIModel
from bot.memory import evidence, grounding
from bot.testing.harness import open_test_app
from bot.testing.openai_server import (
    FakeOpenAIServer,
    image_parts,
    is_reply_request,
    last_user_message,
)
from plugins.facts import FactsSettings
from plugins.facts import plugin as FACTS
from tests.fakes.discord_fakes import FakeCDN, FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer


def jpeg(marker: bytes, side: int = 8) -> bytes:
    """A real JPEG, `side` pixels square, carrying `marker` in its comment."""
    out = io.BytesIO()
    Image.new("RGB", (side, side), (200, 120, 40)).save(out, "JPEG", comment=marker)
    return out.getvalue()


def png(marker: str, side: int = 8) -> bytes:
    """A real PNG carrying `marker` in a text chunk."""
    info = PngInfo()
    info.add_text("marker", marker)
    out = io.BytesIO()
    Image.new("RGB", (side, side), (40, 120, 200)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


# A photo's sizes and a logo: real images, recognisable anywhere they might wrongly be kept.
PHOTO = jpeg(b"sarahs-cat-photo" * 64)
THUMBNAIL = jpeg(b"sarahs-cat-thumb" * 4)
PNG = png("a-logo-in-png" * 8)
# What the audit sent as `image/png`: a web page.
HTML = b"<!doctype html><html><body><script>alert(1)</script></body></html>"
# A file past the size limit whose size nobody declared: read whole, 40 MB came first.
HUGE = 40 * MEGABYTE


@functools.cache
def png_bomb(side: int = 12_000) -> bytes:
    """A real PNG of `side` x `side` grey pixels, all black: 144 megapixels in about 140 KB,
    which a server decoding it unpacks to 144 MB (a decompression bomb)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    packer = zlib.compressobj(9)
    row = bytes(side + 1)  # the filter byte, then the row's pixels
    pixels = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


REPLY = "What a lovely cat!"
# Why a claim only the model made is refused: nobody said it, or the bot did.
# Why a claim resting on no words of its speaker is refused (the evidence and grounding rules).
NOT_HER_WORDS = {
    evidence.QUOTE_NOT_SAID,
    evidence.NOT_IN_QUOTE,
    grounding.NOT_SAID,
    grounding.SAID_BY_ASSISTANT,
}


def is_reading(body: dict[str, Any]) -> bool:
    """A facts reading (plugins/facts/prompts.py), not a reply."""
    first = body["messages"][0]
    return first["role"] == "system" and "write down facts" in first["content"]


def answer(body: dict[str, Any]) -> str:
    return json.dumps({"text": REPLY, "action": "NONE"})


def model_settings(url: str) -> ModelSettings:
    return ModelSettings(
        _env_file=None,  # type: ignore[call-arg]
        openai_api_key="sk-test",
        openai_base_url=url,
        small_model="small",
        large_model="large",
        max_retries=0,
    )


@dataclass
class Mnemo:
    app: App
    openai: FakeOpenAIServer

    def reply_requests(self) -> list[dict[str, Any]]:
        """The reply requests sent so far."""
        return [r.json for r in self.openai.chat_requests if is_reply_request(r.json)]


@asynccontextmanager
async def mnemo(
    tmp_path: Path,
    model_dir: Path,
    mongo_uri: str,
    *,
    plugins: Sequence[Plugin] = (),
    plugin_settings: Mapping[str, BaseModel] | None = None,
) -> AsyncIterator[Mnemo]:
    async with FakeOpenAIServer(responder=answer) as openai:
        model = OpenAIModel(model_settings(openai.base_url), UsageLedger())
        try:
            async with open_test_app(
                tmp_path,
                plugins=plugins,
                plugin_settings=plugin_settings,
                model=model,
                mongodb_uri=mongo_uri,
                model_dir=model_dir,
                evaluator_selection="all",
            ) as app:
                yield Mnemo(app, openai)
        finally:
            await model.close()


@asynccontextmanager
async def on_telegram(
    bot: Mnemo, telegram: FakeTelegramServer, **images: Any
) -> AsyncIterator[TelegramAdapter]:
    settings = PlatformSettings(
        _env_file=None,  # type: ignore[call-arg]
        telegram_token=SecretStr(telegram.token),
        telegram_webhook_url=None,
        **images,
    )
    adapter = TelegramAdapter(settings, base_url=telegram.base_url, poll_timeout=1)
    await adapter.start(bot.app.adapter_services)
    try:
        yield adapter
    finally:
        await adapter.stop()


async def settled(bot: Mnemo, adapter: TelegramAdapter, telegram: FakeTelegramServer) -> None:
    await telegram.drained()
    await adapter.wait_idle()
    assert await bot.app.runtime.evaluations.join(None, 30)


async def everything_stored(app: App) -> str:
    """Every document of every collection, as text."""
    found = []
    for name in await app.store.db.list_collection_names():
        found.append(repr(await app.store.db[name].find({}).to_list()))
    return "\n".join(found)


def files_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


# --------------------------------------------------------------------------- Telegram


async def test_a_telegram_photo_reaches_the_model_as_an_image_part_beside_its_caption(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_telegram(bot, telegram, model_sees_images=True) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        telegram.push_message(dm, sarah, caption="look at Miso!", photo=[THUMBNAIL, PHOTO])
        [reply] = await telegram.wait_for_sent(1, chat_id=dm.id)
        await settled(bot, adapter, telegram)
        stored = await bot.app.store.memories.get(message_id("telegram", dm.id, 1))
        kept = await everything_stored(bot.app)

    assert reply.text == REPLY
    [request] = bot.reply_requests()
    # The largest size, as JPEG, in a base64 data URL beside the text.
    assert image_parts(request) == [("image/jpeg", PHOTO)]
    assert "Sarah: look at Miso! [a photo]" in last_user_message(request)
    assert len(telegram.downloads) == 1
    # What is kept is what Sarah wrote and what the attachment was: never the image.
    assert stored is not None and stored.content.text == "look at Miso!"
    [attachment] = stored.content.attachments
    assert (attachment.content_type, attachment.size) == ("image/jpeg", len(PHOTO))
    photo_b64 = base64.b64encode(PHOTO).decode()
    assert "sarahs-cat" not in kept and photo_b64[:40] not in kept
    on_disk = files_under(tmp_path)
    assert b"sarahs-cat" not in on_disk and photo_b64[:40].encode() not in on_disk


async def test_with_the_setting_off_the_model_gets_the_caption_and_file_name_only(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_telegram(bot, telegram) as adapter,  # MNEMO_MODEL_SEES_IMAGES false by default
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        document = {"file_name": "logo.png", "mime_type": "image/png", "data": PNG}
        telegram.push_message(dm, sarah, caption="the new logo", document=document)
        await telegram.wait_for_sent(1, chat_id=dm.id)
        await settled(bot, adapter, telegram)

    [request] = bot.reply_requests()
    assert image_parts(request) == []
    assert isinstance(request["messages"][-1]["content"], str)  # plain text, as before
    assert "Sarah: the new logo [image: logo.png]" in last_user_message(request)
    assert telegram.downloads == [] and telegram.calls_to("getFile") == []


async def summarise(ctx: Context, found: object) -> None:
    await ctx.model.generate("Summarise the conversation.", model_class=ModelClass.LARGE)


SUMMARY = Plugin(
    name="summary",
    evaluators=[
        Evaluator(name="SUMMARY", description="summarises", handler=summarise, always_run=True)
    ],
)


async def test_only_the_reply_to_the_message_that_carried_images_gets_them(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    """In a group: a photo nobody addressed to Mnemo is never downloaded; the one sent to
    it goes with its reply alone, never to an evaluation nor to the next message's reply."""
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri, plugins=[SUMMARY]) as bot,
        on_telegram(bot, telegram, model_sees_images=True) as adapter,
    ):
        tom, sarah = telegram.user("Tom"), telegram.user("Sarah")
        group = telegram.group("Cat people")
        telegram.push_message(group, tom, caption="holiday pics", photo=[THUMBNAIL, PNG])
        await settled(bot, adapter, telegram)
        assert telegram.calls_to("getFile") == []  # not answered: not downloaded
        telegram.push_message(group, sarah, caption="@mnemo_bot whose cat?", photo=[PHOTO])
        await telegram.wait_for_sent(1, chat_id=group.id)
        await settled(bot, adapter, telegram)
        telegram.push_message(group, sarah, "@mnemo_bot and now?")
        await telegram.wait_for_sent(2, chat_id=group.id)
        await settled(bot, adapter, telegram)

    first, second = bot.reply_requests()
    assert image_parts(first) == [("image/jpeg", PHOTO)]
    assert image_parts(second) == []
    # The earlier photos stay in the conversation (the earlier turns) by what they were.
    earlier = "\n".join(str(m["content"]) for m in second["messages"][1:-1])
    assert "Tom: holiday pics [a photo]" in earlier
    assert "Sarah: @mnemo_bot whose cat? [a photo]" in earlier
    summaries = [
        r.json for r in bot.openai.chat_requests if "Summarise" in last_user_message(r.json)
    ]
    assert len(summaries) == 3 and all(image_parts(s) == [] for s in summaries)
    assert len(telegram.downloads) == 1


async def test_a_telegram_photo_is_sent_in_its_largest_size_within_the_limit(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    small, medium, large = jpeg(b"s"), jpeg(b"m" * 300), jpeg(b"l" * 4_000)
    assert len(small) < len(medium) < 1_048 < len(large)
    limit = {"model_sees_images": True, "max_image_mb": 0.001}  # 1,048 bytes
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_telegram(bot, telegram, **limit) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        telegram.push_message(dm, sarah, caption="sunset", photo=[small, medium, large])
        await telegram.wait_for_sent(1, chat_id=dm.id)
        big = {"file_name": "poster.png", "mime_type": "image/png", "data": b"p" * 5_000}
        with caplog.at_level(logging.INFO, logger="bot.adapters.images"):
            telegram.push_message(dm, sarah, caption="and a poster", document=big)
            await telegram.wait_for_sent(2, chat_id=dm.id)
        await settled(bot, adapter, telegram)
        poster = await bot.app.store.memories.get(message_id("telegram", dm.id, 3))

    sunset, poster_reply = bot.reply_requests()
    assert image_parts(sunset) == [("image/jpeg", medium)]
    assert image_parts(poster_reply) == []
    assert "Sarah: and a poster [image: poster.png]" in last_user_message(poster_reply)
    assert "image poster.png" in caplog.text and "over the 0.0 MB limit" in caplog.text
    assert poster is not None and [a.title for a in poster.content.attachments] == ["poster.png"]


async def test_what_the_model_saw_in_an_image_never_becomes_a_fact(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    """Sarah's caption says she moved to Lisbon; the model, seeing the photo, says there is
    a golden retriever on her balcony. The extraction offers both claims: only what Sarah
    said is stored. An image's description is not a person's words."""
    lisbon = {"fact": "Sarah lives in Lisbon", "quote": "I moved to Lisbon", "about": "home city"}
    # What the model saw, resting on the caption's words about the view: not what they say.
    retriever = {
        "fact": "Sarah has a golden retriever",
        "quote": "the view from my balcony",
        "about": "pet",
    }

    def responder(body: dict[str, Any]) -> str:
        if is_reading(body):
            return json.dumps({"m1": [lisbon, retriever]})
        said = "What a view, and a golden retriever on your balcony!"
        return json.dumps({"text": said, "action": "NONE"})

    facts_settings = FactsSettings().model_copy(update={"conversation_length": 10_000})
    async with (
        FakeTelegramServer() as telegram,
        mnemo(
            tmp_path,
            model_dir,
            mongo_uri,
            plugins=[FACTS],
            plugin_settings={"facts": facts_settings},
        ) as bot,
        on_telegram(bot, telegram, model_sees_images=True) as adapter,
    ):
        bot.openai.responder = responder
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        caption = "I moved to Lisbon last month, the view from my balcony"
        telegram.push_message(dm, sarah, caption=caption, photo=[PHOTO])
        await telegram.wait_for_sent(1, chat_id=dm.id)
        await settled(bot, adapter, telegram)
        said = await bot.app.store.memories.get(message_id("telegram", dm.id, 1))
        assert said is not None
        assert await bot.app.runtime.flush_room(said, timeout=60)
        facts, _ = await bot.app.store.facts.page(said.world_id, limit=10)
        rejects = await bot.app.store.rejects.counts(said.world_id)

    [reply] = bot.reply_requests()
    assert image_parts(reply) == [("image/jpeg", PHOTO)]
    readings = [r.json for r in bot.openai.chat_requests if is_reading(r.json)]
    assert readings and all(image_parts(e) == [] for e in readings)
    assert [f.text for f in facts] == ["Sarah lives in Lisbon"]
    # Refused and counted (the rejects ledger, /stats): its words are not in her message.
    assert sum(rejects.values()) == 1 and set(rejects) <= NOT_HER_WORDS


async def test_only_bytes_that_are_an_image_reach_the_model_whatever_their_declared_type(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 30: HTML sent as `image/png` went to the model, and so did a PNG decompression
    bomb. An image is what its bytes are: its magic number and header (never decoded here),
    within a pixel cap; a JPEG called a PNG goes as the JPEG it is."""
    bomb = png_bomb()
    assert len(bomb) < 200_000
    documents = [
        ("page.png", HTML, "a web page"),
        ("bomb.png", bomb, "a big one"),
        ("photo.png", PHOTO, "my cat"),
    ]
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_telegram(bot, telegram, model_sees_images=True) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        with caplog.at_level(logging.INFO, logger="bot.adapters.images"):
            for number, (name, data, caption) in enumerate(documents, start=1):
                document = {"file_id": name, "file_name": name, "mime_type": "image/png"}
                telegram.push_message(
                    dm, sarah, caption=caption, document={**document, "data": data}
                )
                await telegram.wait_for_sent(number, chat_id=dm.id)
        await settled(bot, adapter, telegram)

    assert [m.text for m in telegram.sent] == [REPLY] * 3  # each answered all the same
    page, big, photo = bot.reply_requests()
    assert image_parts(page) == [] and image_parts(big) == []
    assert image_parts(photo) == [("image/jpeg", PHOTO)]
    assert "image page.png" in caplog.text and "its bytes are no image models take" in caplog.text
    assert "image bomb.png" in caplog.text and "12000 x 12000 pixels, over 50,000,000" in (
        caplog.text
    )
    assert "Sarah: a web page [image: page.png]" in last_user_message(page)


async def test_a_telegram_file_of_no_declared_size_is_read_only_as_far_as_the_limit(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 30: a document Telegram gives no size for was downloaded whole (40 MB) before
    the size check. It is read as it arrives and given up at the limit."""
    document = {"file_id": "huge", "file_name": "huge.jpg", "mime_type": "image/jpeg"}
    async with (
        FakeTelegramServer() as telegram,
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_telegram(bot, telegram, model_sees_images=True, max_image_mb=1) as adapter,
    ):
        sarah = telegram.user("Sarah")
        dm = telegram.private_chat(sarah)
        with caplog.at_level(logging.INFO, logger="bot.adapters.images"):
            huge = PHOTO + bytes(HUGE)
            telegram.push_message(dm, sarah, caption="big", document={**document, "data": huge})
            await telegram.wait_for_sent(1, chat_id=dm.id)
        await settled(bot, adapter, telegram)

    [request] = bot.reply_requests()
    assert image_parts(request) == [] and telegram.sent[0].text == REPLY
    assert "huge" in telegram.undeclared and telegram.calls_to("getFile")
    assert "more than 1048576 bytes, over the 1.0 MB limit" in caplog.text
    # What the server could write before the bot hung up: the limit and the sockets'
    # buffers, far from the whole file.
    [served] = telegram.served
    assert served < HUGE // 2, served


# --------------------------------------------------------------------------- Discord


@asynccontextmanager
async def on_discord(
    bot: Mnemo, **images: Any
) -> AsyncIterator[tuple[DiscordAdapter, FakeDiscord]]:
    settings = PlatformSettings(_env_file=None, **images)  # type: ignore[call-arg]
    adapter = DiscordAdapter(settings, learn_wait=10)
    adapter.bind(bot.app.adapter_services)
    async with FakeCDN() as cdn:
        yield adapter, FakeDiscord(adapter.client, tree=adapter.tree, cdn=cdn)


async def hear(bot: Mnemo, adapter: DiscordAdapter, message: discord.Message) -> None:
    await adapter.on_message(message)
    assert await bot.app.runtime.evaluations.join(None, 30)


async def test_discord_image_attachments_reach_the_model_within_the_limits(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Four images at most, each within 1 MB; a PDF is no image; the rest are left out with
    a log line and keep their titles."""
    pngs = {f"{name}.png": PNG + name.encode() for name in "abcde"}
    attachments = [(name, "image/png", len(data)) for name, data in pngs.items()]
    attachments += [("big.jpg", "image/jpeg", 2_000_000), ("notes.pdf", "application/pdf", 300)]
    files = {**pngs, "big.jpg": b"j" * 2_000_000, "notes.pdf": b"%PDF-1.7"}
    async with (
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_discord(bot, model_sees_images=True, max_images=4, max_image_mb=1) as (adapter, fake),
    ):
        sarah = fake.person("Sarah")
        with caplog.at_level(logging.INFO, logger="bot.adapters.images"):
            message = fake.message(sarah, "my designs", attachments=attachments, files=files)
            await hear(bot, adapter, message)
        stored = await bot.app.store.memories.recent(room_id("discord", message.channel.id), 5)
        kept = await everything_stored(bot.app)

    assert fake.http.texts == [REPLY]
    [request] = bot.reply_requests()
    assert image_parts(request) == [("image/png", pngs[f"{n}.png"]) for n in "abcd"]
    assert "Sarah: my designs [image: a.png]" in last_user_message(request)
    assert fake.cdn is not None
    assert sorted(url.rsplit("/", 1)[-1] for url in fake.cdn.downloads) == [
        "a.png",
        "b.png",
        "c.png",
        "d.png",
    ]
    assert "image e.png" in caplog.text and "over 4 images" in caplog.text
    assert "image big.jpg" in caplog.text and "over the 1.0 MB limit" in caplog.text
    titles = [a.title for a in stored[0].content.attachments]
    assert titles == ["a.png", "b.png", "c.png", "d.png", "e.png", "big.jpg", "notes.pdf"]
    assert "a-logo-in-png" not in kept


async def test_discord_with_the_setting_off_reads_no_attachment(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_discord(bot) as (adapter, fake),
    ):
        sarah = fake.person("Sarah")
        message = fake.message(
            sarah, "", attachments=[("a.png", "image/png", len(PNG))], files={"a.png": PNG}
        )
        await hear(bot, adapter, message)

    [request] = bot.reply_requests()
    assert image_parts(request) == [] and fake.cdn is not None and fake.cdn.downloads == []
    assert "Sarah: [image: a.png]" in last_user_message(request)


async def test_a_discord_file_larger_than_declared_is_read_only_as_far_as_the_limit(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The same on Discord: whatever size the attachment declares, its download is given up
    at the limit."""
    async with (
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_discord(bot, model_sees_images=True, max_image_mb=1) as (adapter, fake),
    ):
        sarah = fake.person("Sarah")
        attachments = [("huge.jpg", "image/jpeg", 500_000)]
        files = {"huge.jpg": PHOTO + bytes(HUGE)}
        with caplog.at_level(logging.INFO, logger="bot.adapters.images"):
            await hear(
                bot, adapter, fake.message(sarah, "big", attachments=attachments, files=files)
            )

    [request] = bot.reply_requests()
    assert image_parts(request) == [] and fake.http.texts == [REPLY]
    assert "more than 1048576 bytes, over the 1.0 MB limit" in caplog.text
    assert fake.cdn is not None
    [served] = fake.cdn.served
    assert served < HUGE // 2, served


# --------------------------------------------------------------------------- the console


@pytest.mark.parametrize("sees_images", [True, False], ids=["sees-images", "setting-off"])
async def test_the_console_sends_a_picture_with_image(
    tmp_path: Path, model_dir: Path, mongo_uri: str, sees_images: bool
) -> None:
    picture = tmp_path / "my garden.png"
    picture.write_bytes(PNG)
    script = f'/image "{picture}" my garden in May\n/image {tmp_path / "nothing.png"}\n'
    limits = ImageLimits(count=4, max_bytes=MEGABYTE) if sees_images else None
    out = io.StringIO()
    async with mnemo(tmp_path, model_dir, mongo_uri) as bot:
        console = ConsoleChat(user_name="sam", stdin=io.StringIO(script), stdout=out, images=limits)
        await console.run(bot.app.adapter_services)
        stored = await bot.app.store.memories.recent(console.room.id, 5)

    [request] = bot.reply_requests()
    assert image_parts(request) == ([("image/png", PNG)] if sees_images else [])
    assert "User: my garden in May [image: my garden.png]" in last_user_message(request)
    assert f"No picture at {tmp_path / 'nothing.png'}." in out.getvalue()
    assert f"Mnemo: {REPLY}" in out.getvalue()
    # Stored: the caption and the file name; not the picture, nor where it is on this machine.
    said = stored[0]
    assert said.content.text == "my garden in May"
    assert [(a.title, a.content_type) for a in said.content.attachments] == [
        ("my garden.png", "image/png")
    ]
    assert str(tmp_path) not in said.model_dump_json()


async def test_an_image_that_cannot_be_downloaded_is_left_out_and_the_reply_still_comes(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    attachments = [("gone.png", "image/png", 400), ("here.png", "image/png", len(PNG))]
    async with (
        mnemo(tmp_path, model_dir, mongo_uri) as bot,
        on_discord(bot, model_sees_images=True) as (adapter, fake),
    ):
        sarah = fake.person("Sarah")
        message = fake.message(sarah, "two", attachments=attachments, files={"here.png": PNG})
        with caplog.at_level(logging.WARNING, logger="bot.adapters.images"):
            await hear(bot, adapter, message)

    assert fake.http.texts == [REPLY]
    [request] = bot.reply_requests()
    assert image_parts(request) == [("image/png", PNG)]
    assert "image gone.png" in caplog.text and "the download failed (HTTP 404)" in caplog.text

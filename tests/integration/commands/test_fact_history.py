"""`/facts history [person]`: how what Mnemo knows about someone changed, a subcommand of the
core's `/facts` on every surface (the console and Telegram type it, Discord picks it as the
search text). Full app, offline model, bundled MongoDB, Chroma and the ONNX embedder."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from bot.adapters.discord import REFUSED, DiscordAdapter
from bot.adapters.telegram import TelegramAdapter
from bot.commands.command_set import Commands, Request
from bot.config.settings import PlatformSettings
from bot.testing.harness import TestChat, open_test_app
from plugins.facts import plugin
from tests.fakes.discord_fakes import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

NOTHING_YET = "I haven't learned anything about you here."


async def learn_each(chat: TestChat, *texts: str) -> None:
    for text in texts:
        said = chat.message(text)
        await chat.send(said)
        await chat.settle()
        assert await chat.runtime.flush_room(said, timeout=60)


async def test_history_shows_each_change_in_order_and_only_admins_see_others(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        group = {"chat": "club", "world": "club", "kind": "group"}
        sarah = TestChat(app.runtime, name="Sarah", **group)
        tom = TestChat(app.runtime, name="Tom", **group)
        await learn_each(sarah, "I live in Seattle.", "I work at the bakery.")
        await learn_each(sarah, "I moved to Berlin.", "I no longer work at the bakery.")
        await learn_each(tom, "I live in York.")
        commands = Commands(app.commands)

        async def run(chat: TestChat, args: str, *, admin: bool) -> str:
            request = Request(
                platform="test",
                account_id=chat.account.id,
                world_id=chat.room.world_id,
                room_id=chat.room.id,
                is_admin=admin,
                args=args,
            )
            return (await commands.run("facts", request)).text

        own = await run(sarah, "history", admin=False)
        other = await run(tom, "history Sarah", admin=False)
        listing = await run(tom, "", admin=False)
        as_admin = await run(tom, "History sarah", admin=True)
        paged = await run(tom, "history sarah 1", admin=True)  # Discord adds a page
        nobody = await run(tom, "history Zed", admin=True)

    lines = own.splitlines()[1:]
    assert lines[0].startswith("• Sarah lives in Seattle (until ")
    assert lines[0].endswith(") → Sarah lives in Berlin")
    assert "Sarah works at the bakery (until " in lines[1] and "no longer true" in lines[1]
    assert "York" not in own
    assert other.startswith("Only admins")
    assert listing == "Sorry, /facts is only for admins."  # the listing stays admins'
    assert as_admin.splitlines()[1:] == lines == paged.splitlines()[1:]
    assert nobody == "I know nothing about Zed here."


async def test_history_is_a_facts_subcommand_on_telegram_and_discord(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with (
        open_test_app(
            tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
        ) as app,
        FakeTelegramServer() as telegram,
    ):
        adapter = TelegramAdapter(
            PlatformSettings(_env_file=None, telegram_token=SecretStr(telegram.token)),
            base_url=telegram.base_url,
            poll_timeout=1,
        )
        await adapter.start(app.adapter_services)
        try:
            sarah = telegram.user("Sarah")
            dm = telegram.private_chat(sarah)
            telegram.push_message(dm, sarah, "/facts history")
            telegram.push_message(dm, sarah, "/facts")
            history, refused = await telegram.wait_for_sent(2, chat_id=dm.id)
        finally:
            await adapter.stop()

        discord_adapter = DiscordAdapter(PlatformSettings(_env_file=None))
        discord_adapter.bind(app.adapter_services)
        fake = FakeDiscord(discord_adapter.client, tree=discord_adapter.tree)
        tom = fake.person("Tom")
        facts = discord_adapter.tree.get_command("facts")
        assert facts is not None
        await facts.callback(own := fake.interaction(tom), search="history")  # type: ignore[call-arg]
        await facts.callback(listing := fake.interaction(tom))  # type: ignore[call-arg]

    assert history.text == NOTHING_YET
    assert refused.text == "Sorry, /facts is only for admins."
    assert own.text == NOTHING_YET
    assert listing.text == REFUSED

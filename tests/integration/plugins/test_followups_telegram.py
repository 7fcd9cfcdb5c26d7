"""A follow-up on Telegram: said in a group on a Wednesday, asked in that group on Saturday
morning, once, through python-telegram-bot against the local fake of the Bot API."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import SecretStr

from bot import Context, Evaluator, Plugin
from bot.adapters.telegram import TelegramAdapter
from bot.config.settings import PlatformSettings
from bot.domain.records import room_id
from bot.testing.harness import open_test_app
from plugins.followups import make_plugin
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.followups import Clock, at


async def test_a_follow_up_is_asked_in_the_telegram_group_it_was_mentioned_in(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    clock = Clock()
    async with (
        FakeTelegramServer() as server,
        open_test_app(
            tmp_path, plugins=[make_plugin(clock=clock)], mongodb_uri=mongo_uri, model_dir=model_dir
        ) as app,
    ):
        sarah, boss = server.user("Sarah", username="sarah"), server.user("Boss")
        group, other = server.group("Study group"), server.group("Chess club")
        adapter = TelegramAdapter(
            PlatformSettings(
                _env_file=None,
                telegram_token=SecretStr(server.token),
                telegram_webhook_url=None,
                admin_ids=[str(boss.id)],
            ),
            base_url=server.base_url,
            poll_timeout=1,
        )
        await adapter.start(app.adapter_services)
        try:
            server.push_message(group, boss, "/followups on")
            [switched_on] = await server.wait_for_sent(1, chat_id=group.id)
            # Overheard, not addressed to the bot: still followed up.
            server.push_message(group, sarah, "My exam is on Friday, so no chess this week")
            server.push_message(other, sarah, "My exam is on Friday")  # follow-ups off there
            await server.drained()
            await adapter.wait_idle()
            for chat in (group, other):
                assert await app.runtime.evaluations.join(room_id("telegram", chat.id), 30)
            before = len(server.sent)
            clock.ms = at(2026, 11, 28, 10, 0)
            await app.runtime.plugins.run_tasks()
            await app.runtime.plugins.run_tasks()
            asked = server.sent[before:]
        finally:
            await adapter.stop()
    assert switched_on.text.startswith("Follow-ups are on here (UTC)")
    [question] = asked
    assert question.chat_id == group.id
    assert "Sarah" in question.text and "exam" in question.text


async def learn_told_name(ctx: Context, found: object) -> None:
    """What the facts plugin does with "my name is ...": the name is the person's here."""
    told = re.search(r"\bmy name is (\w+)", ctx.message.content.text, re.I)
    if told is not None:
        await ctx.memory.learn_name(ctx.message.user_id, told.group(1))


NAMES = Plugin(
    "names",
    evaluators=[Evaluator("TOLD_NAME", "learns told names", learn_told_name, always_run=True)],
)


async def test_the_follow_up_calls_the_person_by_the_name_they_told_not_the_account(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    clock = Clock()
    plugins = [make_plugin(clock=clock), NAMES]
    async with (
        FakeTelegramServer() as server,
        open_test_app(tmp_path, plugins=plugins, mongodb_uri=mongo_uri, model_dir=model_dir) as app,
    ):
        # The account's name is not what she goes by.
        sarah, boss = server.user("User", username="u_4471"), server.user("Boss")
        dm = server.private_chat(sarah)
        adapter = TelegramAdapter(
            PlatformSettings(
                _env_file=None,
                telegram_token=SecretStr(server.token),
                telegram_webhook_url=None,
                admin_ids=[str(sarah.id), str(boss.id)],
            ),
            base_url=server.base_url,
            poll_timeout=1,
        )
        await adapter.start(app.adapter_services)
        try:
            server.push_message(dm, sarah, "/followups on")
            await server.wait_for_sent(1, chat_id=dm.id)
            # The name is told in the very message the follow-up is planned from.
            server.push_message(dm, sarah, "Hi, my name is Sarah. My exam is on Friday!")
            await server.wait_for_sent(2, chat_id=dm.id)
            await server.drained()
            await adapter.wait_idle()
            assert await app.runtime.evaluations.join(room_id("telegram", dm.id), 30)
            before = len(server.sent)
            clock.ms = at(2026, 11, 28, 10, 0)
            await app.runtime.plugins.run_tasks()
            asked = server.sent[before:]
        finally:
            await adapter.stop()
    [question] = asked
    assert "Sarah" in question.text and "exam" in question.text
    assert "User" not in question.text

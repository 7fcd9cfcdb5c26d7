"""`/me` lists the person's own goals and the follow-ups planned for them, as the goals and
follow-ups plugins contribute them through their `about` hook (no command names a plugin): a
member sees their goals without `/goals`, which is for admins. Through python-telegram-bot and
discord.py against the local fakes, and the console."""

from __future__ import annotations

import io
import os
from pathlib import Path

from bot.adapters.console import ConsoleChat
from bot.adapters.discord import world_of
from bot.app.composition import App
from bot.domain.records import account_id, room_id, world_id
from bot.testing.harness import open_test_app
from plugins.followups import make_plugin
from plugins.goals import Goal, GoalStore
from plugins.goals import plugin as GOALS
from plugins.goals.commands import add_goal
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.discord_bot import mnemo_on_discord
from tests.helpers.telegram_bot import OpenBot, open_bot, server  # noqa: F401 (fixtures)


async def set_goal(
    app: App, person: str, room: str, world: str, name: str, steps: list[str]
) -> Goal:
    """A goal as the goals plugin keeps one (CREATE_GOAL, a stated goal, /goal)."""
    goals = GoalStore.of(app.runtime.plugins.plugin_context(GOALS).collections)
    return await add_goal(
        goals, world_id=world, room_id=room, name=name, objectives=steps, owner_id=person
    )


async def test_on_telegram_a_member_sees_their_goals_and_planned_follow_ups_in_me(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah, tom, boss = server.user("Sarah"), server.user("Tom"), server.user("Boss")
    group = server.group("Study group")
    world = world_id("telegram", group.id)
    room = room_id("telegram", group.id)
    plugins = [GOALS, make_plugin()]
    async with open_bot(plugins=plugins, admin_ids=[str(boss.id)]) as bot:
        await bot.said(group, boss, "/followups on")
        server.push_message(group, sarah, "My exam is on Friday, so no chess this week")
        await bot.settle(group)
        await set_goal(
            bot.app,
            account_id("telegram", sarah.id),
            room,
            world,
            "Run a marathon",
            ["buy shoes", "run 10 km"],
        )
        await set_goal(bot.app, account_id("telegram", tom.id), room, world, "Learn Go", [])
        mine = await bot.said(group, sarah, "/me")
        toms = await bot.said(group, tom, "/me")
        refused = await bot.said(group, sarah, "/goals")
    assert "Your goals here (1):" in mine.text
    assert "• Run a marathon (in progress, 0 of 2 steps done; next: buy shoes)" in mine.text
    assert "Follow-ups planned (1):" in mine.text and "I'll ask how your exam went" in mine.text
    assert "Learn Go" not in mine.text
    assert "• Learn Go (in progress)" in toms.text and "marathon" not in toms.text
    assert "exam" not in toms.text
    assert refused.text == "Sorry, /goals is only for admins."  # everyone's goals: admins'


async def test_on_discord_me_lists_the_members_goals(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri, plugins=[GOALS]) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        sarah = fake.person("Sarah")
        channel = fake.channel(guild).id
        world = world_of(guild.id, channel)
        goal = await set_goal(
            bot.app,
            account_id("discord", sarah.id),
            room_id("discord", channel),
            world,
            "Read 20 books",
            ["Piranesi", "Dune"],
        )
        goal.objectives[0].completed = True
        await GoalStore.of(bot.app.runtime.plugins.plugin_context(GOALS).collections).replace(goal)
        shown = await bot.run("me", fake.interaction(sarah, guild=guild))
        in_dm = await bot.run("me", fake.interaction(sarah))
    assert "• Read 20 books (in progress, 1 of 2 steps done; next: Dune)" in shown
    assert "Read 20 books" not in in_dm  # another world's


async def test_in_the_console_me_lists_goals(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    read, write = os.pipe()
    out = io.StringIO()
    async with open_test_app(
        tmp_path, plugins=[GOALS], model_dir=model_dir, mongodb_uri=mongo_uri
    ) as app:
        console = ConsoleChat(user_name="sam", stdin=os.fdopen(read), stdout=out)
        await console.start(app.adapter_services)
        try:
            goal = await set_goal(
                app, console.account.id, console.room.id, console.room.world_id, "Keep bees", []
            )
            goal.status = "DONE"
            await GoalStore.of(app.runtime.plugins.plugin_context(GOALS).collections).replace(goal)
            assert await console.command("/me")
        finally:
            os.close(write)
            await console.stop()
    shown = out.getvalue()
    assert "I haven't learned any facts about you here yet." in shown
    assert "Your goals here (1):\n• Keep bees (done)" in shown

"""Consent and /privacy on every surface: Discord (discord.py's own objects, slash command
callbacks), Telegram (python-telegram-bot against the fake Bot API) and the console (`mnemo
chat` as a process), each with a real runtime and real stores."""

from __future__ import annotations

from pathlib import Path

from bot.adapters.discord import REFUSED, world_of
from bot.domain.records import room_id, world_id
from bot.privacy.policy import OPTED_OUT_NOTICE
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.discord_bot import mnemo_on_discord
from tests.helpers.processes import mnemo
from tests.helpers.telegram_bot import OpenBot, open_bot, server  # noqa: F401 - pytest fixtures


async def test_on_discord_only_admins_turn_learning_off_and_then_nothing_is_kept(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        tom, boss = fake.person("Tom"), fake.person("Boss")
        refused = await bot.run("learning", fake.interaction(tom, guild=guild), args="off")
        await bot.hear(fake.message(tom, "I keep bees", guild=guild))
        done = await bot.run(
            "learning", fake.interaction(boss, guild=guild, manage_server=True), args="off"
        )
        await bot.hear(fake.message(tom, "my PIN is 7781", guild=guild))
        await bot.hear(fake.message(tom, f"{fake.mention(fake.bot)} what's up?", guild=guild))
        channel = room_id("discord", fake.channel(guild).id)
        stored = await bot.app.store.memories.recent(channel, 10)
        privacy = await bot.run("privacy", fake.interaction(tom, guild=guild))

    assert refused == REFUSED
    assert done.startswith("Learning is off in this chat")
    assert [m.content.text for m in stored] == ["I keep bees"]
    assert fake.http.texts == ["Hello there!"]  # still answered when addressed, not kept
    assert "learning is off in this chat" in privacy
    assert stored[0].world_id == world_of(guild.id, fake.channel(guild).id)


async def test_on_discord_an_opted_out_member_is_told_once_and_kept_nowhere(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        tom = fake.person("Tom")
        answer = await bot.run("optout", fake.interaction(tom, guild=guild))
        await bot.hear(fake.message(tom, "my flat is number 12", guild=guild))
        await bot.hear(fake.message(tom, "and the door code is 4444", guild=guild))
        channel = room_id("discord", fake.channel(guild).id)
        stored = await bot.app.store.memories.recent(channel, 10)

    assert answer.startswith("Done: from now on I keep nothing you say here")
    assert fake.http.texts == [OPTED_OUT_NOTICE]
    assert stored == []


async def test_on_telegram_only_admins_turn_learning_off_and_opting_out_is_told_once(
    open_bot: OpenBot,  # noqa: F811 - the fixture imported above
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah, boss = server.user("Sarah", username="sarah"), server.user("Boss")
    group = server.group("Book club")
    async with open_bot(admin_ids=[f"telegram:{boss.id}"]) as bot:
        refused = await bot.said(group, sarah, "/learning off")
        done = await bot.said(group, boss, "/learning off")
        server.push_message(group, sarah, "my passport number is X123")
        await bot.settle(group)
        in_group = await bot.app.store.memories.count_in_world(world_id("telegram", group.id))

        dm = server.private_chat(sarah)
        opted = await bot.said(dm, sarah, "/optout")
        before = len([m for m in server.sent if m.chat_id == dm.id])
        server.push_message(dm, sarah, "my cat is called Mochi")
        server.push_message(dm, sarah, "she is four")
        [notice, first, second] = (await server.wait_for_sent(before + 3, chat_id=dm.id))[-3:]
        await bot.settle(dm)
        in_dm = await bot.app.store.memories.count_in_world(world_id("telegram", dm.id))

    assert refused.text == "Sorry, /learning is only for admins."
    assert done.text.startswith("Learning is off in this chat")
    assert in_group == 0
    assert opted.text.startswith("Done: from now on I keep nothing you say here")
    assert notice.text == OPTED_OUT_NOTICE
    assert (first.text, second.text) == (
        "You said: my cat is called Mochi",
        "You said: she is four",
    )
    assert in_dm == 0


def test_in_the_console_privacy_shows_the_operators_file_and_stats_the_retention(
    tmp_path: Path, model_dir: Path
) -> None:
    policy = tmp_path / "privacy.md"
    policy.write_text("Our policy: we keep chat logs for 30 days. Ask privacy@example.org.\n")
    script = "/privacy\n/optout\nMy locker code is zanzibar.\n/stats\n/optin\n/quit\n"
    result = mnemo(
        ["chat"],
        script,
        tmp_path,
        model_dir,
        MNEMO_PRIVACY_FILE=str(policy),
        MNEMO_RETENTION_DAYS="30",
    )
    assert result.returncode == 0, result.stderr
    assert "Our policy: we keep chat logs for 30 days. Ask privacy@example.org." in result.stdout
    assert OPTED_OUT_NOTICE in result.stdout
    assert "Messages: 0 (kept 30 days)" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_missing_privacy_file_stops_start_up_with_one_line(
    tmp_path: Path, model_dir: Path
) -> None:
    missing = tmp_path / "nowhere" / "privacy.md"
    result = mnemo(["chat"], "", tmp_path, model_dir, MNEMO_PRIVACY_FILE=str(missing))
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "MNEMO_PRIVACY_FILE" in line and "no such file" in line and str(missing) in line

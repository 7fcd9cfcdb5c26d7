"""The Discord adapter against a real Mnemo (MongoDB wire protocol, Chroma, the ONNX embedder)
with a scripted model. Discord objects are discord.py's own, parsed from gateway payloads;
slash commands run through their callbacks; start-up runs against a loopback Discord."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import discord
import pytest

from bot import Claim, Context, Evaluator, Plugin
from bot.adapters.discord import (
    FORGET_ME_CANCELLED,
    FORGET_ME_EXPIRED,
    INTENT_MISSING,
    REFUSED,
    TOKEN_REJECTED,
    DiscordAdapter,
    to_memory,
    world_of,
)
from bot.app.platforms import PlatformError, PlatformStartupError
from bot.config.settings import PlatformSettings
from bot.domain.records import Content, Memory, Room, account_id, message_id, room_id
from bot.domain.state import State
from bot.llm.base import Task
from bot.runtime.agent import RATE_LIMITED_REPLY
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.goals import GoalStore
from plugins.goals import plugin as GOALS
from tests.fakes.discord_fakes import (
    FakeDiscord,
    FakeDiscordServer,
    FakeInteraction,
    Person,
    pointed_at,
)
from tests.helpers.discord_bot import HELLO, mnemo_on_discord, replying, settings


# --------------------------------------------------------------------------- messages
async def test_a_direct_message_is_answered_while_typing_is_shown(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        sarah = bot.discord.person("Sarah")
        await bot.hear(bot.discord.message(sarah, "hi, I just moved to Seattle"))
        dm = bot.discord.dm_channel_id(sarah)
        stored = await bot.app.store.memories.recent(room_id("discord", dm), 10)
        room = await bot.app.store.rooms.get(room_id("discord", dm))
        accounts = await bot.app.store.accounts.get_many([account_id("discord", sarah.id)])
    assert bot.discord.http.texts == ["Hello there!"]
    assert bot.discord.http.sent[0].channel_id == dm
    assert bot.discord.http.sent[0].reply_to is None  # a DM needs no reply arrow
    assert bot.discord.http.typing == [dm]
    assert [m.content.text for m in stored] == ["hi, I just moved to Seattle", "Hello there!"]
    assert room is not None and room.kind == "dm"
    assert accounts[account_id("discord", sarah.id)].name == "Sarah"


async def test_a_server_message_nobody_addressed_to_the_bot_is_kept_but_not_answered(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        guild = bot.discord.guild("Book Club")
        tom = bot.discord.person("Tom")
        await bot.hear(bot.discord.message(tom, "anyone read Piranesi?", guild=guild))
        channel = bot.discord.channel(guild)
        stored = await bot.app.store.memories.recent(room_id("discord", channel.id), 10)
    assert bot.discord.http.sent == [] and bot.discord.http.typing == []
    assert bot.model.calls == []
    assert [m.content.text for m in stored] == ["anyone read Piranesi?"]
    assert stored[0].world_id == world_of(guild.id, channel.id)


async def test_a_mention_a_role_mention_a_reply_and_the_name_are_each_answered(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        tom = fake.person("Tom")
        earlier = fake.message(fake.bot, "What are you reading?", guild=guild)
        addressed = [
            fake.message(tom, f"{fake.mention(fake.bot)} recommend a book", guild=guild),
            fake.message(tom, f"{fake.mention(fake.bot_role(guild))} hello?", guild=guild),
            fake.message(tom, "Piranesi, again", guild=guild, reply_to=earlier),
            fake.message(tom, "what do you think, mnemo?", guild=guild),
        ]
        for message in addressed:
            await bot.hear(message)
        channel = fake.channel(guild).id
        stored = await bot.app.store.memories.get_many(
            [message_id("discord", channel, m.id) for m in addressed]
        )
    assert [(m.mentions_agent, m.replies_to_agent) for m in stored] == [
        (True, False),
        (True, False),  # the role Discord made for the bot stands for the bot
        (False, True),
        (False, False),  # named: the runtime's own check
    ]
    assert bot.discord.http.texts == ["Hello there!"] * 4
    # In a server each answer is a Discord reply to the message it answers.
    assert [s.reply_to for s in bot.discord.http.sent] == [m.id for m in addressed]
    assert all(s.payload["allowed_mentions"]["parse"] == [] for s in bot.discord.http.sent), (
        "the model's text must never ping anyone"
    )


async def test_a_person_mentioned_in_a_message_is_known_by_name_through_the_runtime(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        tom, ana = fake.person("Tom"), fake.person("Ana")
        await bot.hear(fake.message(tom, f"{fake.mention(ana)} lent me Piranesi", guild=guild))
        await bot.hear(fake.message(tom, f"{fake.mention(ana)} says hi", guild=guild))
        known = await bot.app.store.accounts.get_many([account_id("discord", ana.id)])
    # Ana never wrote, yet prompts and /facts can name her.
    assert known[account_id("discord", ana.id)].name == "Ana"


async def test_its_own_other_bots_webhooks_system_and_empty_messages_are_ignored(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        tom, helper = fake.person("Tom"), fake.person("Helper", bot=True)
        hello = f"{fake.mention(fake.bot)} hello"
        ignored = [
            fake.message(fake.bot, "I said this myself, Mnemo", guild=guild),
            fake.message(helper, hello, guild=guild),
            fake.message(tom, hello, guild=guild, webhook=True),
            fake.message(tom, "", guild=guild, kind=7),  # "Tom joined the server"
            fake.message(tom, hello, guild=guild, kind=6),  # "Tom pinned a message"
            fake.message(tom, "   ", guild=guild),
        ]
        for message in ignored:
            await bot.hear(message)
        channel = room_id("discord", fake.channel(guild).id)
        stored = await bot.app.store.memories.count_in_room(channel)
    assert stored == 0
    assert bot.discord.http.sent == [] and bot.model.calls == []


async def test_a_5000_character_reply_arrives_in_3_parts_with_its_code_block_whole(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    code = "```python\n" + "".join(f"print('line {i}')\n" for i in range(60)) + "```"
    prose = "This is a sentence about books. " * 62
    reply = f"{prose}\n\n{code}\n\n{prose}".strip()
    assert 4900 <= len(reply) <= 5100
    model = ScriptedModel(answers={Task.REPLY: [reply]})
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri, model=model) as bot:
        await bot.hear(bot.discord.message(bot.discord.person("Sarah"), "tell me everything"))
    parts = bot.discord.http.texts
    assert len(parts) == 3
    assert all(len(p) <= 2000 for p in parts)
    assert sum(code in p for p in parts) == 1  # the code block is in one part, intact
    assert all(p.count("```") % 2 == 0 for p in parts)
    assert "".join(parts).replace(" ", "").replace("\n", "") == reply.replace(" ", "").replace(
        "\n", ""
    )


async def test_a_channel_the_bot_may_not_write_in_costs_a_warning_not_the_bot(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club", channels=("announcements", "general"))
        tom = fake.person("Tom")
        fake.http.fail_sends_with = 403
        await bot.hear(fake.message(tom, "hi mnemo", guild=guild, channel="announcements"))
        fake.http.fail_sends_with = None
        await bot.hear(fake.message(tom, "hi mnemo", guild=guild))
        kept = await bot.app.store.memories.count_in_room(
            room_id("discord", fake.channel(guild, "announcements").id)
        )
    assert "cannot send to #announcements" in caplog.text and "HTTP 403" in caplog.text
    assert kept >= 1  # what Tom said is still remembered
    assert fake.http.texts == ["Hello there!"]  # and the next channel is answered


async def test_a_user_over_the_rate_limit_gets_a_polite_answer_without_a_model_call(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri, rate_limit=1) as bot:
        sarah = bot.discord.person("Sarah")
        await bot.hear(bot.discord.message(sarah, "first"))
        await bot.hear(bot.discord.message(sarah, "second"))
    assert bot.discord.http.texts == ["Hello there!", RATE_LIMITED_REPLY]
    assert len(bot.model.calls_for(Task.REPLY)) == 1


async def test_a_channel_keeps_its_order_while_another_channel_goes_ahead(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    release = asyncio.Event()

    async def respond(prompt: str, task: str, state: State | None) -> str:
        assert state is not None
        text = state.message.content.text
        if text.startswith("slow"):
            await release.wait()
        return f'{{"text": "re: {text}", "action": "NONE"}}'

    model = ScriptedModel(respond)
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri, model=model) as bot:
        fake = bot.discord
        sarah, tom = fake.person("Sarah"), fake.person("Tom")
        # discord.py runs each event as its own task, in arrival order.
        first = asyncio.create_task(bot.adapter.on_message(fake.message(sarah, "slow one")))
        second = asyncio.create_task(bot.adapter.on_message(fake.message(sarah, "quick two")))
        other = asyncio.create_task(bot.adapter.on_message(fake.message(tom, "other channel")))
        await asyncio.wait_for(other, 10)
        assert fake.http.texts == ["re: other channel"]  # not stuck behind Sarah's channel
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)
        await bot.app.runtime.evaluations.join(None, 30)
    assert fake.http.texts == ["re: other channel", "re: slow one", "re: quick two"]
    assert len(bot.adapter.lanes) == 0  # idle channels keep nothing


async def test_stopping_finishes_the_answer_in_progress_and_takes_no_new_messages(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    thinking, release = asyncio.Event(), asyncio.Event()

    async def respond(prompt: str, task: str, state: State | None) -> str:
        thinking.set()
        await release.wait()
        return HELLO

    async with mnemo_on_discord(
        tmp_path, model_dir, mongo_uri, model=ScriptedModel(respond)
    ) as bot:
        sarah = bot.discord.person("Sarah")
        answering = asyncio.create_task(bot.adapter.on_message(bot.discord.message(sarah, "hi")))
        await asyncio.wait_for(thinking.wait(), 10)
        stopping = asyncio.create_task(bot.adapter.stop())
        await asyncio.sleep(0.05)
        await bot.adapter.on_message(bot.discord.message(sarah, "are you there?"))
        assert not stopping.done()  # waits for the answer in progress
        release.set()
        await asyncio.wait_for(asyncio.gather(answering, stopping), 10)
        stored = await bot.app.store.memories.count_in_room(
            room_id("discord", bot.discord.dm_channel_id(sarah))
        )
    assert bot.discord.http.texts == ["Hello there!"]
    assert stored == 2  # "hi" and the answer; nothing taken after stop()
    assert bot.adapter.client.is_closed()


async def test_a_message_becomes_a_memory_with_its_world_mentions_reply_and_attachments() -> None:
    adapter = DiscordAdapter(settings())
    fake = FakeDiscord(adapter.client, tree=adapter.tree)
    guild = fake.guild("Book Club", threads=[("general", "spoilers")])
    tom, ana = fake.person("Tom"), fake.person("Ana")
    earlier = fake.message(ana, "the ending!", guild=guild, channel="spoilers")
    message = fake.message(
        tom,
        f"{fake.mention(ana)} agreed, see photo",
        guild=guild,
        channel="spoilers",
        reply_to=earlier,
        attachments=[("page.png", "image/png", 2048)],
    )
    incoming = to_memory(message, fake.client.user, agent_id="agent")  # type: ignore[arg-type]
    assert incoming is not None
    memory, thread = incoming.memory, fake.channel(guild, "spoilers")
    # A thread is its own room in its guild's world.
    assert memory.room_id == room_id("discord", thread.id)
    assert memory.world_id == world_of(guild.id, 0) == incoming.room.world_id
    assert incoming.room.kind == "group"
    assert memory.content.text == "@Ana agreed, see photo"
    assert memory.mentions == [account_id("discord", ana.id)]
    assert [a.name for a in incoming.mentioned] == ["Ana"]
    assert not memory.mentions_agent and not memory.replies_to_agent  # replied to Ana
    assert memory.content.in_reply_to is not None
    [attachment] = memory.content.attachments
    assert (attachment.title, attachment.content_type, attachment.size) == (
        "page.png",
        "image/png",
        2048,
    )
    assert attachment.url and attachment.url.endswith("page.png")
    assert memory.created_at == message.created_at
    # A DM is its own world, separate from every server.
    dm = to_memory(fake.message(tom, "hi"), fake.client.user, agent_id="agent")  # type: ignore[arg-type]
    assert dm is not None and dm.room.kind == "dm" and dm.memory.world_id != memory.world_id


# --------------------------------------------------------------------------- /me, /forgetme
async def test_me_shows_only_what_was_learned_about_the_caller_in_this_server(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild, other_guild = fake.guild("Book Club"), fake.guild("Chess")
        sarah, tom = fake.person("Sarah"), fake.person("Tom")
        await bot.learn(sarah, "Sarah lives in Seattle", guild=guild)
        await bot.learn(sarah, "Sarah is learning the Sicilian defence", guild=other_guild)
        await bot.learn(tom, "Tom loves Piranesi", guild=guild)
        shown = await bot.run("me", fake.interaction(sarah, guild=guild))
        in_dm = await bot.run("me", fake.interaction(sarah))
    assert "Sarah lives in Seattle" in shown
    assert "Sicilian" not in shown and "Piranesi" not in shown
    assert "haven't learned anything" in in_dm


async def test_me_includes_what_was_said_just_before_it(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async def remember(ctx: Context, found: object) -> None:
        await asyncio.sleep(0.5)  # learning takes a moment; /me must wait for it
        said = ctx.message.content.text
        claim = Claim(f"said {said}", ctx.message.user_id, said, message_id=ctx.message.id)
        await ctx.memory.propose([claim], messages=[ctx.message])

    plugin = Plugin("remember", evaluators=[Evaluator("REMEMBER", "keeps it", handler=remember)])
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri, plugins=[plugin]) as bot:
        sarah = bot.discord.person("Sarah")
        await bot.adapter.on_message(bot.discord.message(sarah, "I adopted a cat called Miso"))
        shown = await bot.run("me", interaction := bot.discord.interaction(sarah))
    assert interaction.shown[0].kind == "defer"  # acknowledged within Discord's 3 seconds
    assert "said I adopted a cat called Miso" in shown


async def test_forgetme_after_confirming_deletes_from_mongodb_and_chroma(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        sarah, tom = fake.person("Sarah"), fake.person("Tom")
        await bot.hear(fake.message(sarah, "hello everyone", guild=guild))
        mine = await bot.learn(
            sarah, "Sarah lives in Seattle", guild=guild, said="I live in Seattle"
        )
        theirs = await bot.learn(tom, "Tom loves Piranesi", guild=guild, said="I love Piranesi")

        asked = fake.interaction(sarah, guild=guild)
        await bot.run("forgetme", asked)
        assert "cannot be undone" in asked.text
        # Nothing is deleted before the button is pressed, and only Sarah may press it.
        assert await bot.app.store.facts.get_many([mine.id])
        assert not await asked.view.interaction_check(fake.interaction(tom, guild=guild))  # type: ignore[union-attr]
        await asked.button("Forget me").callback(press := fake.interaction(sarah, guild=guild))

        facts = await bot.app.store.facts.get_many([mine.id, theirs.id])
        vectors = await bot.app.knowledge.vectors.existing_ids("facts", [mine.id, theirs.id])
        channel = room_id("discord", fake.channel(guild).id)
        messages = await bot.app.store.memories.recent(channel, 10)
    assert "forgot 1 fact about you" in press.text
    assert [f.id for f in facts] == [theirs.id]
    assert vectors == {theirs.id}
    assert [m.content.text for m in messages] == ["I love Piranesi"]  # Tom's stays


async def test_export_is_a_file_only_the_asker_sees(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        sarah, tom = fake.person("Sarah"), fake.person("Tom")
        await bot.hear(fake.message(tom, "I keep bees", guild=guild))
        await bot.learn(sarah, "Sarah lives in Seattle", guild=guild, said="I live in Seattle")
        text = await bot.run("export", asked := fake.interaction(sarah, guild=guild))
        await bot.run("mydata", again := fake.interaction(sarah, guild=guild))

    assert asked.shown[0].kind == "defer"  # acknowledged within Discord's 3 seconds
    [(filename, data)] = [s.file for s in asked.shown if s.file is not None]
    exported = json.loads(data)
    assert filename.endswith(".json") and "Everything I keep about you here" in text
    assert [m["text"] for m in exported["messages"]] == ["I live in Seattle"]
    assert [f["text"] for f in exported["facts"]] == ["Sarah lives in Seattle"]
    assert exported["account"]["id"] == account_id("discord", sarah.id)
    assert "bees" not in data.decode()
    assert [s.file for s in again.shown if s.file is not None]


async def test_forgetme_cancelled_or_unanswered_forgets_nothing(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        sarah = fake.person("Sarah")
        fact = await bot.learn(sarah, "Sarah lives in Seattle", guild=None)
        asked = fake.interaction(sarah)
        await bot.run("forgetme", asked)
        await asked.button("Cancel").callback(press := fake.interaction(sarah))
        unanswered = fake.interaction(sarah)
        await bot.run("forgetme", unanswered)
        await unanswered.view.on_timeout()  # type: ignore[union-attr]
        kept = await bot.app.store.facts.get_many([fact.id])
    assert press.text == FORGET_ME_CANCELLED
    assert unanswered.shown[-1].content == FORGET_ME_EXPIRED
    assert [f.id for f in kept] == [fact.id]


# --------------------------------------------------------------------------- admin commands
ADMIN_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("facts", {}),
    ("goals", {}),
    ("stats", {}),
    ("goal", {"args": "Read 12 books: pick a list; read one a month"}),
    ("forget", {"member": "Sarah"}),  # a whole person; one's own facts are anyone's to forget
]


@pytest.mark.parametrize("name,options", ADMIN_CALLS, ids=[c[0] for c in ADMIN_CALLS])
async def test_a_member_without_manage_server_is_refused_every_admin_command(
    tmp_path: Path, model_dir: Path, mongo_uri: str, name: str, options: dict[str, Any]
) -> None:
    async with mnemo_on_discord(
        tmp_path, model_dir, mongo_uri, admin_ids="discord:1", plugins=[GOALS]
    ) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        tom, sarah = fake.person("Tom"), fake.person("Sarah")
        await bot.learn(tom, "Tom loves Piranesi", guild=guild)
        await bot.learn(sarah, "Sarah lives in Seattle", guild=guild)
        if options.get("member") == "Sarah":
            options = {"member": fake.member(guild, sarah)}
        shown = await bot.run(name, fake.interaction(tom, guild=guild), **options)
        in_dm = await bot.run(name, fake.interaction(tom, manage_server=True), **options)
        facts_left = await bot.app.store.facts.page(world_of(guild.id, 0))
        store = GoalStore.of(bot.app.runtime.plugins.plugin_context(GOALS).collections)
        goals = await store.in_world(world_of(guild.id, 0))
    assert shown == REFUSED and in_dm == REFUSED
    assert "Piranesi" not in shown
    assert goals == []
    assert facts_left[1] == 2


async def test_a_member_forgets_their_own_fact_once_they_confirm_and_no_one_elses(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        sarah, tom = fake.person("Sarah"), fake.person("Tom")
        seattle = await bot.learn(sarah, "Sarah lives in Seattle", guild=guild)
        piranesi = await bot.learn(tom, "Tom loves Piranesi", guild=guild)

        async def tom_forgets(fact: str) -> str:
            return await bot.run("forget", fake.interaction(tom, guild=guild), fact=fact)

        someone_elses = await tom_forgets(f"{seattle.id[:8]} yes")
        asked = await tom_forgets(piranesi.id[:8])
        before_yes = await bot.app.store.facts.get_many([seattle.id, piranesi.id])
        forgot = await tom_forgets(f"{piranesi.id[:8]} yes")
        left = await bot.app.store.facts.get_many([seattle.id, piranesi.id])
    # Another person's fact is not his to forget, and he learns nothing of it.
    assert "No fact of yours" in someone_elses and "Seattle" not in someone_elses
    assert "Tom loves Piranesi" in asked and f"{piranesi.id[:8]} yes" in asked
    assert {f.id for f in before_yes} == {seattle.id, piranesi.id}
    assert "Forgot: Tom loves Piranesi" in forgot
    assert [f.id for f in left] == [seattle.id]


async def test_a_manage_server_member_can_list_search_and_forget_facts(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        mod, sarah, tom = fake.person("Mod"), fake.person("Sarah"), fake.person("Tom")
        seattle = await bot.learn(sarah, "Sarah lives in Seattle", guild=guild)
        await bot.learn(sarah, "Sarah is a nurse", guild=guild)
        await bot.learn(tom, "Tom loves Piranesi", guild=guild)

        def mod_uses() -> FakeInteraction:
            return fake.interaction(mod, guild=guild, manage_server=True)

        everything = await bot.run("facts", mod_uses())
        about_tom = await bot.run("facts", mod_uses(), member=fake.member(guild, tom))
        searched = await bot.run("facts", mod_uses(), search="nurse")
        past_end = await bot.run("facts", mod_uses(), page=5)
        asked_one = await bot.run("forget", mod_uses(), fact=seattle.id[:8])
        assert (await bot.app.store.facts.get_many([seattle.id])) != []  # not before "yes"
        forgot = await bot.run("forget", mod_uses(), fact=f"{seattle.id[:8]} yes")
        asked = await bot.run("forget", asking := mod_uses(), member=fake.member(guild, tom))
        # A whole person: nothing goes before the admin presses the button.
        assert "It cannot be undone" in asked and "Tom" in asked
        world = world_of(guild.id, fake.channel(guild).id)
        tom_id = account_id("discord", tom.id)
        assert (await bot.app.store.facts.page(world, subject_id=tom_id))[1] == 1
        await asking.button("Forget them").callback(pressed := mod_uses())
        forgot_tom = pressed.text
        left = await bot.run("facts", mod_uses())
    assert all(t in everything for t in ("Seattle", "nurse", "Piranesi"))
    assert "Piranesi" in about_tom and "Seattle" not in about_tom
    assert "nurse" in searched and "Seattle" not in searched
    assert "Seattle" not in past_end
    assert "Sarah lives in Seattle" in asked_one and "yes" in asked_one
    assert "Sarah lives in Seattle" in forgot
    assert "Forgot 1 fact about them" in forgot_tom
    assert "nurse" in left and "Seattle" not in left and "Piranesi" not in left


async def test_admins_add_and_list_goals_and_see_stats(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    # /goal and /goals are the goals plugin's: a plugin's command is a slash command too.
    async with mnemo_on_discord(
        tmp_path, model_dir, mongo_uri, admin_ids="discord:1", plugins=[GOALS]
    ) as bot:
        fake = bot.discord
        guild = fake.guild("Book Club")
        mod = fake.person("Mod")
        await bot.hear(fake.message(mod, "hello everyone", guild=guild))

        def mod_uses() -> FakeInteraction:
            return fake.interaction(mod, guild=guild, manage_server=True)

        added = await bot.run(
            "goal", mod_uses(), args="Read 12 books: pick a list; read one a month"
        )
        listed = await bot.run("goals", mod_uses())
        stats = await bot.run("stats", mod_uses())
    assert "Read 12 books [IN_PROGRESS] 0/2" in added
    assert "pick a list" in listed and "read one a month" in listed
    assert "Messages: 1" in stats and "Goals: 1" in stats


async def test_a_configured_admin_id_may_use_admin_commands_in_servers_and_dms(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    owner_id = 123456789012345678
    admins = f"telegram:42, discord:{owner_id}"
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri, admin_ids=admins) as bot:
        fake = bot.discord
        owner = fake.person("Owner", id=owner_id)
        guild = fake.guild("Book Club")
        sarah = fake.person("Sarah")
        await bot.learn(sarah, "Sarah lives in Seattle", guild=guild)
        await bot.learn(owner, "Owner drinks green tea", guild=None)
        in_guild = await bot.run("facts", fake.interaction(owner, guild=guild))
        in_dm = await bot.run("facts", fake.interaction(owner))
    assert "Seattle" in in_guild and "green tea" not in in_guild
    assert "green tea" in in_dm and "Seattle" not in in_dm


async def test_facts_learned_in_one_server_never_show_in_another(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        first = fake.guild("Book Club", channels=("general", "random"))
        second = fake.guild("Chess")
        mod, sarah = fake.person("Mod"), fake.person("Sarah")
        fact = await bot.learn(sarah, "Sarah lives in Seattle", guild=first)
        # Learned in #general, known in the whole server.
        in_first = await bot.run(
            "facts", fake.interaction(mod, guild=first, channel="random", manage_server=True)
        )
        in_second = await bot.run("facts", fake.interaction(mod, guild=second, manage_server=True))
        about = await bot.run(
            "facts",
            fake.interaction(mod, guild=second, manage_server=True),
            member=fake.member(second, sarah),
        )
        cross = await bot.run(
            "forget", fake.interaction(mod, guild=second, manage_server=True), fact=fact.id[:8]
        )
        still = await bot.app.store.facts.get_many([fact.id])
    assert "Seattle" in in_first
    assert "Seattle" not in in_second and "Seattle" not in about
    assert "No fact with id" in cross and still  # an admin of one server cannot reach another


# --------------------------------------------------------------------------- start-up
def server_settings(server: FakeDiscordServer, token: str, **options: Any) -> PlatformSettings:
    return settings(token=token, **options)


async def test_a_rejected_token_stops_start_up_with_one_line_without_the_token(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    bad = "MTIz.bad-token.secret"
    async with (
        FakeDiscordServer(token="the-real-token") as server,
        open_test_app(
            tmp_path, model=replying(), model_dir=model_dir, mongodb_uri=mongo_uri
        ) as app,
    ):
        adapter = DiscordAdapter(server_settings(server, bad))
        with pointed_at(server), pytest.raises(PlatformStartupError) as raised:
            await adapter.start(app.adapter_services)
    message = str(raised.value)
    assert message == TOKEN_REJECTED
    assert "\n" not in message and bad not in message
    assert raised.value.__cause__ is None  # no chained traceback to print
    assert bad not in caplog.text
    assert server.requests == ["GET /api/v10/users/@me"]


async def test_start_up_without_the_message_content_intent_says_how_to_fix_it(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeDiscordServer(token="good", message_content_allowed=False) as server,
        open_test_app(
            tmp_path, model=replying(), model_dir=model_dir, mongodb_uri=mongo_uri
        ) as app,
    ):
        adapter = DiscordAdapter(server_settings(server, "good"), ready_timeout=10)
        with pointed_at(server), pytest.raises(PlatformStartupError) as raised:
            await adapter.start(app.adapter_services)
    assert str(raised.value) == INTENT_MISSING


async def test_start_connects_registers_commands_and_answers_over_the_gateway(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with (
        FakeDiscordServer(token="good") as server,
        open_test_app(
            tmp_path, model=replying(), model_dir=model_dir, mongodb_uri=mongo_uri, plugins=[GOALS]
        ) as app,
    ):
        guild = server.add_guild("Book Club")
        adapter = DiscordAdapter(server_settings(server, "good"), ready_timeout=20)
        with pointed_at(server):
            await adapter.start(app.adapter_services)
            try:
                # The gateway identified with the intents Mnemo needs.
                intents = discord.Intents._from_value(server.identified[0]["intents"])
                assert intents.message_content and intents.guild_messages and intents.dm_messages
                await server.until(lambda: guild.id in server.commands and None in server.commands)
                sarah = Person(server.snowflakes(), "Sarah")
                await server.push(
                    "MESSAGE_CREATE", server.message(guild, sarah, f"<@{server.bot.id}> hi!")
                )
                await asyncio.wait_for(server.message_arrived.wait(), 10)
            finally:
                await adapter.stop()
    # Personal commands globally (servers and DMs); admin ones in the server, Manage Server.
    everywhere = {c["name"]: c for c in server.commands[None]}
    in_server = {c["name"]: c for c in server.commands[guild.id]}
    personal = {"me", "forgetme", "export", "mydata", "help", "facts", "privacy", "optout"}
    # /forget too: everyone forgets their own facts (a member, `member:`, is for admins).
    assert set(everywhere) == personal | {"optin", "reset", "new", "forget"}
    assert set(in_server) == {
        *("stats", "learning", "character", "model", "language"),
        *("goals", "goal"),  # the goals plugin's: admins'
    }
    commands = everywhere | in_server
    assert all(c["description"] for c in commands.values())
    assert all(c["contexts"] == [0, 1] for c in everywhere.values())
    assert all(c["default_member_permissions"] is None for c in everywhere.values())
    assert all(c["contexts"] == [0] and not c["dm_permission"] for c in in_server.values())
    manage_server = discord.Permissions(manage_guild=True).value
    assert all(int(c["default_member_permissions"]) == manage_server for c in in_server.values())
    assert [o["name"] for o in commands["facts"]["options"]] == ["member", "search", "page"]
    assert [o["name"] for o in commands["goal"]["options"]] == ["args"]
    assert [o["name"] for o in commands["learning"]["options"]] == ["args"]
    [(channel, sent)] = server.sent
    assert channel == int(guild.payload["channels"][0]["id"]) and sent["content"] == "Hello there!"
    assert adapter.client.is_closed()


async def test_a_dropped_connection_resumes_and_a_revoked_token_ends_with_one_line(
    tmp_path: Path, model_dir: Path, mongo_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        FakeDiscordServer(token="good") as server,
        open_test_app(
            tmp_path, model=replying(), model_dir=model_dir, mongodb_uri=mongo_uri
        ) as app,
    ):
        guild = server.add_guild("Book Club")
        adapter = DiscordAdapter(server_settings(server, "good"), ready_timeout=20)
        with pointed_at(server):
            await adapter.start(app.adapter_services)
            try:
                closed = asyncio.create_task(adapter.wait_closed())
                await server.drop(4000)
                await server.until(lambda: server.resumed == 1)
                assert not closed.done()
                sarah = Person(server.snowflakes(), "Sarah")
                await server.push(
                    "MESSAGE_CREATE", server.message(guild, sarah, "still there, mnemo?")
                )
                await asyncio.wait_for(server.message_arrived.wait(), 10)
                await server.drop(4004)
                with pytest.raises(PlatformError) as raised:
                    await asyncio.wait_for(closed, 10)
            finally:
                await adapter.stop()
    assert [p["content"] for _, p in server.sent] == ["Hello there!"]
    assert "connection lost" in caplog.text
    assert str(raised.value).startswith(TOKEN_REJECTED) and "\n" not in str(raised.value)


async def test_global_sync_registers_every_command_once_admin_ones_for_servers_only() -> None:
    adapter = DiscordAdapter(settings(global_sync=True))
    fake = FakeDiscord(adapter.client, tree=adapter.tree)
    guilds = [fake.guild("Book Club"), fake.guild("Chess")]
    await adapter.sync_commands(guilds)
    assert fake.http.registrations == [None]  # one call, for every server
    commands = {c["name"]: c for c in fake.http.commands[None]}
    assert len(commands) == 13  # the built-in ones; no runtime, no plugins
    assert commands["me"]["contexts"] == [0, 1]
    assert commands["stats"]["contexts"] == [0] and commands["stats"]["default_member_permissions"]


class Crash(BaseException):
    """Nothing in the runtime catches it: the process would be gone."""


async def test_a_message_a_crash_left_unanswered_is_answered_once_discord_is_back(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    where = {"mongodb_uri": mongo_uri, "model_dir": model_dir}
    channel = 555_000_111
    room = Room(
        id=room_id("discord", channel),
        world_id=world_of(None, channel),
        platform="discord",
        kind="dm",
        platform_id=str(channel),
    )
    crashing = ScriptedModel(answers={Task.REPLY: [Crash()]})
    async with open_test_app(tmp_path, model=crashing, keep_database=True, **where) as app:
        said = Memory(
            id=message_id("discord", channel, 1),
            user_id=account_id("discord", 42),
            agent_id=app.runtime.agent_id,
            room_id=room.id,
            world_id=room.world_id,
            content=Content(text="are you there?", source="discord"),
        )

        async def nowhere(content: Content) -> None:
            raise AssertionError("the crash comes first")

        with pytest.raises(Crash):
            await app.runtime.handle(said, nowhere, room=room)
    async with open_test_app(tmp_path, model=replying(), **where) as app:
        adapter = DiscordAdapter(settings())
        adapter.bind(app.adapter_services)
        fake = FakeDiscord(adapter.client, tree=adapter.tree)
        # What start() does once Discord says ready.
        await adapter._answer_unanswered(app.adapter_services)
    assert [(s.channel_id, s.content) for s in fake.http.sent] == [(channel, "Hello there!")]

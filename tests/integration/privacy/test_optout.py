"""Opt-out and learning off, through the real runtime (MongoDB over the wire, Chroma, the
ONNX embedder): nothing of an opted-out person's text is kept anywhere, while everyone else
in the room still is; the choice survives a restart; admins switch learning off for a room
or a whole world."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot import Action, Claim, Context, Evaluator, Plugin, PluginContext
from bot.app.composition import App
from bot.commands.command_set import Commands, Request
from bot.llm.base import Task
from bot.privacy.policy import OPTED_OUT_NOTICE
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel

NOTES = "notes"


async def keep(ctx: Context, found: object) -> None:
    """Learns everything: a fact per message and a copy in its own collection."""
    message = ctx.message
    text = message.content.text
    claim = Claim(f"said {text}", about=message.user_id, quote=text, message_id=message.id)
    await ctx.memory.propose([claim], messages=[message])
    await ctx.collections[NOTES].insert_one(
        {"user_id": message.user_id, "text": message.content.text}
    )


async def note(ctx: Context) -> None:
    """An action that keeps what was said (as CREATE_GOAL would)."""
    await ctx.collections[NOTES].insert_one({"action": ctx.message.content.text})


async def forget_notes(ctx: PluginContext, person: str, world: str) -> int:
    return (await ctx.collections[NOTES].delete_many({"user_id": person})).deleted_count


async def export_notes(ctx: PluginContext, person: str, world: str) -> dict[str, Any]:
    return {"notes": await ctx.collections[NOTES].find({"user_id": person}).to_list()}


KEEPER = Plugin(
    name="keeper",
    evaluators=[Evaluator("KEEP", "keeps everything", handler=keep, always_run=True)],
    actions=[Action("NOTE", "keeps a note", handler=note)],
    stores=(NOTES,),
    forget=forget_notes,
    export=export_notes,
)


def echo_model() -> ScriptedModel:
    """Replies quote the message (as a real model's "Seattle, noted." does) and name NOTE."""

    def reply(prompt: str, task: str, state: Any) -> str:
        assert task == Task.REPLY and state is not None
        return f'{{"text": "You said: {state.message.content.text}", "action": "NOTE"}}'

    return ScriptedModel(reply)


def request(chat: TestChat, args: str = "", *, admin: bool = False) -> Request:
    return Request(
        platform=chat.platform,
        account_id=chat.account.id,
        world_id=chat.room.world_id,
        room_id=chat.room.id,
        is_admin=admin,
        args=args,
    )


async def everything_stored(app: App) -> str:
    """Every document of every collection, and every Chroma id and metadata, as one text."""
    parts: list[str] = []
    for name in await app.store.db.list_collection_names():
        parts += [repr(doc) async for doc in app.store.db[name].find()]
    for collection in ("messages", "facts"):
        found = await app.knowledge.vectors._call(  # every vector: no public call lists them
            collection, lambda target: target.get(include=["metadatas", "documents"])
        )
        parts += [repr(found["ids"]), repr(found["metadatas"]), repr(found["documents"])]
    return "\n".join(parts)


async def message_vectors_of(app: App, user_id: str) -> list[str]:
    found = await app.knowledge.vectors._call(
        "messages", lambda target: target.get(where={"user_id": user_id}, include=[])
    )
    return list(found["ids"])


async def test_an_opted_out_person_leaves_nothing_while_the_room_is_still_learned_from(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path,
        plugins=[KEEPER],
        model=echo_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        sarah = TestChat(app.runtime, name="Sarah", chat="club", kind="group")
        tom = TestChat(app.runtime, name="Tom", chat="club", kind="group")
        commands = Commands(app.commands, learn_wait=10)
        answer = (await commands.run("optout", request(sarah))).text
        assert answer.startswith("Done: from now on I keep nothing you say here")

        # Not addressed, then addressed by name (answered, but neither kept nor acted on).
        await sarah.say("my locker code is zanzibar")
        addressed = sarah.message("Mnemo, I adore quokkas")
        await sarah.send(addressed)
        await sarah.send(addressed)  # redelivered by the platform: answered once
        await tom.say("Mnemo, turnips grow here")
        await tom.settle()

        assert sarah.replies == [OPTED_OUT_NOTICE, "You said: Mnemo, I adore quokkas"]
        assert tom.replies == ["You said: Mnemo, turnips grow here"]
        stored = await everything_stored(app)
        for word in ("zanzibar", "quokkas"):
            assert word not in stored
        assert await message_vectors_of(app, sarah.account.id) == []
        # Everyone else is remembered as before: message, reply, vector, fact, plugin data.
        assert "turnips grow here" in stored and "said Mnemo, turnips grow here" in stored
        assert len(await message_vectors_of(app, tom.account.id)) == 1
        notes = app.store.db.plugin_keeper_notes
        assert await notes.count_documents({"action": {"$exists": True}}) == 1
        assert await app.store.db.evaluations.count_documents({}) == 1

        # Back in: learned from again, and the next opt-out is told again.
        assert ((await commands.run("optin", request(sarah))).text).startswith("Welcome back")
        await sarah.say("I collect stamps")
        await sarah.settle()
        assert "I collect stamps" in await everything_stored(app)


async def test_the_choice_survives_a_restart(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    options: dict[str, Any] = dict(
        plugins=[KEEPER], mongodb_uri=mongo_uri, model_dir=model_dir, evaluator_selection="all"
    )
    async with open_test_app(tmp_path, model=echo_model(), keep_database=True, **options) as app:
        sarah = TestChat(app.runtime)
        await Commands(app.commands).run("optout", request(sarah))
        await sarah.say("first words")
        assert sarah.replies == [OPTED_OUT_NOTICE, "You said: first words"]

    async with open_test_app(tmp_path, model=echo_model(), **options) as app:
        sarah = TestChat(app.runtime)
        sarah._sent = 1  # the next message, not a redelivery of the first
        await sarah.say("my bank is Northwind")
        await sarah.settle()
        # Told once only: the notice is not repeated after the restart.
        assert sarah.replies == ["You said: my bank is Northwind"]
        assert "Northwind" not in await everything_stored(app)
        state = (await Commands(app.commands).run("privacy", request(sarah))).text
        assert "you opted out, so I keep nothing you say here" in state
        # Their export says so: the consent record is data about them too.
        exported = await Commands(app.commands).exporting.person(
            sarah.account.id, sarah.room.world_id
        )
        assert isinstance(exported.opted_out_at, int) and exported.messages == []


async def test_learning_off_in_a_room_or_a_server_stops_keeping_for_everyone_there(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path,
        plugins=[KEEPER],
        model=echo_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        commands = Commands(app.commands, learn_wait=10)
        sarah = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        tom = TestChat(app.runtime, name="Tom", chat="general", world="guild", kind="group")
        tom_elsewhere = TestChat(
            app.runtime, name="Tom", chat="random", world="guild", kind="group"
        )

        refused = (await commands.run("learning", request(sarah, "off"))).text
        assert refused == "Sorry, /learning is only for admins."
        off = (await commands.run("learning", request(sarah, "off", admin=True))).text
        assert off.startswith("Learning is off in this chat")
        await sarah.say("the alarm code is 0451 walrus")
        await tom.say("Mnemo, my dog is called Pickle")
        await tom_elsewhere.say("I play the oboe")
        await tom_elsewhere.settle()

        assert tom.replies == ["You said: Mnemo, my dog is called Pickle"]  # still answered
        assert sarah.replies == []  # no per-person notice for a room switched off
        stored = await everything_stored(app)
        assert "walrus" not in stored and "Pickle" not in stored
        assert "I play the oboe" in stored

        await commands.run("learning", request(sarah, "off server", admin=True))
        await tom_elsewhere.say("I also play the tuba")
        assert "tuba" not in await everything_stored(app)
        status = (await commands.run("learning", request(tom, admin=True))).text
        assert (
            status
            == "Here, now: learning is off for this whole server or group, so I keep nothing "
            "said here."
        )

        on = (await commands.run("learning", request(sarah, "on", admin=True))).text
        assert (
            on == "Learning is on again in this chat. It is still off for the whole server: "
            "/learning on server."
        )
        await commands.run("learning", request(sarah, "on server", admin=True))
        await tom.say("Pickle is three")
        await tom.settle()
        assert "Pickle is three" in await everything_stored(app)
        sideways = await commands.run("learning", request(sarah, "sideways", admin=True))
        assert sideways.text.startswith("Usage")

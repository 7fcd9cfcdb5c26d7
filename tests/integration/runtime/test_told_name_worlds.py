"""A name told in one world is part of that world (issue 19, finding 3): used there, never in
another world's prompts, /me or /export; and an older database's one global told name is
moved to the world(s) where it was told.

The audit: "call me Mirelune" in group A, and every model request for her messages in group B
and in her DM called her Mirelune; /export in B showed it. Real path: the facts plugin learns
the name with the offline model, the replies are composed by the runtime, MongoDB and Chroma
are real.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from bot.adapters.console import ConsoleChat
from bot.commands.command_set import Commands
from bot.llm.base import ModelRequest
from bot.ops.migrations import META_COLLECTION, SCHEMA_ID, migrate
from bot.testing.harness import TestChat, open_test_app
from plugins.facts import plugin as facts


def exported_file(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def record_senders(app: Any) -> list[tuple[str, str]]:
    """(world, sender name) of every reply request the model gets from now on."""
    seen: list[tuple[str, str]] = []
    model = app.runtime.model
    generate = model.generate

    async def recording(request: ModelRequest) -> str:
        state = request.state
        if request.task == "reply" and state is not None:
            seen.append((state.message.world_id, state.values["senderName"]))
        return await generate(request)

    model.generate = recording
    return seen


async def test_a_told_name_is_used_in_its_world_and_nowhere_else(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with open_test_app(
        tmp_path,
        plugins=[facts],
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        told_in = TestChat(app.runtime, name="Jane", chat="group-a")
        await told_in.say("Hi, my name is Mirelune.")
        assert await Commands(app.commands).learned(told_in.room.id)  # as /me does

        senders = record_senders(app)
        elsewhere = TestChat(app.runtime, name="Jane", chat="group-b")
        dm = TestChat(app.runtime, name="Jane", chat="dm-jane")
        await elsewhere.say("hello from the other group")
        await dm.say("hello in private")
        await told_in.say("and hello again here")
        assert senders == [
            (elsewhere.room.world_id, "Jane"),
            (dm.room.world_id, "Jane"),
            (told_in.room.world_id, "Mirelune"),
        ]
        assert not any("Mirelune" in reply for reply in elsewhere.replies + dm.replies)

        exported = {
            chat.room.world_id: await Commands(app.commands).exporting.person(
                told_in.account.id, chat.room.world_id
            )
            for chat in (told_in, elsewhere)
        }
        assert exported[told_in.room.world_id].account.told_name == "Mirelune"
        assert exported[elsewhere.room.world_id].account.told_name is None
        assert b"Mirelune" not in exported[elsewhere.room.world_id].to_json()


async def test_me_and_export_on_the_console_show_the_name_told_there(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with open_test_app(
        tmp_path, plugins=[facts], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        out = io.StringIO()
        said = "Hi, my name is Mirelune.\n/me\n/export\n"
        await ConsoleChat(
            user_name="jd4711", stdin=io.StringIO(said), stdout=out, exports_dir=tmp_path / "x"
        ).run(app.adapter_services)
    assert "You asked me to call you Mirelune here." in out.getvalue()
    [path] = re.findall(r"Written to (\S+\.json)", out.getvalue())
    assert exported_file(Path(path))["account"]["told_name"] == "Mirelune"


async def test_an_older_databases_told_name_moves_to_the_world_it_was_told_in(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with open_test_app(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir) as app:
        db = app.store.db
        await db["accounts"].insert_many(
            [
                {"_id": "jane", "platform": "t", "platform_id": "1", "name": "Jane",
                 "told_name": "Mirelune"},
                {"_id": "sam", "platform": "t", "platform_id": "2", "name": "Sam",
                 "told_name": "Sammy"},
            ]
        )  # fmt: skip
        await db["facts"].insert_many(
            [
                {"_id": "f1", "subject_id": "jane", "world_id": "world-a",
                 "text": "Jane's name is Mirelune"},
                {"_id": "f2", "subject_id": "jane", "world_id": "world-b",
                 "text": "Jane likes tea"},
            ]
        )  # fmt: skip
        await db[META_COLLECTION].update_one({"_id": SCHEMA_ID}, {"$set": {"version": 1}})
        assert 2 in await migrate(db)
        accounts = await app.store.accounts.get_many(["jane", "sam"])
        jane, sam = accounts["jane"], accounts["sam"]
        assert jane.in_world("world-a").name == "Mirelune"
        assert jane.in_world("world-b").name == "Jane"
        assert sam.in_world("world-a").name == "Sam"  # told nowhere we know of: dropped
        assert (await db["accounts"].find_one({"_id": "jane"}))["told_name"] is None

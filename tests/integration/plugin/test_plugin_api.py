"""The plugin API as a plugin author meets it: only `bot`'s public module, a real Mnemo.

setup() returns per-runtime state, collections are the plugin's own, validate's finding
reaches the handler, providers return data the runtime files in the state, commands answer
through the runtime's command layer, and the privacy hooks are called per plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot import (
    Command,
    CommandContext,
    Context,
    Evaluator,
    Plugin,
    PluginContext,
    Provided,
    Provider,
)
from bot.llm.base import Task
from bot.plugin.api import UndeclaredCollection
from bot.plugin.loading import PluginError, Registry
from bot.plugin.services import Collections
from bot.storage.mongo import CORE_COLLECTIONS, MongoStore, _indexes
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel


class Counter:
    """Per-runtime state a plugin's setup returns (no module globals)."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.torn_down = False


async def setup(ctx: PluginContext) -> Counter:
    await ctx.collections["notes"].create_index("user_id", name="user")
    return Counter()


async def teardown(ctx: PluginContext) -> None:
    ctx.plugin_state.torn_down = True


async def validate(ctx: Context) -> Any:
    # A finding, not just True: the handler gets it and need not look again.
    words = ctx.message.content.text.split()
    return {"words": len(words)} if words else None


async def handler(ctx: Context, found: dict[str, int]) -> None:
    ctx.plugin_state.seen.append((found, ctx.job_id))
    await ctx.collections["notes"].update_one(
        {"_id": ctx.message.id},
        {"$set": {"user_id": ctx.message.user_id, "words": found["words"]}},
        upsert=True,
    )


async def get(ctx: Context) -> Provided:
    return Provided(text="Notes: none", data={"notes": 0})


async def count_notes(ctx: CommandContext) -> str:
    notes = await ctx.collections["notes"].count_documents({"user_id": ctx.account_id})
    return f"{notes} note(s) in {ctx.room_id}; args={ctx.args!r}"


async def broken(ctx: CommandContext) -> str:
    raise RuntimeError("boom")


async def forget(ctx: PluginContext, person: str, world: str) -> int:
    result = await ctx.collections["notes"].delete_many({"user_id": person})
    return result.deleted_count


async def export(ctx: PluginContext, person: str, world: str) -> dict[str, Any]:
    notes = await ctx.collections["notes"].find({"user_id": person}).to_list()
    return {"notes": [n["words"] for n in notes]}


def notes_plugin() -> Plugin:
    return Plugin(
        name="notes",
        evaluators=[
            Evaluator("TAKE_NOTES", "Takes notes.", handler, validate=validate, always_run=True)
        ],
        providers=[Provider("notes", get)],
        commands=[
            Command("notes", "How many notes I took about you.", count_notes, usage="[room]"),
            Command("wipe_notes", "Admins only.", count_notes, admin_only=True),
            Command("broken", "Always fails.", broken),
        ],
        setup=setup,
        teardown=teardown,
        stores=["notes"],
        forget=forget,
        export=export,
    )


def model() -> ScriptedModel:
    return ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Noted.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["TAKE_NOTES"]'],
        }
    )


async def test_a_plugin_keeps_its_state_collections_and_commands_to_itself(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    plugin = notes_plugin()
    scripted = model()
    async with open_test_app(
        tmp_path, plugins=[plugin], model=scripted, mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        host = app.runtime.plugins
        sarah = TestChat(app.runtime, name="Sarah")
        result = await sarah.say("three words here")
        await sarah.settle()
        state: Counter = host.plugin_context(plugin).plugin_state
        # validate's finding reached the handler, with the job's id as idempotency key.
        assert state.seen == [({"words": 3}, result.job.id)]  # type: ignore[union-attr]
        # The collection is namespaced: no plugin can write Mnemo's (or another's) data.
        names = await app.store.db.list_collection_names()
        assert "plugin_notes_notes" in names and "notes" not in names
        # The provider's data was filed in the state the reply was composed from.
        [reply_call] = scripted.calls_for(Task.REPLY)
        assert reply_call.state is not None
        assert reply_call.state.provided["notes"] == {"notes": 0}
        assert reply_call.state.values["notes"] == "Notes: none"

        where = {
            "account_id": sarah.account.id,
            "world_id": sarah.room.world_id,
            "room_id": sarah.room.id,
        }
        notes = host.find_command("/Notes")
        assert notes is not None
        answer = await host.run_command(notes, args=" here ", **where)
        assert answer == f"1 note(s) in {sarah.room.id}; args='here'"
        wipe = host.find_command("wipe_notes")
        assert wipe is not None
        assert await host.run_command(wipe, **where) == "Only an admin can use /wipe_notes."
        assert (await host.run_command(wipe, is_admin=True, **where)).startswith("1 note")
        failing = host.find_command("broken")
        assert failing is not None
        assert await host.run_command(failing, **where) == (
            "Sorry, /broken failed. Please try again later."
        )

        assert await host.export(sarah.account.id, sarah.room.world_id) == {"notes": {"notes": [3]}}
        assert await host.forget(sarah.account.id, sarah.room.world_id) == {"notes": 1}
        assert await host.export(sarah.account.id, sarah.room.world_id) == {"notes": {"notes": []}}
        # Only what it declared: a collection its privacy hooks do not know is refused.
        with pytest.raises(UndeclaredCollection, match="collection 'secrets' is not declared"):
            host.plugin_context(plugin).collections["secrets"]
    assert state.torn_down


async def _reply(ctx: CommandContext) -> str:
    return ""


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (Command("Notes", "d", _reply), "lower-case letters"),
        (Command("a-b", "d", _reply), "lower-case letters"),
        (Command("x" * 33, "d", _reply), "lower-case letters"),
        (Command("notes", "", _reply), "one-line description"),
        (Command("notes", "two\nlines", _reply), "one-line description"),
        (Command("notes", "x" * 101, _reply), "at most 100"),
        (Command("notes", "d", lambda ctx: ""), "async def"),  # type: ignore[arg-type,return-value]
    ],
)
def test_a_command_every_surface_cannot_show_is_refused_at_start_up(
    command: Command, reason: str
) -> None:
    with pytest.raises(PluginError, match=reason):
        Registry().add(Plugin("p", commands=[command]), "test")


def test_two_plugins_cannot_claim_one_command() -> None:
    registry = Registry()
    registry.add(Plugin("a", commands=[Command("notes", "d", _reply)]), "test")
    with pytest.raises(PluginError, match="command 'notes' repeats a name"):
        registry.add(Plugin("b", commands=[Command("notes", "d", _reply)]), "test")


async def test_a_plugin_adopts_an_old_collection_but_never_mnemos_own(store: MongoStore) -> None:
    await store.db["memories"].insert_one({"_id": "m1", "text": "kept"})
    await store.db["notes"].insert_many([{"_id": "n1"}, {"_id": "n2"}])
    await store.db["plugin_notes_notes"].insert_one({"_id": "n1", "newer": True})
    collections = Collections(store.db, "notes", ["notes"], reserved=CORE_COLLECTIONS)
    for name in ("memories", "facts", "evaluations", "plugin_goals_goals", "mnemo_meta"):
        with pytest.raises(ValueError, match="not one a plugin may adopt"):
            await collections.adopt("notes", legacy=name)
    moved = await collections.adopt("notes", legacy="notes")
    again = await collections.adopt("notes", legacy="notes")
    kept = await collections["notes"].find({}).sort("_id", 1).to_list()
    left = await store.db.list_collection_names()

    assert (moved, again) == (1, 0)
    assert kept == [{"_id": "n1", "newer": True}, {"_id": "n2"}]  # what was there wins
    assert "notes" not in left and "memories" in left
    # Every collection the core creates indexes for is protected.
    assert set(_indexes()) <= CORE_COLLECTIONS

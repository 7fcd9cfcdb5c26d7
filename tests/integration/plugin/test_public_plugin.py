"""A plugin written only against `bot`'s public module, discovered from a plugins folder like
any other, gets what the built-in ones get: its offline answer, its own collection, its
command and its line in `/stats`, with no change to the core. One without an offline answer
is told so, once."""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path

import pytest

from bot.commands.command_set import Scope, stats
from bot.plugin.loading import discover
from bot.testing.harness import TestChat, open_test_app

SOURCE = '''
import json

from bot import (Command, CommandContext, Context, Evaluator, ModelClass, OfflineRequest, Plugin,
                 PluginContext)


def offline_mood(request: OfflineRequest) -> str | None:
    """Without a language model: a word list, from the state the prompt was made from."""
    if request.state is None:
        return None
    text = request.state.message.content.text.lower()
    return json.dumps({"mood": "happy" if "love" in text else "calm"})


async def validate(ctx: Context) -> bool:
    return ctx.message.user_id != ctx.agent.id


async def note_mood(ctx: Context, found: bool) -> None:
    raw = await ctx.model.generate("How does this sound?", model_class=ModelClass.SMALL,
                                   state=ctx.state)
    mood = json.loads(raw)["mood"]
    await ctx.collections["moods"].update_one(
        {"_id": ctx.message.id},
        {"$set": {"user_id": ctx.message.user_id, "world_id": ctx.message.world_id,
                  "mood": mood}},
        upsert=True,
    )


async def guess(ctx: Context, found: bool) -> None:
    # Asks the model for a task nobody answers offline.
    await ctx.model.generate("Guess.", state=ctx.state)


async def moods(ctx: CommandContext) -> str:
    found = await ctx.collections["moods"].find(
        {"user_id": ctx.account_id, "world_id": ctx.world_id}
    ).to_list()
    return "Moods: " + ", ".join(sorted(doc["mood"] for doc in found))


async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    mine = {"user_id": person_id, "world_id": world_id}
    return (await ctx.collections["moods"].delete_many(mine)).deleted_count


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict:
    mine = {"user_id": person_id, "world_id": world_id}
    return {"moods": [doc["mood"] for doc in await ctx.collections["moods"].find(mine).to_list()]}


async def mood_stats(ctx: PluginContext, world_id: str) -> list[str]:
    noted = await ctx.collections["moods"].count_documents({"world_id": world_id})
    return [f"Moods noted: {noted}"]


plugin = Plugin(
    name="moods",
    stats=mood_stats,
    evaluators=[
        Evaluator("NOTE_MOOD", "Notes the mood of a message.", note_mood, validate=validate,
                  always_run=True, offline=offline_mood),
        Evaluator("GUESS", "Guesses.", guess, validate=validate, always_run=True),
    ],
    commands=[Command("moods", "Your moods here", moods)],
    stores=["moods"],
    forget=forget,
    export=export,
)
'''


async def test_a_public_api_plugin_works_offline_with_its_collection_and_command(
    tmp_path: Path, mongo_uri: str, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "moods.py").write_text(textwrap.dedent(SOURCE), encoding="utf-8")
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", SOURCE, re.M))
    assert imported == {"json", "bot"}  # nothing of Mnemo but the public module
    registry = discover(folder, use_entry_points=False)

    caplog.set_level(logging.WARNING, logger="bot.plugin.offline_model")
    async with open_test_app(
        tmp_path / "app",
        plugins=registry.plugins,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        assert app.offline
        sarah = TestChat(app.runtime, name="Sarah")
        await sarah.say("I love this song")
        await sarah.say("The bus comes at nine")
        await sarah.settle()
        host = app.runtime.plugins
        command = host.find_command("moods")
        assert command is not None
        answer = await host.run_command(
            command,
            account_id=sarah.account.id,
            world_id=sarah.room.world_id,
            room_id=sarah.room.id,
        )
        stored = await app.store.db["plugin_moods_moods"].count_documents({})
        shown = await stats(app.commands, Scope(sarah.room.world_id, sarah.room.id, "x"))

    assert answer == "Moods: calm, happy"
    assert stored == 2
    assert "Moods noted: 2" in shown.splitlines()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len([w for w in warnings if "evaluator:GUESS" in w]) == 1  # once, not per message
    assert not any("NOTE_MOOD" in w for w in warnings)

"""NOTES: a plugin written only against `bot` that adds a command for everyone and one for
admins."""

from __future__ import annotations

from bot import Command, CommandContext, Plugin, PluginContext


async def add_note(ctx: CommandContext) -> str:
    await ctx.collections["notes"].insert_one({"room": ctx.room_id, "text": ctx.args})
    return f"Noted: {ctx.args}"


async def count_notes(ctx: CommandContext) -> str:
    return f"{await ctx.collections['notes'].count_documents({})} notes"


async def forget_notes(ctx: PluginContext, person_id: str, world_id: str) -> int:
    return 0  # its notes are the room's, not a person's


async def export_notes(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, int]:
    return {}


NOTES = Plugin(
    name="notes",
    stores=["notes"],
    forget=forget_notes,
    export=export_notes,
    commands=[
        Command("note", "Keep a note", add_note, usage="<text>"),
        Command("notes", "Admins: how many notes", count_notes, admin_only=True),
    ],
)

"""Follow-ups: when someone mentions something with a time in it ("my exam is on Friday"),
Mnemo asks them afterwards, in the same room and in character, how it went.

- opt-in per world by an admin (`/followups on [Time/Zone]`), and per person (`/optout`);
- FOLLOW_UP (schedule.py) plans one follow-up for the day after, in daytime, at most one per
  person per day; no model call;
- a timed task (sending.py) sends what is due through the platform that runs the room,
  exactly one process claiming each, at most once even across a crash;
- a follow-up is data about its person: `/me` lists the planned ones, `/export` has them,
  `/forgetme` deletes them.

`make_plugin(clock=...)` takes the clock (milliseconds since the epoch) so tests freeze time;
`plugin` is the one Mnemo loads, on the wall clock.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from bot import Plugin, PluginContext, Task, TaskContext, new_id, now_ms

from .commands import followups_command
from .prompts import TASK, offline_question
from .schedule import NAME, follow_up_evaluator
from .sending import send_due
from .settings import FollowupsSettings
from .store import FOLLOWUPS, WORLDS, FollowUpStore
from .timing import Clock, local, zone_of

__all__ = ["NAME", "FollowupsSettings", "make_plugin", "plugin"]

TASK_NAME = "followups"
# How often each process looks for due follow-ups: they are asked on a day, not a minute.
CHECK_SECONDS = 60.0


async def setup(ctx: PluginContext[FollowupsSettings]) -> str:
    await FollowUpStore.of(ctx.collections).ensure_indexes()
    # This process's name on the follow-ups it claims.
    return new_id()


async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    return await FollowUpStore.of(ctx.collections).delete_of(world_id, person_id)


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, Any]:
    followups = await FollowUpStore.of(ctx.collections).of_person(world_id, person_id)
    return {"followups": [f.model_dump(mode="json", include=EXPORTED) for f in followups]}


EXPORTED = {
    "id",
    "topic",
    "kind",
    "said",
    "phrase",
    "event_day",
    "local_day",
    "timezone",
    "due_ms",
    "status",
    "sent_ms",
    "question",
    "room_id",
}


async def about(ctx: PluginContext[FollowupsSettings], person_id: str, world_id: str) -> list[str]:
    """`/me`: the follow-ups planned for the person here."""
    store = FollowUpStore.of(ctx.collections)
    pending = await store.of_person(world_id, person_id, statuses=("pending",))
    lines = []
    for f in pending:
        zone = zone_of(f.timezone, ctx.settings)
        when = local(f.due_ms, zone)
        day = date.fromisoformat(f.local_day)
        asked = (
            f"whether you managed to {f.topic}" if f.kind == "deadline" else f"how {f.topic} went"
        )
        lines.append(
            f"• I'll ask {asked}: {day.strftime('%a %d %b')} "
            f"around {when.strftime('%H:%M')} ({zone.key})"
        )
    if not lines:
        return []
    return [f"Follow-ups planned ({len(lines)}):", *lines]


async def stats(ctx: PluginContext, world_id: str) -> list[str]:
    store = FollowUpStore.of(ctx.collections)
    choice = await store.world(world_id)
    if choice.followups != "on":
        return ["Follow-ups: off"]
    pending = await store.count(world_id, "pending")
    sent = await store.count(world_id, "sent")
    return [f"Follow-ups: on ({pending} planned, {sent} sent)"]


def make_plugin(clock: Clock = now_ms) -> Plugin:
    """The plugin on this clock (milliseconds since the epoch)."""

    async def run(ctx: TaskContext[FollowupsSettings, str]) -> int:
        return await send_due(ctx, clock, ctx.plugin_state)

    return Plugin(
        name="followups",
        description="Asks people afterwards how the things they mentioned went.",
        evaluators=[follow_up_evaluator(clock)],
        commands=[followups_command(clock)],
        settings_model=FollowupsSettings,
        setup=setup,
        stores=[FOLLOWUPS, WORLDS],
        forget=forget,
        export=export,
        stats=stats,
        about=about,
        tasks=[
            Task(
                name=TASK_NAME,
                every_seconds=CHECK_SECONDS,
                run=run,
                description="follow-ups: ask how things went, when due",
            )
        ],
        offline_answers={TASK: offline_question},
    )


plugin = make_plugin()

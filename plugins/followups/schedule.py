"""FOLLOW_UP: notices when a person says something will happen at a time ("my exam is on
Friday") and plans one follow-up for the day after, in the same room.

No model call: the words are read (detect.py), so it runs on every message at no cost, also
on messages the bot did not answer. Only in worlds whose admins switched follow-ups on;
messages of people who opted out, or where learning is off, never reach evaluators at all.
At most one follow-up per person per day: a day already planned moves the new one on to the
next free day. The follow-up's id derives from the message, so evaluating the message again
(a retried job) plans nothing twice.
"""

from __future__ import annotations

from datetime import timedelta

from bot import Context, Evaluator, stable_id

from .detect import Event, find_event
from .settings import FollowupsSettings
from .store import LIVE, FollowUp, FollowUpStore, WorldChoice
from .timing import Clock, ask_time, local, millis, zone_of

NAME = "FOLLOW_UP"
# How many later days a follow-up may move to when its day already has one.
MAX_SHIFT_DAYS = 7


def follow_up_evaluator(clock: Clock) -> Evaluator:
    async def validate(ctx: Context[FollowupsSettings]) -> tuple[Event, WorldChoice] | None:
        message = ctx.message
        if message.user_id == ctx.agent.id or ctx.trigger != "message":
            return None
        text = message.content.text
        # The words first (no round trip for the many messages without a time in them).
        if find_event(text, local(clock(), zone_of(None, ctx.settings)).date()) is None:
            return None
        choice = await FollowUpStore.of(ctx.collections).world(message.world_id)
        if choice.followups != "on":
            return None
        # Read again in the world's own time zone: "tomorrow" is its tomorrow.
        today = local(clock(), zone_of(choice.timezone, ctx.settings)).date()
        event = find_event(text, today)
        if event is None or event.last_day > today + timedelta(days=ctx.settings.max_days_ahead):
            return None
        return event, choice

    async def handle(
        ctx: Context[FollowupsSettings], found: tuple[Event, WorldChoice]
    ) -> FollowUp | None:
        event, choice = found
        return await plan(ctx, event, choice, clock())

    return Evaluator(
        name=NAME,
        description=(
            "Notices when someone mentions something happening at a time, to ask later how it went."
        ),
        handler=handle,
        validate=validate,
        always_run=True,
        uses_model=False,
    )


async def plan(
    ctx: Context[FollowupsSettings], event: Event, choice: WorldChoice, now_ms: int
) -> FollowUp | None:
    """Store the follow-up for `event`; None when one is planned for it already."""
    message, settings = ctx.message, ctx.settings
    store = FollowUpStore.of(ctx.collections)
    existing = await store.of_person(message.world_id, message.user_id, statuses=LIVE)
    if any(f.key == event.key and f.status == "pending" for f in existing):
        return None  # said again: already planned
    if any(f.key == event.key and f.event_day == event.last_day.isoformat() for f in existing):
        return None  # asked already about this very event
    taken = {f.local_day for f in existing}
    day = event.last_day + timedelta(days=1)
    for _ in range(MAX_SHIFT_DAYS):
        if day.isoformat() not in taken:
            break
        day += timedelta(days=1)
    else:
        return None
    zone = zone_of(choice.timezone, settings)
    room = ctx.state.room or await ctx.conversations.room(message.room_id)
    if room is None:
        return None
    followup = FollowUp(
        id=stable_id("followup", message.id),
        world_id=message.world_id,
        room_id=message.room_id,
        platform=room.platform,
        person_id=message.user_id,
        person_name=ctx.state.name_of(message.user_id),
        topic=event.topic,
        key=event.key,
        kind="deadline" if event.kind == "deadline" else "event",
        said=ctx.conversations.cut(event.sentence),
        phrase=event.phrase,
        event_day=event.last_day.isoformat(),
        local_day=day.isoformat(),
        timezone=zone.key,
        due_ms=millis(ask_time(day, zone, settings)),
        created_ms=now_ms,
    )
    if not await store.insert(followup):
        return None
    # What it is about stays out of the logs: it is the person's.
    ctx.log.info("follow-up planned in room %s for %s", message.room_id, day.isoformat())
    return followup

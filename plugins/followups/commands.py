"""`/followups on [Time/Zone]`, `/followups off`, `/followups`: admins choose whether Mnemo
follows up in their world (off until they do), and in which time zone its days run."""

from __future__ import annotations

from bot import Command, CommandContext

from .settings import FollowupsSettings, zone_or_none
from .store import FollowUpStore, WorldChoice
from .timing import Clock

USAGE = "on [Time/Zone] | off"


def followups_command(clock: Clock) -> Command:
    async def handler(ctx: CommandContext[FollowupsSettings]) -> str:
        store = FollowUpStore.of(ctx.collections)
        words = ctx.args.split()
        current = await store.world(ctx.world_id)
        if not words:
            return describe(current, ctx.settings)
        choice, rest = words[0].casefold(), words[1:]
        if choice == "off" and not rest:
            await store.choose(_changed(current, "off", current.timezone, ctx, clock))
            dropped = await store.drop_pending(ctx.world_id)
            planned = f" ({dropped} planned one(s) dropped)" if dropped else ""
            return f"Follow-ups are off here{planned}."
        if choice == "on" and len(rest) <= 1:
            zone = current.timezone
            if rest:
                found = zone_or_none(rest[0])
                if found is None:
                    return (
                        f"I don't know the time zone {rest[0][:40]!r}. "
                        "Use a name like Europe/Paris or America/New_York."
                    )
                zone = found.key
            await store.choose(_changed(current, "on", zone, ctx, clock))
            return (
                f"Follow-ups are on here ({zone or ctx.settings.timezone}): I'll ask people "
                "how the things they mention went. /optout stops them for a person."
            )
        return f"Usage: /followups {USAGE}"

    return Command(
        name="followups",
        description="Admins: ask people later how things they mentioned went (on/off)",
        handler=handler,
        admin_only=True,
        usage=USAGE,
    )


def _changed(
    current: WorldChoice,
    state: str,
    zone: str | None,
    ctx: CommandContext[FollowupsSettings],
    clock: Clock,
) -> WorldChoice:
    return current.model_copy(
        update={
            "followups": state,
            "timezone": zone,
            "changed_by": ctx.account_id,
            "changed_ms": clock(),
        }
    )


def describe(choice: WorldChoice, settings: FollowupsSettings) -> str:
    if choice.followups != "on":
        return f"Follow-ups are off here. Turn them on with /followups {USAGE}."
    return f"Follow-ups are on here (time zone {choice.timezone or settings.timezone})."

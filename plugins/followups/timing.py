"""When a follow-up is asked: the day after the event, at the configured hour of the room's
local time, and never at night. Pure functions of a clock reading (integer milliseconds)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .settings import FollowupsSettings, zone_or_none

# Milliseconds since the epoch, now: injected, so tests freeze time without patching.
Clock = Callable[[], int]


def zone_of(world_zone: str | None, settings: FollowupsSettings) -> ZoneInfo:
    """The world's time zone, else the configured default (always a valid one)."""
    for name in (world_zone, settings.timezone):
        if name:
            zone = zone_or_none(name)
            if zone is not None:
                return zone
    return ZoneInfo("UTC")


def local(ms: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone)


def millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def ask_time(day: date, zone: ZoneInfo, settings: FollowupsSettings) -> datetime:
    """The moment on `day` a follow-up is asked: the configured hour, kept inside daytime."""
    hour = min(max(settings.ask_at_hour, settings.day_starts), settings.day_ends - 1)
    return datetime.combine(day, time(hour), tzinfo=zone)


def night_until(now: datetime, settings: FollowupsSettings) -> datetime | None:
    """None in daytime; at night, when the day starts (today's morning, or tomorrow's)."""
    if settings.day_starts <= now.hour < settings.day_ends:
        return None
    day = now.date() if now.hour < settings.day_starts else now.date() + timedelta(days=1)
    return datetime.combine(day, time(settings.day_starts), tzinfo=now.tzinfo)

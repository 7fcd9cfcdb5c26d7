"""The follow-ups plugin's settings, from `MNEMO_FOLLOWUPS_*` environment variables (and
`.env`). Whether a world gets follow-ups at all is its admins' choice (`/followups on`)."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class FollowupsSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MNEMO_FOLLOWUPS_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        env_ignore_empty=True,
    )

    # The time zone of a world whose admins gave none (`/followups on Europe/Paris` does).
    timezone: str = "UTC"
    # The hour (local) a follow-up is asked, the day after the event.
    ask_at_hour: int = Field(default=10, ge=0, le=23)
    # Never outside these local hours: a follow-up due at night waits for the morning.
    day_starts: int = Field(default=9, ge=0, le=23)
    day_ends: int = Field(default=21, ge=1, le=24)
    # Events further away than this are not followed up (a birthday in ten months).
    max_days_ahead: int = Field(default=60, ge=1, le=366)
    # A follow-up claimed this long ago and never confirmed sent was lost with its process.
    sending_lease_seconds: float = Field(default=600.0, gt=0)
    # A send that raised is tried again this many times (later), then given up.
    max_attempts: int = Field(default=3, ge=1, le=20)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if zone_or_none(value) is None:
            raise ValueError(f"unknown time zone {value!r}; use an IANA name like Europe/Paris")
        return value

    @model_validator(mode="after")
    def _daytime(self) -> FollowupsSettings:
        if self.day_starts >= self.day_ends:
            raise ValueError("day_starts must be before day_ends")
        return self


def zone_or_none(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None

"""The sentiment plugin's own settings: `MNEMO_SENTIMENT_*` in the environment or `.env`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SentimentSettings(BaseSettings):
    """Read once at start-up by plugin discovery; handlers receive it as `ctx.settings`."""

    model_config = SettingsConfigDict(
        env_prefix="MNEMO_SENTIMENT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        # `MNEMO_SENTIMENT_MIN_CHARS=` (as copied templates write it) means "use the default".
        env_ignore_empty=True,
    )

    # Sentiment is a cheap judgement, run on every message: the small model is the default.
    model_class: Literal["small", "large"] = "small"
    # Messages shorter than this ("ok", "k", an emoji) carry too little tone to score.
    min_chars: int = Field(3, ge=1, le=10_000)

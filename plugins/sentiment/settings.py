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

    # `vader`: VADER's lexicon and rules score each message, no model call (issue 22: a call
    # per message for a tone score cost more than the reply's); `model`: the language model
    # is asked, one call per message, with the class below.
    scorer: Literal["vader", "model"] = "vader"
    # With the `model` scorer: a cheap judgement, run on every message, so the small model.
    model_class: Literal["small", "large"] = "small"
    # Messages shorter than this ("ok", "k", an emoji) carry too little tone to score.
    min_chars: int = Field(3, ge=1, le=10_000)

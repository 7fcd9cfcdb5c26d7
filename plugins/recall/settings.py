"""The recall plugin's settings, read from `MNEMO_RECALL_*` environment variables (and `.env`)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class RecallSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MNEMO_RECALL_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        env_ignore_empty=True,
    )

    # Earlier messages shown in the prompt; 0 switches the provider off.
    limit: int = Field(default=5, ge=0, le=50)
    # Longer messages are cut: they are reminders, and every character is paid per reply.
    max_chars: int = Field(default=500, ge=20, le=10_000)
    # Cosine distance past which a message is too unlike the current one to be recalled by
    # meaning (keyword matches still are). Tuned for the local all-MiniLM-L6-v2; raise it
    # for embedding models whose related texts sit farther apart.
    max_distance: float = Field(default=0.65, gt=0.0, le=2.0)

"""The facts plugin's settings, read from `MNEMO_FACTS_*` environment variables (and `.env`)."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class FactsSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MNEMO_FACTS_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        env_ignore_empty=True,
        # `FactsSettings(conversation_length=8)` in code, despite the field's env aliases.
        populate_by_name=True,
    )

    # Facts are extracted every ceil(conversation_length / 2) messages (the bot's replies
    # count), as elizaOS does. It was a core option; its old name still works.
    conversation_length: int = Field(
        default=32,
        ge=2,
        le=1000,
        validation_alias=AliasChoices(
            "MNEMO_FACTS_CONVERSATION_LENGTH", "MNEMO_CONVERSATION_LENGTH"
        ),
    )

    # The offline rules' claims beside a model's: off unless a scored run shows they add right
    # facts and no wrong ones (docs/performance.md, "Memory"). With no model configured the
    # rules are the model (the offline model), whatever this says.
    merge_rules: bool = False
    # The most messages one extraction reads (bounds the prompt after a long silence).
    max_messages: int = Field(default=64, ge=1, le=1000)
    # How many of a person's known facts a reading shows the model (the most recent), so a
    # changed value is filed under the same attribute as the one it replaces.
    known_facts: int = Field(default=12, ge=0, le=500)

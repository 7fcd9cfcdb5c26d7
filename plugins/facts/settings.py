"""The facts plugin's settings, read from `MNEMO_FACTS_*` environment variables (and `.env`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot import FactType


def _every_type() -> list[FactType]:
    return ["fact", "status", "opinion"]


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

    # Which claim types are remembered. elizaOS keeps only "fact" and drops every opinion
    # and new status silently, which lost "lactose intolerant" and "we have 3 kids now" with
    # a real model; people expect both kept. Statuses and opinions are stored with their
    # lifetimes (a newer one of the same kind closes the old: bot/memory/store.py); a
    # type left out here is counted in the rejects ledger, never dropped without a word.
    keep_types: Annotated[list[FactType], NoDecode] = Field(default_factory=_every_type)
    # Cosine distance under which a new claim counts as a paraphrase of a stored one.
    # Measured with MiniLM: "lives in Lisbon" / "is living in Lisbon" 0.02 (same fact), but
    # "has two kids" / "has three kids" 0.045 and "lives" / "works in Lisbon" 0.088 (different
    # facts). Low, so an update is never swallowed; exact repeats are caught by text anyway.
    near_duplicate_distance: float = Field(default=0.04, ge=0.0, le=2.0)
    # The offline rules' claims beside the model's: the rules are a high-precision extractor
    # that works beside any model, so a weak model adds memory and never takes any away
    # (every claim, the rules' too, still has to pass the core's grounding).
    merge_rules: bool = True
    # The most messages one extraction reads (bounds the prompt after a long silence).
    max_messages: int = Field(default=64, ge=1, le=1000)
    # How many facts about the people in the conversation the provider puts in the prompt.
    relevant_facts: int = Field(default=8, ge=0, le=100)
    # How many known facts the extraction prompt shows (those most similar to what was said,
    # then the most recent), so the model can tell what is new, changed or repeated.
    known_facts: int = Field(default=12, ge=0, le=500)

    @field_validator("keep_types", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        # `MNEMO_FACTS_KEEP_TYPES=fact,status` as well as a list in code.
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value

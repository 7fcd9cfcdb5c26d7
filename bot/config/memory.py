"""Settings of the memory: what the reply is shown of it, and the language facts are kept in.

    MNEMO_FACTS_RELEVANT_FACTS=8     facts about the people in a message the reply prompt shows
    MNEMO_FACTS_LANGUAGE=English     write facts in one language, whatever language was said
                                     (unset: each fact in the language it was said in)
    MNEMO_FACTS_NEAR_DUPLICATE_DISTANCE=0.04   a new fact this close to a stored one (cosine
                                     distance) is the same fact said again

The `MNEMO_FACTS_` prefix is shared with the facts plugin's own settings (how often it reads
the conversation): one prefix for everything about facts, wherever it is read.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.config.base import SettingsGroup, settings_config


class MemorySettings(SettingsGroup):
    model_config = settings_config("MNEMO_FACTS_")

    relevant_facts: int = Field(8, ge=0, le=100)
    # A language name or code ("English", "es"); the facts plugin asks the model to write
    # facts in it, and the memory then checks only their names and numbers against what was
    # said, since their other words were translated.
    language: str | None = Field(None, max_length=40)
    # Measured with MiniLM: "lives in Lisbon" / "is living in Lisbon" 0.02 (same fact), but
    # "has two kids" / "has three kids" 0.045 and "lives" / "works in Lisbon" 0.088 (different
    # facts). Low, so an update is never swallowed; exact repeats are caught by text anyway.
    near_duplicate_distance: float = Field(0.04, ge=0.0, le=2.0)

    @field_validator("language")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        return value.strip() if value and value.strip() else None


def default_memory() -> MemorySettings:
    # Settings built in code (tests, benches) get the defaults without reading the environment.
    return MemorySettings.model_construct(
        **{
            name: info.get_default(call_default_factory=True)
            for name, info in MemorySettings.model_fields.items()
        }
    )

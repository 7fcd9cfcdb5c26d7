"""Characters: personas in elizaOS character JSON.

A file copied from an elizaOS project loads unchanged: camelCase keys, `bio` as a string or a
list, message examples written with `user` (v0) or `name` (v1), and unknown fields are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator


class CharacterError(Exception):
    """A character file could not be loaded; the message names the file and the field."""


class ExampleContent(BaseModel):
    model_config = ConfigDict(extra="allow")

    text: str = ""
    action: str | None = None


class ExampleMessage(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    user: str = Field(validation_alias=AliasChoices("user", "name"))
    content: ExampleContent


class Style(BaseModel):
    model_config = ConfigDict(extra="allow")

    all: list[str] = Field(default_factory=list)
    chat: list[str] = Field(default_factory=list)
    post: list[str] = Field(default_factory=list)


def _as_list(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


class Character(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = Field(min_length=1)
    username: str | None = None
    system: str | None = None
    bio: list[str] = Field(default_factory=list)
    lore: list[str] = Field(default_factory=list)
    message_examples: list[list[ExampleMessage]] = Field(
        default_factory=list, alias="messageExamples"
    )
    post_examples: list[str] = Field(default_factory=list, alias="postExamples")
    topics: list[str] = Field(default_factory=list)
    adjectives: list[str] = Field(default_factory=list)
    knowledge: list[Any] = Field(default_factory=list)
    style: Style = Field(default_factory=Style)
    settings: dict[str, Any] = Field(default_factory=dict)
    templates: dict[str, str] = Field(default_factory=dict)
    plugins: list[Any] = Field(default_factory=list)
    clients: list[str] = Field(default_factory=list)

    _lists = field_validator("bio", "lore", "topics", "adjectives", mode="before")(_as_list)

    @property
    def names(self) -> list[str]:
        """What people call the bot in a group: its name and username."""
        return [n for n in (self.name, self.username) if n]

    def template(self, name: str, default: str) -> str:
        """A character's own template overrides the built-in one of the same name."""
        return self.templates.get(name) or default


def load_character(path: Path) -> Character:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CharacterError(f"character file {path}: not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CharacterError(f"character file {path}: cannot read it ({error})") from None
    except json.JSONDecodeError as error:
        raise CharacterError(
            f"character file {path}: not valid JSON at line {error.lineno}, "
            f"column {error.colno}: {error.msg}"
        ) from None
    if not isinstance(raw, dict):
        raise CharacterError(f"character file {path}: expected a JSON object at the top level")
    try:
        return Character.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise CharacterError(f"character file {path}: field {field}: {first['msg']}") from None

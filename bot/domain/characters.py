"""Characters: personas in elizaOS character JSON.

A file copied from an elizaOS project loads unchanged: camelCase keys, `bio` as a string or a
list, message examples written with `user` (v0) or `name` (v1), `knowledge` as strings or
objects, `plugins` as package names. Fields Mnemo does not use (`modelProvider`, `people`,
`clientConfig`, `id` ...) are kept in `model_extra`, never rejected, so a file round-trips.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

log = logging.getLogger(__name__)


class CharacterError(Exception):
    """A character file could not be loaded; the message names the file and the field."""


def _as_list(value: Any) -> Any:
    # elizaOS allows `bio` as one string; the same slip in other list fields is harmless.
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


class ExampleContent(BaseModel):
    # v1 adds `actions`, `providers`, `thought`; kept as extras.
    model_config = ConfigDict(extra="allow")

    text: str = ""
    action: str | None = None


class ExampleMessage(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    # v0 writes `user`, v1 writes `name`; both mean the speaker.
    user: str = Field(validation_alias=AliasChoices("user", "name"))
    content: ExampleContent


class Style(BaseModel):
    model_config = ConfigDict(extra="allow")

    all: list[str] = Field(default_factory=list)
    chat: list[str] = Field(default_factory=list)
    post: list[str] = Field(default_factory=list)

    _lists = field_validator("all", "chat", "post", mode="before")(_as_list)


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
    # Strings, or objects such as {"path": ..., "shared": false} / {"directory": ...}.
    knowledge: list[str | dict[str, Any]] = Field(default_factory=list)
    style: Style = Field(default_factory=Style)
    # Nested and open (`secrets`, `voice`, `model`, `avatar` ...). `secrets` values become
    # SecretStr so a logged character never shows an API key.
    settings: dict[str, Any] = Field(default_factory=dict)
    templates: dict[str, str] = Field(default_factory=dict)
    # Package names ("@elizaos/plugin-bootstrap") in JSON files; Mnemo's own plugins are found
    # by discovery, so these are informational.
    plugins: list[Any] = Field(default_factory=list)
    clients: list[str] = Field(default_factory=list)

    _lists = field_validator(
        "bio",
        "lore",
        "topics",
        "adjectives",
        "post_examples",
        "knowledge",
        "plugins",
        "clients",
        mode="before",
    )(_as_list)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()

    @field_validator("settings", mode="before")
    @classmethod
    def _hide_secrets(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, dict) and isinstance(value.get("secrets"), dict):
            secrets = {
                str(key): secret if isinstance(secret, SecretStr) else SecretStr(str(secret))
                for key, secret in value["secrets"].items()
                if secret is not None
            }
            return {**value, "secrets": secrets}
        return value

    @property
    def names(self) -> list[str]:
        """What people call the bot in a group: its name and username."""
        return [n for n in (self.name, self.username) if n]

    def template(self, name: str, default: str) -> str:
        """A character's own template overrides the built-in one of the same name."""
        return self.templates.get(name) or default

    def secret(self, key: str) -> str | None:
        """A value from `settings.secrets`, or None."""
        value = self.settings.get("secrets", {}).get(key)
        return value.get_secret_value() if isinstance(value, SecretStr) else None


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ".".join(str(part) for part in loc) or "(top level)"
    # Pydantic names the first alias; a v1 file calls the speaker `name`.
    if loc and loc[0] == "messageExamples" and loc[-1] == "user":
        path += " (or name)"
    return path


def load_character(path: Path | str) -> Character:
    """Read and validate a character file, or raise CharacterError with one line."""
    path = Path(path)
    try:
        # utf-8-sig: editors on Windows like to start JSON files with a byte-order mark.
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise CharacterError(f"character file {path}: not found") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise CharacterError(f"character file {path}: cannot read it ({reason})") from None
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
        problems = error.errors()
        first = problems[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CharacterError(
            f"character file {path}: field {_field_path(first['loc'])}: {message}{more}"
        ) from None


# A character is chosen by its file's stem ("archivist"), or by the name inside it.
CHARACTER_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def character_key(name: str) -> str:
    """A name as a key admins can type: "Captain Hook" -> "captain-hook"."""
    return re.sub(r"[^a-z0-9_.-]+", "-", name.strip().casefold()).strip("-")[:64] or "character"


@dataclass(frozen=True)
class InstalledCharacter:
    """A character a world may choose: `key` is how an admin names it (its file's stem, or
    the name a plugin gave it) and what a world's choice keeps."""

    key: str
    character: Character
    origin: str  # "characters/archivist.json", "plugin weather", ...


@dataclass(frozen=True)
class CharacterCatalog:
    """The installed characters, and the process's own (the default of every world)."""

    default: InstalledCharacter
    others: tuple[InstalledCharacter, ...] = ()

    @classmethod
    def only(cls, character: Character, key: str) -> CharacterCatalog:
        """A catalogue of one: the process's character."""
        return cls(InstalledCharacter(key, character, "settings"))

    @property
    def all(self) -> list[InstalledCharacter]:
        return [self.default, *self.others]

    def find(self, name: str) -> InstalledCharacter | None:
        """The character an admin named: by key, else by its name or username (any case)."""
        wanted = name.strip().casefold()
        if not wanted:
            return None
        for installed in self.all:
            if installed.key.casefold() == wanted:
                return installed
        for installed in self.all:
            if wanted in (n.casefold() for n in installed.character.names):
                return installed
        return None

    def keys(self) -> list[str]:
        return [installed.key for installed in self.all]


def character_catalog(
    default: Character,
    default_key: str,
    *,
    folders: Sequence[Path] = (),
    extra: Sequence[InstalledCharacter] = (),
) -> CharacterCatalog:
    """Every character installed beside the default: the `*.json` files of `folders` (first
    folder first; a key seen earlier wins, so the working folder's `characters/archivist.json`
    hides the shipped one) and `extra` (plugins' characters). A file that does not load is
    left out with a warning: one bad file must not stop the bot."""
    seen = {default_key.casefold()}
    found: list[InstalledCharacter] = []
    for folder in folders:
        try:
            files = sorted(folder.glob("*.json"))
        except OSError:
            continue
        for path in files:
            key = path.stem
            if key.casefold() in seen or not CHARACTER_KEY.fullmatch(key):
                continue
            try:
                character = load_character(path)
            except CharacterError as error:
                log.warning("%s; it cannot be chosen with /character", error)
                continue
            seen.add(key.casefold())
            found.append(InstalledCharacter(key, character, str(path)))
    for installed in extra:
        if installed.key.casefold() in seen or not CHARACTER_KEY.fullmatch(installed.key):
            log.warning("character %r (%s) is already installed", installed.key, installed.origin)
            continue
        seen.add(installed.key.casefold())
        found.append(installed)
    return CharacterCatalog(InstalledCharacter(default_key, default, "settings"), tuple(found))


@dataclass(frozen=True)
class WorldChoice:
    """What a world runs as: its character and, when its admins chose them, its own SMALL and
    LARGE model names (None: the process's settings)."""

    character: Character
    character_key: str
    small_model: str | None = None
    large_model: str | None = None
    # The character the world chose, when it is no longer installed (the default stands in).
    missing_character: str | None = None
    # Model names the world chose that the operator does not allow (any more): kept in the
    # world's settings, never used (the process's model stands in), shown by `/model`.
    refused_small_model: str | None = None
    refused_large_model: str | None = None

    def model_name(self, model_class: str) -> str | None:
        """The world's model name for "small" or "large" (a `ModelClass`), or None."""
        return self.small_model if model_class == "small" else self.large_model

    def refused_model(self, model_class: str) -> str | None:
        """The name chosen here for "small" or "large" that is not allowed, or None."""
        return self.refused_small_model if model_class == "small" else self.refused_large_model

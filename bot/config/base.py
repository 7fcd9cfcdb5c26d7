"""What every settings group shares: the pydantic-settings configuration, overrides by
Python field name, the validators several groups use, and `ConfigError`.

Overrides passed in code use the Python field names (`ModelSettings(small_model="x")`,
`load_settings(model={"small_model": "x"})`). That is done by `SettingsGroup.__init__` rather
than `populate_by_name`, because pydantic-settings would then also read the bare field name
from the environment: `SMALL_MODEL`, `DATA_DIR`, `MAX_RETRIES` ... names Mnemo never promised
to read. The groups themselves live in config_services.py, config_platforms.py and
config_runtime.py; `bot.config.settings` gathers them into `Settings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, overload
from urllib.parse import urlsplit

from pydantic import AfterValidator, AliasChoices
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

# The checkout this `bot` package was loaded from (an editable install, as `make` does, or a
# source run). The default character and the built-in plugins are found there rather than in
# the working folder, so `mnemo` behaves the same whichever folder it is started in. Without a
# checkout (an installed wheel) they are the copies shipped inside the package (setup.py maps
# `characters/` and `plugins/` to `bot/_builtin/`).
_PACKAGE = Path(__file__).resolve().parents[1]
_CHECKOUT = _PACKAGE.parent
_HAS_CHECKOUT = (_CHECKOUT / "characters" / "mnemo.json").is_file()
_SHIPPED = _PACKAGE / "_builtin"
BUILTIN_CHARACTERS = (_CHECKOUT if _HAS_CHECKOUT else _SHIPPED) / "characters"
BUILTIN_PLUGINS = (_CHECKOUT if _HAS_CHECKOUT else _SHIPPED) / "plugins"


class ConfigError(Exception):
    """A setting is missing or malformed; the message is one line meant for the operator."""


def settings_config(prefix: str = "") -> SettingsConfigDict:
    return SettingsConfigDict(
        env_prefix=prefix,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        # `DISCORD_TOKEN=` (as docker compose and copied templates write it) means "unset",
        # not "the empty token" - otherwise an empty OPENAI_API_KEY would disable offline mode.
        env_ignore_empty=True,
    )


def env(*names: str) -> Any:
    """The environment variable(s) a field reads, first one canonical (shown in errors)."""
    return AliasChoices(*names)


@overload
def split_csv(value: str) -> list[str]: ...
@overload
def split_csv(value: object) -> object: ...
def split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def http_url(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("expected an http:// or https:// URL")
    return value


def _absolute(path: Path) -> Path:
    """A path setting made absolute once, against the folder Mnemo was started in.

    Relative paths are resolved here rather than where they are used: the bundled MongoDB runs
    with another working folder, so a relative path handed to it named a different place.
    """
    return path.expanduser().absolute()


# Every path setting has this type (and `validate_default=True` when its default is relative).
AbsolutePath = Annotated[Path, AfterValidator(_absolute)]


def _preferred_alias(info: FieldInfo) -> str | None:
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        first = alias.choices[0]
        return first if isinstance(first, str) else None
    return alias if isinstance(alias, str) else None


class SettingsGroup(BaseSettings):
    """Base of every settings group: accepts overrides by Python field name."""

    def __init__(self, **values: Any) -> None:
        fields = type(self).model_fields
        renamed: dict[str, Any] = {}
        for key, value in values.items():
            info = fields.get(key)
            alias = _preferred_alias(info) if info is not None else None
            renamed[alias or key] = value
        super().__init__(**renamed)

"""Settings, read from the environment and `.env` by pydantic-settings.

Service settings keep their conventional names (`OPENAI_API_KEY`, `MONGODB_URI`, `DISCORD_TOKEN`,
...); Mnemo's own knobs are prefixed `MNEMO_`. `.env.example` documents every one.
A wrong value stops start-up with one line (`ConfigError`), never a traceback, and a secret is
never echoed back.

The groups live by subject (config_services.py: model, embedding, storage;
config_platforms.py; config_runtime.py: runtime and ops) on a shared base (config_base.py);
this module gathers them into `Settings` and loads them, and every name stays importable
from here (`from bot.config.settings import Settings, ModelSettings, ConfigError`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tempfile
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import AliasChoices, SecretStr, ValidationError
from pydantic_settings import BaseSettings
from pydantic_settings.exceptions import SettingsError

from bot.config.base import (
    BUILTIN_CHARACTERS,
    BUILTIN_PLUGINS,
    AbsolutePath,
    ConfigError,
    SettingsGroup,
)
from bot.config.memory import MemorySettings, default_memory
from bot.config.platforms import PlatformSettings
from bot.config.privacy import PrivacySettings, default_privacy
from bot.config.runtime import OpsSettings, RuntimeSettings, default_ops, unpriced_models
from bot.config.services import EmbeddingSettings, ModelSettings, StorageSettings

__all__ = [
    "BUILTIN_CHARACTERS",
    "BUILTIN_PLUGINS",
    "AbsolutePath",
    "ConfigError",
    "EmbeddingSettings",
    "ModelSettings",
    "OpsSettings",
    "PlatformSettings",
    "PrivacySettings",
    "RuntimeSettings",
    "Settings",
    "StorageSettings",
    "check_data_dir",
    "describe_error",
    "env_names",
    "environment_variables",
    "load_settings",
    "setting_names",
    "unknown_setting_warnings",
]

# Field-name fragments whose values are never echoed in an error, even when not a SecretStr
# (a Telegram webhook URL usually carries the bot token in its path).
_SENSITIVE_WORDS = ("token", "key", "secret", "password", "uri", "url")


@dataclass(frozen=True)
class Settings:
    """All settings, one sub-model per service. Built by `load_settings()`."""

    model: ModelSettings
    embedding: EmbeddingSettings
    storage: StorageSettings
    platforms: PlatformSettings
    runtime: RuntimeSettings
    ops: OpsSettings = dataclasses.field(default_factory=default_ops)
    # Retention and the /privacy text (bot/config/privacy.py).
    privacy: PrivacySettings = dataclasses.field(default_factory=default_privacy)
    # What the reply is shown of the memory, and the facts' language (bot/config/memory.py).
    memory: MemorySettings = dataclasses.field(default_factory=default_memory)
    # The settings file these came from, if any: plugins' settings models read it too. Where
    # the values came from does not make two settings different.
    env_file: Path | None = dataclasses.field(default=None, compare=False)


def _groups() -> dict[str, type[SettingsGroup]]:
    return {
        "model": ModelSettings,
        "embedding": EmbeddingSettings,
        "storage": StorageSettings,
        "platforms": PlatformSettings,
        "runtime": RuntimeSettings,
        "ops": OpsSettings,
        "privacy": PrivacySettings,
        "memory": MemorySettings,
    }


def env_names(cls: type[BaseSettings], field: str) -> list[str]:
    """Every environment variable that sets `field` of `cls`, the canonical one first."""
    info = cls.model_fields[field]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice).upper() for choice in alias.choices if isinstance(choice, str)]
    if isinstance(alias, str):
        return [alias.upper()]
    return [f"{cls.model_config.get('env_prefix', '')}{field}".upper()]


def environment_variables() -> list[str]:
    """The canonical name of every setting Mnemo reads, in `.env.example` order."""
    return [env_names(cls, field)[0] for cls in _groups().values() for field in cls.model_fields]


def _field_for(cls: type[BaseSettings], key: str) -> str | None:
    """The field an error location names: pydantic reports the alias the value came in by."""
    for field in cls.model_fields:
        if key.lower() == field.lower() or key.upper() in env_names(cls, field):
            return field
    return None


def _is_secret(cls: type[BaseSettings], field: str | None) -> bool:
    if field is None:
        return True
    annotation = cls.model_fields[field].annotation
    if annotation is SecretStr or SecretStr in typing.get_args(annotation):
        return True
    return any(word in field.lower() for word in _SENSITIVE_WORDS)


def describe_error(cls: type[BaseSettings], error: ValidationError) -> str:
    """One line naming the environment variable, what it expects and (unless secret) the value.

    Public so plugin settings (bot.plugin.loading) report errors the same way.
    """
    problems = error.errors()
    first = problems[0]
    key = str(first["loc"][0]) if first.get("loc") else ""
    field = _field_for(cls, key) if key else None
    if field is not None:
        # pydantic-settings reports the first alias whichever one was set, so name them all.
        names = env_names(cls, field)
        name = names[0] + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")
    else:
        name = key.upper() or cls.__name__
    message = str(first["msg"]).removeprefix("Value error, ")
    given = first.get("input")
    shown = "" if _is_secret(cls, field) else _short(given)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"setting {name}: {message}{shown}{more}"


def _short(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return ""
    text = str(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f" (got {text!r})"


def load_settings(env_file: Path | None = Path(".env"), **overrides: dict[str, object]) -> Settings:
    """Read every settings group; raise `ConfigError` with one line on the first bad value.

    `env_file=None` reads the environment only; `overrides` maps a group (`model`, `embedding`,
    `storage`, `platforms`, `runtime`, `ops`, `privacy`) to field values that win over the
    environment.
    """
    classes = _groups()
    unknown = sorted(set(overrides) - set(classes))
    if unknown:
        raise TypeError(f"load_settings: unknown settings group(s) {', '.join(unknown)}")
    if env_file is not None:
        _check_env_file(env_file)
    groups: dict[str, BaseSettings] = {}
    for key, cls in classes.items():
        try:
            groups[key] = cls(_env_file=env_file, **overrides.get(key, {}))
        except ValidationError as error:
            raise ConfigError(describe_error(cls, error)) from None
        except SettingsError as error:
            # Raised before validation, e.g. a value pydantic-settings could not decode; its
            # message names the field and the source, never the value.
            raise ConfigError(f"setting {cls.__name__}: {error}") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"settings file {env_file}: cannot read it ({error})") from None
    settings = Settings(**groups, env_file=env_file)  # type: ignore[arg-type]
    _check_across_groups(settings)
    return settings


def _check_across_groups(settings: Settings) -> None:
    """What no one group can check alone: a dollar cap needs a price for every model it
    counts (the configured ones and MNEMO_MODEL_CHOICES; the offline model costs nothing)."""
    model = settings.model
    if model.offline:
        return
    counted = [model.small_model, model.large_model, *model.model_choices]
    missing = unpriced_models(settings.ops, counted)
    if missing:
        raise ConfigError(
            "setting MNEMO_DAILY_USD_PER_WORLD / _PER_PERSON / _TOTAL: no price for "
            f"{', '.join(missing)} in MNEMO_MODEL_PRICES (MODEL=PROMPT/COMPLETION, USD per "
            "million tokens), so its spend could not count against the cap"
        )


def _check_env_file(env_file: Path) -> None:
    """A line python-dotenv cannot parse is an error, once, naming the file and the line.

    Otherwise dotenv skips it with a warning repeated by every settings group, and the setting
    on that line silently keeps its default. The line itself is not shown: it may hold a secret.
    """
    from dotenv.parser import parse_stream

    try:
        with env_file.open(encoding="utf-8") as stream:
            bad = next((b.original.line for b in parse_stream(stream) if b.error), None)
    except FileNotFoundError:
        return  # a missing default .env is fine; an explicit one is checked by the caller
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"settings file {env_file}: cannot read it ({error})") from None
    if bad is not None:
        raise ConfigError(f"settings file {env_file}, line {bad}: not a NAME=value line")


def check_data_dir(data_dir: Path) -> None:
    """The data folder exists (made when missing) and takes a new file; else `ConfigError`.

    Checked once at start-up, so an unwritable MNEMO_DATA_DIR is one line naming the folder and
    the reason, not a traceback from whichever part first writes there (the log file).
    """
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".mnemo-write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(
            f"setting MNEMO_DATA_DIR: cannot write to the folder {data_dir} ({reason})"
        ) from None


# Prefixes of names that are not settings: the test tools and the fault hook read them
# (bot/testing, bot/faults.py), and the Makefile exports MNEMO_TEST_MODEL_DIR to every command.
_NOT_SETTINGS_PREFIXES = ("MNEMO_TEST_",)


def setting_names(models: Iterable[type[BaseSettings]] = ()) -> set[str]:
    """Every environment name Mnemo's settings read (aliases included), and those of `models`
    (the loaded plugins' settings models)."""
    names: set[str] = set()
    for cls in [*_groups().values(), *models]:
        for field in cls.model_fields:
            names.update(env_names(cls, field))
    return names


def unknown_setting_warnings(
    env_file: Path | None,
    known: set[str],
    environ: Mapping[str, str] = os.environ,
) -> list[str]:
    """One line per MNEMO_* name, in the environment or the settings file, that nothing reads,
    with the nearest name that is read (a typo is otherwise silently ignored: the setting keeps
    its default). Values are never shown."""
    given: dict[str, str] = {name.upper(): "the environment" for name in environ}
    if env_file is not None and env_file.is_file():
        from dotenv import dotenv_values

        for name in dotenv_values(env_file):
            given.setdefault(name.upper(), str(env_file))
    warnings: list[str] = []
    for name, where in sorted(given.items()):
        if not name.startswith("MNEMO_") or name.startswith(_NOT_SETTINGS_PREFIXES):
            continue
        if name in known:
            continue
        nearest = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]}?" if nearest else "; see .env.example for the names"
        what = "is not a setting of Mnemo or of a loaded plugin"
        warnings.append(f"{name} (in {where}) {what}{hint}")
    return warnings

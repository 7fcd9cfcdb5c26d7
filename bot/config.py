"""Settings, read from the environment and `.env` by pydantic-settings.

Service settings keep their conventional names (`OPENAI_API_KEY`, `MONGODB_URI`, `DISCORD_TOKEN`,
...); Mnemo's own knobs are prefixed `MNEMO_`. `.env.example` documents every one.
A wrong value stops start-up with one line (`ConfigError`), never a traceback, and a secret is
never echoed back.

Overrides passed in code use the Python field names (`ModelSettings(small_model="x")`,
`load_settings(model={"small_model": "x"})`). That is done by `_Group.__init__` rather than
`populate_by_name`, because pydantic-settings would then also read the bare field name from the
environment: `SMALL_MODEL`, `DATA_DIR`, `MAX_RETRIES` ... names Mnemo never promised to read.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

# Platforms an admin id may name; kept here (not imported from bot.models) so settings load
# without the domain package.
_ADMIN_PLATFORMS = ("discord", "telegram", "console", "test")
# Field-name fragments whose values are never echoed in an error, even when not a SecretStr
# (a Telegram webhook URL usually carries the bot token in its path).
_SENSITIVE_WORDS = ("token", "key", "secret", "password", "uri", "url")


# The checkout this `bot` package was loaded from (an editable install, as `make` does, or a
# source run). The default character and the built-in plugins are found there rather than in
# the working folder, so `mnemo` behaves the same whichever folder it is started in. Without a
# checkout (a bare wheel) the old relative defaults apply and a setting must name the files.
_CHECKOUT = Path(__file__).resolve().parent.parent
_HAS_CHECKOUT = (_CHECKOUT / "characters" / "mnemo.json").is_file()
BUILTIN_CHARACTERS = _CHECKOUT / "characters" if _HAS_CHECKOUT else Path("characters")
BUILTIN_PLUGINS = _CHECKOUT / "plugins" if _HAS_CHECKOUT else Path("plugins")


class ConfigError(Exception):
    """A setting is missing or malformed; the message is one line meant for the operator."""


def _config(prefix: str = "") -> SettingsConfigDict:
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


def _env(*names: str) -> Any:
    """The environment variable(s) a field reads, first one canonical (shown in errors)."""
    return AliasChoices(*names)


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _http_url(value: str | None) -> str | None:
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


class _Group(BaseSettings):
    """Base of every settings group: accepts overrides by Python field name."""

    def __init__(self, **values: Any) -> None:
        fields = type(self).model_fields
        renamed: dict[str, Any] = {}
        for key, value in values.items():
            info = fields.get(key)
            alias = _preferred_alias(info) if info is not None else None
            renamed[alias or key] = value
        super().__init__(**renamed)


class ModelSettings(_Group):
    """The OpenAI-compatible endpoint. No key and no base URL selects the offline model."""

    model_config = _config()

    openai_api_key: SecretStr | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=_env("OPENAI_BASE_URL"))
    small_model: str = Field("gpt-4o-mini", validation_alias=_env("MNEMO_SMALL_MODEL"))
    large_model: str = Field("gpt-4o", validation_alias=_env("MNEMO_LARGE_MODEL"))
    timeout_seconds: float = Field(60.0, gt=0, validation_alias=_env("MNEMO_MODEL_TIMEOUT"))
    max_retries: int = Field(3, ge=0, le=10, validation_alias=_env("MNEMO_MODEL_RETRIES"))
    # Requests in flight at once (0: no limit). A local server that answers one request at a
    # time wants 1: calls then wait here, and the time-out counts from when each is sent.
    concurrency: int = Field(0, ge=0, le=1000, validation_alias=_env("MNEMO_MODEL_CONCURRENCY"))
    # `auto`: JSON tasks send `response_format` (a JSON schema) until the endpoint refuses it,
    # then JSON mode, then the prompt alone; `off`: never sent.
    structured_output: Literal["auto", "off"] = Field(
        "auto", validation_alias=_env("MNEMO_STRUCTURED_OUTPUT")
    )

    _url = field_validator("openai_base_url")(_http_url)

    @property
    def offline(self) -> bool:
        return self.openai_api_key is None and not self.openai_base_url


class EmbeddingSettings(_Group):
    """`local` runs all-MiniLM-L6-v2 with onnxruntime; any other name is an OpenAI model."""

    model_config = _config("MNEMO_EMBEDDING_")

    model: str = "local"
    # Folder holding model.onnx and tokenizer.json; default: Chroma's download cache.
    model_dir: AbsolutePath | None = None
    batch_size: int = Field(64, ge=1, le=2048)


class StorageSettings(_Group):
    model_config = _config()

    # No URI starts the bundled server; a URI may carry a password, hence SecretStr.
    mongodb_uri: SecretStr | None = Field(None, validation_alias=_env("MONGODB_URI"))
    mongodb_database: str = Field("mnemo", validation_alias=_env("MNEMO_MONGODB_DATABASE"))

    @field_validator("mongodb_uri")
    @classmethod
    def _mongodb_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        # PyMongo's own message for a wrong scheme reads like a bug; say what is expected.
        if value is not None:
            scheme = value.get_secret_value().strip().partition("://")[0].lower()
            if scheme not in ("mongodb", "mongodb+srv"):
                raise ValueError("expected a mongodb:// or mongodb+srv:// URI")
        return value

    # No host uses an embedded PersistentClient under data_dir.
    chroma_host: str | None = Field(None, validation_alias=_env("CHROMA_HOST"))
    chroma_port: int = Field(8000, ge=1, le=65535, validation_alias=_env("CHROMA_PORT"))
    data_dir: AbsolutePath = Field(
        Path("data"), validation_alias=_env("MNEMO_DATA_DIR"), validate_default=True
    )


class PlatformSettings(_Group):
    model_config = _config()

    # elizaOS's names are accepted too, so an elizaOS `.env` works as it is.
    discord_token: SecretStr | None = Field(
        None, validation_alias=_env("DISCORD_TOKEN", "DISCORD_API_TOKEN")
    )
    telegram_token: SecretStr | None = Field(
        None, validation_alias=_env("TELEGRAM_TOKEN", "TELEGRAM_BOT_TOKEN")
    )
    # Platform user ids ("discord:123", "telegram:456", or a bare id) allowed the admin commands.
    admin_ids: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=_env("MNEMO_ADMIN_IDS")
    )
    # Set: Telegram pushes updates to this public URL (behind a load balancer) instead of
    # being polled; several processes can then share one bot.
    telegram_webhook_url: str | None = Field(
        None, validation_alias=_env("MNEMO_TELEGRAM_WEBHOOK_URL")
    )
    telegram_webhook_port: int = Field(
        8443, ge=1, le=65535, validation_alias=_env("MNEMO_TELEGRAM_WEBHOOK_PORT")
    )
    # Where the webhook server listens: every interface behind a load balancer, loopback
    # behind a reverse proxy on the same host.
    telegram_webhook_listen: str = Field(
        "0.0.0.0", validation_alias=_env("MNEMO_TELEGRAM_WEBHOOK_LISTEN")
    )
    # Administrators of a Telegram group may use the admin commands in that group.
    telegram_group_admins: bool = Field(False, validation_alias=_env("MNEMO_TELEGRAM_GROUP_ADMINS"))
    # Global slash-command sync takes up to an hour to reach every guild, so the default syncs
    # per guild (instant) and global sync is opt-in.
    discord_global_sync: bool = Field(False, validation_alias=_env("MNEMO_DISCORD_GLOBAL_SYNC"))
    # Replies per user per minute; 0 turns the limit off.
    rate_limit_per_minute: int = Field(
        6, ge=0, le=10_000, validation_alias=_env("MNEMO_RATE_LIMIT_PER_MINUTE")
    )

    _split = field_validator("admin_ids", mode="before")(_split_csv)
    _url = field_validator("telegram_webhook_url")(_http_url)

    @field_validator("admin_ids")
    @classmethod
    def _check_admin_ids(cls, ids: list[str]) -> list[str]:
        # A typo in the platform would silently lock the admin out, so it is an error.
        normalized: list[str] = []
        for raw in ids:
            platform, sep, user = raw.strip().partition(":")
            if sep:
                if platform.lower() not in _ADMIN_PLATFORMS or not user.strip():
                    raise ValueError(
                        f"{raw.strip()!r} is not an id like 123, discord:123 or telegram:456"
                    )
                value = f"{platform.lower()}:{user.strip()}"
            else:
                value = platform
            if value not in normalized:
                normalized.append(value)
        return normalized

    def admin_ids_for(self, platform: str) -> frozenset[str]:
        """The admin user ids that apply on one platform: `platform:123` and bare `123`."""
        ids = set()
        for entry in self.admin_ids:
            prefix, sep, user = entry.partition(":")
            if not sep:
                ids.add(prefix)
            elif prefix == platform:
                ids.add(user)
        return frozenset(ids)


class RuntimeSettings(_Group):
    model_config = _config("MNEMO_")

    # A path, or a bare name such as `archivist`: characters/archivist.json in the working
    # folder if there is one, else the one shipped with Mnemo.
    character: AbsolutePath = Field(BUILTIN_CHARACTERS / "mnemo.json", validate_default=True)
    # `llm`: one SMALL-model call picks which validated evaluators run (the spec).
    # `all`: every validated evaluator runs, no call.
    evaluator_selection: Literal["llm", "all"] = "llm"
    evaluator_timeout: float = Field(120.0, gt=0)
    # Longer replies are cut at the last sentence end that fits, before they are split and stored.
    reply_max_chars: int = Field(4000, ge=100, le=100_000)
    # Pending evaluations of a room whose conversation went quiet are run after this long,
    # so what was said last is learned even if nobody speaks again.
    evaluation_idle_flush_minutes: float = Field(10.0, gt=0)
    # A failed evaluation is retried with back-off (this many seconds, doubling each time)
    # until it has had this many attempts, then left `dead` for the operator.
    evaluation_max_attempts: int = Field(5, ge=1, le=100)
    evaluation_retry_seconds: float = Field(5.0, gt=0)
    # After a crash, a message stored but never answered is answered if younger than this.
    answer_window_minutes: float = Field(5.0, ge=0)
    # The plugin folder (default: the built-in plugins shipped with Mnemo), and plugin names
    # to leave out (comma separated).
    plugins_dir: AbsolutePath = Field(BUILTIN_PLUGINS, validate_default=True)
    disabled_plugins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    _split = field_validator("disabled_plugins", mode="before")(_split_csv)

    @field_validator("character", mode="before")
    @classmethod
    def _character_by_name(cls, value: object) -> object:
        if isinstance(value, str) and value.strip() and "/" not in value and "\\" not in value:
            name = value.strip()
            if not Path(name).suffix:
                own = Path("characters") / f"{name}.json"
                return own if own.is_file() else BUILTIN_CHARACTERS / f"{name}.json"
        return value

    @field_validator("evaluator_selection", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value


def _parse_prices(value: object) -> object:
    """`gpt-4o=2.5/10, gpt-4o-mini=0.15/0.6` -> {model: (prompt, completion)} per 1M tokens."""
    if not isinstance(value, str):
        return value
    prices: dict[str, tuple[float, float]] = {}
    for entry in _split_csv(value):  # type: ignore[union-attr]
        model, sep, pair = str(entry).partition("=")
        prompt, slash, completion = pair.partition("/")
        try:
            if not sep or not slash or not model.strip():
                raise ValueError
            prices[model.strip()] = (float(prompt), float(completion))
        except ValueError:
            raise ValueError(
                f"{entry!r} is not MODEL=PROMPT/COMPLETION (USD per million tokens)"
            ) from None
    return prices


class OpsSettings(_Group):
    """Running as a service: the metrics endpoint, log files, model prices."""

    model_config = _config("MNEMO_")

    # Unset: no metrics server (a console chat opens no port). 0 picks a free port.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    # Loopback by default: metrics are for the operator's scraper, not the internet.
    metrics_host: str = "127.0.0.1"
    # `text` to stderr and a rotating file under MNEMO_DATA_DIR; `json` lines on stdout only
    # (containers, where the platform collects stdout).
    log_format: Literal["text", "json"] = "text"
    log_max_mb: float = Field(10.0, gt=0)
    log_backups: int = Field(5, ge=0, le=1000)
    # USD per million prompt / completion tokens, by model name, for the cost estimate.
    model_prices: Annotated[dict[str, tuple[float, float]], NoDecode] = Field(
        default_factory=lambda: {"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)}
    )

    _prices = field_validator("model_prices", mode="before")(_parse_prices)

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def _default_ops() -> OpsSettings:
    # Settings built in code (tests, benches) get the defaults without reading the environment.
    return OpsSettings.model_construct(
        **{
            name: info.get_default(call_default_factory=True)
            for name, info in OpsSettings.model_fields.items()
        }
    )


@dataclass(frozen=True)
class Settings:
    """All settings, one sub-model per service. Built by `load_settings()`."""

    model: ModelSettings
    embedding: EmbeddingSettings
    storage: StorageSettings
    platforms: PlatformSettings
    runtime: RuntimeSettings
    ops: OpsSettings = dataclasses.field(default_factory=_default_ops)
    # The settings file these came from, if any: plugins' settings models read it too. Where
    # the values came from does not make two settings different.
    env_file: Path | None = dataclasses.field(default=None, compare=False)


def _groups() -> dict[str, type[_Group]]:
    return {
        "model": ModelSettings,
        "embedding": EmbeddingSettings,
        "storage": StorageSettings,
        "platforms": PlatformSettings,
        "runtime": RuntimeSettings,
        "ops": OpsSettings,
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

    Public so plugin settings (bot.plugins) report errors the same way.
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
    `storage`, `platforms`, `runtime`, `ops`) to field values that win over the environment.
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
    return Settings(**groups, env_file=env_file)  # type: ignore[arg-type]


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

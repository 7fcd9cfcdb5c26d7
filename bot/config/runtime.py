"""Settings of the runtime (character, evaluation, plugins, logging) and of running Mnemo as a
service (metrics, log files, model prices, daily spending caps)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from bot.config.base import (
    BUILTIN_CHARACTERS,
    BUILTIN_PLUGINS,
    AbsolutePath,
    SettingsGroup,
    settings_config,
    split_csv,
)
from bot.i18n import SOURCE_LANGUAGE, available_languages, match_language


class RuntimeSettings(SettingsGroup):
    model_config = settings_config("MNEMO_")

    # A path, or a bare name such as `archivist`: characters/archivist.json in the working
    # folder if there is one, else the one shipped with Mnemo.
    character: AbsolutePath = Field(BUILTIN_CHARACTERS / "mnemo.json", validate_default=True)
    # `llm`: one SMALL-model call picks which validated evaluators run (the spec).
    # `all`: every validated evaluator runs, no call.
    evaluator_selection: Literal["llm", "all"] = "llm"
    evaluator_timeout: float = Field(120.0, gt=0)
    # Longer replies are cut at the last sentence end that fits, before they are split and stored.
    reply_max_chars: int = Field(4000, ge=100, le=100_000)
    # Replies read as the model writes them (a reply that fails a check for good is stopped
    # there) and shown so where the adapter can (one message edited as the text grows,
    # printed as it comes in the console), where the model endpoint streams. Only the
    # finished reply is stored. False: each reply is asked for and sent once, whole.
    stream_replies: bool = True
    # Pending evaluations of a room whose conversation went quiet are run after this long,
    # so what was said last is learned even if nobody speaks again.
    evaluation_idle_flush_minutes: float = Field(10.0, gt=0)
    # A failed evaluation is retried with back-off (this many seconds, doubling each time)
    # until it has had this many attempts, then left `dead` for the operator.
    evaluation_max_attempts: int = Field(5, ge=1, le=100)
    evaluation_retry_seconds: float = Field(5.0, gt=0)
    # Several processes on one database: a room's evaluations belong to the process holding
    # its lease, renewed every third of this; a process that dies leaves its rooms to the
    # others after at most this long.
    evaluation_lease_seconds: float = Field(30.0, ge=1, le=3600)
    # After a crash, a message stored but never answered is answered if younger than this.
    answer_window_minutes: float = Field(5.0, ge=0)
    # The operator's own plugin folder, loaded after the built-in plugins shipped with Mnemo
    # rather than instead of them (an operator adding a plugin rarely means to lose memory);
    # `builtin_plugins=False` loads it (and installed packages) alone. Then plugin names to
    # leave out (comma separated), wherever they come from.
    plugins_dir: AbsolutePath | None = None
    builtin_plugins: bool = True
    disabled_plugins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # The language of the bot's own words (command answers, notices, its fallback lines)
    # where a world's admins chose none (/language) and the person's app says none that has
    # a catalog (docs/languages.md). Replies written by the model follow the conversation.
    language: str = SOURCE_LANGUAGE

    _split = field_validator("disabled_plugins", mode="before")(split_csv)

    @property
    def plugin_folders(self) -> list[Path]:
        """The folders plugins are loaded from, in order: the built-in one (unless turned off),
        then the operator's; the built-in folder named as MNEMO_PLUGINS_DIR counts once."""
        folders = [BUILTIN_PLUGINS] if self.builtin_plugins else []
        extra = self.plugins_dir
        if extra is not None and extra.resolve() not in {f.resolve() for f in folders}:
            folders.append(extra)
        return folders

    @field_validator("language", mode="after")
    @classmethod
    def _language_with_a_catalog(cls, value: str) -> str:
        found = match_language(value)
        if found is None:
            raise ValueError(
                f"no catalog for the language {value!r}; available: "
                + ", ".join(available_languages())
            )
        return found

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
    for entry in split_csv(value):
        model, sep, pair = entry.partition("=")
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


class OpsSettings(SettingsGroup):
    """Running as a service: the metrics endpoint, log files, model prices, spending caps."""

    model_config = settings_config("MNEMO_")

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

    # Daily caps (a UTC day), counted across every process: the tokens (prompt + completion)
    # or the estimated USD (MNEMO_MODEL_PRICES) the model may spend for one world (a server,
    # a group, a DM), for one person, and in all; unset: no cap. Past one, the room is told
    # once that day and gets no reply; learning that needs the model waits
    # (docs/operations.md).
    daily_tokens_per_world: int | None = Field(None, ge=1)
    daily_tokens_per_person: int | None = Field(None, ge=1)
    daily_tokens_total: int | None = Field(None, ge=1)
    daily_usd_per_world: float | None = Field(None, gt=0)
    daily_usd_per_person: float | None = Field(None, gt=0)
    daily_usd_total: float | None = Field(None, gt=0)

    _prices = field_validator("model_prices", mode="before")(_parse_prices)

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def default_ops() -> OpsSettings:
    # Settings built in code (tests, benches) get the defaults without reading the environment.
    return OpsSettings.model_construct(
        **{
            name: info.get_default(call_default_factory=True)
            for name, info in OpsSettings.model_fields.items()
        }
    )


def unpriced_models(ops: OpsSettings, models: list[str]) -> list[str]:
    """The models a dollar cap would count that have no price (their spend would count as
    nothing): empty when no dollar cap is set."""
    dollar_caps = (ops.daily_usd_per_world, ops.daily_usd_per_person, ops.daily_usd_total)
    if all(cap is None for cap in dollar_caps):
        return []
    return sorted({model for model in models if model not in ops.model_prices})

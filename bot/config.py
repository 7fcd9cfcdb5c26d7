"""Settings, read from the environment and `.env` by pydantic-settings.

Service settings keep their conventional names (`OPENAI_API_KEY`, `MONGODB_URI`, `DISCORD_TOKEN`,
...); Mnemo's own knobs are prefixed `MNEMO_`. `.env.example` documents every one.
A wrong value stops start-up with one line (`ConfigError`), never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class ConfigError(Exception):
    """A setting is missing or malformed; the message is one line meant for the operator."""


def _config(prefix: str = "") -> SettingsConfigDict:
    return SettingsConfigDict(
        env_prefix=prefix,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
    )


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class ModelSettings(BaseSettings):
    """The OpenAI-compatible endpoint. No key and no base URL selects the offline model."""

    model_config = _config()

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    small_model: str = Field("gpt-4o-mini", validation_alias=AliasChoices("MNEMO_SMALL_MODEL"))
    large_model: str = Field("gpt-4o", validation_alias=AliasChoices("MNEMO_LARGE_MODEL"))
    timeout_seconds: float = Field(
        60.0, gt=0, validation_alias=AliasChoices("MNEMO_MODEL_TIMEOUT")
    )
    max_retries: int = Field(3, ge=0, le=10, validation_alias=AliasChoices("MNEMO_MODEL_RETRIES"))

    @property
    def offline(self) -> bool:
        return self.openai_api_key is None and not self.openai_base_url


class EmbeddingSettings(BaseSettings):
    """`local` runs all-MiniLM-L6-v2 with onnxruntime; any other name is an OpenAI model."""

    model_config = _config("MNEMO_EMBEDDING_")

    model: str = "local"
    # Folder holding model.onnx and tokenizer.json; default: Chroma's download cache.
    model_dir: Path | None = None
    batch_size: int = Field(64, ge=1, le=2048)


class StorageSettings(BaseSettings):
    model_config = _config()

    mongodb_uri: SecretStr | None = None
    mongodb_database: str = Field("mnemo", validation_alias=AliasChoices("MNEMO_MONGODB_DATABASE"))
    chroma_host: str | None = None
    chroma_port: int = Field(8000, ge=1, le=65535)
    data_dir: Path = Field(Path("data"), validation_alias=AliasChoices("MNEMO_DATA_DIR"))


class PlatformSettings(BaseSettings):
    model_config = _config()

    discord_token: SecretStr | None = None
    telegram_token: SecretStr | None = None
    # Platform user ids ("discord:123", "telegram:456", or a bare id) allowed the admin commands.
    admin_ids: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=AliasChoices("MNEMO_ADMIN_IDS")
    )

    _split = field_validator("admin_ids", mode="before")(_split_csv)


class RuntimeSettings(BaseSettings):
    model_config = _config("MNEMO_")

    character: Path = Path("characters/mnemo.json")
    # `llm`: one SMALL-model call picks which validated evaluators run (the spec).
    # `all`: every validated evaluator runs, no call.
    evaluator_selection: Literal["llm", "all"] = "llm"
    evaluator_timeout: float = Field(120.0, gt=0)
    conversation_length: int = Field(32, ge=2, le=1000)
    # Extra plugin folders and plugin names to leave out (comma separated).
    plugins_dir: Path = Path("plugins")
    disabled_plugins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    _split = field_validator("disabled_plugins", mode="before")(_split_csv)


@dataclass(frozen=True)
class Settings:
    """All settings, one sub-model per service. Built by `load_settings()`."""

    model: ModelSettings
    embedding: EmbeddingSettings
    storage: StorageSettings
    platforms: PlatformSettings
    runtime: RuntimeSettings


def _env_name_for(cls: type[BaseSettings], field: str) -> str:
    info = cls.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"{cls.model_config.get('env_prefix', '')}{field}"


def load_settings(
    env_file: Path | None = Path(".env"), **overrides: dict[str, object]
) -> Settings:
    """Read every settings group; raise `ConfigError` with one line on the first bad value."""
    groups: dict[str, BaseSettings] = {}
    classes: dict[str, type[BaseSettings]] = {
        "model": ModelSettings,
        "embedding": EmbeddingSettings,
        "storage": StorageSettings,
        "platforms": PlatformSettings,
        "runtime": RuntimeSettings,
    }
    for key, cls in classes.items():
        try:
            groups[key] = cls(_env_file=env_file, **overrides.get(key, {}))  # type: ignore[arg-type, call-arg]
        except ValidationError as error:
            first = error.errors()[0]
            field = str(first["loc"][0]) if first.get("loc") else "?"
            given = first.get("input")
            # Never echo a secret back, even a malformed one.
            secret = any(word in field for word in ("token", "key", "uri"))
            shown = None if secret else given
            given_text = f" (got {shown!r})" if isinstance(shown, str | int | float) else ""
            raise ConfigError(
                f"setting {_env_name_for(cls, field).upper()}: {first['msg']}{given_text}"
            ) from None
    return Settings(**groups)  # type: ignore[arg-type]

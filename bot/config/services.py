"""Settings of the services Mnemo talks to: the model endpoint, the embedder, MongoDB and
Chroma."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from bot.config.base import (
    AbsolutePath,
    SettingsGroup,
    env,
    http_url,
    settings_config,
    split_csv,
)

# A model name as endpoints spell them ("gpt-4o-mini", "llama3.1:8b", "Qwen/Qwen2.5-7B-Instruct"):
# ASCII letters, digits and `. _ : / + -`, no whitespace, at most `MAX_MODEL_NAME` long. What
# an admin may name with `/model` is one of the operator's own `MNEMO_MODEL_CHOICES`, which
# are checked against this when the settings are read.
MAX_MODEL_NAME = 100
MODEL_NAME = re.compile(rf"[A-Za-z0-9._:/+-]{{1,{MAX_MODEL_NAME}}}")


def _model_names(value: object) -> object:
    """`gpt-4o, gpt-4o-mini` -> ["gpt-4o", "gpt-4o-mini"]: each a model name, once."""
    names = split_csv(value)
    if not isinstance(names, list):
        return names
    for name in names:
        if not isinstance(name, str) or not MODEL_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not a model name (at most {MAX_MODEL_NAME} letters, digits "
                "and . _ : / + -, comma separated)"
            )
    return list(dict.fromkeys(names))


class ModelSettings(SettingsGroup):
    """The OpenAI-compatible endpoint. No key and no base URL selects the offline model."""

    model_config = settings_config()

    openai_api_key: SecretStr | None = Field(None, validation_alias=env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=env("OPENAI_BASE_URL"))
    small_model: str = Field("gpt-4o-mini", validation_alias=env("MNEMO_SMALL_MODEL"))
    large_model: str = Field("gpt-4o", validation_alias=env("MNEMO_LARGE_MODEL"))
    # The only model names a world's admins may choose with `/model` (comma separated);
    # empty: none, and every world runs on the two above. The operator pays for every model
    # call, so the operator, not a server's owner, decides which models may be called.
    model_choices: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=env("MNEMO_MODEL_CHOICES")
    )
    timeout_seconds: float = Field(60.0, gt=0, validation_alias=env("MNEMO_MODEL_TIMEOUT"))
    max_retries: int = Field(3, ge=0, le=10, validation_alias=env("MNEMO_MODEL_RETRIES"))
    # Requests in flight at once (0: no limit). A local server that answers one request at a
    # time wants 1: calls then wait here, and the time-out counts from when each is sent.
    concurrency: int = Field(0, ge=0, le=1000, validation_alias=env("MNEMO_MODEL_CONCURRENCY"))
    # `auto`: JSON tasks send `response_format` (a JSON schema) until the endpoint refuses it,
    # then JSON mode, then the prompt alone; `off`: never sent.
    structured_output: Literal["auto", "off"] = Field(
        "auto", validation_alias=env("MNEMO_STRUCTURED_OUTPUT")
    )
    # A speech-to-text model on the same endpoint (`/v1/audio/transcriptions`: whisper-1,
    # gpt-4o-mini-transcribe, a local whisper server's name): a voice note is transcribed and
    # handled as text. Unset: a voice note is kept as a voice note, unheard.
    transcription_model: str | None = Field(None, validation_alias=env("MNEMO_TRANSCRIPTION_MODEL"))

    _url = field_validator("openai_base_url")(http_url)

    @field_validator("transcription_model")
    @classmethod
    def _no_blank_model(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    _choices = field_validator("model_choices", mode="before")(_model_names)

    @property
    def offline(self) -> bool:
        return self.openai_api_key is None and not self.openai_base_url


class EmbeddingSettings(SettingsGroup):
    """`local` runs all-MiniLM-L6-v2 with onnxruntime; any other name is an OpenAI model."""

    model_config = settings_config("MNEMO_EMBEDDING_")

    model: str = "local"
    # Folder holding model.onnx and tokenizer.json; default: Chroma's download cache.
    model_dir: AbsolutePath | None = None
    batch_size: int = Field(64, ge=1, le=2048)


class StorageSettings(SettingsGroup):
    model_config = settings_config()

    # No URI starts the bundled server; a URI may carry a password, hence SecretStr.
    mongodb_uri: SecretStr | None = Field(None, validation_alias=env("MONGODB_URI"))
    mongodb_database: str = Field("mnemo", validation_alias=env("MNEMO_MONGODB_DATABASE"))
    # How long a database call waits for a reachable server before it fails: the first message
    # of an outage waits this long before it is journaled (later ones are journaled at once).
    mongodb_timeout_seconds: float = Field(
        5.0, gt=0, le=120, validation_alias=env("MNEMO_MONGODB_TIMEOUT_SECONDS")
    )
    # The bound of the outage journal (messages kept on disk while MongoDB is unreachable);
    # when it is full, new messages are refused with a reply saying so.
    journal_max_mb: float = Field(50.0, gt=0, validation_alias=env("MNEMO_JOURNAL_MAX_MB"))
    # Seconds one Chroma call or one write of the local files (the journal) may take before it
    # is given up on as stuck (a full or hung disk): the message goes on without it, and
    # /healthz reports the stuck store until the call returns.
    store_call_seconds: float = Field(
        15.0, gt=0, le=600, validation_alias=env("MNEMO_STORE_CALL_SECONDS")
    )

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
    chroma_host: str | None = Field(None, validation_alias=env("CHROMA_HOST"))
    chroma_port: int = Field(8000, ge=1, le=65535, validation_alias=env("CHROMA_PORT"))
    data_dir: AbsolutePath = Field(
        Path("data"), validation_alias=env("MNEMO_DATA_DIR"), validate_default=True
    )

"""Settings: every field reads its documented environment variable, from the environment or a
`.env` file, and a bad value stops start-up with one line that names the variable."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.settings import (
    ConfigError,
    ModelSettings,
    PlatformSettings,
    Settings,
    describe_error,
    environment_variables,
    load_settings,
)
from tests.paths import REPO

# Names someone may have set for other programs; Mnemo must not read them.
FOREIGN = ("SMALL_MODEL", "LARGE_MODEL", "DATA_DIR", "ADMIN_IDS", "MAX_RETRIES", "TIMEOUT_SECONDS")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting leaks in from the machine running the tests, nor from a `.env` in the cwd."""
    for name in (*environment_variables(), "DISCORD_API_TOKEN", "TELEGRAM_BOT_TOKEN", *FOREIGN):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def load(**overrides: dict[str, object]) -> Settings:
    return load_settings(env_file=None, **overrides)


# (variable, value, (group, field), expected)
CASES = [
    ("OPENAI_API_KEY", "sk-abc", ("model", "openai_api_key"), "sk-abc"),
    (
        "OPENAI_BASE_URL",
        "http://localhost:11434/v1",
        ("model", "openai_base_url"),
        "http://localhost:11434/v1",
    ),
    ("MNEMO_SMALL_MODEL", "tiny", ("model", "small_model"), "tiny"),
    ("MNEMO_LARGE_MODEL", "huge", ("model", "large_model"), "huge"),
    (
        "MNEMO_MODEL_CHOICES",
        "gpt-4o, Qwen/Qwen2.5-7B-Instruct,gpt-4o",
        ("model", "model_choices"),
        ["gpt-4o", "Qwen/Qwen2.5-7B-Instruct"],
    ),
    ("MNEMO_MODEL_TIMEOUT", "5.5", ("model", "timeout_seconds"), 5.5),
    ("MNEMO_MODEL_RETRIES", "7", ("model", "max_retries"), 7),
    ("MNEMO_MODEL_CONCURRENCY", "1", ("model", "concurrency"), 1),
    ("MNEMO_STRUCTURED_OUTPUT", "off", ("model", "structured_output"), "off"),
    ("MNEMO_TRANSCRIPTION_MODEL", "whisper-1", ("model", "transcription_model"), "whisper-1"),
    (
        "MNEMO_EMBEDDING_MODEL",
        "text-embedding-3-small",
        ("embedding", "model"),
        "text-embedding-3-small",
    ),
    (
        "MNEMO_EMBEDDING_MODEL_DIR",
        "/models/minilm",
        ("embedding", "model_dir"),
        Path("/models/minilm"),
    ),
    ("MNEMO_EMBEDDING_BATCH_SIZE", "16", ("embedding", "batch_size"), 16),
    (
        "MONGODB_URI",
        "mongodb://u:p@db/?replicaSet=rs0",
        ("storage", "mongodb_uri"),
        "mongodb://u:p@db/?replicaSet=rs0",
    ),
    ("MNEMO_MONGODB_DATABASE", "mnemo_test", ("storage", "mongodb_database"), "mnemo_test"),
    ("CHROMA_HOST", "chroma.internal", ("storage", "chroma_host"), "chroma.internal"),
    ("CHROMA_PORT", "9000", ("storage", "chroma_port"), 9000),
    ("MNEMO_DATA_DIR", "/var/lib/mnemo", ("storage", "data_dir"), Path("/var/lib/mnemo")),
    ("DISCORD_TOKEN", "d-token", ("platforms", "discord_token"), "d-token"),
    ("DISCORD_API_TOKEN", "d-token", ("platforms", "discord_token"), "d-token"),
    ("TELEGRAM_TOKEN", "t-token", ("platforms", "telegram_token"), "t-token"),
    ("TELEGRAM_BOT_TOKEN", "t-token", ("platforms", "telegram_token"), "t-token"),
    ("MNEMO_ADMIN_IDS", "1,discord:2", ("platforms", "admin_ids"), ["1", "discord:2"]),
    (
        "MNEMO_TELEGRAM_WEBHOOK_URL",
        "https://bot.example.com/hook",
        ("platforms", "telegram_webhook_url"),
        "https://bot.example.com/hook",
    ),
    ("MNEMO_TELEGRAM_WEBHOOK_PORT", "88", ("platforms", "telegram_webhook_port"), 88),
    (
        "MNEMO_TELEGRAM_API_URL",
        "http://127.0.0.1:8081/bot",
        ("platforms", "telegram_api_url"),
        "http://127.0.0.1:8081/bot",
    ),
    (
        "MNEMO_TELEGRAM_WEBHOOK_LISTEN",
        "127.0.0.1",
        ("platforms", "telegram_webhook_listen"),
        "127.0.0.1",
    ),
    ("MNEMO_TELEGRAM_GROUP_ADMINS", "true", ("platforms", "telegram_group_admins"), True),
    ("MNEMO_DISCORD_GLOBAL_SYNC", "1", ("platforms", "discord_global_sync"), True),
    ("MNEMO_MONGODB_TIMEOUT_SECONDS", "1.5", ("storage", "mongodb_timeout_seconds"), 1.5),
    ("MNEMO_JOURNAL_MAX_MB", "0.5", ("storage", "journal_max_mb"), 0.5),
    ("MNEMO_STORE_CALL_SECONDS", "2.5", ("storage", "store_call_seconds"), 2.5),
    ("MNEMO_DISCORD_SHARDS", "auto", ("platforms", "discord_shards"), "auto"),
    (
        "MNEMO_TELEGRAM_WEBHOOK_SECRET",
        "s3cret_-X",
        ("platforms", "telegram_webhook_secret"),
        "s3cret_-X",
    ),
    # Alone it is refused (it needs MNEMO_DISCORD_SHARDS):
    # tests/integration/adapters/test_discord_shards.py.
    ("MNEMO_DISCORD_SHARD_IDS", "", ("platforms", "discord_shard_ids"), []),
    ("MNEMO_RATE_LIMIT_PER_MINUTE", "0", ("platforms", "rate_limit_per_minute"), 0),
    ("MNEMO_MODEL_SEES_IMAGES", "true", ("platforms", "model_sees_images"), True),
    ("MNEMO_MAX_IMAGES", "2", ("platforms", "max_images"), 2),
    ("MNEMO_MAX_IMAGE_MB", "0.5", ("platforms", "max_image_mb"), 0.5),
    ("MNEMO_MAX_VOICE_MB", "2.5", ("platforms", "max_voice_mb"), 2.5),
    (
        "MNEMO_CHARACTER",
        "/srv/characters/archivist.json",
        ("runtime", "character"),
        Path("/srv/characters/archivist.json"),
    ),
    ("MNEMO_EVALUATOR_SELECTION", "all", ("runtime", "evaluator_selection"), "all"),
    ("MNEMO_EVALUATOR_TIMEOUT", "30", ("runtime", "evaluator_timeout"), 30.0),
    ("MNEMO_REPLY_MAX_CHARS", "2000", ("runtime", "reply_max_chars"), 2000),
    (
        "MNEMO_EVALUATION_IDLE_FLUSH_MINUTES",
        "2.5",
        ("runtime", "evaluation_idle_flush_minutes"),
        2.5,
    ),
    ("MNEMO_EVALUATION_MAX_ATTEMPTS", "3", ("runtime", "evaluation_max_attempts"), 3),
    ("MNEMO_EVALUATION_RETRY_SECONDS", "0.5", ("runtime", "evaluation_retry_seconds"), 0.5),
    ("MNEMO_EVALUATION_LEASE_SECONDS", "5", ("runtime", "evaluation_lease_seconds"), 5.0),
    ("MNEMO_ANSWER_WINDOW_MINUTES", "1", ("runtime", "answer_window_minutes"), 1.0),
    ("MNEMO_PLUGINS_DIR", "/opt/plugins", ("runtime", "plugins_dir"), Path("/opt/plugins")),
    ("MNEMO_BUILTIN_PLUGINS", "false", ("runtime", "builtin_plugins"), False),
    (
        "MNEMO_DISABLED_PLUGINS",
        "goals, weather",
        ("runtime", "disabled_plugins"),
        ["goals", "weather"],
    ),
    ("MNEMO_LOG_LEVEL", "DEBUG", ("runtime", "log_level"), "DEBUG"),
    # A platform's spelling of a language with a catalog is its catalog's code.
    ("MNEMO_LANGUAGE", "es-ES", ("runtime", "language"), "es"),
    ("MNEMO_STREAM_REPLIES", "false", ("runtime", "stream_replies"), False),
    ("MNEMO_METRICS_PORT", "9464", ("ops", "metrics_port"), 9464),
    ("MNEMO_METRICS_HOST", "0.0.0.0", ("ops", "metrics_host"), "0.0.0.0"),
    ("MNEMO_LOG_FORMAT", "JSON", ("ops", "log_format"), "json"),
    ("MNEMO_LOG_MAX_MB", "2.5", ("ops", "log_max_mb"), 2.5),
    ("MNEMO_LOG_BACKUPS", "0", ("ops", "log_backups"), 0),
    (
        "MNEMO_MODEL_PRICES",
        "gpt-4o=2.5/10, local-llama=0/0",
        ("ops", "model_prices"),
        {"gpt-4o": (2.5, 10.0), "local-llama": (0.0, 0.0)},
    ),
    ("MNEMO_DAILY_TOKENS_PER_WORLD", "200000", ("ops", "daily_tokens_per_world"), 200_000),
    ("MNEMO_DAILY_TOKENS_PER_PERSON", "20000", ("ops", "daily_tokens_per_person"), 20_000),
    # The offline model (no key here) costs nothing: a dollar cap needs no price for it.
    ("MNEMO_DAILY_USD_PER_WORLD", "0.5", ("ops", "daily_usd_per_world"), 0.5),
    ("MNEMO_DAILY_USD_PER_PERSON", "0.05", ("ops", "daily_usd_per_person"), 0.05),
    ("MNEMO_DAILY_TOKENS_TOTAL", "5000000", ("ops", "daily_tokens_total"), 5_000_000),
    ("MNEMO_DAILY_USD_TOTAL", "20", ("ops", "daily_usd_total"), 20.0),
    ("MNEMO_RETENTION_DAYS", "90", ("privacy", "retention_days"), 90),
    ("MNEMO_FACTS_RELEVANT_FACTS", "3", ("memory", "relevant_facts"), 3),
    ("MNEMO_FACTS_LANGUAGE", " English ", ("memory", "language"), "English"),
    ("MNEMO_FACTS_NEAR_DUPLICATE_DISTANCE", "0.1", ("memory", "near_duplicate_distance"), 0.1),
    ("MNEMO_PRIVACY_TEXT", "We keep logs.", ("privacy", "privacy_text"), "We keep logs."),
    (
        "MNEMO_PRIVACY_FILE",
        str(REPO / "characters" / "mnemo.json"),
        ("privacy", "privacy_file"),
        REPO / "characters" / "mnemo.json",
    ),
]


def value_of(settings: Settings, group: str, field: str) -> object:
    value = getattr(getattr(settings, group), field)
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.mark.parametrize(("variable", "raw", "where", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_setting_reads_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    raw: str,
    where: tuple[str, str],
    expected: object,
) -> None:
    monkeypatch.setenv(variable, raw)
    assert value_of(load(), *where) == expected


def test_every_setting_is_covered_by_a_case() -> None:
    assert set(environment_variables()) <= {case[0] for case in CASES}
    assert len(environment_variables()) == len(set(environment_variables()))


def test_defaults(tmp_path: Path) -> None:
    settings = load()
    assert settings.model.offline
    assert settings.model.small_model == "gpt-4o-mini"
    assert settings.storage.mongodb_uri is None
    assert settings.storage.data_dir == tmp_path / "data"
    assert settings.platforms.admin_ids == []
    assert settings.platforms.telegram_webhook_url is None
    assert settings.platforms.telegram_webhook_port == 8443
    assert settings.platforms.telegram_group_admins is False
    assert settings.platforms.discord_global_sync is False
    assert settings.platforms.rate_limit_per_minute == 6
    # The model sees no images unless the operator says it does (never guessed by name).
    assert settings.platforms.model_sees_images is False
    assert (settings.platforms.max_images, settings.platforms.max_image_mb) == (4, 5.0)
    assert settings.runtime.stream_replies is True
    assert settings.runtime.evaluation_idle_flush_minutes == 10
    assert settings.runtime.evaluator_selection == "llm"
    # Shipped with Mnemo, found whatever the working folder (here an empty temporary one).
    assert settings.runtime.character == REPO / "characters" / "mnemo.json"
    assert settings.runtime.plugins_dir is None
    assert settings.runtime.plugin_folders == [REPO / "plugins"]


def test_relative_paths_are_taken_from_the_starting_folder_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The bundled MongoDB runs in another folder, so a relative path given to it named a
    # different place; every path setting is absolute by the time anything uses it.
    monkeypatch.setenv("MNEMO_DATA_DIR", "state")
    monkeypatch.setenv("MNEMO_PLUGINS_DIR", "more/plugins")
    monkeypatch.setenv("MNEMO_EMBEDDING_MODEL_DIR", "models/minilm")
    monkeypatch.setenv("MNEMO_CHARACTER", "people/bob.json")
    settings = load()
    monkeypatch.chdir("/")
    assert settings.storage.data_dir == tmp_path / "state"
    assert settings.runtime.plugins_dir == tmp_path / "more" / "plugins"
    assert settings.embedding.model_dir == tmp_path / "models" / "minilm"
    assert settings.runtime.character == tmp_path / "people" / "bob.json"


@pytest.mark.parametrize("name", FOREIGN)
def test_bare_field_names_are_not_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, name: str, tmp_path: Path
) -> None:
    monkeypatch.setenv(name, "999")
    assert load() == load_settings(env_file=Path("missing.env"))
    settings = load()
    assert settings.model.small_model == "gpt-4o-mini"
    assert settings.storage.data_dir == tmp_path / "data"


def test_overrides_by_field_name_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_SMALL_MODEL", "from-env")
    monkeypatch.setenv("MNEMO_EVALUATOR_TIMEOUT", "50")
    settings = load(
        model={"small_model": "from-code"},
        storage={"data_dir": Path("/tmp/x")},
        runtime={"evaluator_timeout": 5},
    )
    assert settings.model.small_model == "from-code"
    assert settings.storage.data_dir == Path("/tmp/x")
    assert settings.runtime.evaluator_timeout == 5
    assert ModelSettings(_env_file=None, small_model="direct").small_model == "direct"


def test_unknown_override_group_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="modle"):
        load(modle={"small_model": "x"})


def test_env_file_is_read(tmp_path: Path) -> None:
    env = tmp_path / "prod.env"
    env.write_text(
        "MNEMO_SMALL_MODEL=from-file\n"
        "OPENAI_API_KEY=sk-file\n"
        "MNEMO_ADMIN_IDS=telegram:5, 6\n"
        "MNEMO_EVALUATOR_TIMEOUT=12\n"
        "MNEMO_TELEGRAM_GROUP_ADMINS=yes\n"
        "SOMETHING_ELSE=ignored\n",
        encoding="utf-8",
    )
    settings = load_settings(env_file=env)
    assert settings.model.small_model == "from-file"
    assert settings.model.openai_api_key is not None
    assert settings.model.openai_api_key.get_secret_value() == "sk-file"
    assert settings.platforms.admin_ids == ["telegram:5", "6"]
    assert settings.runtime.evaluator_timeout == 12
    assert settings.platforms.telegram_group_admins is True


def test_dot_env_in_the_working_directory_is_the_default(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MNEMO_DATA_DIR=/srv/mnemo\n", encoding="utf-8")
    assert load_settings().storage.data_dir == Path("/srv/mnemo")


def test_environment_wins_over_env_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MNEMO_SMALL_MODEL=from-file\n", encoding="utf-8")
    monkeypatch.setenv("MNEMO_SMALL_MODEL", "from-env")
    assert load_settings().model.small_model == "from-env"


def test_empty_values_count_as_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("DISCORD_TOKEN=\nMNEMO_EVALUATOR_TIMEOUT=\n", "utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "")
    settings = load_settings()
    assert settings.model.offline
    assert settings.platforms.discord_token is None
    assert settings.runtime.evaluator_timeout == 120


def test_env_example_documents_every_setting_and_changes_nothing(tmp_path: Path) -> None:
    example = (REPO / ".env.example").read_text(encoding="utf-8")
    for name in environment_variables():
        assert re.search(rf"^# {name}=", example, re.MULTILINE), f"{name} not in .env.example"
    assert not [line for line in example.splitlines() if line.strip() and not line.startswith("#")]
    # The documented defaults are the real ones: uncommented, they load to the same settings.
    uncommented = tmp_path / "uncommented.env"
    uncommented.write_text(
        "\n".join(
            line.removeprefix("# ")
            for line in example.splitlines()
            if re.match(r"# [A-Z_]+=", line)
        ),
        encoding="utf-8",
    )
    assert load_settings(env_file=uncommented) == load()
    assert load_settings(env_file=REPO / ".env.example") == load()


@pytest.mark.parametrize(
    ("variable", "raw", "expected"),
    [
        ("MNEMO_EVALUATOR_TIMEOUT", "lots", "valid number"),
        ("MNEMO_EVALUATOR_TIMEOUT", "0", "greater than 0"),
        ("MNEMO_MODEL_RETRIES", "3.5", "valid integer"),
        ("CHROMA_PORT", "70000", "less than or equal to 65535"),
        ("MNEMO_EVALUATOR_SELECTION", "random", "'llm' or 'all'"),
        ("MNEMO_LOG_LEVEL", "verbose", "'DEBUG', 'INFO', 'WARNING' or 'ERROR'"),
        ("MNEMO_LANGUAGE", "klingon", "no catalog for the language 'klingon'; available: en, es"),
        ("MNEMO_TELEGRAM_GROUP_ADMINS", "perhaps", "valid boolean"),
        ("MNEMO_RATE_LIMIT_PER_MINUTE", "-1", "greater than or equal to 0"),
        ("MNEMO_MAX_IMAGE_MB", "0", "greater than 0"),
        ("MNEMO_EVALUATION_IDLE_FLUSH_MINUTES", "0", "greater than 0"),
        ("MNEMO_ADMIN_IDS", "dicsord:1", "not an id like"),
        ("MNEMO_TELEGRAM_WEBHOOK_SECRET", "not secret!", "A-Z, a-z, 0-9, _ and -"),
        ("OPENAI_BASE_URL", "localhost:8080", "http:// or https:// URL"),
        ("MNEMO_MODEL_CHOICES", "gpt-4o, o1 pro", "'o1 pro' is not a model name"),
        ("MNEMO_MODEL_CHOICES", "gpt\u20114o", "is not a model name"),
        ("MNEMO_DAILY_TOKENS_PER_WORLD", "0", "greater than or equal to 1"),
        ("MNEMO_DAILY_USD_PER_PERSON", "-1", "greater than 0"),
    ],
)
def test_bad_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str, expected: str
) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ConfigError) as caught:
        load()
    message = str(caught.value)
    assert message.startswith(f"setting {variable}: ")
    assert expected in message
    assert "\n" not in message
    # No traceback of pydantic's underneath: the one line is the whole story.
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_dollar_cap_needs_a_price_for_every_model_it_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MNEMO_MODEL_CHOICES", "o1-pro")
    monkeypatch.setenv("MNEMO_DAILY_USD_PER_WORLD", "1")
    # An unpriced model would spend without counting: refused at start-up, in one line.
    with pytest.raises(ConfigError, match=r"no price for o1-pro in MNEMO_MODEL_PRICES"):
        load()
    monkeypatch.setenv("MNEMO_MODEL_PRICES", "gpt-4o=2.5/10,gpt-4o-mini=0.15/0.6,o1-pro=150/600")
    assert load().ops.daily_usd_per_world == 1.0
    monkeypatch.delenv("MNEMO_DAILY_USD_PER_WORLD")
    monkeypatch.delenv("MNEMO_MODEL_PRICES")
    assert load().model.model_choices == ["o1-pro"]  # a token cap, or none, needs no price


def test_bad_value_in_env_file_names_the_variable(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("MNEMO_EVALUATOR_SELECTION=sometimes\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^setting MNEMO_EVALUATOR_SELECTION: .*'sometimes'"):
        load_settings(env_file=env)


def test_every_accepted_name_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    class Aliased(BaseSettings):
        model_config = SettingsConfigDict(extra="ignore")
        port: int = Field(1, validation_alias=AliasChoices("NEW_PORT", "OLD_PORT"))

    monkeypatch.setenv("OLD_PORT", "many")
    with pytest.raises(ValidationError) as caught:
        Aliased(_env_file=None)
    assert describe_error(Aliased, caught.value).startswith("setting NEW_PORT (or OLD_PORT): ")


def test_unreadable_env_file_is_a_config_error(tmp_path: Path) -> None:
    env = tmp_path / "bad.env"
    env.write_bytes(b"MNEMO_SMALL_MODEL=\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"bad\.env"):
        load_settings(env_file=env)


def test_secret_in_a_bad_url_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_TELEGRAM_WEBHOOK_URL", "bot.example.com/123456:SECRET-TOKEN")
    with pytest.raises(ConfigError) as caught:
        load()
    assert "MNEMO_TELEGRAM_WEBHOOK_URL" in str(caught.value)
    assert "SECRET" not in str(caught.value)


def test_describe_error_never_echoes_a_secret_str() -> None:
    class Guarded(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="GUARD_")
        api_key: SecretStr = SecretStr("")
        count: int = 0

    with pytest.raises(ValidationError) as caught:
        Guarded(_env_file=None, api_key=["sk-live-SECRET"], count="x")  # type: ignore[arg-type]
    line = describe_error(Guarded, caught.value)
    assert line.startswith("setting GUARD_API_KEY: ")
    assert "SECRET" not in line
    assert "(and 1 more)" in line


def test_secrets_never_reach_reprs_or_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-live-AAAA",
        "MONGODB_URI": "mongodb://admin:hunter2@db",
        "DISCORD_TOKEN": "discord-BBBB",
        "TELEGRAM_TOKEN": "123:telegram-CCCC",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    settings = load()
    logging.getLogger("test").warning("settings: %s %r", settings, settings.platforms)
    shown = repr(settings) + str(settings) + caplog.text + str(settings.model.model_dump())
    for value in secrets.values():
        assert value not in shown
    assert settings.platforms.telegram_token is not None
    assert settings.platforms.telegram_token.get_secret_value() == "123:telegram-CCCC"
    assert not settings.model.offline


def test_admin_ids_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_ADMIN_IDS", " 123 , Discord:456,, telegram:789 ,123 ")
    assert load().platforms.admin_ids == ["123", "discord:456", "telegram:789"]
    assert PlatformSettings(_env_file=None, admin_ids="7,8").admin_ids == ["7", "8"]
    assert PlatformSettings(_env_file=None, admin_ids=["9"]).admin_ids == ["9"]


def test_character_by_bare_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MNEMO_CHARACTER", "archivist")
    assert load().runtime.character == REPO / "characters" / "archivist.json"
    # A character of that name in the working folder's characters/ wins over the shipped one.
    (tmp_path / "characters").mkdir()
    (tmp_path / "characters" / "archivist.json").write_text("{}", encoding="utf-8")
    assert load().runtime.character == tmp_path / "characters" / "archivist.json"


def test_selection_and_log_level_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_EVALUATOR_SELECTION", "ALL")
    monkeypatch.setenv("MNEMO_LOG_LEVEL", "warning")
    settings = load()
    assert settings.runtime.evaluator_selection == "all"
    assert settings.runtime.log_level == "WARNING"


def test_variable_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("mnemo_small_model", "lower")
    assert load().model.small_model == "lower"


def test_admin_ids_apply_to_their_platform_and_bare_ids_to_every_platform() -> None:
    settings = PlatformSettings(_env_file=None, admin_ids="discord:11, telegram:22, 33")  # type: ignore[call-arg]
    assert settings.admin_ids_for("discord") == {"11", "33"}
    assert settings.admin_ids_for("telegram") == {"22", "33"}


@pytest.mark.parametrize("uri", ["http://db:27017", "localhost:27017", "postgres://u:p@db/x"])
def test_a_uri_that_is_not_mongodb_says_so(monkeypatch: pytest.MonkeyPatch, uri: str) -> None:
    monkeypatch.setenv("MONGODB_URI", uri)
    with pytest.raises(ConfigError) as error:
        load()
    assert str(error.value) == ("setting MONGODB_URI: expected a mongodb:// or mongodb+srv:// URI")


def test_mongodb_srv_uris_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongodb+srv://user:pw@cluster0.example.net/")
    assert load().storage.mongodb_uri is not None


def test_a_privacy_file_that_is_missing_or_doubled_stops_start_up_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MNEMO_PRIVACY_FILE", "policy/privacy.md")
    with pytest.raises(ConfigError) as missing:
        load()
    assert str(missing.value).startswith(
        f"setting MNEMO_PRIVACY_FILE: no such file: {tmp_path / 'policy' / 'privacy.md'}"
    )
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "privacy.md").write_text("We keep nothing for long.\n")
    assert load().privacy.operator_text() == "We keep nothing for long."
    monkeypatch.setenv("MNEMO_PRIVACY_TEXT", "Another policy")
    with pytest.raises(ConfigError, match=r"^setting MNEMO_PRIVACY_FILE: set MNEMO_PRIVACY_TEXT"):
        load()
    monkeypatch.delenv("MNEMO_PRIVACY_TEXT")
    monkeypatch.setenv("MNEMO_RETENTION_DAYS", "-1")
    with pytest.raises(ConfigError, match=r"^setting MNEMO_RETENTION_DAYS: .*'-1'"):
        load()

"""`mnemo doctor` checks what it says it checks, against the real parts and local fakes of the
remote services: each failure is one line, a failure exits non-zero, no secret is printed."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.app.doctor import Doctor, PlatformEndpoints
from bot.app.logs import configure_logging
from bot.config.settings import Settings, load_settings
from bot.testing.openai_server import FakeOpenAIServer, Outcome, image_parts, status
from tests.fakes.discord_fakes import FakeDiscordServer, pointed_at
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.shipped_plugins import shipped_plugins

KEY = "sk-doctor-secret-0123456789"


def _clean_env(model_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MNEMO_", "OPENAI_", "DISCORD_", "TELEGRAM_", "CHROMA_"))
        and k != "MONGODB_URI"
    }
    env.update(MNEMO_EMBEDDING_MODEL_DIR=str(model_dir), **extra)
    return env


def doctor(cwd: Path, model_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(model_dir, **env),
        timeout=240,
    )


def test_zero_set_up_passes_from_any_folder(tmp_path: Path, model_dir: Path) -> None:
    result = doctor(tmp_path, model_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines[:-1]] == [
        "data",
        "character",
        "plugins",
        "settings",
        "mongodb",
        "chroma",
        "embedder",
        "model",
    ]
    assert all(line.startswith("ok ") for line in lines[:-1])
    assert f"plugins    {shipped_plugins()} (built-in); settings valid" in result.stdout
    assert lines[-1] == "all checks passed"
    assert result.stderr == ""


def test_unreachable_model_and_chroma_fail_with_one_line_each(
    tmp_path: Path, model_dir: Path
) -> None:
    result = doctor(
        tmp_path,
        model_dir,
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL="http://127.0.0.1:1/v1",
        CHROMA_HOST="127.0.0.1",
        CHROMA_PORT="1",
    )
    assert result.returncode == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert [line.split()[1] for line in failed] == ["chroma", "model"]
    assert "connect" in failed[1]
    # Each failure says what to do about it.
    assert "To fix: start the Chroma server and check CHROMA_HOST and CHROMA_PORT" in failed[0]
    assert failed[1].endswith("To fix: check OPENAI_BASE_URL and that the server there is running")
    assert result.stdout.splitlines()[-1] == "2 check(s) failed"
    assert KEY not in result.stdout + result.stderr


def test_a_bad_plugin_setting_in_the_env_file_fails_the_plugins_check(
    tmp_path: Path, model_dir: Path
) -> None:
    settings_file = tmp_path / "prod.env"
    settings_file.write_text("MNEMO_RECALL_LIMIT=lots\n", encoding="utf-8")
    result = doctor(tmp_path, model_dir, "--env-file", str(settings_file))
    assert result.returncode == 1
    [failed] = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert "plugins" in failed and "MNEMO_RECALL_LIMIT" in failed


def test_a_malformed_settings_line_is_reported_once(tmp_path: Path, model_dir: Path) -> None:
    settings_file = tmp_path / "prod.env"
    settings_file.write_text(f"OPENAI_API_KEY={KEY}\nnot a setting\n", encoding="utf-8")
    result = doctor(tmp_path, model_dir, "--env-file", str(settings_file))
    assert result.returncode == 2
    assert result.stderr == f"mnemo: settings file {settings_file}, line 2: not a NAME=value line\n"
    assert KEY not in result.stdout + result.stderr


@pytest.fixture
def cli_logging(tmp_path: Path) -> Iterator[Path]:
    """Logging as `mnemo doctor` sets it up (warnings on stderr, everything in the log file);
    the root logger is put back afterwards. Yields the log file."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    log_file = tmp_path / "mnemo.log"
    configure_logging("INFO", [], log_file=log_file, quiet=True)
    yield log_file
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def _settings(tmp_path: Path, model_dir: Path, **platforms: str) -> Settings:
    return load_settings(
        env_file=None,
        storage={"data_dir": tmp_path / "data"},
        embedding={"model_dir": model_dir},
        model={"openai_api_key": SecretStr(KEY), "openai_base_url": platforms.pop("base_url")},
        platforms={name: SecretStr(value) for name, value in platforms.items()},
    )


async def test_a_refused_key_and_bad_platform_tokens_fail_one_line_each(
    tmp_path: Path, model_dir: Path
) -> None:
    async with (
        FakeOpenAIServer() as openai_api,
        FakeTelegramServer() as telegram_api,
        FakeDiscordServer(token="discord-good") as discord_api,
    ):
        openai_api.enqueue(status(401))
        settings = _settings(
            tmp_path,
            model_dir,
            base_url=openai_api.base_url,
            telegram_token="999:not-the-bot-token",
            discord_token="discord-bad",
        )
        out = io.StringIO()
        doctor = Doctor(
            settings,
            endpoints=PlatformEndpoints(telegram_base_url=telegram_api.base_url),
            secrets=[KEY, "999:not-the-bot-token", "discord-bad"],
        )
        with pointed_at(discord_api):
            assert not await doctor.run(out)
    shown = out.getvalue()
    failed = {line.split()[1]: line for line in shown.splitlines() if line.startswith("FAIL")}
    assert set(failed) == {"model", "telegram", "discord"}, shown
    assert "TELEGRAM_TOKEN was refused" in failed["telegram"]
    assert "DISCORD_TOKEN was refused" in failed["discord"]
    assert "To fix: check OPENAI_API_KEY" in failed["model"]
    assert "To fix: copy the bot's token from @BotFather" in failed["telegram"]
    assert "Reset Token" in failed["discord"]
    for secret in (KEY, "not-the-bot-token", "discord-bad"):
        assert secret not in shown


async def test_good_tokens_and_key_pass(tmp_path: Path, model_dir: Path) -> None:
    async with (
        FakeOpenAIServer() as openai_api,
        FakeTelegramServer() as telegram_api,
        FakeDiscordServer(token="discord-good") as discord_api,
    ):
        settings = _settings(
            tmp_path,
            model_dir,
            base_url=openai_api.base_url,
            telegram_token=telegram_api.token,
            discord_token="discord-good",
        )
        out = io.StringIO()
        doctor = Doctor(
            settings, endpoints=PlatformEndpoints(telegram_base_url=telegram_api.base_url)
        )
        with pointed_at(discord_api):
            assert await doctor.run(out), out.getvalue()
        # One tiny real call per model: replies use LARGE, evaluations SMALL.
        asked = [request.json["model"] for request in openai_api.chat_requests]
        assert asked == [settings.model.small_model, settings.model.large_model]
    assert "@mnemo_bot (getMe at 127.0.0.1:" in out.getvalue()


async def test_the_doctor_prints_only_its_own_lines(
    tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str], cli_logging: Path
) -> None:
    """discord.py warns about the doctor's own intent-less client ("Guilds intent seems to be
    disabled") and about voice; that is not the operator's problem and stays in the log file."""
    async with FakeDiscordServer(token="discord-good") as discord_api:
        settings = load_settings(
            env_file=None,
            storage={"data_dir": tmp_path / "data"},
            embedding={"model_dir": model_dir},
            platforms={"discord_token": SecretStr("discord-good")},
        )
        with pointed_at(discord_api):
            assert await Doctor(settings).run(sys.stdout)
    shown = capsys.readouterr()
    assert shown.err == ""
    lines = shown.out.splitlines()
    assert all(line.startswith(("ok   ", "FAIL ", "warn ")) for line in lines[:-1]), lines
    assert lines[-2].startswith("ok   discord") and lines[-1] == "all checks passed"
    kept = cli_logging.read_text(encoding="utf-8")  # noqa: ASYNC240 (a small file, after the run)
    assert "Guilds intent seems to be disabled" in kept


async def test_a_wrong_large_model_fails_the_model_check_naming_it(
    tmp_path: Path, model_dir: Path
) -> None:
    """Before, only SMALL was called: a wrong MNEMO_LARGE_MODEL passed, then every reply
    failed."""

    def no_such_model(request: dict[str, object]) -> Outcome | str:
        return status(404, message="model not found") if request["model"] == "gpt-typo" else "OK"

    async with FakeOpenAIServer(responder=no_such_model) as openai_api:
        settings = load_settings(
            env_file=None,
            storage={"data_dir": tmp_path / "data"},
            embedding={"model_dir": model_dir},
            model={
                "openai_api_key": SecretStr(KEY),
                "openai_base_url": openai_api.base_url,
                "large_model": "gpt-typo",
            },
        )
        out = io.StringIO()
        assert not await Doctor(settings, secrets=[KEY], environ={}).run(out)
    [failed] = [line for line in out.getvalue().splitlines() if line.startswith("FAIL")]
    assert failed.split()[1] == "model"
    assert "MNEMO_LARGE_MODEL=gpt-typo" in failed
    assert "MNEMO_SMALL_MODEL" not in failed


async def test_the_telegram_check_asks_the_configured_bot_api_server(
    tmp_path: Path, model_dir: Path
) -> None:
    """MNEMO_TELEGRAM_API_URL (a self-hosted Bot API server) is where the adapter goes, so the
    check goes there too, not to api.telegram.org."""
    async with FakeTelegramServer() as telegram_api:
        settings = load_settings(
            env_file=None,
            storage={"data_dir": tmp_path / "data"},
            embedding={"model_dir": model_dir},
            platforms={
                "telegram_token": SecretStr(telegram_api.token),
                "telegram_api_url": telegram_api.base_url,
            },
        )
        out = io.StringIO()
        assert await Doctor(settings, environ={}).run(out), out.getvalue()
    [line] = [line for line in out.getvalue().splitlines() if line.split()[1] == "telegram"]
    assert line.startswith("ok ") and "@mnemo_bot (getMe at 127.0.0.1:" in line


def test_mistyped_setting_names_are_warned_with_the_nearest_one(
    tmp_path: Path, model_dir: Path
) -> None:
    """In the environment and in the settings file; plugins' settings and the test tools'
    variables are names too. A warning, not a failure: nothing else is wrong."""
    settings_file = tmp_path / "prod.env"
    settings_file.write_text("MNEMO_LARGE_MODLE=gpt-4o\nMNEMO_RECALL_LIMIT=3\n", encoding="utf-8")
    result = doctor(
        tmp_path,
        model_dir,
        "--env-file",
        str(settings_file),
        MNEMO_DATADIR=str(tmp_path / "elsewhere"),
        MNEMO_TEST_MODEL_DIR=str(model_dir),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    warned = [line for line in result.stdout.splitlines() if line.startswith("warn")]
    assert warned == [
        "warn settings   MNEMO_DATADIR (in the environment) is not a setting of Mnemo or of a "
        "loaded plugin; did you mean MNEMO_DATA_DIR?",
        f"warn settings   MNEMO_LARGE_MODLE (in {settings_file}) is not a setting of Mnemo or "
        "of a loaded plugin; did you mean MNEMO_LARGE_MODEL?",
    ]
    assert result.stdout.splitlines()[-1] == "all checks passed, 2 warning(s)"


def test_mnemo_chat_warns_about_a_mistyped_name_before_the_banner(
    tmp_path: Path, model_dir: Path
) -> None:
    (tmp_path / ".env").write_text("MNEMO_SMAL_MODEL=gpt-4o-mini\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "bot", "chat"],
        input="",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(model_dir),
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "mnemo: warning: MNEMO_SMAL_MODEL (in .env) is not a setting of Mnemo or of a loaded "
        "plugin; did you mean MNEMO_SMALL_MODEL?"
    ]


def _unwritable_data_dir(tmp_path: Path) -> Path:
    """A data folder nobody can create, root included: its parent is a file."""
    occupied = tmp_path / "occupied"
    occupied.write_text("not a folder", encoding="utf-8")
    return occupied / "data"


def test_an_unwritable_data_folder_is_one_line_at_start(tmp_path: Path, model_dir: Path) -> None:
    data_dir = _unwritable_data_dir(tmp_path)
    expected = (
        f"mnemo: setting MNEMO_DATA_DIR: cannot write to the folder {data_dir} (Not a directory)"
    )
    for command in ("chat", "run"):
        result = subprocess.run(
            [sys.executable, "-m", "bot", command],
            input="hello\n",
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_clean_env(model_dir, MNEMO_DATA_DIR=str(data_dir)),
            timeout=240,
        )
        assert (result.returncode, result.stderr.splitlines()) == (2, [expected]), result.stderr
    checked = doctor(tmp_path, model_dir, MNEMO_DATA_DIR=str(data_dir))
    assert checked.returncode == 1
    failed = [line for line in checked.stdout.splitlines() if line.startswith("FAIL")]
    assert failed[0] == (
        f"FAIL data       setting MNEMO_DATA_DIR: cannot write to the folder {data_dir} "
        "(Not a directory). To fix: set MNEMO_DATA_DIR to a folder Mnemo may write in"
    )
    assert "Traceback" not in checked.stderr


async def test_a_model_said_to_see_images_is_asked_with_one(
    tmp_path: Path, model_dir: Path
) -> None:
    """MNEMO_MODEL_SEES_IMAGES=true: the LARGE call carries a small picture, so a text-only
    model fails the check, naming the setting, rather than the first photo someone sends."""

    def text_only(request: dict[str, Any]) -> Outcome | str:
        return status(400, message="image input is not supported") if image_parts(request) else "OK"

    async with FakeOpenAIServer(responder=text_only) as openai_api:
        settings = load_settings(
            env_file=None,
            storage={"data_dir": tmp_path / "data"},
            embedding={"model_dir": model_dir},
            model={"openai_api_key": SecretStr(KEY), "openai_base_url": openai_api.base_url},
            platforms={"model_sees_images": True},
        )
        out = io.StringIO()
        assert not await Doctor(settings, secrets=[KEY], environ={}).run(out)
        small, large = (r.json for r in openai_api.chat_requests)
    [failed] = [line for line in out.getvalue().splitlines() if line.startswith("FAIL")]
    assert failed.split()[1] == "model"
    assert f"MNEMO_LARGE_MODEL={settings.model.large_model}" in failed
    assert "MNEMO_MODEL_SEES_IMAGES=true" in failed
    assert image_parts(small) == [] and [kind for kind, _ in image_parts(large)] == ["image/png"]

"""The console chat end to end: `mnemo chat` driven by a script through standard input,
with zero set-up (bundled MongoDB, local Chroma, offline model)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import mnemo
from tests.helpers.shipped_plugins import shipped_plugins
from tests.paths import REPO


def test_a_piped_session_learns_facts_and_remembers_them_after_a_restart(
    tmp_path: Path, model_dir: Path
) -> None:
    script = (
        "Hi, my name is Sarah and I live in Seattle.\n"
        "I work as a nurse at the children's hospital.\n"
        "/facts\n"
        "/quit\n"
    )
    first = mnemo(["chat"], script, tmp_path, model_dir)
    assert first.returncode == 0, first.stderr
    assert "offline model" in first.stdout  # the banner is honest about the fallback
    facts_listing = first.stdout.split("Facts (")[1]
    assert "Seattle" in facts_listing and "nurse" in facts_listing
    assert "Traceback" not in first.stderr

    # Everything said survives a restart: the second session recalls it.
    second = mnemo(["chat"], "what do you remember about me?\n", tmp_path, model_dir)
    assert second.returncode == 0, second.stderr
    assert "Seattle" in second.stdout


def test_what_was_said_in_an_earlier_session_is_learned(tmp_path: Path, model_dir: Path) -> None:
    # One message, far from the extraction cadence, then the session ends (end of input).
    first = mnemo(["chat"], "I have a cat named Pixel.\n", tmp_path, model_dir)
    assert first.returncode == 0, first.stderr
    second = mnemo(["chat"], "/facts\n", tmp_path, model_dir)
    assert "cat named Pixel" in second.stdout


def test_goals_can_be_added_and_listed_from_the_console(tmp_path: Path, model_dir: Path) -> None:
    script = "/goal Run a marathon: run 30 miles a week; finish a half marathon\n/goals\n"
    result = mnemo(["chat"], script, tmp_path, model_dir)
    assert result.returncode == 0, result.stderr
    listing = result.stdout.split("Added goal:")[1]
    assert "Run a marathon [IN_PROGRESS] 0/2" in listing
    assert "finish a half marathon" in listing


def test_a_bad_setting_stops_start_up_with_one_line(tmp_path: Path, model_dir: Path) -> None:
    result = mnemo(["chat"], "", tmp_path, model_dir, MNEMO_CONVERSATION_LENGTH="many")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "MNEMO_CONVERSATION_LENGTH" in lines[0]
    assert "Traceback" not in result.stderr


def test_a_missing_character_file_is_named(tmp_path: Path, model_dir: Path) -> None:
    result = mnemo(["chat"], "", tmp_path, model_dir, MNEMO_CHARACTER="characters/nobody.json")
    assert result.returncode == 2
    assert "characters/nobody.json" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_dead_database_stops_start_up_with_one_line_and_no_password(
    tmp_path: Path, model_dir: Path
) -> None:
    uri = "mongodb://mnemo:hunter2secret@127.0.0.1:1/?serverSelectionTimeoutMS=500"
    result = mnemo(["chat"], "", tmp_path, model_dir, MONGODB_URI=uri)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "MongoDB" in lines[0]
    assert "hunter2secret" not in result.stderr + result.stdout
    # What went wrong in a few words and what to do, not the driver's topology line.
    assert "nothing accepts connections there" in lines[0]
    assert "or unset MONGODB_URI to use the bundled server" in lines[0]
    assert "ServerSelectionTimeoutError" not in lines[0] and "socketTimeoutMS" not in lines[0]


def test_a_long_piped_script_gets_every_reply(tmp_path: Path, model_dir: Path) -> None:
    # The console is one trusted person: the per-person reply limit of public chats (6 a
    # minute by default) would answer most of these lines with "slow down".
    lines = [f"I have a plant number {n}." for n in range(10)]
    result = mnemo(["chat"], "".join(f"{line}\n" for line in lines), tmp_path, model_dir)
    assert result.returncode == 0, result.stderr
    replies = [line for line in result.stdout.splitlines() if line.startswith("Mnemo: ")]
    assert len(replies) == len(lines)
    assert "slow down" not in result.stdout.lower()


def test_the_person_is_shown_by_the_name_they_told(tmp_path: Path, model_dir: Path) -> None:
    first = mnemo(
        ["chat"], "Hi, my name is Sarah.\nI live in Seattle.\n/facts\n", tmp_path, model_dir
    )
    assert first.returncode == 0, first.stderr
    listing = first.stdout.split("Facts (", 1)[1].splitlines()[1:]
    facts = [line for line in listing if line.startswith("`")]  # not their evidence lines
    assert facts and all(line.endswith("— about Sarah") for line in facts), listing
    # The learned name is kept for the next session.
    second = mnemo(["chat"], "I have a cat named Pixel.\n/facts\n", tmp_path, model_dir)
    assert "Sarah has a cat named Pixel — about Sarah" in second.stdout


def test_name_given_up_front(tmp_path: Path, model_dir: Path) -> None:
    result = mnemo(["chat", "--name", "Ana"], "I live in Porto.\n/facts\n", tmp_path, model_dir)
    assert result.returncode == 0, result.stderr
    assert "Ana lives in Porto — about Ana" in result.stdout


@pytest.mark.slow
def test_sigterm_shuts_down_like_ctrl_c_and_loses_nothing(tmp_path: Path, model_dir: Path) -> None:
    env_file = tmp_path / "empty.env"
    env_file.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMO_", "OPENAI_"))}
    env.update(MNEMO_DATA_DIR=str(tmp_path), MNEMO_EMBEDDING_MODEL_DIR=str(model_dir))
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "--env-file", str(env_file), "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("I have a cat named Pixel.\n")
    process.stdin.flush()
    # stdin stays open: the chat is waiting for more, as a person at the prompt would be.
    for line in process.stdout:
        if line.startswith("Mnemo: "):
            break
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 0, errors
    assert "Traceback" not in errors
    pid_file = tmp_path / "mongo" / "nx-27017.pid"
    assert not pid_file.exists() or not _alive(int(pid_file.read_text().strip() or 0))
    later = mnemo(["chat"], "/facts\n", tmp_path, model_dir)
    assert "cat named Pixel" in later.stdout


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_own_plugin_folder_adds_to_the_built_ins_and_the_banner_says_where(
    tmp_path: Path, model_dir: Path
) -> None:
    folder = tmp_path / "my-plugins"
    folder.mkdir()
    (folder / "weather.py").write_text(
        "from bot import Command, Plugin\n\n\n"
        "async def weather(ctx):\n    return 'Sunny here.'\n\n\n"
        "plugin = Plugin('weather', commands=[Command('weather', 'The weather', weather)])\n",
        encoding="utf-8",
    )
    result = mnemo(
        ["chat"], "/weather\n/goals\n", tmp_path, model_dir, MNEMO_PLUGINS_DIR=str(folder)
    )
    assert result.returncode == 0, result.stderr
    assert f"plugins: {shipped_plugins()} (built-in); weather ({folder})\n" in result.stdout
    assert "Sunny here." in result.stdout
    assert "No goals here yet." in result.stdout  # the built-in goals plugin answers too


def test_run_as_a_service_without_a_token_says_what_is_missing_and_stays_up(
    tmp_path: Path, model_dir: Path
) -> None:
    """Under systemd or docker compose standard input is /dev/null: there is no console chat to
    start. Exiting (0 or not) would be started again and again by `restart: unless-stopped`;
    `mnemo run` says once what is missing and waits until it is stopped."""
    env_file = tmp_path / "empty.env"
    env_file.touch()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MNEMO_", "OPENAI_", "DISCORD_", "TELEGRAM_"))
    }
    env.update(MNEMO_DATA_DIR=str(tmp_path / "data"), MNEMO_EMBEDDING_MODEL_DIR=str(model_dir))
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "--env-file", str(env_file), "run"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        assert process.stderr is not None
        said = process.stderr.readline()
        assert "No DISCORD_TOKEN or TELEGRAM_TOKEN set" in said
        assert "Set DISCORD_TOKEN and/or TELEGRAM_TOKEN" in said
        # Still running: no exit for a restart policy to turn into a loop.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=3)
        assert process.returncode is None, process.stderr.read()
        # Nothing was started for a bot with nowhere to talk: no bundled MongoDB.
        assert not (tmp_path / "data" / "mongo").exists()
        process.send_signal(signal.SIGTERM)
        out, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, errors
    assert "console chat" not in out and "Traceback" not in errors

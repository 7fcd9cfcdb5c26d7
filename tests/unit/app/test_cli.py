"""The `mnemo` command line teaches itself: help for every command, a version, and settings
files that are checked wherever `--env-file` is written."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from bot.app.cli import DISTRIBUTION, build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"mnemo {version(DISTRIBUTION)}"


def test_every_command_is_described_in_the_overview(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    overview = capsys.readouterr().out
    for command in ("run", "chat", "doctor", "bench"):
        described = [line for line in overview.splitlines() if line.strip().startswith(command)]
        assert described and len(described[0].split()) > 3, f"{command} has no description"


@pytest.mark.parametrize("command", ["run", "chat", "doctor"])
def test_every_command_has_its_own_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: mnemo {command}")
    assert "--env-file" in shown


def test_bench_help_lists_the_parts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    shown = capsys.readouterr().out
    assert "rest" not in shown
    assert "cost" in shown and "scale" in shown


@pytest.mark.parametrize(
    "argv", [["--env-file", "missing.env", "doctor"], ["doctor", "--env-file", "missing.env"]]
)
def test_a_missing_settings_file_is_an_error_wherever_it_is_written(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "mnemo: settings file missing.env: not found"


def test_env_file_after_the_command_is_read(tmp_path: Path) -> None:
    settings_file = tmp_path / "prod.env"
    settings_file.write_text("MNEMO_SMALL_MODEL=tiny\n", encoding="utf-8")
    args = build_parser().parse_args(["chat", "--env-file", str(settings_file), "--name", "Ana"])
    assert args.env_file == settings_file and args.name == "Ana"
    args = build_parser().parse_args(["--env-file", str(settings_file), "chat"])
    assert args.env_file == settings_file

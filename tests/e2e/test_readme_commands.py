"""The README's first commands, run as a new user runs them.

`make run` in a fresh copy of the checkout (no `data/`, nothing configured, input piped), its
output checked line by line against the README's example session; and the installed `mnemo
chat` started from a folder outside the repository. Every earlier test passed an absolute data
folder and ran inside the checkout, which is how a fresh clone's `make run` broke unnoticed.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.checkout_copy import copy_checkout
from tests.helpers.shipped_plugins import shipped_plugins
from tests.helpers.tracked_plugins import tracked_plugin_names
from tests.paths import REPO

# The venv running these tests: CI's, built by `make test` from this checkout.
VENV = Path(sys.prefix)
# README placeholders: ids and the day a fact was said differ on every run, and the bot knows
# you by your login name until you tell it yours.
_ID = "<id>"
_DATE = "<date>"
_LOGIN = "<login>"
# The line under a fact saying which words it was learned from ("    from Sarah's message").
_EVIDENCE = "    from "


def _nothing_configured(model_dir: Path) -> dict[str, str]:
    """This machine's environment minus every Mnemo setting: a new user's shell."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MNEMO_", "OPENAI_", "DISCORD_", "TELEGRAM_", "CHROMA_"))
        and key != "MONGODB_URI"
    }
    # The one exception: the embedding model comes from disk, as tests never reach the internet
    # (a new user's first reply downloads it into Chroma's cache instead).
    env["MNEMO_EMBEDDING_MODEL_DIR"] = str(model_dir)
    return env


def readme_session() -> tuple[str, list[str]]:
    """The README's example session: what the person types, and what is printed."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("```\n$ make run\n", 1)[1].split("```", 1)[0]
    typed, printed = [], []
    for line in block.splitlines():
        if line.startswith("you> "):
            typed.append(line.removeprefix("you> "))
        else:
            printed.append(line)
    return "".join(f"{line}\n" for line in typed), printed


def _pattern(expected: str, login: str) -> re.Pattern[str]:
    escaped = re.escape(expected.replace(_LOGIN, login))
    escaped = escaped.replace(re.escape(_DATE), "[0-9]{1,2} [A-Z][a-z]{2}")
    return re.compile(escaped.replace(re.escape(_ID), "[0-9a-f]{8}") + r"\Z")


def _with_evidence(lines: list[str]) -> list[str]:
    """Each fact line with its evidence line under it, as one: the pair moves together."""
    joined: list[str] = []
    for line in lines:
        if line.startswith(_EVIDENCE) and joined:
            joined[-1] += "\n" + line
        else:
            joined.append(line)
    return joined


@pytest.fixture
def mnemo_script() -> Path:
    script = VENV / "bin" / "mnemo"
    if not script.exists():
        pytest.skip(f"no installed `mnemo` in {VENV}: run the tests with `make test`")
    return script


def test_make_run_in_a_fresh_clone_matches_the_readme_session(
    tmp_path: Path, model_dir: Path, mnemo_script: Path
) -> None:
    clone = tmp_path / "mnemo"
    copy_checkout(REPO, clone)
    typed, printed = readme_session()
    env = _nothing_configured(model_dir)
    # The copy's own code runs, found from the copy as an editable install of it would be.
    env["PYTHONPATH"] = str(clone)
    result = subprocess.run(
        # REUSE_VENV: use the venv `make test` built as it is. Without it, make would re-install
        # Mnemo editable from this copy (its pyproject.toml is newer than the venv's stamp) and
        # leave CI's venv pointing at a folder deleted after this test.
        ["make", "--no-print-directory", "run", f"VENV={VENV}", "REUSE_VENV=1"],
        input=typed,
        capture_output=True,
        text=True,
        cwd=clone,
        env=env,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    # The default relative data folder, under the folder `make run` ran in.
    assert (clone / "data" / "mongo" / "mnemo.db").is_file()
    shown = _with_evidence(result.stdout.splitlines())
    printed = _with_evidence(printed)
    login = getpass.getuser()
    assert len(shown) == len(printed), "\n".join(shown)
    # The banner lists the plugins Mnemo ships, as a fresh clone has them; a plugin of the
    # reader's own in plugins/ (the README's questions.py) is listed too when they run it.
    [listed] = [i for i, line in enumerate(printed) if line.startswith("  plugins: ")]
    shipped = tracked_plugin_names(REPO)
    if shipped is not None:
        assert printed[listed] == f"  plugins: {', '.join(sorted(shipped))} (built-in)"
    printed[listed] = f"  plugins: {shipped_plugins()} (built-in)"
    # Facts learned in one extraction share their time, so their order in a listing is not
    # defined: a fact line of the README may match any fact line of the same listing.
    for expected_run, shown_run in zip(_runs(printed), _runs(shown), strict=True):
        if len(expected_run) > 1 and all(line.startswith("`") for line in expected_run):
            shown_run = sorted(
                shown_run,
                key=lambda actual: next(
                    (i for i, e in enumerate(expected_run) if _pattern(e, login).match(actual)),
                    -1,
                ),
            )
        for expected, actual in zip(expected_run, shown_run, strict=True):
            assert _pattern(expected, login).match(actual), (
                f"README: {expected!r}\nseen:   {actual!r}"
            )


def _runs(lines: list[str]) -> list[list[str]]:
    """Lines grouped into runs of fact lines (starting with an id) and single other lines."""
    runs: list[list[str]] = []
    for line in lines:
        if line.startswith("`") and runs and runs[-1][0].startswith("`"):
            runs[-1].append(line)
        else:
            runs.append([line])
    return runs


def test_installed_mnemo_chat_works_from_a_folder_outside_the_repository(
    tmp_path: Path, model_dir: Path, mnemo_script: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = "I live in Lisbon and I have a cat named Pixel.\n/facts\n/quit\n"
    result = subprocess.run(
        [str(mnemo_script), "chat"],
        input=script,
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=_nothing_configured(model_dir),
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    # The default character and the built-in plugins come with the installation.
    assert result.stdout.startswith("Mnemo — console chat")
    assert f"plugins: {shipped_plugins()} (built-in)\n" in result.stdout
    listing = result.stdout.split("Facts (", 1)[1]
    assert "lives in Lisbon" in listing and "cat named Pixel" in listing
    assert (elsewhere / "data" / "mongo" / "mnemo.db").is_file()


def _planned(target: str, venv: Path) -> str:
    """What `make TARGET` would run on a machine without the venv (a dry run, nothing done)."""
    result = subprocess.run(
        ["make", "--dry-run", "--no-print-directory", target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_run_installs_only_what_running_needs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run = _planned("run", venv)
    # At the versions of the lock, so a clone installs next month what the tests passed with:
    # pip itself first, then Mnemo built with the lock's setuptools; never the newest pip.
    assert "pip install --quiet --constraint constraints.txt pip\n" in run
    assert "--constraint constraints.txt --build-constraint constraints.txt -e .\n" in run
    assert "--upgrade" not in run
    assert "[dev" not in run and "bench]" not in run  # no pytest, ruff, matplotlib, tiktoken
    assert "--build-constraint constraints.txt -e '.[dev,bench]'" in _planned("test", venv)
    bench = _planned("bench", venv)
    assert "--build-constraint constraints.txt -e '.[bench]'" in bench and "dev" not in bench


def _readme_plugin_files() -> dict[str, str]:
    """The README's plugin and its test, by the path each block's first line names."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Write a plugin") : readme.index("## Performance")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return {block.splitlines()[0].removeprefix("# ").strip(): block for block in blocks}


def _failed(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The ids pytest's summary lists as failed or in error (`-ra`, as pyproject.toml asks)."""
    return set(re.findall(r"^(?:FAILED|ERROR) (\S+)", result.stdout, re.M))


def test_the_readme_plugin_copied_into_a_clone_passes_its_test_and_breaks_none(
    tmp_path: Path, model_dir: Path
) -> None:
    """A reader copies the README's plugin and its test from the README, into the files it
    names, in a clone of Mnemo, and runs the test as the README says: it passes, and the
    project's own fast tests fail no more than they did without it (and lint holds)."""
    clone = tmp_path / "mnemo"
    copy_checkout(REPO, clone)
    # A clone tracks what Mnemo ships; the reader's new files are untracked.
    git = ["git", "-C", str(clone), "-c", "user.name=reader", "-c", "user.email=r@example.org"]
    for step in (["init", "--quiet"], ["add", "--all"], ["commit", "--quiet", "-m", "clone"]):
        subprocess.run([*git, *step], check=True, capture_output=True, timeout=120)
    env = _nothing_configured(model_dir)
    env["PYTHONPATH"] = str(clone)  # the copy's code, as an editable install of it would be
    env["MNEMO_TEST_MODEL_DIR"] = str(model_dir)  # the model_dir fixture (no internet here)
    python = str(VENV / "bin" / "python")

    def pytest_in_clone(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
            capture_output=True,
            text=True,
            cwd=clone,
            env=env,
            timeout=600,
        )

    files = _readme_plugin_files()
    assert sorted(files) == ["plugins/questions.py", "tests/test_questions.py"]
    for relative, code in files.items():
        (clone / relative).write_text(code, encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    [command] = re.findall(r"run it with `([^`]+)`", readme)
    words = shlex.split(command)
    assert words[:3] == [".venv/bin/python", "-m", "pytest"], command
    ran = subprocess.run(
        [python, *words[1:]], capture_output=True, text=True, cwd=clone, env=env, timeout=600
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout, ran.stdout

    after = pytest_in_clone("tests/unit")
    assert "passed" in after.stdout, after.stdout + after.stderr
    if _failed(after):
        # Only then the run without the plugin: the clone's own failures are not the plugin's.
        for relative in files:
            (clone / relative).rename(clone / f"{relative}.aside")
        before = pytest_in_clone("tests/unit")
        for relative in files:
            (clone / f"{relative}.aside").rename(clone / relative)
        assert _failed(after) <= _failed(before), after.stdout
    # `make lint` checks plugins/ and tests/ the same way.
    ruff = VENV / "bin" / "ruff"
    if ruff.exists():
        for check in (["check"], ["format", "--check"]):
            linted = subprocess.run(
                [str(ruff), *check, *files], capture_output=True, text=True, cwd=clone
            )
            assert linted.returncode == 0, linted.stdout + linted.stderr

"""A plugin author's tests get Mnemo's fixtures from the installed package: the `pytest11`
entry point loads bot/testing/pytest_plugin.py into every pytest run, so a plugin's own
project needs no conftest. Run here as an author would: pytest in a folder of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

# The wheel as `pip install mnemo-bot` gets it (built once for this module).
from tests.helpers.wheel import wheel  # noqa: F401
from tests.paths import REPO

TEMPLATE = REPO / "plugins" / "_template.py"

AUTHORS_TEST = textwrap.dedent(
    """
    from pathlib import Path

    from bot.testing.harness import TestChat, open_test_app
    from bot.testing.scripted import ScriptedModel
    from my_questions import plugin


    async def test_questions_are_counted(tmp_path: Path, model_dir: Path, mongo_uri: str) -> None:
        model = ScriptedModel(answers={"reply": ['{"text": "Sure."}'],
                                       "evaluator_selection": ['["COUNT_QUESTIONS"]']})
        async with open_test_app(tmp_path, plugins=[plugin], model=model,
                                 mongodb_uri=mongo_uri, model_dir=model_dir) as app:
            chat = TestChat(app.runtime)
            await chat.say("Where is the station?")
            await chat.settle()
            assert await app.store.db["plugin_questions_asked"].count_documents({}) == 1
    """
)


def plugin_project(folder: Path) -> Path:
    """A plugin's own project: the plugin, its test, pytest settings; no conftest."""
    folder.mkdir()
    shutil.copy(TEMPLATE, folder / "my_questions.py")
    (folder / "test_my_questions.py").write_text(AUTHORS_TEST)
    (folder / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    return folder


def run_pytest(
    project: Path, env: dict[str, str], python: Path | str = sys.executable
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_installed_mnemo_is_loaded_as_a_pytest_plugin(pytestconfig: pytest.Config) -> None:
    # Loaded by its `pytest11` entry point (the name is the entry point's), not by a conftest.
    plugin = pytestconfig.pluginmanager.get_plugin("mnemo")
    assert plugin is not None and plugin.__name__ == "bot.testing.pytest_plugin"


def test_a_plugin_project_without_a_conftest_gets_the_fixtures(
    tmp_path: Path, model_dir: Path
) -> None:
    project = plugin_project(tmp_path / "my-plugin")
    env = {**os.environ, "MNEMO_TEST_MODEL_DIR": str(model_dir)}
    env.pop("MNEMO_TEST_MONGODB_URI", None)  # `mongo_uri` starts the bundled server itself
    run = run_pytest(project, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout


def test_without_the_model_the_fixture_skips_with_the_reason(tmp_path: Path) -> None:
    project = plugin_project(tmp_path / "my-plugin")
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_TEST_MODEL_DIR"}
    run = run_pytest(project, env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 skipped" in run.stdout
    assert "set MNEMO_TEST_MODEL_DIR to the ONNX folder" in run.stdout


def test_pip_installed_mnemo_gives_a_plugin_project_its_fixtures(
    wheel: Path,  # noqa: F811
    tmp_path: Path,
    model_dir: Path,
) -> None:
    """No checkout at all: a new virtualenv with the wheel installed (its dependencies seen
    as plain paths from this venv, so nothing is downloaded and this checkout's editable
    install is not run), and the author's project elsewhere."""
    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]

    project = plugin_project(tmp_path / "my-plugin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MNEMO_TEST_MODEL_DIR"] = str(model_dir)
    env.pop("MNEMO_TEST_MONGODB_URI", None)
    loaded = subprocess.run(
        [str(python), "-c", "import bot.testing.pytest_plugin as p; print(p.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded.startswith(site), loaded  # the wheel's copy, not the checkout's
    run = run_pytest(project, env, python)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout

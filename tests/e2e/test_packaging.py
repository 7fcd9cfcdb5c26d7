"""The wheel is the product, published as `mnemo-bot`: it holds Mnemo and a plugin author's
test tools, and nothing of Mnemo's own benchmarks or platform fakes; installed on its own,
every module imports, and installed into a fresh virtualenv `mnemo` runs from any folder.

The wheel is built from a copy of the checkout (`pip wheel --no-deps --no-build-isolation`,
a few seconds), so the build's `build/` and `*.egg-info` never land in the working tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import wheel as wheels
from tests.helpers.shipped_plugins import shipped_plugins
from tests.helpers.wheel import DIST_INFO
from tests.paths import REPO

# The fixture the tests below ask for by name (tests/helpers/wheel.py): built once for this module.
wheel = wheels.wheel

# What a plugin author tests with (docs/plugins.md); the platform fakes are not among them.
PLUGIN_AUTHOR_TOOLS = {
    "__init__.py",
    "harness.py",
    "scripted.py",
    "recorded_model.py",  # a recorded live run's answers, for the fake model server
    "openai_server.py",
    "pytest_plugin.py",
}


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_no_benchmark_and_no_platform_fake(wheel: Path) -> None:
    names = _names(wheel)
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"bot", DIST_INFO}, top_level
    assert not [n for n in names if "bench" in n], "benchmarks ship in the wheel"
    fakes = [n for n in names if "discord_fakes" in n or "telegram_server" in n]
    assert not fakes, f"platform fakes ship in the wheel: {fakes}"
    testing = {n.removeprefix("bot/testing/") for n in names if n.startswith("bot/testing/")}
    assert testing == PLUGIN_AUTHOR_TOOLS


def test_the_wheel_ships_the_default_character_and_the_built_in_plugins(wheel: Path) -> None:
    """Inside the package (bot/_builtin), so an installed Mnemo finds them without a checkout."""
    names = set(_names(wheel))
    characters = {f"bot/_builtin/characters/{p.name}" for p in (REPO / "characters").glob("*.json")}
    assert "bot/_builtin/characters/mnemo.json" in characters
    assert characters <= names
    plugins = {
        f"bot/_builtin/{p.relative_to(REPO).as_posix()}" for p in (REPO / "plugins").rglob("*.py")
    }
    assert {"bot/_builtin/plugins/facts/__init__.py", "bot/_builtin/plugins/goals/__init__.py"} <= (
        plugins
    )
    assert plugins <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheel_ships_the_message_catalogs_compiled_and_as_sources(wheel: Path) -> None:
    """An installed Mnemo answers in Spanish too: gettext reads the compiled catalog, and a
    translator finds the source beside it (bot/i18n, docs/languages.md)."""
    names = set(_names(wheel))
    catalogs = {
        f"bot/{p.relative_to(REPO / 'bot').as_posix()}"
        for p in (REPO / "bot" / "i18n" / "locales").rglob("*")
        if p.suffix in (".po", ".mo", ".pot")
    }
    assert {
        "bot/i18n/locales/es/LC_MESSAGES/mnemo.mo",
        "bot/i18n/locales/es/LC_MESSAGES/mnemo.po",
        "bot/i18n/locales/mnemo.pot",
    } <= catalogs
    assert catalogs <= names


def test_the_wheel_carries_the_license_a_packager_checks(wheel: Path) -> None:
    """PyPI and distribution packagers read the SPDX expression and want the licence text."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"{DIST_INFO}/METADATA").decode()
        names = archive.namelist()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert f"{DIST_INFO}/licenses/LICENSE" in names


def test_the_wheel_holds_every_module_of_the_product_and_its_command(wheel: Path) -> None:
    names = set(_names(wheel))
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "bot").rglob("*.py")}
    assert sources - names == set(), "modules of bot/ missing from the wheel"
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(f"{DIST_INFO}/entry_points.txt").decode()
    assert "mnemo = bot.app.cli:main" in entry_points


def test_installed_alone_every_module_imports_and_bench_says_what_to_do(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    # Only the installed wheel on the path (the venv's packages still provide the
    # dependencies), and a working directory outside the checkout.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["PYTHONPATH"] = str(target)
    check = (
        "import importlib, json, pkgutil, bot\n"
        "walked = pkgutil.walk_packages(bot.__path__, 'bot.')\n"
        # `bot.__main__` would start Mnemo.
        "names = [m.name for m in walked if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps({'bot': bot.__file__, 'modules': len(names)}))\n"
    )
    imported = subprocess.run(
        [sys.executable, "-c", check],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    found = json.loads(imported.stdout.strip().splitlines()[-1])
    assert found["bot"].startswith(str(target)), found  # the wheel's code, not the checkout's
    assert found["modules"] > 20

    version = subprocess.run(
        [sys.executable, "-m", "bot", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (version.returncode, version.stdout.strip()) == (0, "mnemo 0.1.0"), version.stderr

    bench = subprocess.run(
        [sys.executable, "-m", "bot", "bench", "all"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bench.returncode == 2
    [line] = bench.stderr.strip().splitlines()
    assert "not installed" in line and "checkout" in line


def test_a_fresh_virtualenv_installs_the_wheel_and_runs_mnemo_from_anywhere(
    wheel: Path, tmp_path: Path, model_dir: Path
) -> None:
    """`pip install mnemo-bot` as a user would, without the network: a new venv sees this
    venv's packages as plain paths (so pip finds every dependency installed and downloads
    nothing, but no editable install of the checkout), and the command runs from elsewhere."""
    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # A path line, not a site dir: the shared venv's own .pth files (the editable install of
    # this checkout) are not run in the new venv.
    Path(site, "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert "Successfully installed mnemo-bot-0.1.0" in installed.stdout

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = subprocess.run(
        [str(fresh / "bin" / "mnemo"), "--help"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.startswith("usage: mnemo")
    for command in ("run", "chat", "doctor", "backup", "restore"):
        assert command in shown.stdout
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import bot, importlib.metadata as m; print(bot.__file__, m.version('mnemo-bot'))",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where == [str(Path(site, "bot", "__init__.py")), "0.1.0"]

    # `mnemo --version` and `mnemo doctor` from an empty folder, with nothing but the
    # embedding model's folder configured: the character and the plugins come from the wheel.
    clean = {
        k: v
        for k, v in env.items()
        if not k.startswith(("MNEMO_", "OPENAI_", "MONGODB_", "CHROMA_", "DISCORD_", "TELEGRAM_"))
    }
    clean["MNEMO_EMBEDDING_MODEL_DIR"] = str(model_dir)
    version = subprocess.run(
        [str(fresh / "bin" / "mnemo"), "--version"],
        cwd=elsewhere,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (version.returncode, version.stdout.strip()) == (0, "mnemo 0.1.0"), version.stderr
    doctor = subprocess.run(
        [str(fresh / "bin" / "mnemo"), "doctor"],
        cwd=elsewhere,
        env=clean,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr[-2000:]
    shipped = Path(site, "bot", "_builtin")
    lines = doctor.stdout.splitlines()
    assert f"ok   character  Mnemo ({shipped / 'characters' / 'mnemo.json'})" in lines
    assert f"ok   plugins    {shipped_plugins()} (built-in); settings valid" in lines
    assert lines[-1] == "all checks passed"
    # What it created, it created in the folder it was started in.
    assert (elsewhere / "data" / "mongo").is_dir()


def _project() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _locked() -> dict[str, str]:
    lines = (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = [line.split("==") for line in lines if line and not line.startswith("#")]
    assert all(len(pin) == 2 for pin in pins), "constraints.txt holds exact pins only"
    return {canonicalize_name(name): version for name, version in pins}


def _requirements() -> list[Requirement]:
    project = _project()
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    for extra in project["project"]["optional-dependencies"].values():
        wanted += extra
    return [Requirement(text) for text in wanted]


def test_every_dependency_has_an_upper_bound_and_the_lock_pins_it_within_range() -> None:
    """Next month's install is this month's: a new major (openai 4, nx-27017 0.9) is never
    picked up unseen, and `make`, CI and the Dockerfile install the lock's exact versions."""
    locked = _locked()
    assert "mnemo-bot" not in locked
    for requirement in _requirements():
        bounds = {spec.operator for spec in requirement.specifier}
        assert bounds & {"<", "<=", "==", "~="}, f"{requirement} has no upper bound"
        name = canonicalize_name(requirement.name)
        assert name in locked, f"constraints.txt does not pin {name}"
        assert requirement.specifier.contains(locked[name]), (requirement, locked[name])
    nx = next(r for r in _requirements() if r.name == "nx-27017")
    assert not nx.specifier.contains("0.9.0"), "nx-27017 0.9 needs Python 3.12, untested"


def test_the_tests_run_with_the_locked_versions() -> None:
    """What `make test` installed is what the lock says (the venv is redone when it changes)."""
    locked = _locked()
    for requirement in _requirements():
        name = canonicalize_name(requirement.name)
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            continue  # an extra this venv was not set up with
        assert installed == locked[name], f"{name}: installed {installed}, locked {locked[name]}"

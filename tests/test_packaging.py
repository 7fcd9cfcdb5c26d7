"""The wheel is the product: it holds Mnemo and a plugin author's test tools, and nothing of
Mnemo's own benchmarks or platform fakes; installed on its own, every module imports.

The wheel is built from a copy of the checkout (`pip wheel --no-deps --no-build-isolation`,
a few seconds), so the build's `build/` and `*.egg-info` never land in the working tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "build", "dist", "*.egg-info", ".pytest_cache", ".ruff_cache"
)
# Run-time folders at the top of a checkout (MNEMO_DATA_DIR's default, bench results).
_RUNTIME_FOLDERS = {"data", "bench-results", ".env"}


def _ignore(folder: str, names: list[str]) -> set[str]:
    ignored = set(_NOT_SOURCES(folder, names))
    if Path(folder) == REPO:
        ignored |= _RUNTIME_FOLDERS & set(names)
    return ignored


# What a plugin author tests with (docs/plugins.md); the platform fakes are not among them.
PLUGIN_AUTHOR_TOOLS = {"__init__.py", "harness.py", "scripted.py", "openai_server.py"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "source"
    shutil.copytree(REPO, source, ignore=_ignore)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(folder / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [found] = (folder / "dist").glob("mnemo-*.whl")
    return found


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_no_benchmark_and_no_platform_fake(wheel: Path) -> None:
    names = _names(wheel)
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"bot", "mnemo-0.1.0.dist-info"}, top_level
    assert not [n for n in names if "bench" in n], "benchmarks ship in the wheel"
    fakes = [n for n in names if "discord_fakes" in n or "telegram_server" in n]
    assert not fakes, f"platform fakes ship in the wheel: {fakes}"
    testing = {n.removeprefix("bot/testing/") for n in names if n.startswith("bot/testing/")}
    assert testing == PLUGIN_AUTHOR_TOOLS


def test_the_wheel_holds_every_module_of_the_product_and_its_command(wheel: Path) -> None:
    names = set(_names(wheel))
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "bot").rglob("*.py")}
    assert sources - names == set(), "modules of bot/ missing from the wheel"
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read("mnemo-0.1.0.dist-info/entry_points.txt").decode()
    assert "mnemo = bot.cli:main" in entry_points


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

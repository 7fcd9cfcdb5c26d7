"""A copy of the checkout as a fresh clone holds it: the sources, without what running and
testing leave beside them (venvs, caches, build output) and without the run-time folders at its
top (MNEMO_DATA_DIR's default `data/`, bench results, `.env`). Only at the top: `tests/data/`
is part of the clone, and the tests that read it fail in a copy without it."""

from __future__ import annotations

import shutil
from pathlib import Path

_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv*", "__pycache__", "build", "dist", "*.egg-info", ".pytest_cache", ".ruff_cache"
)
_RUNTIME_FOLDERS = {"data", "bench-results", ".env"}


def copy_checkout(repo: Path, destination: Path) -> Path:
    """`repo` copied to `destination` as a clone of it would be; returns `destination`."""

    def ignored(folder: str, names: list[str]) -> set[str]:
        left_out = set(_NOT_SOURCES(folder, names))
        if Path(folder) == repo:
            left_out |= _RUNTIME_FOLDERS & set(names)
        return left_out

    shutil.copytree(repo, destination, ignore=ignored)
    return destination

"""The wheel, built from a copy of the checkout (`pip wheel --no-deps --no-build-isolation`, a
few seconds), so the build's `build/` and `*.egg-info` never land in the working tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.checkout_copy import copy_checkout
from tests.paths import REPO

# Published as `mnemo-bot` (`mnemo` and a hundred `mnemo*` names are taken on PyPI); the
# command stays `mnemo`.
DIST_INFO = "mnemo_bot-0.1.0.dist-info"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "source"
    copy_checkout(REPO, source)
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
    [found] = (folder / "dist").glob(f"{DIST_INFO.split('-')[0]}-*.whl")
    return found

"""nx-27017 whose SIGTERM does nothing: the audit's rare case made certain.

nx-27017 answers SIGTERM with `sys.exit(0)`; when that lands inside a uvloop stream callback the
SystemExit is swallowed ("Fatal error on transport") and the server keeps running. About 1 kill
in 60 under traffic; here every time, so a test can tell a parent-death signal the server can
swallow from one it cannot.
"""

from __future__ import annotations

import runpy
from types import FrameType

from nx_27017 import daemon


def _swallowed(signum: int, frame: FrameType | None) -> None:
    return None


daemon._signal_exit_handler = _swallowed  # type: ignore[assignment]
runpy.run_module("nx_27017.nx_27017", run_name="__main__")

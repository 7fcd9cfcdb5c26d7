"""A bundled server left running by a Mnemo that died: found and stopped at the next start.

nx-27017 refuses to start while its pid file names a live process ("NX-27017 is already
running"), so a server that outlived its Mnemo (it swallowed its parent-death signal, or runs
where there is none) would block every later start. bot/storage/bundled/server.py records which
process started the server (the owner file); a server whose parent is no longer that process
is a leftover. Linux (/proc); elsewhere nothing is found and nx-27017 decides.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

logger = logging.getLogger(__name__)

STOP_SECONDS = 5.0


class LeftoverServerError(RuntimeError):
    """The server in the way belongs to a running Mnemo, or would not stop."""


def clear_leftover_server(folder: Path, data_dir: Path, pid_name: str, owner_name: str) -> None:
    """Make way for a new server: a pid file naming a process that is not nx-27017 (its pid
    was reused) is dropped, and a server of this folder whose Mnemo died is stopped.

    nx-27017 refuses to start while its pid file names a live process, so either would
    block every later start ("NX-27017 is already running"). A server whose parent is still
    the Mnemo that started it belongs to a running Mnemo: that is an error, not a leftover.
    """
    pid_file = folder / pid_name
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return  # no pid file, a dead pid (nx handles that), or no /proc to ask
    if b"nx_27017" not in cmdline or str(folder).encode() not in cmdline.split(b"\0"):
        pid_file.unlink(missing_ok=True)
        return
    parent = _parent_of(pid)
    owner = _read_pid(folder / owner_name)
    # Without an owner file (a server started by an older Mnemo) only a server adopted by
    # init is known to be orphaned.
    orphaned = parent != owner if owner is not None else parent in (None, 1)
    if not orphaned:
        raise LeftoverServerError(
            f"the bundled database of {data_dir} is in use by another Mnemo "
            f"(pid {parent}); stop that one first, or give this one another MNEMO_DATA_DIR"
        )
    logger.warning(
        "stopping a bundled database (nx-27017, pid %d) left running by a Mnemo that "
        "died (its parent is now pid %s)",
        pid,
        parent,
    )
    _stop_pid(pid, STOP_SECONDS)
    pid_file.unlink(missing_ok=True)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _parent_of(pid: int) -> int | None:
    """The parent pid of a live process (Linux /proc), or None when it cannot be told."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        # After the ")" closing the command name: state, then the parent pid.
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie counts as gone: it holds no files or sockets)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _stop_pid(pid: int, seconds: float) -> None:
    """SIGTERM a process that is not our child, then SIGKILL it if it is still there: the
    SIGTERM can be swallowed (see EmbeddedMongo), SIGKILL cannot."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError as error:
            raise LeftoverServerError(
                f"a bundled database (pid {pid}) left running in this data folder cannot be "
                f"stopped: {error}"
            ) from error
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if _gone(pid):
                return
            time.sleep(0.05)
    raise LeftoverServerError(f"a bundled database (pid {pid}) left running would not stop")

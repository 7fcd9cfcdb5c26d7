"""A process's identity in its deployment, and what it inherits from the run before it.

Every start is a new owner of leases and claims (a uuid), so that a crash is told apart from a
live process (bot/queue/worker.py). A restart must still not wait for its own predecessor: one
process runs from a data folder at a time (its journal and log live there), so the owner
recorded in the folder by the previous start is a process that is gone. Its leases are
released at once, and its interrupted jobs and unanswered messages are this start's to
recover, instead of waiting up to the lease time as another process's would.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from bot.storage.leases import Leases

log = logging.getLogger(__name__)

OWNER_FILE = "process-owner"
LOCK_FILE = "process-owner.lock"


@dataclass
class Succession:
    """This start's lease owner, and the data folder's lock it holds while it runs."""

    owner: str
    lock: FileLock | None

    def close(self) -> None:
        if self.lock is not None:
            self.lock.release()


def succeed(data_dir: Path, owner: str) -> str | None:
    """Record `owner` as the process running from `data_dir`; returns the previous one."""
    path = data_dir / OWNER_FILE
    try:
        previous = path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        previous = None
    # Written whole or not at all: a crash mid-write must not lose the predecessor's name.
    partial = path.with_name(OWNER_FILE + ".tmp")
    partial.write_text(owner, encoding="utf-8")
    os.replace(partial, path)
    return previous


async def take_over(leases: Leases, data_dir: Path, *, bundled: bool) -> Succession:
    """A new owner for this start, with what the previous run left released.

    The previous run is known gone when this start gets the data folder's lock (the operating
    system drops it with its process, kill -9 included). Another live process on the same
    folder (say `mnemo reindex` beside `mnemo run`) keeps its leases, and its name stays."""
    owner = uuid.uuid4().hex
    lock = FileLock(data_dir / LOCK_FILE)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.warning("another Mnemo process runs from %s: its leases are left alone", data_dir)
        return Succession(owner, None)
    previous = succeed(data_dir, owner)
    if bundled:
        # The bundled server belongs to this one process (its data folder is locked), so
        # every lease left in it is a dead process's.
        released = await leases.clear()
    elif previous is not None and previous != owner:
        released = await leases.release_owner(previous)
    else:
        released = 0
    if released:
        log.info("released %d lease(s) the previous run left: its work resumes now", released)
    return Succession(owner, lock)

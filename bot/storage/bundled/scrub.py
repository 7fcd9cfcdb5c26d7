"""The bundled server's files rid of what was deleted, while it runs.

SQLite keeps a deleted document's bytes: in its page, in a free page, and in the write-ahead
log (the WAL), which the server checkpoints and removes only when it stops. After a
forgetting that is the person's words, readable in the data folder by anyone who can read
it. `BundledFiles.scrub` rewrites the database without them (the server's own `vacuum`
command: SQLite's VACUUM, on the server's connection, under its lock) and then empties the
WAL (`PRAGMA wal_checkpoint(TRUNCATE)` on the file, from a connection of our own: nx-27017
runs only a passive checkpoint over the wire, which leaves the log's bytes in place; SQLite
is made for a second connection to checkpoint a WAL database another process writes).

VACUUM rewrites the whole file: the database's other writers wait meanwhile (well under a
second for a few megabytes; seconds for hundreds), and it needs about the database's size in
free disk space. A scrub that fails is logged and does not fail the deletion it follows.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

log = logging.getLogger(__name__)

# A checkpoint that finds a reader in the middle of a read (busy) is tried again this often,
# this long apart; then the WAL is left to the server's next checkpoint, with a warning.
CHECKPOINT_TRIES = 50
CHECKPOINT_PAUSE = 0.1
# How long one try waits for the server's writer to finish (SQLite's busy timeout).
BUSY_SECONDS = 10.0


class BundledFiles:
    """One database of the bundled server: its wire handle and its SQLite file."""

    def __init__(self, db: AsyncDatabase, path: Path) -> None:
        self._db = db
        self.path = path

    async def scrub(self) -> None:
        """Rewrite the database without its deleted bytes, then empty its WAL. A step that
        fails (VACUUM needs free space about the database's size) is logged, never raised:
        what was deleted is gone from every collection, and the next scrub tries again."""
        try:
            await self._db.command("vacuum")
        except PyMongoError as error:
            log.warning(
                "the bundled database could not be rewritten after a deletion (%s); the "
                "deleted bytes stay in its free pages until the next one",
                str(error).splitlines()[0] if str(error) else type(error).__name__,
            )
        try:
            await asyncio.to_thread(empty_wal, self.path)
        except (sqlite3.Error, OSError) as error:
            log.warning("the bundled database's write-ahead log could not be emptied (%s)", error)


def empty_wal(path: Path) -> bool:
    """Checkpoint the WAL of the SQLite database at `path` into it and truncate the log to
    nothing; False when readers kept it busy through every try (logged)."""
    if not path.exists():
        return True  # nothing written yet
    connection = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    try:
        for _ in range(CHECKPOINT_TRIES):
            busy, _frames, _moved = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return True
            time.sleep(CHECKPOINT_PAUSE)
    finally:
        connection.close()
    log.warning(
        "the bundled database's write-ahead log could not be emptied (readers kept it busy); "
        "what was deleted stays in it until the server's next checkpoint"
    )
    return False

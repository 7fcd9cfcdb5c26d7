"""The data folder is owner-only: it holds what people said (the database, Chroma, the log,
the journal, backups and exports).

`mnemo` sets its umask to 077 before it creates anything, so every file it and its children
(the bundled nx-27017, Chroma's SQLite) create is 0600 and every folder 0700, whatever the
library that creates it; and the data folder itself is made 0700 even when an older Mnemo
created it 0755, so files it made then can no longer be reached through it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

OWNER_ONLY_UMASK = 0o077
FOLDER_MODE = 0o700


def owner_only(data_dir: Path) -> int:
    """Owner-only from here on (umask), and the data folder itself 0700. Returns the umask
    it replaced."""
    previous = os.umask(OWNER_ONLY_UMASK)
    with contextlib.suppress(FileExistsError):
        data_dir.mkdir(mode=FOLDER_MODE, parents=True)
    try:
        if stat.S_IMODE(data_dir.stat().st_mode) != FOLDER_MODE:
            data_dir.chmod(FOLDER_MODE)
    except OSError as error:  # not ours (a mounted volume's root): its owner decides
        log.warning("cannot make the data folder %s owner-only: %s", data_dir, error)
    return previous

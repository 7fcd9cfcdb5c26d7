"""Rooms owed one line after a restart: "I missed some messages while I was restarting".

A message a crash left unanswered is answered after the restart while it is young (within
MNEMO_ANSWER_WINDOW_MINUTES); an older one is only learned from, since a late answer to an old
message only confuses. Its room is then told once, in the room's lane, when its platform is
connected again. Learning from the old message releases its job, so nothing in MongoDB would
say the room is still owed the line: a process killed between the two (a crash loop) would
leave it silent. The rooms owed it are kept here, in `missed_rooms.json` in the data folder,
written before the messages are learned from and rewritten once a room has been told.

One small JSON file (a list of rooms), replaced atomically (bot/runtime/intake/journal.py's
`replace_file`): a crash leaves the old list or the new one. A room is told at most once per
start; a crash after the line went out and before the file was rewritten tells it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from bot.domain.records import Room
from bot.runtime.intake.journal import replace_file

log = logging.getLogger(__name__)

MISSED_ROOMS_FILE = "missed_rooms.json"
_ROOMS = TypeAdapter(list[Room])


class MissedRooms:
    """The rooms owed the line; `path` None keeps them in memory only (tests, no data folder).
    Thread-safe: the intake writes it through a worker thread (a stuck disk never blocks the
    event loop)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._rooms: dict[str, Room] = {}
        if path is not None and path.exists():
            try:
                rooms = _ROOMS.validate_json(path.read_bytes())
            except (OSError, ValidationError) as error:
                # Only a courtesy line is lost: the messages were learned from already.
                log.error("%s is unreadable, ignored: %s", path, str(error).splitlines()[0])
                rooms = []
            self._rooms = {room.id: room for room in rooms}

    @classmethod
    def in_folder(cls, data_dir: Path) -> MissedRooms:
        return cls(data_dir / MISSED_ROOMS_FILE)

    def rooms(self) -> list[Room]:
        with self._lock:
            return list(self._rooms.values())

    def add(self, rooms: Iterable[Room]) -> None:
        """Owe these rooms the line (durably, before their messages are learned from)."""
        with self._lock:
            before = len(self._rooms)
            self._rooms.update((room.id, room) for room in rooms)
            if len(self._rooms) != before:
                self._write()

    def told(self, room_id: str) -> None:
        with self._lock:
            if self._rooms.pop(room_id, None) is not None:
                self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        rooms = list(self._rooms.values())
        data = _ROOMS.dump_json(rooms) if rooms else b""
        replace_file(self.path, data)  # empty: the file is removed

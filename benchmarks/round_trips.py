"""MongoDB round trips, counted with PyMongo's command monitoring.

A `RoundTrips` listener is registered on the client the app uses (`open_app(...,
mongo_listeners=[round_trips])`); every command the client sends is one round trip, whatever
the server's speed, so the counts are the same on the bundled server and on a real MongoDB
and can be asserted in a test. Each command is recorded as "<command> <collection>"
("find memories", "insert evaluations"), so a count can be explained, not only compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pymongo import monitoring

# Commands the client sends on its own behalf, not for Mnemo's reads and writes (a session
# ending when the client closes).
_HOUSEKEEPING = frozenset({"endSessions"})


@dataclass
class Tally:
    """The commands of one stretch of work, by "<command> <collection>"."""

    commands: Counter[str] = field(default_factory=Counter)
    # The same commands in the order they were sent.
    sequence: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.commands.values())


class RoundTrips(monitoring.CommandListener):
    """Counts the commands a client sends, and the time they took (queueing at the server
    included). `measure()` tallies one stretch of work on its own."""

    def __init__(self) -> None:
        self.commands: Counter[str] = Counter()
        self.seconds = 0.0
        self._open: list[Tally] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in _HOUSEKEEPING:
            return
        target = event.command.get(event.command_name)
        # A collection-level command names its collection; `bulkWrite` (client level) and
        # admin commands name none.
        name = f"{event.command_name} {target}" if isinstance(target, str) else event.command_name
        self.commands[name] += 1
        for tally in self._open:
            tally.commands[name] += 1
            tally.sequence.append(name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self.seconds += event.duration_micros / 1e6

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self.seconds += event.duration_micros / 1e6

    @property
    def total(self) -> int:
        return sum(self.commands.values())

    def snapshot(self) -> tuple[int, float]:
        """Commands so far and the seconds they took."""
        return self.total, self.seconds

    @contextmanager
    def measure(self) -> Iterator[Tally]:
        """Tally the commands sent while the block runs."""
        tally = Tally()
        self._open.append(tally)
        try:
            yield tally
        finally:
            self._open.remove(tally)

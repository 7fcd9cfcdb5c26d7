"""Current facts about a message's people, read with the room's window before its reply, so the
facts shown to the reply cost no MongoDB read of their own (the reply path's round trips,
issue 14).

`Knowledge.search_facts` given them answers from them instead of reading: the facts its vector
hits name, or the most recent ones. What was read is complete when fewer than the read's limit
came back; otherwise a hit that is not among them is read from MongoDB as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.domain.records import Fact

# Facts read per message at most: a person has tens of facts; past this the read is partial.
PREFETCHED_FACTS = 50

Key = tuple[str, tuple[str, ...]]


def key_of(world_id: str, subject_ids: Sequence[str]) -> Key:
    return world_id, tuple(dict.fromkeys(subject_ids))


@dataclass
class KnownFacts:
    """Current facts about some people in one world, newest first."""

    facts: list[Fact]
    by_id: dict[str, Fact] = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {fact.id: fact for fact in self.facts}

    @property
    def complete(self) -> bool:
        return len(self.facts) < PREFETCHED_FACTS

    def named(self, ids: Sequence[str]) -> list[Fact] | None:
        """The current facts among `ids`, in their order; None when some may be unknown."""
        if not self.complete and any(i not in self.by_id for i in ids):
            return None
        return [self.by_id[i] for i in dict.fromkeys(ids) if i in self.by_id]

    def newest(self, limit: int) -> list[Fact] | None:
        """The `limit` most recent; None when more exist than were read."""
        if not self.complete and len(self.facts) < limit:
            return None
        return self.facts[:limit]

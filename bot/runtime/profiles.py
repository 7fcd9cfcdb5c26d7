"""KnownProfiles: accounts and rooms written only when they changed.

Every message carries its sender's and room's profile; writing them each time would cost two
database round trips per message, so the profiles already written are remembered (bounded,
like an LRU) and only a changed one is written again.
"""

from __future__ import annotations

from collections.abc import Iterable

from cachetools import LRUCache

from bot.domain.records import Account, Room
from bot.storage.mongo import MongoStore

SEEN_PROFILES = 10_000


class KnownProfiles:
    def __init__(self, store: MongoStore, *, limit: int = SEEN_PROFILES) -> None:
        self.store = store
        self.limit = limit
        # Profiles already written need no write per message; the least recently seen go.
        self._seen: LRUCache[str, Account | Room] = LRUCache(maxsize=limit)

    async def note(self, accounts: Iterable[Account] = (), room: Room | None = None) -> None:
        """Write the accounts and the room that changed since they were last written."""
        for account in accounts:
            if self._seen.get(account.id) != account:
                await self.store.accounts.upsert(account)
                self._seen[account.id] = account
        if room is not None and self._seen.get(room.id) != room:
            await self.store.rooms.upsert(room)
            self._seen[room.id] = room

    def forget(self, ids: Iterable[str]) -> None:
        """Profiles deleted from the database (a person forgotten, their DM room): written
        again when they next appear, rather than taken as written."""
        for key in ids:
            self._seen.pop(key, None)

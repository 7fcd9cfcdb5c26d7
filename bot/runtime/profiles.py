"""KnownProfiles: accounts and rooms written only when they changed.

Every message carries its sender's and room's profile; writing them each time would cost two
database round trips per message, so the profiles already written are remembered (bounded,
like an LRU) and only a changed one is written again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from bot.domain.records import Account, Room
from bot.storage.mongo import MongoStore

SEEN_PROFILES = 10_000


class KnownProfiles:
    def __init__(self, store: MongoStore, *, limit: int = SEEN_PROFILES) -> None:
        self.store = store
        self.limit = limit
        self._seen: OrderedDict[str, Account | Room] = OrderedDict()

    async def note(self, accounts: Iterable[Account] = (), room: Room | None = None) -> None:
        """Write the accounts and the room that changed since they were last written."""
        for account in accounts:
            if self._seen.get(account.id) != account:
                await self.store.accounts.upsert(account)
                self._remember(account.id, account)
        if room is not None and self._seen.get(room.id) != room:
            await self.store.rooms.upsert(room)
            self._remember(room.id, room)

    def _remember(self, key: str, value: Account | Room) -> None:
        """Profiles already written need no write per message; bounded like an LRU."""
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > self.limit:
            self._seen.popitem(last=False)

    def forget(self, ids: Iterable[str]) -> None:
        """Profiles deleted from the database (a person forgotten, their DM room): written
        again when they next appear, rather than taken as written."""
        for key in ids:
            self._seen.pop(key, None)

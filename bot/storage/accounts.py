"""The `accounts` collection: the people Mnemo has met, one document per platform account."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import ClassVar

from pymongo import IndexModel
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.names import told_name_for
from bot.domain.records import Account
from bot.domain.text import readable
from bot.storage.documents import (
    by_ids,
    fields,
    load_one,
)


class Accounts:
    """Accounts: upserted on every message, found by id or username."""

    # The indexes its queries need (names fixed: a second start-up asks for the same).
    INDEXES: ClassVar[Mapping[str, list[IndexModel]]] = {}

    def __init__(self, db: AsyncDatabase) -> None:
        self._collection: AsyncCollection = db.accounts

    async def upsert(self, account: Account) -> None:
        # $set, not replace: fields other code adds to the document survive a profile refresh.
        await self._collection.update_one(
            {"_id": account.id}, {"$set": fields(account)}, upsert=True
        )

    async def set_told_name(
        self, account_id: str, world_id: str, name: str, *, others: Iterable[Account] = ()
    ) -> str | None:
        """Remember the name a person told the bot in a world (`Account.in_world` shows it
        there, and only there), as people can read it; one that reads like a name one of
        `others` (the world's other members) goes by there is kept with the teller's own
        after it, "Tobrin (Zed)" (bot/domain/names.py). Returns the name kept (None: nothing
        readable was told, or the account is unknown)."""
        teller = (await self.get_many([account_id])).get(account_id)
        if teller is None or not readable(name):
            return None
        kept = told_name_for(name, teller, others, world_id)
        await self._collection.update_one(
            {"_id": account_id}, {"$set": {f"told_names.{world_id}": kept}}
        )
        return kept

    async def forget_told_name(self, account_id: str, world_id: str) -> None:
        """The name told in a world goes with what was learned from them there."""
        await self._collection.update_one(
            {"_id": account_id}, {"$set": {f"told_names.{world_id}": None}}
        )

    async def delete(self, account_id: str) -> bool:
        result = await self._collection.delete_one({"_id": account_id})
        return result.deleted_count == 1

    async def find_by_username(self, platform: str, username: str) -> Account | None:
        """Usernames are case-insensitive on Discord and Telegram: an anchored `i` regex."""
        pattern = {"$regex": f"^{re.escape(username)}$", "$options": "i"}
        document = await self._collection.find_one({"platform": platform, "username": pattern})
        return load_one(Account, document)

    async def in_world(self, ids: Iterable[str], world_id: str) -> dict[str, Account]:
        """The accounts as shown in a world: by the name told there, if one was."""
        found = await self.get_many(sorted(set(ids)))
        return {i: account.in_world(world_id) for i, account in found.items()}

    async def get_many(self, ids: list[str]) -> dict[str, Account]:
        return {account.id: account for account in await by_ids(self._collection, Account, ids)}

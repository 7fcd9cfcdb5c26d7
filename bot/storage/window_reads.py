"""A room's recent window, with everything a prompt's state needs about it, in one read.

Composing a state needs the room's last messages, the accounts of the people in them (and of
the sender and whoever the message mentions), and for an evaluation the room itself with its
marks. Read one by one that is three or four round trips per reply and per evaluation; here
it is one aggregation whose `$unionWith` stages read each part (MongoDB 4.4+ and the bundled
nx-27017 server have it).

The aggregation runs on `ANCHOR`, a collection that stays empty, and every part is a
`$unionWith`: nx-27017 runs a pipeline with a `$unionWith` in Python over the whole collection
it starts from (on `memories` that was 80 ms per read at 1,000 rooms, growing with the data),
while each `$unionWith`'s own pipeline uses its collection's indexes (a few ms in all). No
`$lookup` for the authors for the same reason (10 ms at 1,000 accounts): the accounts of
`people` come with the read; an author not among them is read by the caller if needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import Account, Memory, Room
from bot.storage.documents import as_utc, load

_KIND = "_mnemo_kind"
# Always empty: the read starts here (see above). Created at start-up (bot/storage/mongo.py).
ANCHOR = "window_reads"


@dataclass(frozen=True)
class Window:
    """What one read found: the messages oldest first, the accounts by id, and (when asked
    for) the room and its marks."""

    messages: list[Memory]
    accounts: dict[str, Account]
    room: Room | None = None
    marks: dict[str, datetime | None] = field(default_factory=dict)
    # Everyone whose account was looked for (the people asked for): one missing from
    # `accounts` has none.
    asked: frozenset[str] = frozenset()
    # Documents of other collections asked for (`Read`), by name, read in the same round trip.
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def written_since(self, account: Account) -> None:
        """An account the adapter wrote after this read (the sender's profile): as written,
        with the name the person told the bot kept (a profile refresh never overwrites it)."""
        known = self.accounts.get(account.id)
        if known is not None and known.told_names:
            account = account.model_copy(update={"told_names": known.told_names})
        self.accounts[account.id] = account


@dataclass(frozen=True)
class Read:
    """Documents of another collection to read with the window: those matching `match`,
    sorted and limited if asked."""

    collection: str
    match: Mapping[str, Any]
    sort: Mapping[str, int] | None = None
    limit: int | None = None

    @classmethod
    def by_ids(cls, collection: str, ids: Iterable[str]) -> list[Read]:
        """The documents with these ids: one equality each (nx-27017 answers `_id: {$in}`
        inside a `$unionWith` by scanning the collection, an `_id` equality from its index)."""
        return [cls(collection, {"_id": i}) for i in sorted(set(ids))]

    def stages(self) -> list[dict[str, Any]]:
        stages: list[dict[str, Any]] = [{"$match": dict(self.match)}]
        if self.sort:
            stages.append({"$sort": dict(self.sort)})
        if self.limit is not None:
            stages.append({"$limit": max(self.limit, 1)})
        return stages


async def read_window(
    db: AsyncDatabase,
    room_id: str,
    limit: int,
    *,
    before_ms: int | None = None,
    people: Iterable[str] = (),
    with_room: bool = False,
    extra: Mapping[str, Read | list[Read]] | None = None,
) -> Window:
    """The room's last `limit` messages (created before `before_ms`, integer milliseconds,
    if given), the accounts of `people`, the room when `with_room`, and the documents of each
    `extra` read under its name."""
    match: dict[str, Any] = {"room_id": room_id}
    if before_ms is not None:
        match["created_ms"] = {"$lt": before_ms}
    recent: list[dict[str, Any]] = [
        {"$match": match},
        {"$sort": {"created_ms": DESCENDING}},
        # PyMongo reads limit 0 as "no limit"; the server refuses `$limit: 0`.
        {"$limit": max(limit, 1)},
    ]
    pipeline: list[dict[str, Any]] = [
        {"$match": {"_id": None}},  # nothing: the anchor is empty anyway
        _union("memories", recent, "message"),
    ]
    wanted = sorted(set(people))
    if wanted:
        # One equality each (`Read.by_ids`): `_id: {$in}` scanned 1,000 accounts, 17 ms.
        pipeline += [
            _union("accounts", r.stages(), "account") for r in Read.by_ids("accounts", wanted)
        ]
    if with_room:
        pipeline.append(_union("rooms", [{"$match": {"_id": room_id}}], "room"))
    for name, reads in (extra or {}).items():
        for read in reads if isinstance(reads, list) else [reads]:
            pipeline.append(_union(read.collection, read.stages(), f"extra:{name}"))
    messages: list[Memory] = []
    accounts: dict[str, Account] = {}
    room_document: dict[str, Any] | None = None
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in extra or {}}
    async for document in await db[ANCHOR].aggregate(pipeline):
        kind = document.pop(_KIND, None)
        if isinstance(kind, str) and kind.startswith("extra:"):
            found[kind.removeprefix("extra:")].append(document)
        elif kind == "account":
            account = load(Account, document)
            accounts[account.id] = account
        elif kind == "room":
            room_document = document
        elif kind == "message":
            messages.append(load(Memory, document))
    if limit <= 0:
        messages = []
    messages.reverse()
    room, marks = _room(room_document)
    asked = frozenset(wanted)
    return Window(
        messages=messages, accounts=accounts, room=room, marks=marks, asked=asked, extra=found
    )


def _union(collection: str, stages: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return {
        "$unionWith": {
            "coll": collection,
            "pipeline": [*stages, {"$addFields": {_KIND: kind}}],
        }
    }


def _room(document: dict[str, Any] | None) -> tuple[Room | None, dict[str, datetime | None]]:
    if document is None:
        return None, {}
    marks = {key: as_utc(value) for key, value in (document.get("marks") or {}).items()}
    # A mark can be set before the adapter has described the room: such a placeholder holds
    # only marks and is not a room yet (as `Rooms.get`).
    room = load(Room, document) if "kind" in document else None
    return room, marks

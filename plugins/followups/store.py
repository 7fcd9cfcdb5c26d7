"""The follow-ups plugin's data, in its own collections:

- `plugin_followups_followups`: one document per follow-up (a UUID `_id`, integer-ms times),
  about one person: a follow-up is data about them, so /export shows it and /forgetme
  deletes it;
- `plugin_followups_worlds`: whether a world's admins switched follow-ups on, and the
  world's time zone.

Sending is at most once across every process of a deployment: a due follow-up is claimed in
one `find_one_and_update` (pending -> sending, with the claiming process as owner) before
anything is sent, and only a send that raised (so did not go out) puts it back. A process
killed between the claim and the platform's answer leaves it `sending`; it is never claimed
again (`abandon_stale` marks it `lost` once its lease ends). The trade-off is deliberate: a
follow-up lost to a crash is a question not asked; one sent twice is a bot that nags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from bot import Document

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

    from bot import Collections

_T = TypeVar("_T", bound=Document)

FOLLOWUPS = "followups"
WORLDS = "worlds"

Status = Literal["pending", "sending", "sent", "cancelled", "lost"]
# Kept for the one-a-day rule and shown in /export; only `pending` ones are listed in /me.
LIVE: tuple[Status, ...] = ("pending", "sending", "sent")

_INDEXES = [
    IndexModel([("status", ASCENDING), ("due_ms", ASCENDING)], name="status_due"),
    IndexModel([("world_id", ASCENDING), ("person_id", ASCENDING)], name="world_person"),
]


class FollowUp(Document):
    id: str
    world_id: str
    room_id: str
    platform: str
    person_id: str
    person_name: str
    # As the bot says it back ("your exam"), the key that tells the same event ("exam"),
    # and the sentence the person said it in (what the question is written from).
    topic: str
    key: str
    # "event" (asked how it went) or "deadline" (asked whether they managed it).
    kind: Literal["event", "deadline"] = "event"
    said: str
    phrase: str
    # The day it happens by, and the day the follow-up is asked (ISO dates, local time).
    event_day: str
    local_day: str
    timezone: str
    due_ms: int
    created_ms: int
    status: Status = "pending"
    owner: str | None = None
    claimed_ms: int | None = None
    sent_ms: int | None = None
    attempts: int = 0
    question: str | None = None


class WorldChoice(Document):
    """A world's follow-up setting: "on" or "off" (strings: nx-27017 stores a $set boolean
    as 1), and its time zone (an IANA name) when an admin gave one."""

    id: str
    followups: Literal["on", "off"] = "off"
    timezone: str | None = None
    changed_by: str = ""
    changed_ms: int = 0


class FollowUpStore:
    def __init__(self, followups: AsyncCollection, worlds: AsyncCollection) -> None:
        self._followups = followups
        self._worlds = worlds

    @classmethod
    def of(cls, collections: Collections) -> FollowUpStore:
        return cls(collections[FOLLOWUPS], collections[WORLDS])

    async def ensure_indexes(self) -> None:
        await self._followups.create_indexes(_INDEXES)

    # ------------------------------------------------------------------ worlds
    async def world(self, world_id: str) -> WorldChoice:
        document = await self._worlds.find_one({"_id": world_id})
        return WorldChoice(id=world_id) if document is None else _load(WorldChoice, document)

    async def choose(self, choice: WorldChoice) -> None:
        # Replaced whole (typed the same on every server), its `_id` in the document too:
        # nx-27017's upsert does not take it from the filter.
        document = _dump(choice)
        await self._worlds.replace_one({"_id": document["_id"]}, document, upsert=True)

    # ------------------------------------------------------------------ follow-ups
    async def insert(self, followup: FollowUp) -> bool:
        """False when it exists already (the same message evaluated again)."""
        try:
            await self._followups.insert_one(_dump(followup))
        except DuplicateKeyError:
            return False
        return True

    async def of_person(
        self, world_id: str, person_id: str, *, statuses: tuple[Status, ...] | None = None
    ) -> list[FollowUp]:
        """The person's follow-ups in a world, soonest first."""
        query: dict[str, Any] = {"world_id": world_id, "person_id": person_id}
        if statuses is not None:
            query["status"] = {"$in": list(statuses)}
        cursor = self._followups.find(query).sort("due_ms", ASCENDING)
        return [_load(FollowUp, document) for document in await cursor.to_list()]

    async def sent_on(self, world_id: str, person_id: str, local_day: str, other_than: str) -> int:
        """How many other follow-ups the person was sent (or is being sent) that day."""
        return await self._followups.count_documents(
            {
                "_id": {"$ne": other_than},
                "world_id": world_id,
                "person_id": person_id,
                "local_day": local_day,
                "status": {"$in": ["sending", "sent"]},
            }
        )

    async def claim_due(self, now_ms: int, platforms: list[str], owner: str) -> FollowUp | None:
        """Take the earliest due follow-up of these platforms for this process, atomically:
        no other process can take it after this."""
        document = await self._followups.find_one_and_update(
            {"status": "pending", "due_ms": {"$lte": now_ms}, "platform": {"$in": platforms}},
            {"$set": {"status": "sending", "owner": owner, "claimed_ms": now_ms}},
            sort=[("due_ms", ASCENDING)],
            return_document=ReturnDocument.AFTER,
        )
        return None if document is None else _load(FollowUp, document)

    async def sent(self, followup: FollowUp, *, now_ms: int, local_day: str, question: str) -> None:
        await self._followups.update_one(
            {"_id": followup.id, "owner": followup.owner},
            {
                "$set": {
                    "status": "sent",
                    # The person's own sentence is not kept once asked: the question is.
                    "said": "",
                    "sent_ms": now_ms,
                    "local_day": local_day,
                    "question": question,
                }
            },
        )

    async def put_back(
        self, followup: FollowUp, *, due_ms: int, local_day: str, failed: bool = False
    ) -> None:
        """Pending again, due later (a night, a day that already had one, a send that
        raised: counted in `attempts`)."""
        await self._followups.update_one(
            {"_id": followup.id, "owner": followup.owner},
            {
                "$set": {
                    "status": "pending",
                    "owner": None,
                    "claimed_ms": None,
                    "due_ms": due_ms,
                    "local_day": local_day,
                    "attempts": followup.attempts + (1 if failed else 0),
                }
            },
        )

    async def close(self, followup: FollowUp, status: Status) -> None:
        await self._followups.update_one(
            {"_id": followup.id, "owner": followup.owner},
            {"$set": {"status": status, "said": ""}},
        )

    async def drop_finished(self, before_ms: int) -> int:
        """Follow-ups asked (or given up) before `before_ms`: no longer needed for the
        one-a-day rule, so not kept."""
        result = await self._followups.delete_many(
            {"status": {"$in": ["sent", "cancelled", "lost"]}, "due_ms": {"$lt": before_ms}}
        )
        return result.deleted_count

    async def abandon_stale(self, now_ms: int, lease_ms: int) -> int:
        """Claims older than the lease, never confirmed: their process died around the
        send. Marked `lost`, never sent again (at most once)."""
        result = await self._followups.update_many(
            {"status": "sending", "claimed_ms": {"$lt": now_ms - lease_ms}},
            {"$set": {"status": "lost", "said": ""}},
        )
        return result.modified_count

    async def drop_pending(self, world_id: str) -> int:
        """A world switched off: what was planned there is not kept."""
        result = await self._followups.delete_many({"world_id": world_id, "status": "pending"})
        return result.deleted_count

    async def delete_of(self, world_id: str, person_id: str) -> int:
        result = await self._followups.delete_many({"world_id": world_id, "person_id": person_id})
        return result.deleted_count

    async def count(self, world_id: str, status: Status) -> int:
        return await self._followups.count_documents({"world_id": world_id, "status": status})


def _dump(document: FollowUp | WorldChoice) -> dict[str, Any]:
    values = document.model_dump(mode="python")
    return {"_id": values.pop("id"), **values}


def _load(model: type[_T], document: dict[str, Any]) -> _T:
    values = dict(document)
    values["id"] = values.pop("_id")
    return model.model_validate(values)

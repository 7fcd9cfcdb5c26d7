"""Exporting a person's data in one world: everything Mnemo and its plugins keep about them
there, as one JSON document (the right of access), the mirror of `forgetting.py`.

The envelope is a pydantic model (`PersonalData`), so its shape is documented and checked:
their account, the messages they wrote and the bot's replies to them, the facts about them
with their history (closed versions too), the evaluations still waiting on their messages,
and what every plugin's `export` hook returns, under the plugin's name.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, Field

from bot.domain.records import Account, Fact, Memory, Room, utcnow
from bot.i18n import SOURCE_TEXTS, Texts
from bot.privacy.consent import ConsentStore

if TYPE_CHECKING:
    from bot.plugin.host import PluginHost
    from bot.storage.mongo import MongoStore

FORMAT: Final = "mnemo-personal-data/1"
# A person's facts in one world, closed ones included: tens, rarely hundreds.
EVERY_FACT = 100_000


class ExportedAccount(BaseModel):
    id: str
    platform: str
    platform_id: str
    name: str
    username: str | None = None
    # The name they told the bot in this world, if any (shown here instead of the platform's).
    told_name: str | None = None

    @classmethod
    def of(cls, account: Account, world_id: str) -> ExportedAccount:
        exported = cls.model_validate(account, from_attributes=True)
        return exported.model_copy(update={"told_name": account.told_name_in(world_id)})


class ExportedRoom(BaseModel):
    id: str
    kind: str
    name: str | None = None

    @classmethod
    def of(cls, room: Room) -> ExportedRoom:
        return cls.model_validate(room, from_attributes=True)


class ExportedMessage(BaseModel):
    id: str
    room_id: str
    created_at: datetime
    text: str
    # The message a reply answers.
    in_reply_to: str | None = None
    attachments: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def of(cls, memory: Memory) -> ExportedMessage:
        return cls(
            id=memory.id,
            room_id=memory.room_id,
            created_at=memory.created_at,
            text=memory.content.text,
            in_reply_to=memory.content.in_reply_to,
            attachments=[a.model_dump(mode="json") for a in memory.content.attachments],
        )


class ExportedFact(BaseModel):
    id: str
    text: str
    type: str
    learned_at: datetime
    # Integer milliseconds since the epoch: from when it held, and until when (None: it
    # still holds); a changed fact names the one that replaced it.
    valid_from: int
    valid_until: int | None = None
    superseded_by: str | None = None
    source_message_ids: list[str] = Field(default_factory=list)
    # Who said it, when someone else did (their account id).
    said_by: str | None = None

    @classmethod
    def of(cls, fact: Fact) -> ExportedFact:
        return cls(
            id=fact.id,
            text=fact.text,
            type=fact.type,
            learned_at=fact.created_at,
            valid_from=fact.valid_from,
            valid_until=fact.valid_until,
            superseded_by=fact.superseded_by,
            source_message_ids=list(fact.source_message_ids),
            said_by=fact.said_by,
        )


class PersonalData(BaseModel):
    """Everything stored about one person in one world."""

    format: Literal["mnemo-personal-data/1"] = FORMAT
    exported_at: datetime = Field(default_factory=utcnow)
    person_id: str
    world_id: str
    account: ExportedAccount | None = None
    rooms: list[ExportedRoom] = Field(default_factory=list)
    messages: list[ExportedMessage] = Field(default_factory=list)
    replies: list[ExportedMessage] = Field(default_factory=list)
    facts: list[ExportedFact] = Field(default_factory=list)
    # Evaluations of their messages not run yet (what may still be learned from them).
    pending_evaluations: int = 0
    # When they opted out here (integer ms), if they did: the consent record keeps only that.
    opted_out_at: int | None = None
    # Plugin name -> what its `export` hook returned.
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def summary(self) -> str:
        """ "3 messages, 3 of my replies, 4 facts and what 2 plugins keep"."""
        kept = sum(1 for data in self.plugins.values() if data)
        return (
            f"{len(self.messages)} messages, {len(self.replies)} of my replies, "
            f"{len(self.facts)} facts and what {kept} plugin{'s' * (kept != 1)} keep"
        )

    def filename(self) -> str:
        return f"mnemo-my-data-{self.exported_at:%Y%m%d-%H%M%S}.json"

    def to_json(self) -> bytes:
        return self.model_dump_json(indent=2).encode("utf-8")


class Exporting:
    """Collects a person's data. Built from the runtime's parts (see `bot.commands.command_set`)."""

    def __init__(self, *, store: MongoStore, plugins: PluginHost, agent_id: str) -> None:
        self._store = store
        self._plugins = plugins
        self._agent_id = agent_id

    async def person(self, person_id: str, world_id: str) -> PersonalData:
        store = self._store
        messages = await store.memories.by(user_id=person_id, world_id=world_id)
        ids = [m.id for m in messages]
        replies = await store.memories.get_many(
            await store.memories.reply_ids(ids, agent_id=self._agent_id, world_id=world_id)
        )
        account = (await store.accounts.get_many([person_id])).get(person_id)
        rooms = [
            room
            for room_id in dict.fromkeys(m.room_id for m in messages)
            if (room := await store.rooms.get(room_id)) is not None
        ]
        return PersonalData(
            person_id=person_id,
            world_id=world_id,
            account=None if account is None else ExportedAccount.of(account, world_id),
            rooms=[ExportedRoom.of(room) for room in rooms],
            messages=[ExportedMessage.of(m) for m in messages],
            replies=[ExportedMessage.of(m) for m in sorted(replies, key=lambda m: m.created_at)],
            facts=[
                ExportedFact.of(fact)
                for fact in await store.facts.history(person_id, world_id, limit=EVERY_FACT)
            ],
            pending_evaluations=await store.jobs.count_for_messages(ids, statuses=NOT_FINISHED),
            plugins=await self._plugins.export(person_id, world_id),
            opted_out_at=await ConsentStore(store.db).opted_out_since(
                user_id=person_id, world_id=world_id
            ),
        )


# The evaluations that may still learn from a message.
NOT_FINISHED = ["intake", "pending", "running", "retrying"]


async def told_name_line(
    store: MongoStore, person_id: str, world_id: str, texts: Texts = SOURCE_TEXTS
) -> str:
    """/me's first line when the person told the bot a name in this world ("" otherwise)."""
    account = (await store.accounts.get_many([person_id])).get(person_id)
    told = account.told_name_in(world_id) if account is not None else None
    if not told:
        return ""
    return texts.gettext("You asked me to call you {name} here.").format(name=told) + "\n"

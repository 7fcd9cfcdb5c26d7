"""The domain: what Mnemo stores in MongoDB and passes between adapters, runtime and plugins.

These are pydantic models because they cross boundaries (platform -> runtime, runtime ->
database). Every id is a UUID string; ids that come from a platform are derived with uuid5 so
the same platform object always maps to the same id (a redelivered message is a no-op).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from bot.domain.images import ImageLoader
from bot.domain.quotes import Quoted, QuoteLoader
from bot.domain.text import capped, readable, valid_text, visible

# Fixed namespace for every uuid5 Mnemo derives; changing it would orphan every stored id.
MNEMO_NAMESPACE = uuid.UUID("6f1c2f4e-8d7a-5b8e-9a51-2f3c0d6e4b71")

Platform = Literal["discord", "telegram", "console", "test"]
RoomKind = Literal["dm", "group"]
# "goal": an aim the person stated for themselves ("I want to run a marathon next year").
FactType = Literal["fact", "opinion", "status", "goal"]
# intake: the message is being answered (the job holds a copy of it until then); pending and
# retrying: waiting for a worker; dead: out of attempts, left for the operator.
JobStatus = Literal["intake", "pending", "running", "retrying", "done", "failed", "dead"]
# Why evaluators run: after a message, because the room went quiet with unlearned messages,
# or because a person edited a message (what was learned from its old words is withdrawn).
Trigger = Literal["message", "idle", "edit"]


def stable_id(*parts: str) -> str:
    """A UUID string that is the same for the same parts, on every machine, forever."""
    return str(uuid.uuid5(MNEMO_NAMESPACE, "\x1f".join(parts)))


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> datetime:
    return to_millis(datetime.now(UTC))


def epoch_millis(value: datetime) -> int:
    """Integer milliseconds since the epoch: how fact lifetimes are stored, because nx-27017
    compares dates only to the second and stores dates written by `$set` as strings."""
    return int(to_millis(value).timestamp() * 1000)


def now_ms() -> int:
    """Now in integer milliseconds since the epoch: how leases, jobs, consent and migrations
    keep their times (nx-27017 compares dates only to the second)."""
    return time.time_ns() // 1_000_000


def from_epoch_millis(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, UTC)


def to_millis(value: datetime) -> datetime:
    """BSON keeps milliseconds: truncate first, so a time read back equals the time written
    and "messages since <time>" windows never drop or repeat a message."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=value.microsecond // 1000 * 1000)


def account_id(platform: str, user_id: str | int) -> str:
    return stable_id(platform, "account", str(user_id))


def room_id(platform: str, chat_id: str | int) -> str:
    return stable_id(platform, "room", str(chat_id))


def world_id(platform: str, world: str | int) -> str:
    """A guild, a group, or a DM: the scope that learned knowledge never leaves."""
    return stable_id(platform, "world", str(world))


def message_id(platform: str, chat_id: str | int, platform_message_id: str | int) -> str:
    return stable_id(platform, "message", str(chat_id), str(platform_message_id))


def reply_id(message: str, agent: str, part: int = 0) -> str:
    """The agent's reply to a message: stable, so a retried handle() stores it once."""
    return stable_id("reply", message, agent, str(part))


class Document(BaseModel):
    """Base for stored models: ignores fields added by newer versions or by MongoDB."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @field_validator("*", mode="after")
    @classmethod
    def _millisecond_times(cls, value: object) -> object:
        return to_millis(value) if isinstance(value, datetime) else value

    @field_validator("*", mode="before")
    @classmethod
    def _valid_text(cls, value: object) -> object:
        # A lone surrogate fails the database write and the message would be lost.
        return valid_text(value) if isinstance(value, str) else value


class Attachment(Document):
    id: str
    url: str | None = None
    title: str | None = None
    content_type: str | None = None
    size: int | None = None


class Content(Document):
    text: str = ""
    action: str | None = None
    source: str | None = None
    url: str | None = None
    in_reply_to: str | None = None
    attachments: list[Attachment] = Field(default_factory=list)

    @field_validator("text", mode="after")
    @classmethod
    def _capped(cls, text: str) -> str:
        return capped(text)


class Memory(Document):
    """One message in a room: from a person, or the agent's own reply."""

    id: str
    user_id: str
    agent_id: str
    room_id: str
    world_id: str
    content: Content
    created_at: datetime = Field(default_factory=utcnow)
    # Who the message addresses, decided by the adapter that knows the platform.
    mentions: list[str] = Field(default_factory=list)
    mentions_agent: bool = False
    replies_to_agent: bool = False
    # How to download the message's images, for the reply to this message only
    # (bot/domain/images.py): private, so no dump (MongoDB, the job's copy, the outage
    # journal) ever holds it or what it downloaded.
    _images: ImageLoader | None = PrivateAttr(default=None)
    # The message it replies to: how its platform delivers it (an adapter's loader), and
    # what the reply's prompt shows of it (bot/domain/quotes.py). Private for the same reason.
    _quote_loader: QuoteLoader | None = PrivateAttr(default=None)
    _quoted: Quoted | None = PrivateAttr(default=None)
    # The language the author's app is set to, as their platform says it (Telegram's
    # `language_code`): the bot's own lines in answer to this message are in it, unless the
    # world chose one (bot/runtime/languages.py). Never stored, never shown to a model.
    _locale: str | None = PrivateAttr(default=None)

    def carry_images(self, loader: ImageLoader | None) -> Memory:
        """Attach how to download this message's images (an adapter's loader); returns self."""
        self._images = loader
        return self

    @property
    def images(self) -> ImageLoader | None:
        return self._images

    def carry_quote(self, loader: QuoteLoader | None) -> Memory:
        """Attach how to fetch the message this one replies to from its platform (an
        adapter's loader); returns self."""
        self._quote_loader = loader
        return self

    @property
    def quote_loader(self) -> QuoteLoader | None:
        return self._quote_loader

    def show_quoted(self, quoted: Quoted | None) -> None:
        """What prompts show of the message this one replies to (the composer sets it)."""
        self._quoted = quoted

    @property
    def quoted(self) -> Quoted | None:
        return self._quoted

    def carry_locale(self, locale: str | None) -> Memory:
        """Attach the author's platform language (an adapter's); returns self."""
        self._locale = locale
        return self

    @property
    def locale(self) -> str | None:
        return self._locale


class Account(Document):
    id: str
    platform: str
    platform_id: str
    name: str
    username: str | None = None
    is_bot: bool = False
    details: dict[str, Any] = Field(default_factory=dict)
    # The names the person told the bot ("call me Priya"), by the world they were told in:
    # part of what was learned there, so shown there instead of the platform's name and
    # nowhere else (`in_world`). Excluded from dumps, so a profile refresh from the platform
    # never overwrites them; only learning one sets it (Accounts.set_told_name). A forgotten
    # one is stored as None (nx-27017 has no reliable `$unset` of a nested field).
    told_names: dict[str, str | None] = Field(default_factory=dict, exclude=True)

    # Names are what people can read (bot/domain/text.py): a display name holding a
    # right-to-left override or zero-width characters is kept without them, on every path in.
    @field_validator("name", mode="after")
    @classmethod
    def _readable_name(cls, name: str) -> str:
        return readable(name)

    @field_validator("username", mode="after")
    @classmethod
    def _readable_username(cls, username: str | None) -> str | None:
        return (readable(username) or None) if username is not None else None

    @field_validator("told_names", mode="after")
    @classmethod
    def _readable_told_names(cls, names: dict[str, str | None]) -> dict[str, str | None]:
        return {world: readable(name) or None if name else None for world, name in names.items()}

    @model_validator(mode="after")
    def _some_name(self) -> Account:
        # A name made only of what cannot be seen: called by the username, else the id.
        if not self.name:
            self.name = self.username or self.platform_id
        return self

    def told_name_in(self, world_id: str | None) -> str | None:
        return self.told_names.get(world_id) if world_id is not None else None

    def in_world(self, world_id: str | None) -> Account:
        """The account as shown in a world: by the name told there, if one was."""
        told = self.told_name_in(world_id)
        return self if not told or told == self.name else self.model_copy(update={"name": told})


class Room(Document):
    id: str
    world_id: str
    platform: str
    kind: RoomKind
    name: str | None = None
    platform_id: str | None = None


class Evidence(BaseModel):
    """The words a fact rests on: a quote from one message, as its speaker wrote it. Shown to
    people beside the fact ("from your message of 1 Dec: 'vivo en Málaga desde...'"), and what
    the memory checked the fact against when it was learned (bot/memory/evidence.py)."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    quote: str
    # When the message was written (integer milliseconds since the epoch).
    said_at: int = 0


class Fact(Document):
    """A claim learned about someone (its subject), scoped to the world it was learned in.

    A fact has a lifetime: it holds from `valid_from` (when it was said) until `valid_until`,
    which stays None while it is current. An update closes the old fact and names its
    successor in `superseded_by`; a retraction closes it without one. Nothing is deleted by
    an update, so the history stays queryable. Times are integer milliseconds since the epoch.
    """

    id: str = Field(default_factory=new_id)
    text: str
    type: FactType = "fact"
    subject_id: str
    room_id: str
    world_id: str
    agent_id: str
    source_message_ids: list[str] = Field(default_factory=list)
    # Who said it, when that is not its subject ("Tobrin is a convicted thief", said by
    # Quorra, is Tobrin's fact); None: the subject said it themselves.
    said_by: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    # Set once the fact's vector is in Chroma; None marks it for re-indexing.
    indexed_at: datetime | None = None
    valid_from: int = 0
    valid_until: int | None = None
    superseded_by: str | None = None
    # What the value is about ("home city", "employer", "dog's name"): one current fact per
    # subject and attribute, so a newer value of the same attribute replaces the older one
    # (with history) even when the two share no words. None: a fact learned without one.
    attribute: str | None = None
    # The value itself, in the words it was said in ("Málaga", "five engineers"): for a fact
    # written as "attribute: value", the part that must stand in its evidence word for word.
    value: str | None = None
    # The words it was learned from; None for facts learned before evidence was kept, and for
    # facts given without a conversation (an import).
    evidence: Evidence | None = None

    @field_validator("text", mode="after")
    @classmethod
    def _readable_text(cls, text: str) -> str:
        # One line people read (/facts, /me, the prompts): nothing in it they cannot see.
        return visible(text)

    @model_validator(mode="after")
    def _said_when_learned(self) -> Fact:
        # Facts stored before lifetimes existed (and callers that do not say when it was
        # said) held from when they were learned.
        if not self.valid_from:
            self.valid_from = epoch_millis(self.created_at)
        return self

    @property
    def is_current(self) -> bool:
        return self.valid_until is None


class EvaluationJob(Document):
    """A durable request to run the evaluators for one message, claimed by one worker."""

    id: str
    room_id: str
    message_id: str
    did_respond: bool
    trigger: Trigger = "message"
    # The message's position in its room when stored (1 = first), for cadence checks.
    position: int | None = None
    status: JobStatus = "pending"
    attempts: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    claimed_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    # Names of the evaluators whose handlers ran to completion.
    ran: list[str] = Field(default_factory=list)
    # What the selection step chose, kept so a retry runs the same evaluators, not a new pick.
    selected: list[str] | None = None
    # Not claimed before this time (integer milliseconds: compared on the server).
    due_ms: int = 0
    # While in intake: the message itself, so the job and the message are one write and a
    # crash before the message is stored loses nothing.
    message: Memory | None = None
    # When the message was written (integer ms), kept after the copy is dropped: the
    # evaluation reads the room up to it, its message included, in one read.
    message_ms: int | None = None
    # Its sender and the people it mentions: their accounts come with that read.
    people: list[str] = Field(default_factory=list)


from bot.domain.characters import Character  # noqa: E402,F401  (listed with the domain models)

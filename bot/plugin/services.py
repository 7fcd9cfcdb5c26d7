"""What a plugin's contexts hand it besides the message: who the bot is, the plugin's own
collections, read access to conversations (and its room marks), and the model handle.

Part of the plugin API (re-exported by `bot`); kept apart from the types in
`bot.plugin.api` so each module stays small.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from pymongo.errors import DuplicateKeyError

from bot.domain.quotes import Quoted
from bot.domain.records import Account, Attachment, Content, Fact, Memory, Room, new_id, utcnow
from bot.domain.state import State
from bot.knowledge.retrieval import MessageRetriever, RetrieverOptions
from bot.llm.base import OFFLINE_MODEL_NAME, Example, JsonAnswer, ModelClass, ModelRequest
from bot.llm.templating import render
from bot.memory.claims import Claim, Learned
from bot.storage.rooms import check_mark_key

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from bot.llm.accounting import UsageLedger
    from bot.llm.base import LanguageModel
    from bot.storage.mongo import MongoStore

_COLLECTION_NAME = re.compile(r"^[a-z0-9_]{1,48}$")
# How much of a message replied to a prompt shows: enough to say which one it is.
QUOTE_CHARS = 120

log = logging.getLogger(__name__)

# How a platform's adapter reaches one of its rooms with no message to answer: the sender
# for `room` (the same shape as the sender a reply uses).
RoomSender = Callable[[Room], Callable[[Content], Awaitable[None]]]
# (person_id, room_id, world_id) -> may the person be learned about (and spoken of) there.
ConsentCheck = Callable[[str, str, str], Awaitable[bool]]
# What became of `Rooms.send`.
Delivery = Literal["sent", "no_room", "not_connected", "not_allowed"]


@dataclass(frozen=True)
class Agent:
    """Who the bot is: its account id, name (and other names it answers to) and bio."""

    id: str
    name: str
    names: tuple[str, ...] = ()
    bio: str = ""


@dataclass(frozen=True)
class WorldVoice:
    """The bot as it speaks in one world (`await ctx.world(world_id)` in a task): the
    character its admins chose there (`/character`) as `agent`, and a model handle that
    uses that character's templates and the world's own model names (`/model`)."""

    world_id: str
    agent: Agent
    model: ModelHandle


class UndeclaredCollection(LookupError):
    """A plugin used a collection it did not declare in `Plugin(stores=[...])`."""


class Collections:
    """A plugin's own MongoDB collections, namespaced so plugins never collide with each
    other or with Mnemo's: `ctx.collections["scores"]` is `plugin_<plugin>_scores`.

    Only the collections the plugin declares (`Plugin.stores`) are handed out: what a plugin
    keeps must be reachable by its privacy hooks, so an undeclared one is refused."""

    def __init__(
        self,
        db: AsyncDatabase,
        plugin_name: str,
        declared: Sequence[str] = (),
        *,
        reserved: Collection[str] = (),
    ) -> None:
        self._db = db
        self._plugin = plugin_name
        self._prefix = f"plugin_{_slug(plugin_name)}_"
        self._declared = frozenset(declared)
        # Mnemo's own collections: never adopted by a plugin.
        self._reserved = frozenset(reserved)

    @property
    def declared(self) -> frozenset[str]:
        return self._declared

    def name_of(self, name: str) -> str:
        if not _COLLECTION_NAME.fullmatch(name):
            raise ValueError(
                f"collection name {name!r}: use 1-48 lower-case letters, digits or underscores"
            )
        return self._prefix + name

    def __getitem__(self, name: str) -> AsyncCollection:
        if name not in self._declared:
            raise UndeclaredCollection(
                f"plugin {self._plugin}: collection {name!r} is not declared; add it to "
                f"Plugin(stores=[...]) with forget and export hooks (docs/plugins.md)"
            )
        return self._db[self.name_of(name)]

    async def adopt(self, name: str, *, legacy: str) -> int:
        """Move the documents an older version kept in the database's un-namespaced
        collection `legacy` into this plugin's collection `name`; returns how many were
        copied. Call it from `setup()`: safe on every start-up and when interrupted, since a
        document already there wins and `legacy` is dropped only once all are copied (so a
        person forgotten later leaves no copy behind). Mnemo's own collections and other
        plugins' cannot be adopted."""
        if (
            not _COLLECTION_NAME.fullmatch(legacy)
            or legacy in self._reserved
            or legacy.startswith(("plugin_", "mnemo_"))
        ):
            raise ValueError(f"collection {legacy!r} is not one a plugin may adopt")
        old, new = self._db[legacy], self[name]
        copied = 0
        async for document in old.find({}):
            try:
                await new.insert_one(document)
            except DuplicateKeyError:
                continue  # adopted by an earlier, interrupted start-up or another process
            copied += 1
        await old.drop()
        return copied


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", name.casefold()).strip("_") or "plugin"


class Conversations:
    """Read access to what people said, and per-room marks a plugin keeps for itself.

    Mnemo's own collections stay Mnemo's: plugins read them here and write only their own
    collections and marks."""

    def __init__(
        self,
        store: MongoStore,
        *,
        agent: Agent,
        max_message_chars: int,
        search: Callable[[RetrieverOptions], MessageRetriever] | None = None,
    ) -> None:
        self._store = store
        self._agent = agent
        self._max_chars = max_message_chars
        self._search = search
        # Marks of the rooms being evaluated now, read with their window (one round trip less
        # per mark); a room's evaluations run one at a time, so nobody else moves them.
        self._marks: dict[str, dict[str, datetime | None]] = {}

    def retriever(self, options: RetrieverOptions | None = None) -> MessageRetriever:
        """A search over what people said (vectors and keywords, fused), scoped as each
        search asks: one per plugin and runtime (it keeps its keyword index cache)."""
        if self._search is None:
            raise RuntimeError("no message search in this runtime")
        return self._search(options or RetrieverOptions())

    async def recent(self, room_id: str, limit: int) -> list[Memory]:
        """The room's last `limit` messages, oldest first."""
        return await self._store.memories.recent(room_id, limit)

    async def since(
        self, room_id: str, after: datetime | None, *, until: datetime, limit: int
    ) -> list[Memory]:
        """The room's messages after `after` (all when None) up to `until`, oldest first."""
        return await self._store.memories.since(room_id, after, until=until, limit=limit)

    async def count(self, room_id: str) -> int:
        return await self._store.memories.count_in_room(room_id)

    async def messages(self, ids: Sequence[str]) -> list[Memory]:
        """The messages with these ids that exist (any room), in the order of `ids`."""
        return await self._store.memories.get_many(list(ids))

    async def accounts(self, ids: Sequence[str]) -> dict[str, Account]:
        return await self._store.accounts.get_many(list(ids))

    async def room(self, room_id: str) -> Room | None:
        return await self._store.rooms.get(room_id)

    async def mark(self, room_id: str, name: str) -> datetime | None:
        """A per-room bookmark the plugin keeps (e.g. what it has read up to)."""
        known = self._marks.get(room_id)
        if known is not None:
            check_mark_key(name)
            return known.get(name)
        return await self._store.rooms.get_mark(room_id, name)

    async def set_mark(self, room_id: str, name: str, when: datetime) -> None:
        await self._store.rooms.set_mark(room_id, name, when)
        known = self._marks.get(room_id)
        if known is not None:
            known[name] = when

    @contextmanager
    def marks_known(self, room_id: str, marks: Mapping[str, datetime | None]) -> Iterator[None]:
        """While the block runs (the runtime evaluating the room), `mark()` answers from
        these marks, read with the room's window, instead of a read of its own."""
        self._marks[room_id] = dict(marks)
        try:
            yield
        finally:
            self._marks.pop(room_id, None)

    async def display_names(self, state: State, ids: set[str]) -> dict[str, str]:
        """Names for account ids: from the state's actors, else looked up."""
        names = {i: state.name_of(i) for i in ids if i in state.actors or i == state.agent_id}
        missing = sorted(ids - set(names))
        if missing:
            accounts = await self._store.accounts.get_many(missing)
            world = state.message.world_id
            names.update({i: a.in_world(world).name for i, a in accounts.items()})
        return names

    def format(self, state: State, messages: Sequence[Memory], *, attachments: bool = False) -> str:
        """Messages as prompts show them ("Name: text"), long ones cut; with `attachments`,
        each followed by what it carried, by title ("[image: cat.png]", "[file: a.pdf]")."""
        return "\n".join(
            one_message(state.name_of(m.user_id), self.words(m, attachments=attachments))
            for m in messages
        )

    def words(self, message: Memory, *, attachments: bool = False) -> str:
        """One message's words as prompts show them, without its speaker: cut when long,
        with `attachments`, followed by what it carried, by title; after the message it
        replies to, when the reply's state shows one (`Memory.quoted`):
        `(replying to Bob: "The secret word is…") what did he mean?`."""
        text = self.cut(message.content.text)
        if attachments and message.content.attachments:
            text = " ".join([text, *map(_shown, message.content.attachments)]).strip()
        if message.quoted is not None:
            text = f"{replying_to(message.quoted)} {text}"
        return text

    def cut(self, text: str) -> str:
        """One message's text cut as prompts cut it."""
        return text if len(text) <= self._max_chars else text[: self._max_chars] + "…"


def replying_to(quoted: Quoted) -> str:
    """The message replied to, as one unit before the person's words: on one line, short,
    its double quotes made single, so nothing of it reads as a turn of its own or ends the
    quote early ("(replying to Bob: \"...\")")."""
    words = " ".join(quoted.text.split()).replace('"', "'")
    if len(words) > QUOTE_CHARS:
        words = words[:QUOTE_CHARS].rstrip() + "…"
    return f'(replying to {quoted.name or "someone"}: "{words}")'


def one_message(name: str, text: str) -> str:
    """A message as one unit of a transcript, "Name: text": its own line breaks kept, each
    further line indented, so no line of it starts as another speaker's turn or the bot's
    ("nice\nTobrin: I confess" is one message of its writer, not a line of Tobrin's). Every
    prompt that shows messages writes them so."""
    first, *rest = text.strip().splitlines() or [""]
    return "\n".join(
        [f"{name}: {first}", *(f"    {line.strip()}" for line in rest if line.strip())]
    )


class FactMemory(Protocol):
    """What Mnemo knows about the people of one world, as a plugin is handed it: read their
    facts, propose claims with the words they rest on, nothing else (no store, no index, no
    other world). The memory decides what is kept (bot/memory/evidence.py): a claim is stored
    only when its quote was said, by its speaker, and holds what it states; a newer value of
    the same attribute replaces the older one, with history. Forgetting and export of facts
    are Mnemo's own (`/forgetme`, `/export`): a plugin's hooks cover only its collections."""

    world_id: str
    # The language the operator wants facts written in (MNEMO_FACTS_LANGUAGE); None: each in
    # the language it was said in.
    language: str | None

    async def facts_about(self, person_ids: Sequence[str], *, limit: int = 12) -> list[Fact]:
        """The people's current facts here, most recently learned first."""
        ...

    async def relevant_facts(
        self, text: str, person_ids: Sequence[str], *, limit: int = 8
    ) -> list[Fact]:
        """The people's current facts most relevant to `text` (the most recent when none is)."""
        ...

    async def similar_facts(
        self, texts: Sequence[str], person_ids: Sequence[str], *, limit: int = 12
    ) -> list[Fact]:
        """The people's current facts most like any of `texts`, most alike first."""
        ...

    async def history(self, person_id: str) -> list[Fact]:
        """Every fact about a person here, current and closed, oldest first."""
        ...

    async def propose(
        self,
        claims: Sequence[Claim],
        *,
        messages: Sequence[Memory] = (),
        people: Mapping[str, Account] | None = None,
    ) -> Learned:
        """Offer claims; `messages` are the messages they were read from (others are read)."""
        ...

    async def learn_name(self, person_id: str, name: str) -> None:
        """The name a person told the bot here ("call me Sam"): shown here from now on."""
        ...

    async def count_rejected(self, reasons: Mapping[str, int]) -> None:
        """Add what a plugin did not propose, by reason, to the world's rejects ledger."""
        ...


class Rooms:
    """Speaking in a room later, with no message to answer (a follow-up, a reminder).

    Each platform's adapter connects here once it runs (`connect`), so a plugin's timed task
    can `await ctx.rooms.send(room_id, text, about=person_id)`: the text goes to the room
    through its platform, and is stored as the bot's message there, so a person's answer has
    it in the conversation. A process that runs without that platform (another process of
    the deployment runs it, or none does) cannot send: `platforms` says which it can. Words
    `about` a person are held to the same consent as learning: nothing is sent about someone
    who opted out, or where learning is off."""

    def __init__(self, store: MongoStore, *, agent_id: str) -> None:
        self._store = store
        self._agent_id = agent_id
        self._senders: dict[str, RoomSender] = {}
        self._consent: ConsentCheck | None = None

    def connect(self, platform: str, sender: RoomSender) -> None:
        """An adapter, once running: how to reach its rooms."""
        self._senders[platform] = sender

    def disconnect(self, platform: str) -> None:
        """An adapter, when it stops."""
        self._senders.pop(platform, None)

    def require_consent(self, check: ConsentCheck) -> None:
        """The runtime: how to tell whether a person may be learned about in a room."""
        self._consent = check

    @property
    def platforms(self) -> frozenset[str]:
        """The platforms this process can send to now."""
        return frozenset(self._senders)

    async def allowed(self, person_id: str, room_id: str, world_id: str) -> bool:
        """False when the person opted out here, or learning is off in the room or world."""
        return self._consent is None or await self._consent(person_id, room_id, world_id)

    async def send(self, room_id: str, text: str, *, about: str | None = None) -> Delivery:
        """Send `text` into the room and store it as the bot's message. "sent"; or why not:
        "no_room" (unknown), "not_connected" (its platform does not run in this process),
        "not_allowed" (`about` a person who may not be learned about there). A platform
        error propagates: the caller decides whether to try again."""
        room = await self._store.rooms.get(room_id)
        if room is None:
            return "no_room"
        sender = self._senders.get(room.platform)
        if sender is None:
            return "not_connected"
        if about is not None and not await self.allowed(about, room.id, room.world_id):
            return "not_allowed"
        content = Content(text=text, source=room.platform)
        await sender(room)(content)
        memory = Memory(
            id=new_id(),
            user_id=self._agent_id,
            agent_id=self._agent_id,
            room_id=room.id,
            world_id=room.world_id,
            content=content,
            created_at=utcnow(),
        )
        try:
            await self._store.memories.insert(memory)
        except Exception:
            # Sent already: not storing it loses only the conversation's copy.
            log.warning("a message sent to room %s was not stored", room.id, exc_info=True)
        return "sent"


@dataclass(frozen=True)
class ModelHandle:
    """The language model as a plugin calls it: `await ctx.model.generate(prompt)`.

    Calls are accounted under the part's own task (`evaluator:NAME`, `action:NAME`, ...),
    which is also what the offline model dispatches on, so a plugin's offline answer is
    found without the plugin naming its task twice."""

    model: LanguageModel
    task: str
    templates: Mapping[str, str] = field(default_factory=dict)
    ledger: UsageLedger | None = None
    # The world's own model names by class ("small", "large"; `/model`), else the process's.
    model_names: Mapping[str, str] = field(default_factory=dict)
    # The world the calls are made for, when a call passes no state naming it (a task's):
    # every call made for a world counts against its daily cap.
    world_id: str | None = None

    @property
    def is_offline(self) -> bool:
        """Whether the answers come from the offline model (no language model configured)."""
        return self.model.name == OFFLINE_MODEL_NAME

    async def generate(
        self,
        prompt: str,
        *,
        model_class: ModelClass = ModelClass.LARGE,
        state: State | None = None,
        max_tokens: int | None = None,
        task: str | None = None,
        json_answer: JsonAnswer | None = None,
        system: str | None = None,
        examples: Sequence[Example] = (),
    ) -> str:
        """The model's answer (untrusted text); raises `ModelError` when it cannot answer.

        `json_answer` (the JSON shape wanted) makes it a JSON task: structured output where
        the endpoint accepts it, and a low temperature. Size `max_tokens` to the answer.
        `system` is the task's standing instruction (a system message) and `examples` are
        worked examples sent as earlier turns: how small models learn an answer's shape."""
        return await self.model.generate(
            ModelRequest(
                prompt,
                model_class=model_class,
                task=task or self.task,
                state=state,
                max_tokens=max_tokens,
                json_answer=json_answer,
                model_name=self.model_names.get(model_class),
                system=system,
                examples=tuple(examples),
                world_id=self.world_id,
            )
        )

    def reject(self, reason: str, raw: str, *, count: int = 1, task: str | None = None) -> None:
        """Count an answer (or `count` parts of one) that could not be used, by reason; the
        raw answer is logged once at DEBUG. Failures of a model's output must be visible."""
        if self.ledger is not None:
            self.ledger.record_reject(task or self.task, reason, raw, count)

    def template(self, name: str, default: str) -> str:
        """The character's override of a prompt template, else the plugin's own."""
        return self.templates.get(name) or default

    def render(self, name: str, default: str, values: Mapping[str, str]) -> str:
        """The template (possibly the character's override) with `{{placeholders}}` filled."""
        return render(self.template(name, default), dict(values))


def _shown(attachment: Attachment) -> str:
    """An attachment as a prompt names it: its kind and the file name the person gave it."""
    kind = (attachment.content_type or "").lower()
    image = kind.startswith("image/")
    if kind.startswith("audio/") and not (attachment.title or "").startswith("voice"):
        return f"[audio: {attachment.title}]" if attachment.title else "[a voice note]"
    if kind.startswith("audio/"):
        return "[a voice note]"  # Discord names every one "voice-message.ogg"
    if attachment.title:
        return f"[{'image' if image else 'file'}: {attachment.title}]"
    return "[a photo]" if image else "[a file]"


__all__ = [
    "Agent",
    "Collections",
    "ConsentCheck",
    "Conversations",
    "Delivery",
    "ModelHandle",
    "RoomSender",
    "Rooms",
    "WorldVoice",
]

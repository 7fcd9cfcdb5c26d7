"""The plugin API: the types a plugin is written against, re-exported by `bot` itself.

    from bot import Plugin, Evaluator, Provider, Action, Command, Context, CommandContext

A plugin gets, through its contexts, exactly what it needs and nothing of the runtime: the
message and the state composed for it, its own typed settings, the per-runtime state its
`setup()` returned (discord.py cogs' style, so no module globals), a model handle, its own
namespaced MongoDB collections, a logger, and the evaluation job's id (an idempotency key).
The core of Mnemo names no plugin: everything a plugin owns (its marks, offline answers,
commands, collections, privacy hooks and what it adds to the state) is declared here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from bot.llm.base import JsonAnswer, ModelClass
from bot.models import Account, Content, Memory, Room
from bot.state import State
from bot.templating import render

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from bot.llm.base import LanguageModel
    from bot.llm.usage import UsageLedger
    from bot.storage.knowledge import Knowledge
    from bot.storage.mongo import MongoStore

# Unparameterised `Context` means `Context[Any]`: typing the settings is optional.
SettingsT = TypeVar("SettingsT", default=Any)

# Sends extra content to the room the message came from (actions and evaluators may speak).
Callback = Callable[[Content], Awaitable[None]]

_PLUGIN_LOG = "mnemo.plugin"
_COLLECTION_NAME = re.compile(r"^[a-z0-9_]{1,48}$")


async def _no_callback(content: Content) -> None:
    logging.getLogger(_PLUGIN_LOG).debug("no callback for content: %s", content.text[:80])


# ---------------------------------------------------------------------------- services


@dataclass(frozen=True)
class Agent:
    """Who the bot is: its account id, name (and other names it answers to) and bio."""

    id: str
    name: str
    names: tuple[str, ...] = ()
    bio: str = ""


class Collections:
    """A plugin's own MongoDB collections, namespaced so plugins never collide with each
    other or with Mnemo's: `ctx.collections["scores"]` is `plugin_<plugin>_scores`."""

    def __init__(self, db: AsyncDatabase, plugin_name: str) -> None:
        self._db = db
        self._prefix = f"plugin_{_slug(plugin_name)}_"

    def name_of(self, name: str) -> str:
        if not _COLLECTION_NAME.fullmatch(name):
            raise ValueError(
                f"collection name {name!r}: use 1-48 lower-case letters, digits or underscores"
            )
        return self._prefix + name

    def __getitem__(self, name: str) -> AsyncCollection:
        return self._db[self.name_of(name)]


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
    ) -> None:
        self._store = store
        self._agent = agent
        self._max_chars = max_message_chars

    async def recent(self, room_id: str, limit: int) -> list[Memory]:
        """The room's last `limit` messages, oldest first."""
        return await self._store.recent_memories(room_id, limit)

    async def since(
        self, room_id: str, after: datetime | None, *, until: datetime, limit: int
    ) -> list[Memory]:
        """The room's messages after `after` (all when None) up to `until`, oldest first."""
        return await self._store.memories_since(room_id, after, until=until, limit=limit)

    async def count(self, room_id: str) -> int:
        return await self._store.count_memories(room_id)

    async def accounts(self, ids: Sequence[str]) -> dict[str, Account]:
        return await self._store.get_accounts(list(ids))

    async def room(self, room_id: str) -> Room | None:
        return await self._store.get_room(room_id)

    async def mark(self, room_id: str, name: str) -> datetime | None:
        """A per-room bookmark the plugin keeps (e.g. what it has read up to)."""
        return await self._store.get_room_mark(room_id, name)

    async def set_mark(self, room_id: str, name: str, when: datetime) -> None:
        await self._store.set_room_mark(room_id, name, when)

    async def display_names(self, state: State, ids: set[str]) -> dict[str, str]:
        """Names for account ids: from the state's actors, else looked up."""
        names = {i: state.name_of(i) for i in ids if i in state.actors or i == state.agent_id}
        missing = sorted(ids - set(names))
        if missing:
            accounts = await self._store.get_accounts(missing)
            names.update({i: a.name for i, a in accounts.items()})
        return names

    def format(self, state: State, messages: Sequence[Memory]) -> str:
        """Messages as prompts show them ("Name: text"), long ones cut."""
        limit = self._max_chars
        lines = []
        for m in messages:
            text = m.content.text if len(m.content.text) <= limit else m.content.text[:limit] + "…"
            lines.append(f"{state.name_of(m.user_id)}: {text}")
        return "\n".join(lines)

    def cut(self, text: str) -> str:
        """One message's text cut as prompts cut it."""
        return text if len(text) <= self._max_chars else text[: self._max_chars] + "…"


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

    async def generate(
        self,
        prompt: str,
        *,
        model_class: ModelClass = ModelClass.LARGE,
        state: State | None = None,
        max_tokens: int | None = None,
        task: str | None = None,
        json_answer: JsonAnswer | None = None,
    ) -> str:
        """The model's answer (untrusted text); raises `ModelError` when it cannot answer.

        `json_answer` (the JSON shape wanted) makes it a JSON task: structured output where
        the endpoint accepts it, and a low temperature. Size `max_tokens` to the answer."""
        return await self.model.generate_text(
            prompt,
            model_class=model_class,
            task=task or self.task,
            state=state,
            max_tokens=max_tokens,
            json_answer=json_answer,
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


# ---------------------------------------------------------------------------- contexts


@dataclass(frozen=True)
class Context(Generic[SettingsT]):
    """What an evaluator, provider or action gets: everything it may touch, nothing global."""

    message: Memory
    state: State
    settings: SettingsT
    model: ModelHandle
    collections: Collections
    conversations: Conversations
    knowledge: Knowledge
    agent: Agent
    log: logging.Logger
    # What the plugin's `setup()` returned for this runtime (None without a setup).
    plugin_state: Any = None
    # The evaluation job's id: stable across retries of the same job, so an evaluator can
    # make its writes idempotent with it. None outside evaluations.
    job_id: str | None = None
    callback: Callback = _no_callback


@dataclass(frozen=True)
class PluginContext(Generic[SettingsT]):
    """What `setup()` and the privacy hooks get: the plugin's own things, no message."""

    settings: SettingsT
    collections: Collections
    conversations: Conversations
    knowledge: Knowledge
    agent: Agent
    log: logging.Logger
    # None while `setup()` runs (it is what setup returns).
    plugin_state: Any = None


@dataclass(frozen=True)
class CommandContext(Generic[SettingsT]):
    """What a command's handler gets: who asked, where, the text after the command, and the
    plugin's own things. `is_admin` is decided by the surface the command came from."""

    account_id: str
    world_id: str
    room_id: str
    args: str
    is_admin: bool
    settings: SettingsT
    plugin_state: Any
    collections: Collections
    conversations: Conversations
    knowledge: Knowledge
    agent: Agent
    log: logging.Logger


# ---------------------------------------------------------------------------- parts


@dataclass(frozen=True)
class ExampleTurn:
    user: str
    text: str
    action: str | None = None


@dataclass(frozen=True)
class EvaluatorExample:
    """A worked example shown to the model: the scene, the messages and the expected outcome."""

    context: str
    messages: Sequence[ExampleTurn]
    outcome: str


@dataclass(frozen=True)
class OfflineRequest:
    """A model call as the offline model sees it: it reads the state, not the prompt."""

    task: str
    prompt: str
    state: State | None
    model_class: ModelClass


# Answers a task without a language model (pydantic-ai's FunctionModel): pure computation
# over the state. None passes: the next registered answer (or Mnemo's fallback) answers.
OfflineAnswer = Callable[[OfflineRequest], "str | None"]


async def _always(ctx: Context) -> bool:
    return True


@dataclass(frozen=True)
class Evaluator:
    name: str
    description: str
    # async (ctx, found) -> anything, where `found` is what `validate` returned (python-
    # telegram-bot's check_update -> handle_update(check_result)); async (ctx) also works.
    handler: Callable[..., Awaitable[Any]] | None
    # async (ctx) -> falsy to skip, or truthy; a value other than True is handed to `handler`.
    validate: Callable[[Context], Awaitable[Any]] = _always
    similes: Sequence[str] = ()
    examples: Sequence[EvaluatorExample] = ()
    # Run even when the bot did not reply (it still learns from messages it only overheard).
    always_run: bool = False
    # The offline model's answer to this evaluator's task (`evaluator:NAME`).
    offline: OfflineAnswer | None = None
    # A room mark the handler moves past what it has read. The idle flush evaluates a quiet
    # room again (trigger "idle") when its newest message is newer than this mark.
    idle_mark: str | None = None


@dataclass(frozen=True)
class Provided:
    """A provider's output: the prompt text, and structured data the runtime files under
    `state.provided[provider name]` for the offline model and other parts to read."""

    text: str = ""
    data: Any = None


@dataclass(frozen=True)
class Provider:
    """Contributes to the prompt: `get` returns text ("" for nothing) or `Provided`."""

    name: str
    get: Callable[[Context], Awaitable[str | Provided]]
    description: str = ""


@dataclass(frozen=True)
class Action:
    name: str
    description: str
    handler: Callable[[Context], Awaitable[Any]]
    validate: Callable[[Context], Awaitable[bool]] = _always
    similes: Sequence[str] = ()
    examples: Sequence[Sequence[ExampleTurn]] = ()
    # The action speaks for itself: the reply text the model wrote is not sent.
    suppress_initial_message: bool = False
    # The offline model's answer to this action's task (`action:NAME`).
    offline: OfflineAnswer | None = None


@dataclass(frozen=True)
class Command:
    """A command people type (`/name args`), shown on every surface (console, Discord,
    Telegram). `handler` returns the reply text."""

    name: str  # 1-32 of a-z, 0-9, _ (the strictest platform's rule)
    description: str  # one line, at most 100 characters
    handler: Callable[[CommandContext], Awaitable[str]]
    admin_only: bool = False
    usage: str = ""  # what follows the name, e.g. "NAME: first step; second step"
    # The surface lets the room's pending evaluations finish first, so an answer about what
    # was learned includes the last messages.
    after_learning: bool = False


@dataclass(frozen=True)
class Plugin:
    name: str
    description: str = ""
    evaluators: Sequence[Evaluator] = ()
    providers: Sequence[Provider] = ()
    actions: Sequence[Action] = ()
    commands: Sequence[Command] = ()
    # A pydantic(-settings) model; read once at start-up and handed to handlers as ctx.settings.
    settings_model: type[BaseModel] | None = None
    # async (PluginContext) -> the plugin's state for this runtime (ctx.plugin_state).
    setup: Callable[[PluginContext], Awaitable[Any]] | None = None
    # async (PluginContext) -> None, at shutdown; ctx.plugin_state is what setup returned.
    teardown: Callable[[PluginContext], Awaitable[None]] | None = None
    # Privacy hooks: remove, or return, what the plugin keeps about a person in a world.
    # async (PluginContext, person_id, world_id) -> how many records were removed.
    forget: Callable[[PluginContext, str, str], Awaitable[int]] | None = None
    # async (PluginContext, person_id, world_id) -> a JSON-serialisable dict.
    export: Callable[[PluginContext, str, str], Awaitable[dict[str, Any]]] | None = None
    # Offline answers for further tasks this plugin's parts name (task -> answer), including
    # "reply": a plugin may answer the offline reply (e.g. "what do you know about me?").
    offline_answers: Mapping[str, OfflineAnswer] = field(default_factory=dict)


__all__ = [
    "Action",
    "Agent",
    "Callback",
    "Collections",
    "Command",
    "CommandContext",
    "Context",
    "Conversations",
    "Evaluator",
    "EvaluatorExample",
    "ExampleTurn",
    "ModelHandle",
    "OfflineAnswer",
    "OfflineRequest",
    "Plugin",
    "PluginContext",
    "Provided",
    "Provider",
]

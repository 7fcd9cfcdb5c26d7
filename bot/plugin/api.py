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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from bot.domain.characters import Character
from bot.domain.records import Content, Fact, Memory, Trigger
from bot.domain.state import State
from bot.llm.base import ModelClass
from bot.plugin.services import (
    Agent,
    Collections,
    Conversations,
    Delivery,
    FactMemory,
    ModelHandle,
    Rooms,
    RoomSender,
    UndeclaredCollection,
    WorldVoice,
    one_message,
)

# `Context[MySettings, MyState]`: the plugin's settings model and what its `setup()` returns,
# so `ctx.settings` and `ctx.plugin_state` are typed for it. Both default to Any: a bare
# `Context` (or `Context[MySettings]`) still works, typing is optional.
SettingsT = TypeVar("SettingsT", default=Any)
PluginStateT = TypeVar("PluginStateT", default=Any)

# Sends extra content to the room the message came from (actions and evaluators may speak).
Callback = Callable[[Content], Awaitable[None]]

_PLUGIN_LOG = "mnemo.plugin"


async def _no_callback(content: Content) -> None:
    logging.getLogger(_PLUGIN_LOG).debug("no callback for content: %s", content.text[:80])


# ---------------------------------------------------------------------------- contexts


@dataclass(frozen=True)
class Context(Generic[SettingsT, PluginStateT]):
    """What an evaluator, provider or action gets: everything it may touch, nothing global."""

    message: Memory
    state: State
    settings: SettingsT
    model: ModelHandle
    collections: Collections
    conversations: Conversations
    # What is known about the people of the message's world (read, propose claims).
    memory: FactMemory
    agent: Agent
    log: logging.Logger
    # What the plugin's `setup()` returned for this runtime (None without a setup).
    plugin_state: PluginStateT = None  # type: ignore[assignment]
    # The evaluation job's id: stable across retries of the same job, so an evaluator can
    # make its writes idempotent with it. None outside evaluations.
    job_id: str | None = None
    callback: Callback = _no_callback
    # Why this evaluation runs: "message" (a message arrived) or "idle" (the idle flush, or
    # /learn, re-evaluating a quiet room; only evaluators with an `idle_mark` get these).
    trigger: Trigger = "message"


@dataclass(frozen=True)
class PluginContext(Generic[SettingsT, PluginStateT]):
    """What `setup()` and the privacy hooks get: the plugin's own things, no message."""

    settings: SettingsT
    collections: Collections
    conversations: Conversations
    agent: Agent
    log: logging.Logger
    # None while `setup()` runs (it is what setup returns).
    plugin_state: PluginStateT = None  # type: ignore[assignment]


@dataclass(frozen=True)
class CommandContext(Generic[SettingsT, PluginStateT]):
    """What a command's handler gets: who asked, where, the text after the command, and the
    plugin's own things. `is_admin` is decided by the surface the command came from."""

    account_id: str
    world_id: str
    room_id: str
    args: str
    is_admin: bool
    settings: SettingsT
    plugin_state: PluginStateT
    collections: Collections
    conversations: Conversations
    # What is known about the people of the command's world.
    memory: FactMemory
    agent: Agent
    log: logging.Logger


@dataclass(frozen=True)
class TaskContext(Generic[SettingsT, PluginStateT]):
    """What a timed task (`Task`) gets: the plugin's own things, a model handle (accounted
    under `task:NAME`, which is also the task its offline answer registers for), and `rooms`
    to speak in a room with no message to answer."""

    settings: SettingsT
    collections: Collections
    conversations: Conversations
    agent: Agent
    log: logging.Logger
    model: ModelHandle
    rooms: Rooms
    plugin_state: PluginStateT = None  # type: ignore[assignment]
    # Finds how the bot speaks in a world; None (a context built by hand): as `agent`/`model`.
    world_lookup: Callable[[str], Awaitable[WorldVoice]] | None = None
    # What is known about the people of a world (a task works across worlds: it asks for one).
    memory_of: Callable[[str], FactMemory] | None = None

    def memory(self, world_id: str) -> FactMemory:
        """What is known about the people of `world_id`."""
        if self.memory_of is None:
            raise RuntimeError("this task context has no memory")
        return self.memory_of(world_id)

    async def world(self, world_id: str) -> WorldVoice:
        """The bot as it speaks in `world_id`: the character and model names its admins
        chose there (`/character`, `/model`), else the process's `agent` and `model`. A task
        speaking in a room uses this, not `agent`/`model`, so it speaks as that world's bot."""
        if self.world_lookup is None:
            return WorldVoice(world_id, self.agent, self.model)
        return await self.world_lookup(world_id)


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
    # telegram-bot's check_update -> handle_update(check_result)); checked at load time.
    handler: Callable[[Context, Any], Awaitable[Any]] | None
    # async (ctx) -> falsy to skip, or truthy; a value other than True is handed to `handler`.
    validate: Callable[[Context], Awaitable[Any]] = _always
    similes: Sequence[str] = ()
    examples: Sequence[EvaluatorExample] = ()
    # Run even when the bot did not reply (it still learns from messages it only overheard).
    always_run: bool = False
    # The offline model's answer to this evaluator's task (`evaluator:NAME`).
    offline: OfflineAnswer | None = None
    # A room mark the handler moves past what it has read. Declaring one opts in to idle
    # jobs: the idle flush (and /learn) evaluates a quiet room again (`ctx.trigger == "idle"`)
    # when its newest message is newer than this mark. Evaluators without one get no idle
    # jobs: they judge each message as it arrives.
    idle_mark: str | None = None
    # Read a message again when its author edits it (`ctx.trigger == "edit"`, the message
    # with its new words as `ctx.message`): the facts it was the evidence of are withdrawn
    # first, so what it says now is learned instead. Others never see an edit.
    reads_edits: bool = False
    # False for a handler that makes no model call (a lexicon, a count): the selection call
    # is not asked about it, since asking would cost more than running it (issue 22).
    uses_model: bool = True


@dataclass(frozen=True)
class Provided:
    """A provider's output: the prompt text, and structured data the runtime files under
    `state.provided[provider name]` for the offline model and other parts to read.

    `markup` is the text's own format, as it stands in `text`: headings, labels, markers
    ("Plans in progress here:", "0/3 steps done", "[ ]"). It is the prompt's, never anyone's
    words, so a reply that shows any of it is refused (bot/llm/reply_checks.py): a 0.5B
    model wrote "Sarah's: 0/3 objectives done [ ] Run 15 km ..." to Sarah. What people said
    (a fact, the name of what they track) is not markup: a reply may well bring it up."""

    text: str = ""
    data: Any = None
    markup: Sequence[str] = ()


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
class Task:
    """Work a plugin runs on a timer, in every process of the deployment (APScheduler's
    interval job; runs never overlap). Several processes may run it at once: a task that
    acts (sends, writes) claims each piece of work atomically in its own collection."""

    name: str  # 1-32 of a-z, 0-9, _ (its model calls are accounted under `task:NAME`)
    every_seconds: float
    run: Callable[[TaskContext], Awaitable[Any]]
    description: str = ""


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
    # The plugin's own collections (the names it uses in `ctx.collections[...]`). A plugin
    # that keeps anything declares it here and must then have both privacy hooks: a person's
    # /forgetme and /export reach only what is declared, so using an undeclared collection
    # fails (UndeclaredCollection) instead of keeping data nobody can forget.
    stores: Sequence[str] = ()
    # Privacy hooks: remove, or return, what the plugin keeps about a person in a world.
    # async (PluginContext, person_id, world_id) -> how many records were removed.
    forget: Callable[[PluginContext, str, str], Awaitable[int]] | None = None
    # async (PluginContext, person_id, world_id) -> a JSON-serialisable dict.
    export: Callable[[PluginContext, str, str], Awaitable[dict[str, Any]]] | None = None
    # async (PluginContext, world_id) -> lines for `/stats` about what the plugin keeps in
    # that world (e.g. "Moods noted: 12"), shown after Mnemo's own lines.
    stats: Callable[[PluginContext, str], Awaitable[Sequence[str]]] | None = None
    # async (PluginContext, person_id, world_id) -> lines for the person's `/me` about what
    # the plugin keeps for them (e.g. "Follow-up planned: your exam, Sat 10:00").
    about: Callable[[PluginContext, str, str], Awaitable[Sequence[str]]] | None = None
    # async (Context, facts) -> anything: what the memory has just learned about people (any
    # plugin's claims, once checked and stored; a re-run of the same evaluation hands the same
    # facts again, so keep it idempotent, e.g. keyed by the fact's id); e.g. a plugin tracking
    # the aims people state picks the facts of that type.
    learned: Callable[[Context, Sequence[Fact]], Awaitable[Any]] | None = None
    # Timed work (see `Task`).
    tasks: Sequence[Task] = ()
    # Offline answers for further tasks this plugin's parts name (task -> answer), including
    # "reply": a plugin may answer the offline reply (e.g. "what do you know about me?").
    offline_answers: Mapping[str, OfflineAnswer] = field(default_factory=dict)
    # Characters a world's admins may choose with `/character` (besides the `characters/`
    # files), chosen by their username, else their name (`load_character(path)` reads one).
    characters: Sequence[Character] = ()


__all__ = [
    "Action",
    "Agent",
    "Callback",
    "Collections",
    "Command",
    "CommandContext",
    "Context",
    "Conversations",
    "Delivery",
    "Evaluator",
    "EvaluatorExample",
    "ExampleTurn",
    "FactMemory",
    "ModelHandle",
    "OfflineAnswer",
    "OfflineRequest",
    "Plugin",
    "PluginContext",
    "Provided",
    "Provider",
    "RoomSender",
    "Rooms",
    "Task",
    "TaskContext",
    "UndeclaredCollection",
    "WorldVoice",
    "one_message",
]

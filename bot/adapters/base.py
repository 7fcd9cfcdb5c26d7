"""The adapter contract, the same for every platform. Platform objects never leave their
adapter: each platform's `convert.to_memory(message, me, *, agent_id, received_at=None)`
turns a message into an `Incoming` (or None for what Mnemo does not read), the adapter
queues it on the room's lane (bot/adapters/lanes.py) and hands it to `services.handle`.

An adapter is handed `AdapterServices`, the few parts of Mnemo it uses, named, instead of the
runtime (through which it could reach anything); the composition root builds them once
(`App.adapter_services`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.commands.services import CommandServices
from bot.domain.records import Account, Memory, Room
from bot.llm.transcription import Transcriber
from bot.plugin.services import Rooms
from bot.queue.worker import EvaluationQueue
from bot.runtime.editing import EditOutcome
from bot.runtime.intake.intake import AtDoor
from bot.runtime.intake.outage import Outage
from bot.runtime.types import HandleResult, InLane, Send, SenderFor, Typing
from bot.runtime.worlds import WorldChoices
from bot.storage.accounts import Accounts
from bot.storage.facts import Facts


@dataclass(frozen=True)
class Incoming:
    """A message as Mnemo sees it: the memory, who said it, where, and the profiles of the
    people it names (recorded through `AdapterServices.note_profiles`)."""

    memory: Memory
    account: Account
    room: Room
    mentioned: tuple[Account, ...] = ()


class HandleMessage(Protocol):
    """The one way in for a message (the runtime's intake): stored, learned from, answered
    through `send` when the bot should answer. Safe to call twice with the same message."""

    def __call__(
        self,
        memory: Memory,
        send: Send,
        *,
        typing: Typing = ...,
        account: Account | None = None,
        room: Room | None = None,
    ) -> Awaitable[HandleResult]: ...


class KeepFirst(Protocol):
    """Make a message safe before its platform is told it arrived (Telegram): its job
    written, or journaled while the database is away; "refused" when neither could be."""

    def __call__(
        self,
        memory: Memory,
        account: Account | None,
        room: Room | None,
        send: Send,
    ) -> Awaitable[AtDoor]: ...


class NoteProfiles(Protocol):
    """Keep the profiles an adapter saw outside a message's intake (the people a message
    mentions, whoever is at the console); only changes are written."""

    def __call__(
        self, accounts: Iterable[Account] = (), room: Room | None = None
    ) -> Awaitable[None]: ...


class HandleEdit(Protocol):
    """A person edited a message: `memory` is it as it reads now (bot/runtime/editing.py).
    Stored with its new words and learned from again; never answered again."""

    def __call__(self, memory: Memory) -> Awaitable[EditOutcome]: ...


# Answer the messages of a platform a crash left unanswered, in their rooms' lanes (so a room's
# new messages come after them); returns how many were answered. (A coroutine: adapters run
# it as a background task, started before their first message can arrive.)
AnswerUnanswered = Callable[[str, SenderFor, InLane | None], Coroutine[Any, Any, int]]


@dataclass(frozen=True)
class AdapterServices:
    """What an adapter uses of Mnemo, and nothing else."""

    agent_id: str  # whose messages are the bot's own (to_memory)
    handle: HandleMessage
    edited: HandleEdit  # a message edited after it was sent
    note_profiles: NoteProfiles
    answer_unanswered: AnswerUnanswered  # once connected, in the background
    keep_first: KeepFirst  # Telegram: kept before acknowledged (telegram/keeping.py)
    plugin_rooms: Rooms  # where a running platform connects, so plugins can speak later
    commands: CommandServices  # the shared command layer's parts (Commands)
    # What the console reads besides: the name a person gave in an earlier session (accounts)
    # or told the bot (facts), the world's character (worlds), whether the database is away
    # (outage), and learning from what was said before leaving (evaluations).
    accounts: Accounts
    facts: Facts
    worlds: WorldChoices
    outage: Outage | None
    evaluations: EvaluationQueue
    # Voice notes as text, when the operator set MNEMO_TRANSCRIPTION_MODEL (bot/adapters/voice.py).
    transcriber: Transcriber | None = None


class Adapter(Protocol):
    name: str

    async def start(self, services: AdapterServices) -> None:
        """Connect and begin handing messages to `services.handle`; returns once running."""
        ...

    async def stop(self) -> None: ...

"""The adapter contract, the same for every platform. Platform objects never leave their
adapter: each platform's `convert.to_memory(message, me, *, agent_id, received_at=None)`
turns a message into an `Incoming` (or None for what Mnemo does not read), the adapter
queues it on the room's lane (bot/adapters/lanes.py) and hands it to `runtime.handle`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.domain.records import Account, Memory, Room

if TYPE_CHECKING:
    from bot.runtime.agent import AgentRuntime


@dataclass(frozen=True)
class Incoming:
    """A message as Mnemo sees it: the memory, who said it, where, and the profiles of the
    people it names (recorded through `AgentRuntime.note_profiles`)."""

    memory: Memory
    account: Account
    room: Room
    mentioned: tuple[Account, ...] = ()


class Adapter(Protocol):
    name: str

    async def start(self, runtime: AgentRuntime) -> None:
        """Connect and begin handing messages to `runtime.handle`; returns once running."""
        ...

    async def stop(self) -> None: ...

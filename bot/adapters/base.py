"""The adapter contract. Platform objects never leave their adapter."""

from __future__ import annotations

from typing import Protocol

from bot.runtime import AgentRuntime


class Adapter(Protocol):
    name: str

    async def start(self, runtime: AgentRuntime) -> None:
        """Connect and begin handing messages to `runtime.handle`; returns once running."""
        ...

    async def stop(self) -> None: ...

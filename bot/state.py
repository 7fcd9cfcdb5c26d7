"""State: what the runtime knows when it prompts the model about one message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.models import Account, Fact, Goal, Memory, Room


@dataclass
class State:
    """Composed for one message by the providers.

    `values` fills `{{placeholders}}` in templates. The structured fields let the offline model
    and plugins work without parsing prompt text back.
    """

    message: Memory
    agent_id: str
    agent_name: str
    sender: Account | None
    room: Room | None
    recent_messages: list[Memory] = field(default_factory=list)
    actors: dict[str, Account] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    # What providers returned besides their text (`Provided.data`), by provider name.
    provided: dict[str, Any] = field(default_factory=dict)
    # Task-specific structured hints (e.g. the evaluator candidates for selection).
    data: dict[str, Any] = field(default_factory=dict)

    def name_of(self, user_id: str) -> str:
        if user_id == self.agent_id:
            return self.agent_name
        account = self.actors.get(user_id)
        return account.name if account else "someone"

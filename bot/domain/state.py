"""State: what the runtime knows when it prompts the model about one message."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.domain.characters import WorldChoice
from bot.domain.records import Account, Memory, Room


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
    values: dict[str, str] = field(default_factory=dict)
    # What providers returned besides their text (`Provided.data`), by provider name.
    provided: dict[str, Any] = field(default_factory=dict)
    # The providers' own format in the prompt (`Provided.markup`): never shown in a reply.
    markup: list[str] = field(default_factory=list)
    # Task-specific structured hints (e.g. the evaluator candidates for selection).
    data: dict[str, Any] = field(default_factory=dict)
    # The world's character and model names (`/character`, `/model`); None: the process's.
    world: WorldChoice | None = None
    # A reply's state after a fresh start in its room (`/reset`): when the conversation it may
    # use begins. Nothing said before is shown (recent messages, recalled ones).
    conversation_since: datetime | None = None

    def name_of(self, user_id: str) -> str:
        if user_id == self.agent_id:
            return self.agent_name
        account = self.actors.get(user_id)
        return account.name if account else "someone"

    def people_messages(self) -> list[Memory]:
        """People's messages (not the bot's), oldest first, including the message itself."""
        messages = list(self.recent_messages)
        if all(m.id != self.message.id for m in messages):
            messages.append(self.message)
        # Stable sort: callers may list newest first; equal timestamps keep their given order.
        return [
            m
            for m in sorted(messages, key=lambda m: m.created_at)
            if m.user_id != self.agent_id and m.content.text.strip()
        ]

"""The follow-ups plugin's tests share an injected clock (milliseconds, never patched), what a
platform showed in each room, and a way to run a command as a person in a chat."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bot.app.composition import App
from bot.commands.command_set import Commands
from bot.commands.types import Request
from bot.domain.records import Content, Room
from bot.testing.harness import TestChat

# Wednesday 25 November 2026, noon UTC.
WEDNESDAY = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def at(year: int, month: int, day: int, hour: int, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


@dataclasses.dataclass
class Clock:
    """The plugin's clock: what time it is, as the test says."""

    ms: int = int(WEDNESDAY.timestamp() * 1000)

    def __call__(self) -> int:
        return self.ms


@dataclasses.dataclass
class Room_:
    """What a platform showed in a room, by room id."""

    said: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def sender(self, room: Room) -> Callable[[Content], Awaitable[None]]:
        async def send(content: Content) -> None:
            self.said.setdefault(room.id, []).append(content.text)

        return send


async def command(app: App, chat: TestChat, text: str, *, admin: bool = True) -> str:
    name, _, args = text.lstrip("/").partition(" ")
    answer = await Commands(app.commands).run(
        name,
        Request(
            platform=chat.platform,
            account_id=chat.account.id,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            is_admin=admin,
            args=args,
        ),
    )
    return answer.text

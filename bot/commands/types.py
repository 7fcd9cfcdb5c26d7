"""What a surface hands the command layer (`Request`), what it shows of a command
(`CommandInfo`), and what it gets back (`Answer`): text, maybe a file, maybe for the asker's
eyes only. Each surface renders an `Answer` its own way (a Discord ephemeral reply with an
attachment, a Telegram document in the DM with the bot, a file written by the console)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

# Turns `@name` or a user id typed on a surface into an account id, or None if unknown.
ResolvePerson = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True)
class Scope:
    """Where a command was issued: only what was learned in `world_id` is visible."""

    world_id: str
    room_id: str
    user_id: str


@dataclass(frozen=True)
class Request:
    """A command as a surface received it."""

    platform: str
    account_id: str
    world_id: str
    room_id: str
    is_admin: bool
    args: str = ""
    # A person the surface already knows the command is about (Discord's member option, a
    # Telegram text mention or the author of the message replied to).
    subject_id: str | None = None
    # The author of the message the command replied to, if any: `/facts` then lists theirs.
    replied_to: str | None = None
    # How this surface finds `@name`; by default the platform's known usernames.
    resolve_person: ResolvePerson | None = field(default=None, compare=False)
    # When it was used, on the clock the platform dates its messages by (Discord's ids);
    # None: now, the clock Telegram's and the console's messages are dated by on arrival.
    sent_at: datetime | None = None
    # The language the asker's app is set to, as the platform says it (Telegram's
    # `language_code`, Discord's interaction `locale`; the console has none): answers are in
    # it unless the world chose a language (bot/runtime/languages.py).
    locale: str | None = None

    @property
    def scope(self) -> Scope:
        return Scope(world_id=self.world_id, room_id=self.room_id, user_id=self.account_id)


@dataclass(frozen=True)
class CommandInfo:
    """What a surface shows of a command (menus, slash commands, /help)."""

    name: str
    # In English; a built-in command's is shown in the person's language (bot/i18n).
    description: str
    usage: str = ""
    admin_only: bool = False
    # The answer waits for learning: a surface with an answer deadline (Discord) defers.
    slow: bool = False


@dataclass(frozen=True)
class Attachment:
    """A file that goes with an answer."""

    filename: str
    data: bytes
    media_type: str = "application/json"


@dataclass(frozen=True)
class Answer:
    """What a command answers."""

    text: str
    attachment: Attachment | None = None
    # For the asker only: never shown to the others in a group or server.
    private: bool = False

    @classmethod
    def of(cls, value: str | Answer) -> Answer:
        """Handlers may answer plain text: shown where the command was used."""
        return value if isinstance(value, Answer) else cls(value)

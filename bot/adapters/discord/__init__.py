"""Discord: `convert` (discord.py objects into Mnemo's models), `adapter` (lifecycle, messages
in, replies out) and `commands` (the slash commands: Discord's side of the command layer)."""

from bot.adapters.discord.adapter import (
    INTENT_MISSING,
    NO_TOKEN,
    TOKEN_REJECTED,
    DiscordAdapter,
)
from bot.adapters.discord.commands import FORGET_ME_CANCELLED, FORGET_ME_EXPIRED, REFUSED
from bot.adapters.discord.convert import account_of, to_memory, world_of

__all__ = [
    "FORGET_ME_CANCELLED",
    "FORGET_ME_EXPIRED",
    "INTENT_MISSING",
    "NO_TOKEN",
    "REFUSED",
    "TOKEN_REJECTED",
    "DiscordAdapter",
    "account_of",
    "to_memory",
    "world_of",
]

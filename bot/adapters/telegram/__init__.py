"""Telegram: `convert` (Telegram objects into Mnemo's models), `adapter` (lifecycle, messages
in, replies out), `send` (sending with retries, the typing indicator), `updates` (polling or
a webhook) and `commands` (Telegram's side of the command layer)."""

from bot.adapters.telegram.adapter import BAD_TOKEN, TelegramAdapter
from bot.adapters.telegram.commands import FORGET_PROMPT
from bot.adapters.telegram.convert import BotIdentity, to_memory
from bot.adapters.telegram.updates import webhook_secret

__all__ = [
    "BAD_TOKEN",
    "FORGET_PROMPT",
    "BotIdentity",
    "TelegramAdapter",
    "to_memory",
    "webhook_secret",
]

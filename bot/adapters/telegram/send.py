"""Sending to Telegram: one part of a reply with retries (flood waits, network trouble), and
the "typing…" indicator kept up while the model works."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any, Protocol

from telegram import Bot, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut

log = logging.getLogger(__name__)


class HasBot(Protocol):
    @property
    def bot(self) -> Bot | None: ...


async def send_part(
    bot: Bot | None,
    chat_id: int,
    text: str,
    reply_to: int | None,
    thread: int | None,
    markup: InlineKeyboardMarkup | None,
    attempts: int = 3,
) -> Message | None:
    """Send one message (at most 4,096 characters); None when it could not be sent."""
    if bot is None:
        return None
    reply = (
        None
        if reply_to is None
        else ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
    )
    for attempt in range(1, attempts + 1):
        try:
            return await bot.send_message(
                chat_id,
                text,
                reply_parameters=reply,
                message_thread_id=thread,
                reply_markup=markup,
            )
        except RetryAfter as error:
            await asyncio.sleep(_seconds(error) + 0.5)
        except TimedOut as error:
            # It may have arrived: sending again could say it twice.
            log.warning("telegram: sending to %s timed out (%s)", chat_id, error)
            return None
        except NetworkError as error:
            log.warning("telegram: sending to %s failed (%s); retrying", chat_id, error)
            await asyncio.sleep(attempt)
        except (Forbidden, BadRequest) as error:
            # Blocked by the user, removed from the group, ...: nothing to retry.
            log.warning("telegram: cannot send to %s (%s)", chat_id, error)
            return None
    log.error("telegram: gave up sending to %s after %d attempts", chat_id, attempts)
    return None


async def keep_typing(
    owner: HasBot, chat_id: int, thread: int | None, interval: float, *, until: asyncio.Event
) -> None:
    """Until `until` is set, cancelled, or the adapter stops: the indicator lasts about 5 s,
    so it is renewed until the reply is ready."""
    while not until.is_set() and (bot := owner.bot) is not None:
        try:
            await bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread)
        except TelegramError as error:
            log.debug("telegram: typing indicator failed (%s)", error)
        await asyncio.sleep(interval)


def _seconds(error: RetryAfter) -> float:
    value: Any = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)

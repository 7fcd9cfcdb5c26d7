"""Sending to Telegram: one part of a reply, and the "typing…" indicator kept up while the
model works.

Flood control is python-telegram-bot's `AIORateLimiter` (adapter.py builds the bot with it):
it keeps every request within Telegram's limits (30 messages a second, 20 a minute per group)
and waits out a flood wait ("429 Too Many Requests: retry after N") before retrying. Here only
what it does not do: retrying after network trouble, and sending a part again as plain text
when Telegram refuses its HTML ("can't parse entities"), so a reply is never lost to markup.

A streamed reply (bot/adapters/streaming.py) is one message edited as the text grows:
`ChatReplies` posts, edits (an edit to the same text, "message is not modified", is no
failure) and deletes it, at most one edit per `PRIVATE_EDIT_INTERVAL` in a private chat and
per `GROUP_EDIT_INTERVAL` in a group, where Telegram allows about 20 messages a minute.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from telegram import Bot, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_incrementing,
)

from bot.adapters.split import TELEGRAM_LIMIT, split_message
from bot.adapters.streaming import EditedReply, StreamingSender
from bot.adapters.telegram.markdown import answer_html, plain_text, to_telegram_html
from bot.domain.records import Content

log = logging.getLogger(__name__)

HTML = "HTML"
# Seconds between two edits of a streamed reply (see the module's docstring).
PRIVATE_EDIT_INTERVAL = 1.2
GROUP_EDIT_INTERVAL = 3.0


class HasBot(Protocol):
    @property
    def bot(self) -> Bot | None: ...


async def send_text(
    bot: Bot | None,
    chat_id: int,
    text: str,
    reply_to: int | None = None,
    thread: int | None = None,
    markup: InlineKeyboardMarkup | None = None,
    *,
    markdown: bool = False,
    answer: bool = False,
) -> Message | None:
    """Send `text` in parts of at most 4,096 characters; returns the last part sent. Only the
    first part replies to `reply_to`; the buttons (`markup`) go with the last.

    `markdown`: the model's reply, rendered to Telegram's HTML (markdown.py). `answer`: a
    command's answer, rendered as HTML too, with only its backticked ids as code. Otherwise our
    own text (notices), sent plain: nothing in it is markup.
    """
    if markdown:
        parts, mode = to_telegram_html(text, TELEGRAM_LIMIT), HTML
    elif answer:
        parts, mode = answer_html(text, TELEGRAM_LIMIT), HTML
    else:
        parts, mode = split_message(text, TELEGRAM_LIMIT), None
    last: Message | None = None
    for index, part in enumerate(parts):
        last = await send_part(
            bot,
            chat_id,
            part,
            reply_to if index == 0 else None,
            thread,
            markup if index == len(parts) - 1 else None,
            parse_mode=mode,
        )
    return last


async def send_part(
    bot: Bot | None,
    chat_id: int,
    text: str,
    reply_to: int | None,
    thread: int | None,
    markup: InlineKeyboardMarkup | None,
    attempts: int = 3,
    *,
    parse_mode: str | None = None,
) -> Message | None:
    """Send one message (at most 4,096 characters); None when it could not be sent.

    `parse_mode=HTML`: if Telegram refuses the HTML, the same part goes again as plain text.
    """
    if bot is None:
        return None
    reply = (
        None
        if reply_to is None
        else ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
    )

    def retrying_note(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning("telegram: sending to %s failed (%s); retrying", chat_id, error)

    # Network trouble only (not a refusal, not a time-out), waiting 1 s, then 2 s, ...
    retrying = AsyncRetrying(
        retry=retry_if_exception(_worth_sending_again),
        stop=stop_after_attempt(attempts),
        wait=wait_incrementing(start=1, increment=1),
        before_sleep=retrying_note,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                return await _send_once(bot, chat_id, text, reply, thread, markup, parse_mode)
    except NetworkError:
        log.error("telegram: gave up sending to %s after %d attempts", chat_id, attempts)
    return None


def _worth_sending_again(error: BaseException) -> bool:
    """A lost connection or a 5xx: the part did not arrive. A time-out may have delivered it
    (sending again could say it twice); a 400 is a refusal, not trouble."""
    return isinstance(error, NetworkError) and not isinstance(error, TimedOut | BadRequest)


async def _send_once(
    bot: Bot,
    chat_id: int,
    text: str,
    reply: ReplyParameters | None,
    thread: int | None,
    markup: InlineKeyboardMarkup | None,
    parse_mode: str | None,
) -> Message | None:
    """One try: the sent message; None when Telegram refused it for good. Raises
    NetworkError for the trouble `send_part` tries again."""
    while True:
        try:
            return await bot.send_message(
                chat_id,
                text,
                reply_parameters=reply,
                message_thread_id=thread,
                reply_markup=markup,
                parse_mode=parse_mode,
            )
        except RetryAfter as error:
            # The rate limiter already waited and retried: Telegram keeps refusing.
            log.warning("telegram: sending to %s refused by flood control (%s)", chat_id, error)
            return None
        except BadRequest as error:
            if parse_mode is not None and "can't parse entities" in str(error).lower():
                log.warning("telegram: HTML refused in %s (%s); sent as plain text", chat_id, error)
                text, parse_mode = plain_text(text), None
                continue
            log.warning("telegram: cannot send to %s (%s)", chat_id, error)
            return None
        except TimedOut as error:
            # It may have arrived: sending again could say it twice.
            log.warning("telegram: sending to %s timed out (%s)", chat_id, error)
            return None
        except Forbidden as error:
            # Blocked by the user, removed from the group, ...: nothing to retry.
            log.warning("telegram: cannot send to %s (%s)", chat_id, error)
            return None


async def edit_part(
    bot: Bot | None, message: Message, text: str, *, parse_mode: str | None
) -> bool:
    """Change a sent message to `text` (at most 4,096 characters); False when it could not be.

    The same text again ("message is not modified") is no failure; HTML Telegram refuses is
    sent again as plain text."""
    if bot is None:
        return False
    while True:
        try:
            await bot.edit_message_text(
                text, chat_id=message.chat_id, message_id=message.message_id, parse_mode=parse_mode
            )
            return True
        except BadRequest as error:
            reason = str(error).lower()
            if "message is not modified" in reason:
                return True
            if parse_mode is not None and "can't parse entities" in reason:
                text, parse_mode = plain_text(text), None
                continue
            log.warning("telegram: cannot edit a reply in %s (%s)", message.chat_id, error)
            return False
        except TelegramError as error:
            # Flood control already waited, a time-out may have edited it, or the chat is
            # closed to the bot: the reply's last edit, if this was it, posts it anew.
            log.warning("telegram: editing a reply in %s failed (%s)", message.chat_id, error)
            return False


@dataclass
class ChatReplies:
    """The replies to one message in one chat: sent whole (`send`) or streamed
    (`open_stream`). Only the first message quotes `quote`; the first one sent stops the
    "typing…" indicator (`replied`)."""

    owner: HasBot
    chat_id: int
    thread: int | None = None
    quote: int | None = None
    replied: asyncio.Event | None = None
    edit_interval: float | None = None

    def sender(self) -> StreamingSender:
        return StreamingSender(self.send, self.open_stream)

    async def send(self, content: Content) -> None:
        self._replying()
        quote, self.quote = self.quote, None
        await send_text(
            self.owner.bot, self.chat_id, content.text, quote, self.thread, markdown=True
        )

    def open_stream(self) -> EditedReply[Message]:
        interval = self.edit_interval
        if interval is None:
            interval = GROUP_EDIT_INTERVAL if self.chat_id < 0 else PRIVATE_EDIT_INTERVAL
        return EditedReply(self, interval=interval)

    # PlatformMessages[Message]: the model's Markdown as Telegram HTML, as `send` sends it.
    def parts(self, text: str) -> list[str]:
        return to_telegram_html(text, TELEGRAM_LIMIT)

    async def post(self, part: str, *, first: bool) -> Message | None:
        self._replying()
        quote, self.quote = self.quote, None
        return await send_part(
            self.owner.bot, self.chat_id, part, quote, self.thread, None, parse_mode=HTML
        )

    async def edit(self, message: Message, part: str) -> bool:
        return await edit_part(self.owner.bot, message, part, parse_mode=HTML)

    async def delete(self, message: Message) -> None:
        bot = self.owner.bot
        if bot is None:
            return
        try:
            await bot.delete_message(message.chat_id, message.message_id)
        except TelegramError as error:
            log.warning("telegram: cannot take back a reply in %s (%s)", message.chat_id, error)

    def _replying(self) -> None:
        if self.replied is not None:
            self.replied.set()  # no "typing…" after the answer, while it is being stored


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

"""A Telegram message is kept before Telegram is told it arrived.

Telegram never sends an acknowledged update again, so each message is made safe first (its
evaluation job written, holding a copy, or journaled while MongoDB is away:
`Intake.keep_first`), and only then acknowledged: the webhook answers its POST
(webhook.py), polling's next getUpdates confirms it (updates.py). One that could not be kept
(any write failure: a full disk too) is not acknowledged: the webhook answers 503, and polling
asks for it again (its offset stays at the oldest update not kept). Keeping runs as soon as the
update arrives, not when its chat's lane gets to it (that may wait behind a reply being
written); the lane's turn then waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from cachetools import FIFOCache
from telegram import Message

from bot.adapters.base import Incoming, KeepFirst
from bot.domain.records import Content
from bot.runtime.intake.intake import AtDoor

log = logging.getLogger(__name__)

SendText = Callable[[int, str, int | None, int | None], Awaitable[object]]


# An update not kept is not confirmed, so Telegram sends it again; one that fails this many
# times (a message the database refuses for good, not a full disk that frees up) is given up,
# or polling would hold every later update behind it for the 24 hours Telegram keeps them.
MAX_KEEP_ATTEMPTS = 20
# Bound of the updates remembered as not kept (a webhook update Telegram stopped sending).
UNKEPT_REMEMBERED = 10_000


class KeptFirst:
    def __init__(self, send: SendText, *, max_attempts: int = MAX_KEEP_ATTEMPTS) -> None:
        self._send = send
        self._max_attempts = max_attempts
        # Updates handled but not kept, with their failed attempts: the webhook answers 503 and
        # polling does not confirm them (`unconfirmed`), so Telegram sends them again.
        # The oldest are forgotten first, past UNKEPT_REMEMBERED.
        self._unkept: FIFOCache[int, int] = FIFOCache(maxsize=UNKEPT_REMEMBERED)

    def start(
        self,
        keep_first: KeepFirst,
        message: Message,
        incoming: Incoming,
    ) -> asyncio.Future[AtDoor]:
        """Start keeping the message (the chat's lane waits for it: `proceed`)."""
        reply_to = message.message_id if incoming.room.kind == "group" else None
        thread = message.message_thread_id if message.is_topic_message else None

        async def send(content: Content) -> None:  # the outage notice, a kept message's reply
            await self._send(message.chat.id, content.text, reply_to, thread)

        return asyncio.ensure_future(
            keep_first(incoming.memory, incoming.account, incoming.room, send)
        )

    async def settle(self, update_id: int, kept: asyncio.Future[AtDoor]) -> None:
        """Return once the message is kept, or noted as not kept (then raise, if it failed)."""
        try:
            at_door = await asyncio.shield(kept)
        except Exception:
            self._not_kept(update_id)
            raise  # PTB's error handler logs it
        if at_door == "refused":
            self._not_kept(update_id)
        else:
            self._unkept.pop(update_id, None)

    def _not_kept(self, update_id: int) -> None:
        attempts = self._unkept.pop(update_id, 0) + 1
        if attempts >= self._max_attempts:
            log.error(
                "telegram: update %d could not be kept in %d attempts; confirming it (lost)",
                update_id,
                attempts,
            )
            return
        self._unkept[update_id] = attempts

    def acknowledged(self, update_id: int) -> bool:
        """Whether Telegram may be told it has the update (it was kept)."""
        return update_id not in self._unkept

    def unconfirmed(self) -> int | None:
        """The oldest update not kept: polling confirms nothing from it on (updates.py)."""
        return min(self._unkept, default=None)


async def proceed(kept: Awaitable[AtDoor]) -> bool:
    """Whether the chat's lane handles the message: not when it waits in the journal (its
    replay answers it), was refused, or could not be kept (Telegram sends it again)."""
    try:
        return await kept not in ("journaled", "refused")
    except Exception:
        return False

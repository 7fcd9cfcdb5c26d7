"""A Telegram message is kept before Telegram is told it arrived.

Telegram never sends an acknowledged update again, so each message is made safe first (its
evaluation job written, holding a copy, or journaled while MongoDB is away:
`KeptIntake.keep_first`), and only then acknowledged: the webhook answers its POST
(webhook.py), polling's next getUpdates confirms it (updates.py). Keeping runs as soon as the
update arrives, not when its chat's lane gets to it (that may wait behind a reply being
written); the lane's turn then waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from telegram import Message

from bot.adapters.base import Incoming
from bot.domain.records import Content
from bot.runtime.agent import AgentRuntime
from bot.runtime.intake.journaled import AtDoor

SendText = Callable[[int, str, int | None, int | None], Awaitable[object]]


class KeptFirst:
    def __init__(self, send: SendText) -> None:
        self._send = send
        # Updates handled but not kept: the webhook answers 503 and Telegram sends them again.
        self._unkept: set[int] = set()

    def start(
        self,
        runtime: AgentRuntime,
        message: Message,
        incoming: Incoming,
        *,
        platform_retries: bool,
    ) -> asyncio.Future[AtDoor]:
        """Start keeping the message (the chat's lane waits for it: `proceed`)."""
        reply_to = message.message_id if incoming.room.kind == "group" else None
        thread = message.message_thread_id if message.is_topic_message else None

        async def send(content: Content) -> None:  # the outage notice, a kept message's reply
            await self._send(message.chat.id, content.text, reply_to, thread)

        return asyncio.ensure_future(
            runtime.kept.keep_first(
                incoming.memory,
                incoming.account,
                incoming.room,
                send,
                platform_retries=platform_retries,
            )
        )

    async def settle(self, update_id: int, kept: asyncio.Future[AtDoor]) -> None:
        """Return once the message is kept, or noted as not kept (then raise, if it failed)."""
        try:
            if await asyncio.shield(kept) == "refused":
                self._unkept.add(update_id)
        except Exception:
            self._unkept.add(update_id)
            raise  # PTB's error handler logs it

    def acknowledged(self, update_id: int) -> bool:
        """Whether Telegram may be told it has the update (it was kept)."""
        if update_id in self._unkept:
            self._unkept.discard(update_id)
            return False
        return True


async def proceed(kept: Awaitable[AtDoor]) -> bool:
    """Whether the chat's lane handles the message: not when it waits in the journal (its
    replay answers it), was refused, or could not be kept (Telegram sends it again)."""
    try:
        return await kept not in ("journaled", "refused")
    except Exception:
        return False

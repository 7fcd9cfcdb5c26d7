"""Streamed replies on a platform: one message posted at the first words, edited as the text
grows (no more often than the platform allows), and settled on the final text.

The runtime sees a `ReplyStream` (bot/runtime/types.py) through the `send` an adapter gives
it: a `StreamingSender` is that `send` and opens the streams. What differs per platform is
only how one message is posted, edited and deleted, and how a text becomes the platform's
messages (`PlatformMessages`: Telegram's HTML parts of 4,096, Discord's 2,000-character
parts); `EditedReply` does the rest, the same everywhere.

A reply longer than the platform's limit streams its first message only: once the text
passes the limit that message stops growing, and when the reply is finished it is edited to
the final first part and the other parts are sent after it. Editing two messages at once
while the split point moves as the text grows would make words jump between them, and the
split is only right on the final text.
"""

from __future__ import annotations

import asyncio
import logging
import math
import shutil
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TextIO, TypeVar

from bot.domain.records import Content
from bot.runtime.types import ReplyStream

log = logging.getLogger(__name__)

# One edit per message per this many seconds: within Discord's (5 edits per 5 s per channel)
# and Telegram's (about one a second per chat) limits, and fast enough to read as growing.
EDIT_INTERVAL = 1.2

Handle = TypeVar("Handle")


class PlatformMessages(Protocol[Handle]):
    """How one platform shows a reply: its parts, and one message posted, edited, deleted."""

    def parts(self, text: str) -> list[str]:
        """`text` as the platform's messages (each within its limit), none empty."""
        ...

    async def post(self, part: str, *, first: bool) -> Handle | None:
        """Send one part (`first`: the reply's first message); None when it could not be."""
        ...

    async def edit(self, message: Handle, part: str) -> bool:
        """Change a posted message to `part`; False when it could not be (gone, refused)."""
        ...

    async def delete(self, message: Handle) -> None:
        """Remove a posted message; failures are logged, not raised."""
        ...


class EditedReply(Generic[Handle]):
    """A `ReplyStream` over one platform's messages (see the module's docstring)."""

    def __init__(
        self,
        platform: PlatformMessages[Handle],
        *,
        interval: float = EDIT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._platform = platform
        self._interval = interval
        self._clock = clock
        self._message: Handle | None = None
        self._shown = ""
        self._last = 0.0
        # The first post failed (the bot may not write here): no more tries until finish.
        self._failed = False

    async def update(self, text: str) -> None:
        if self._message is not None and self._clock() - self._last < self._interval:
            return  # a later update, or finish, shows it
        if self._message is None and self._failed:
            return
        parts = self._platform.parts(text)
        if not parts:
            return
        if self._message is None:
            await self._post_first(parts[0])
        elif len(parts) == 1 and parts[0] != self._shown:
            await self._edit(parts[0])
        # Past the limit, the first message is full: the rest is sent when it is finished.

    async def finish(self, text: str) -> None:
        parts = self._platform.parts(text)
        if not parts:
            await self.cancel()
            return
        if self._message is None:
            await self._post_all(parts)
            return
        if parts[0] != self._shown:
            # Spaced like the updates: the platform's limit holds for the last edit too.
            await asyncio.sleep(max(0.0, self._last + self._interval - self._clock()))
            if not await self._edit(parts[0]):
                # The message is gone or refused the edit: the reply is sent anew, whole,
                # so nobody is left reading a part of it.
                await self.cancel()
                await self._post_all(parts)
                return
        for part in parts[1:]:
            await self._platform.post(part, first=False)

    async def cancel(self) -> None:
        message, self._message, self._shown = self._message, None, ""
        if message is not None:
            await self._platform.delete(message)

    async def _post_first(self, part: str) -> None:
        message = await self._platform.post(part, first=True)
        if message is None:
            self._failed = True
            return
        self._message, self._shown, self._last = message, part, self._clock()

    async def _post_all(self, parts: list[str]) -> None:
        for index, part in enumerate(parts):
            posted = await self._platform.post(part, first=index == 0)
            if posted is None:
                return  # the platform refused: logged there; the rest would fail alike
            if index == 0:
                self._message, self._shown, self._last = posted, part, self._clock()

    async def _edit(self, part: str) -> bool:
        assert self._message is not None
        edited = await self._platform.edit(self._message, part)
        self._last = self._clock()
        if edited:
            self._shown = part
        return edited


class StreamingSender:
    """An adapter's `send` that can also stream (`StreamingSend`): `send` sends a reply
    whole, `open_stream` gives a stream for one reply."""

    def __init__(
        self, send: Callable[[Content], Awaitable[None]], open_stream: Callable[[], ReplyStream]
    ) -> None:
        self._send = send
        self._open_stream = open_stream

    async def __call__(self, content: Content) -> None:
        await self._send(content)

    def open_stream(self) -> ReplyStream:
        return self._open_stream()


class PrintedReply:
    """The console's `ReplyStream`: the reply printed as it comes, after the speaker's name.

    A printed line cannot be edited, only taken back: on a terminal (`erase`) the lines the
    reply took are cleared with ANSI codes and the replacement printed in their place; on a
    pipe, which no one watches grow, the replacement starts a new line."""

    def __init__(self, out: TextIO, speaker: str, *, erase: bool, width: int | None = None) -> None:
        self._out = out
        self._prefix = f"{speaker}: "
        self._erase_lines = erase
        self._width = width
        self._shown: str | None = None  # None: nothing printed of this reply

    async def update(self, text: str) -> None:
        if self._shown is not None and text.startswith(self._shown):
            self._write(text[len(self._shown) :])
        else:
            self._take_back()
            self._write(self._prefix + text)
        self._shown = text

    async def finish(self, text: str) -> None:
        await self.update(text)
        self._write("\n")
        self._shown = None

    async def cancel(self) -> None:
        self._take_back()

    def _take_back(self) -> None:
        if self._shown is None:
            return
        if not self._erase_lines:
            self._write("\n")
        else:
            width = self._width or shutil.get_terminal_size().columns
            lines = sum(
                max(1, math.ceil(len(line) / width))
                for line in (self._prefix + self._shown).split("\n")
            )
            # To the start of the line, cleared; then each line above, cleared.
            self._write("\r\x1b[2K" + "\x1b[1A\x1b[2K" * (lines - 1))
        self._shown = None

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

"""What the runtime and its collaborators (composing, replying, evaluating) share: the
runtime's options, the result of handling one message, and how an adapter reaches a room.

Kept apart from `bot.runtime.agent` so that the collaborators need not import the runtime that
owns them (no import cycle); `bot.runtime.agent` re-exports all of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from bot.domain.records import Content, EvaluationJob, Memory, Room

# Adapters pass how to reach the room: send a message, and show "typing…" while thinking.
Send = Callable[[Content], Awaitable[None]]
Typing = Callable[[], AbstractAsyncContextManager[Any]]
# How an adapter reaches a room it did not just hear from (to answer after a crash; the
# message answered, or None for a line that answers none).
SenderFor = Callable[[Room, Memory | None], Send]
# How an adapter runs work in a room's lane, behind what the room already has queued
# (bot/adapters/lanes.py): the future resolves once the work has run.
InLane = Callable[[Room, Callable[[], Awaitable[None]]], "asyncio.Future[None]"]


class ReplyStream(Protocol):
    """One reply shown while the model writes it: a message the adapter posts at the first
    `update` and edits as the text grows (as often as the platform allows), settled by
    `finish` with the final text (and the parts past the platform's limit), or taken back by
    `cancel`. Implemented per platform in bot/adapters/streaming.py."""

    async def update(self, text: str) -> None:
        """Show `text` (the reply so far, or another one replacing it)."""

    async def finish(self, text: str) -> None:
        """Show `text` as the reply, whole: the message edited to it, or sent."""

    async def cancel(self) -> None:
        """Take back what was shown (the reply is not sent after all)."""


@runtime_checkable
class StreamingSend(Protocol):
    """A `Send` that can also show a reply as it grows (bot/adapters/streaming.py)."""

    async def __call__(self, content: Content) -> None: ...

    def open_stream(self) -> ReplyStream: ...


@dataclass(frozen=True)
class RuntimeOptions:
    evaluator_selection: Literal["llm", "all"] = "llm"
    evaluator_timeout: float = 120.0
    recent_messages: int = 12
    max_message_chars: int = 4000
    # Longer replies are cut at a sentence end before they are split, sent and stored.
    max_reply_chars: int = 4000
    # After a crash, a message stored but not answered is answered if younger than this (s).
    answer_window: float = 300.0
    # Replies shown as the model writes them, where the adapter can (MNEMO_STREAM_REPLIES).
    stream_replies: bool = True
    # How many facts about the message's people the reply is shown (MNEMO_FACTS_RELEVANT_FACTS).
    relevant_facts: int = 8


@dataclass
class HandleResult:
    stored: bool
    responded: bool = False
    replies: list[Memory] = field(default_factory=list)
    action: str | None = None
    job: EvaluationJob | None = None
    # The room's message count once this message and its replies are stored (elizaOS
    # evaluates after storing the reply, and its cadence counts both).
    position: int = 0
    # MongoDB was unreachable: the message waits in the outage journal
    # (bot/runtime/intake/outage.py).
    journaled: bool = False
    # The message is not stored yet (its new job holds a copy): stored with its replies.
    message_unstored: bool = False
    # Replies sent, not stored yet: stored with the message and the job's release in one
    # batch (bot/storage/intake.py), or before an action runs; journaled with the message
    # when MongoDB went away first.
    unstored: list[Memory] = field(default_factory=list)


def no_typing() -> AbstractAsyncContextManager[Any]:
    return nullcontext()

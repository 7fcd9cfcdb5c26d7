"""The message a message replies to (quotes), as the reply's prompt shows it beside it.

A person who replies to a message on Telegram or Discord says something about that message
("what did he mean by that?"); the model must see which one. The message's `in_reply_to` names
it, and the reply's state shows it (bot/runtime/composing.py): from the conversation, else from
the stored messages, else, for the message being answered only, from the platform. That last
source is the adapter's: a loader carried with the message (`Memory.carry_quote`) in a private
attribute, like its images, so no dump, job copy or journal line holds another person's words
inside this person's message.

A quote is never anyone's evidence: it stays out of `content.text`, which is all the memory
reads a claim's words from (bot/memory/evidence.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quoted:
    """The message replied to: who wrote it (an account id, the agent's for the bot's own) and
    its words. `name`: how the platform showed its author, for one Mnemo has no account of."""

    author_id: str
    text: str
    name: str = ""


# How an adapter fetches the message replied to from its platform; None when it cannot
# (deleted, not visible to the bot, no text).
QuoteLoader = Callable[[], Awaitable[Quoted | None]]


def at_hand(quoted: Quoted | None) -> QuoteLoader | None:
    """A loader for a quote the platform delivered with the message (Telegram's update
    carries the message replied to)."""
    if quoted is None:
        return None

    async def load() -> Quoted | None:
        return quoted

    return load

"""The `relevantMessages` provider: earlier messages of this room that bear on the current one.

The recent window is already in the prompt, so it is left out; what comes back is what
scrolled away. Only the message's own room is searched (and so its own world), and only
messages older than the current one.

The query is the message's text exactly as written (`message.content.text`): the message is
embedded once, for whichever comes first of this provider and `Knowledge.index_message`, and
the caching embedder answers the other (and every later composition of the same state).
"""

from __future__ import annotations

import logging

from bot import (
    Context,
    Memory,
    MessageRetriever,
    PluginContext,
    Provided,
    Provider,
    RetrieverOptions,
)

from .settings import RecallSettings

log = logging.getLogger(__name__)

HEADER = "# Relevant earlier messages in this conversation"


async def setup(ctx: PluginContext[RecallSettings]) -> MessageRetriever:
    """One retriever per runtime (the plugin's state), so it keeps its keyword-index cache
    between messages and goes away with its runtime."""
    settings = ctx.settings
    return ctx.conversations.retriever(RetrieverOptions(max_distance=settings.max_distance))


async def get_relevant_messages(ctx: Context[RecallSettings, MessageRetriever]) -> Provided:
    settings = ctx.settings
    message = ctx.message
    if settings.limit <= 0 or not message.content.text.strip():
        return Provided()
    retriever = ctx.plugin_state  # what setup() returned
    shown = {m.id for m in ctx.state.recent_messages} | {message.id}
    found = await retriever.search(
        message.content.text,
        room_id=message.room_id,
        exclude_ids=shown,
        before=message.created_at,
        limit=settings.limit,
    )
    # After a fresh start (`/reset`) the conversation before it is not brought back either.
    since = ctx.state.conversation_since
    kept = [r.memory for r in found if since is None or r.memory.created_at >= since]
    memories = sorted(kept, key=lambda m: (m.created_at, m.id))
    if not memories:
        return Provided(data=[])
    names = await ctx.conversations.display_names(ctx.state, {m.user_id for m in memories})
    lines = [_line(m, names.get(m.user_id, "someone"), settings.max_chars) for m in memories]
    # The heading and each line's "(date) name:" are the provider's, not what was said.
    labels = [line.partition(": ")[0] + ":" for line in lines]
    return Provided(text=HEADER + "\n" + "\n".join(lines), data=memories, markup=[HEADER, *labels])


def _line(memory: Memory, name: str, max_chars: int) -> str:
    text = " ".join(memory.content.text.split())
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return f"({memory.created_at:%Y-%m-%d}) {name}: {text}"


relevant_messages_provider = Provider(
    name="relevantMessages",
    get=get_relevant_messages,
    description="Earlier messages of this conversation relevant to the current message.",
)

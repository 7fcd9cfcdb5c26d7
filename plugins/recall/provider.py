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
from weakref import WeakKeyDictionary

from bot.models import Memory
from bot.plugins import Context, Provider
from bot.retrieval import MessageRetriever, RetrieverOptions
from bot.runtime import AgentRuntime

from .settings import RecallSettings

log = logging.getLogger(__name__)

HEADER = "# Relevant earlier messages in this conversation"


class _Retrievers:
    """One retriever per runtime, so each keeps its keyword-index cache between messages;
    weakly held, so a stopped runtime (tests open many) takes its retriever with it."""

    def __init__(self) -> None:
        self._by_runtime: WeakKeyDictionary[AgentRuntime, MessageRetriever] = WeakKeyDictionary()

    def of(self, runtime: AgentRuntime, settings: RecallSettings) -> MessageRetriever:
        retriever = self._by_runtime.get(runtime)
        if retriever is None:
            knowledge = runtime.knowledge
            retriever = MessageRetriever(
                runtime.store,
                knowledge.vectors,
                knowledge.embedder,
                options=RetrieverOptions(max_distance=settings.max_distance),
            )
            self._by_runtime[runtime] = retriever
        return retriever


_retrievers = _Retrievers()


async def get_relevant_messages(ctx: Context) -> str:
    settings: RecallSettings = ctx.settings or RecallSettings()
    message = ctx.message
    if settings.limit <= 0 or not message.content.text.strip():
        return ""
    shown = {m.id for m in ctx.state.recent_messages} | {message.id}
    found = await _retrievers.of(ctx.runtime, settings).search(
        message.content.text,
        room_id=message.room_id,
        exclude_ids=shown,
        before=message.created_at,
        limit=settings.limit,
    )
    memories = sorted((r.memory for r in found), key=lambda m: (m.created_at, m.id))
    ctx.state.data["relevant_messages"] = memories
    if not memories:
        return ""
    names = await ctx.runtime.display_names(ctx.state, {m.user_id for m in memories})
    lines = [_line(m, names.get(m.user_id, "someone"), settings.max_chars) for m in memories]
    return HEADER + "\n" + "\n".join(lines)


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

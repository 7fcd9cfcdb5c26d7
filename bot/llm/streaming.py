"""Streaming a model's answer: the pieces as the model writes them, from any model.

`OpenAIModel.stream` streams; a model without `stream` (the offline model, a scripted one, a
wrapper that only generates) answers whole, which is a stream of one piece. The reply path
reads every model this way (bot/runtime/replying.py).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Protocol, runtime_checkable

from bot.llm.base import LanguageModel, ModelRequest


@runtime_checkable
class StreamingModel(Protocol):
    """A model that can give its answer in pieces (the text of each chunk, in order)."""

    def stream(self, request: ModelRequest) -> AsyncGenerator[str, None]: ...


async def stream_text(model: LanguageModel, request: ModelRequest) -> AsyncGenerator[str, None]:
    """The answer to `request` in pieces; joined, they are what `generate` would return.

    Close the iterator when stopping early (`contextlib.aclosing`): the model's request is
    then closed too, and its place in the model queue freed.
    """
    if isinstance(model, StreamingModel):
        async with aclosing(model.stream(request)) as pieces:
            async for piece in pieces:
                yield piece
        return
    yield await model.generate(request)

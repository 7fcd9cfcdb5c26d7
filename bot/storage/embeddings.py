"""Embedders: all-MiniLM-L6-v2 on onnxruntime (default) or an OpenAI embedding model."""

from __future__ import annotations

from typing import Protocol


class Embedder(Protocol):
    name: str
    dimensions: int

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order. Never blocks the event loop."""
        ...

"""What the runtime reports as it works, for whoever watches (the metrics, or nobody).

A protocol with a do-nothing default, so the runtime never depends on a metrics library and a
deployment without metrics pays nothing.
"""

from __future__ import annotations

from typing import Protocol


class RuntimeEvents(Protocol):
    def message_received(self) -> None:
        """A new message was stored (a redelivered one is not counted again)."""

    def replied(self, replies: int, seconds: float) -> None:
        """`replies` messages were sent in answer, `seconds` after the message arrived."""


class NoEvents:
    def message_received(self) -> None:
        pass

    def replied(self, replies: int, seconds: float) -> None:
        pass


NO_EVENTS: RuntimeEvents = NoEvents()

"""Images a person sent, as bytes for a model that sees images: never stored.

An adapter knows how to download a message's images; the reply to that message is the only
place that needs them. So the adapter hands the runtime a loader (`ImageLoader`), carried
with the message (`Memory.carry_images`) in a private attribute that no dump, no job copy
and no journal line holds: what is stored of the message is what the person wrote and the
attachments' titles. The loader is called only when Mnemo answers the message, so nothing is
downloaded for the group messages it only reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ImageBytes:
    """One downloaded image."""

    data: bytes
    media_type: str  # "image/jpeg", "image/png", ...


# Downloads the message's images (within the operator's limits) when first called; what it
# could not download is left out, so a reply never fails for an image.
ImageLoader = Callable[[], Awaitable[tuple[ImageBytes, ...]]]

"""Images a person sent, as bytes for a model that sees images: never stored.

An adapter knows how to download a message's images; the reply to that message is the only
place that needs them. So the adapter hands the runtime a loader (`ImageLoader`), carried
with the message (`Memory.carry_images`) in a private attribute that no dump, no job copy
and no journal line holds: what is stored of the message is what the person wrote and the
attachments' titles. The loader is called only when Mnemo answers the message, so nothing is
downloaded for the group messages it only reads.

What a platform says a file is proves nothing (an HTML page went to a model as `image/png`),
so the downloaded bytes are read for what they are (`checked_image`): an image type models
take, by its magic number, with its dimensions read from its header, never decoded here,
within a pixel cap (a small PNG that would unpack to gigabytes is refused before any model
server decodes it).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

# What OpenAI's chat API (and the servers copying it) takes as an image part, by Pillow's
# format name; others (SVG, HEIC, TIFF, ...) stay titles.
MODEL_IMAGE_FORMATS = {
    "JPEG": "image/jpeg",
    "PNG": "image/png",
    "WEBP": "image/webp",
    "GIF": "image/gif",
}
MODEL_IMAGE_TYPES = frozenset(MODEL_IMAGE_FORMATS.values())
# Pixels an image may have: a 48-megapixel phone photo (8064 x 6048) fits; what a model server
# would unpack from more (four bytes a pixel) is not worth a reply.
MAX_IMAGE_PIXELS = 50_000_000


@dataclass(frozen=True)
class ImageBytes:
    """One downloaded image."""

    data: bytes
    media_type: str  # "image/jpeg", "image/png", ...


class UnusableImage(ValueError):
    """Bytes that are not an image a model may be sent; the message says why, for the log."""


def checked_image(data: bytes, *, max_pixels: int = MAX_IMAGE_PIXELS) -> ImageBytes:
    """`data` as an image for a model, its type the one its bytes show (whatever the platform
    said); raises `UnusableImage` for anything else: no image a model takes, a header that
    does not read, or more than `max_pixels`."""
    try:
        with warnings.catch_warnings():
            # Pillow warns of (and past twice its own limit, refuses) a decompression bomb
            # when it reads the header; the cap below is ours, and lower.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(MODEL_IMAGE_FORMATS)) as image:
                kind, (width, height) = image.format, image.size
    except Image.DecompressionBombError:
        raise UnusableImage(f"over {max_pixels:,} pixels") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        # SyntaxError is how some of Pillow's format readers refuse a broken header.
        raise UnusableImage("its bytes are no image models take") from None
    if kind not in MODEL_IMAGE_FORMATS or width <= 0 or height <= 0:
        raise UnusableImage("its bytes are no image models take")
    if width * height > max_pixels:
        raise UnusableImage(f"{width} x {height} pixels, over {max_pixels:,}")
    return ImageBytes(data, MODEL_IMAGE_FORMATS[kind])


# Downloads the message's images (within the operator's limits) when first called; what it
# could not download is left out, so a reply never fails for an image.
ImageLoader = Callable[[], Awaitable[tuple[ImageBytes, ...]]]

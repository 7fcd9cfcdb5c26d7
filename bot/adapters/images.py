"""A message's images for a model that sees them: chosen within the operator's limits when the
message arrives, downloaded through the platform's own library only when Mnemo answers it.

Each platform lists the images a message carries (`ImageFile`: what the platform says about
the file and how to download it); `image_loader` keeps those within the limits and returns
the loader an adapter attaches to the message (`Memory.carry_images`, bot/domain/images.py).
What is left out is logged, and its attachment keeps its title in the stored message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.config.platforms import PlatformSettings
from bot.domain.images import ImageBytes, ImageLoader

log = logging.getLogger(__name__)

# What OpenAI's chat API (and the servers copying it) takes as an image part; others (SVG,
# HEIC, TIFF, ...) stay titles.
MODEL_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
MEGABYTE = 1024 * 1024
# A download that takes longer is given up: the reply goes on without the image.
DOWNLOAD_SECONDS = 30.0


@dataclass(frozen=True)
class ImageLimits:
    """How many images of one message, and how large each, go to the model."""

    count: int
    max_bytes: int

    @classmethod
    def of(cls, settings: PlatformSettings) -> ImageLimits | None:
        """The limits, or None when the model does not see images (nothing is downloaded)."""
        if not settings.model_sees_images or settings.max_images == 0:
            return None
        return cls(settings.max_images, int(settings.max_image_mb * MEGABYTE))


@dataclass(frozen=True)
class ImageFile:
    """One image a message carries: its name for the log, its type and size as the platform
    says (size None: unknown until downloaded), and how to download it."""

    name: str
    media_type: str | None
    size: int | None
    download: Callable[[], Awaitable[bytes]]


def media_type_of(content_type: str | None) -> str | None:
    """ "image/png; charset=..." -> "image/png"; None for anything but an image."""
    if not content_type:
        return None
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind if kind.startswith("image/") else None


def image_loader(
    files: Sequence[ImageFile], limits: ImageLimits | None, *, where: str
) -> ImageLoader | None:
    """The loader for the images within `limits` (None: none to send). `where` names the
    message in the log lines (an id, never its text)."""
    if limits is None:
        return None
    chosen: list[ImageFile] = []
    for file in files:
        if file.media_type not in MODEL_IMAGE_TYPES:
            log.info(
                "image %s of %s left out: %s is not a type models take",
                file.name,
                where,
                file.media_type,
            )
        elif file.size is not None and file.size > limits.max_bytes:
            _too_large(file, file.size, limits, where)
        elif len(chosen) == limits.count:
            log.info("image %s of %s left out: over %d images", file.name, where, limits.count)
        else:
            chosen.append(file)
    if not chosen:
        return None
    loaded: list[tuple[ImageBytes, ...]] = []

    async def load() -> tuple[ImageBytes, ...]:
        # Downloaded once: a reply asked again (bot/llm/reply_checks.py) sends the same bytes.
        if not loaded:
            found = await asyncio.gather(*(_download(file, limits, where) for file in chosen))
            loaded.append(tuple(image for image in found if image is not None))
        return loaded[0]

    return load


async def _download(file: ImageFile, limits: ImageLimits, where: str) -> ImageBytes | None:
    try:
        async with asyncio.timeout(DOWNLOAD_SECONDS):
            data = await file.download()
    except Exception as error:  # the platform's errors vary; a reply never fails for an image
        log.warning(
            "image %s of %s left out: the download failed (%s)",
            file.name,
            where,
            type(error).__name__,
        )
        return None
    if len(data) > limits.max_bytes:
        _too_large(file, len(data), limits, where)
        return None
    assert file.media_type is not None  # chosen only when a type models take
    return ImageBytes(bytes(data), file.media_type)


def _too_large(file: ImageFile, size: int, limits: ImageLimits, where: str) -> None:
    log.info(
        "image %s of %s left out: %d bytes, over the %.1f MB limit",
        file.name,
        where,
        size,
        limits.max_bytes / MEGABYTE,
    )

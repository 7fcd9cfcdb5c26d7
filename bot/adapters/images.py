"""A message's images for a model that sees them: chosen within the operator's limits when the
message arrives, downloaded only when Mnemo answers it, and only as far as the size limit.

Each platform lists the images a message carries (`ImageFile`: what the platform says about
the file and how to read its bytes as they arrive); `image_loader` keeps those within the
limits and returns the loader an adapter attaches to the message (`Memory.carry_images`,
bot/domain/images.py). A download is read chunk by chunk and given up as soon as it passes
the size limit, whatever size the platform declared, or none (Telegram often gives none): a
40 MB file is never fetched whole to be refused. What arrives is checked for what its bytes
are (`checked_image`) before any model sees it. What is left out is logged, and its
attachment keeps its title in the stored message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass

import aiohttp

from bot.config.platforms import PlatformSettings
from bot.domain.images import (
    MODEL_IMAGE_TYPES,
    ImageBytes,
    ImageLoader,
    UnusableImage,
    checked_image,
)

log = logging.getLogger(__name__)

MEGABYTE = 1024 * 1024
# A download that takes longer is given up: the reply goes on without the image.
DOWNLOAD_SECONDS = 30.0
# Bytes read at a time from a download.
CHUNK_BYTES = 64 * 1024

# A file's bytes as they arrive; closed (aclose) when the reader stops early, which closes
# the download's connection.
Chunks = Callable[[], AsyncGenerator[bytes, None]]


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
    says (size None: unknown until downloaded), and how to read its bytes."""

    name: str
    media_type: str | None
    size: int | None
    chunks: Chunks


class TooLarge(Exception):
    """A download passed the size limit (and was given up there)."""


async def read_capped(chunks: AsyncGenerator[bytes, None], limit: int) -> bytes:
    """The bytes `chunks` gives, or `TooLarge` as soon as they pass `limit` (the rest is
    never read: the generator is closed, and with it the download)."""
    data = bytearray()
    async with aclosing(chunks):
        async for chunk in chunks:
            data += chunk
            if len(data) > limit:
                raise TooLarge
    return bytes(data)


async def http_chunks(url: str) -> AsyncGenerator[bytes, None]:
    """The body at `url` as it arrives (aiohttp; discord.py and python-telegram-bot only read a
    file whole). An HTTP error status raises `aiohttp.ClientResponseError`. `url` may hold a
    secret (Telegram's file URLs hold the bot token): it is never logged here."""
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        response.raise_for_status()
        async for chunk in response.content.iter_chunked(CHUNK_BYTES):
            yield chunk


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
            data = await read_capped(file.chunks(), limits.max_bytes)
    except TooLarge:
        # Given up at the limit: the file's real size was never read, only that it is more.
        _too_large(file, f"more than {limits.max_bytes}", limits, where)
        return None
    except Exception as error:  # the platform's errors vary; a reply never fails for an image
        log.warning(
            "image %s of %s left out: the download failed (%s)", file.name, where, _failure(error)
        )
        return None
    try:
        # Its type is what its bytes are (a JPEG the platform called a PNG goes as a JPEG).
        return checked_image(data)
    except UnusableImage as why:
        log.info("image %s of %s left out: %s", file.name, where, why)
        return None


def _failure(error: BaseException) -> str:
    """Why a download failed, for the log: never the URL (a Telegram file URL holds the token)."""
    if isinstance(error, aiohttp.ClientResponseError):
        return f"HTTP {error.status}"
    return type(error).__name__


def _too_large(file: ImageFile, size: int | str, limits: ImageLimits, where: str) -> None:
    log.info(
        "image %s of %s left out: %s bytes, over the %.1f MB limit",
        file.name,
        where,
        size,
        limits.max_bytes / MEGABYTE,
    )

"""An image is what its bytes are (bot/domain/images.py): the type a model is told comes from
the magic number, the size from the header (never decoded), and past the pixel cap or
outside the types models take, the bytes are refused with the reason."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from bot.domain.images import MAX_IMAGE_PIXELS, UnusableImage, checked_image


def saved(kind: str, size: tuple[int, int] = (16, 12)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(out, kind)
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG claiming `width` x `height` in its header, with the first row's pixels only: what
    a decompression bomb looks like up to its pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    first_row = zlib.compress(bytes(1 + 3 * width))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", first_row)
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("kind", "media_type"),
    [("JPEG", "image/jpeg"), ("PNG", "image/png"), ("WEBP", "image/webp"), ("GIF", "image/gif")],
)
def test_the_types_models_take_pass_with_the_type_their_bytes_show(
    kind: str, media_type: str
) -> None:
    data = saved(kind)
    image = checked_image(data)
    assert (image.media_type, image.data) == (media_type, data)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"<!doctype html><html><body>hello</body></html>", "no image models take"),
        (b"", "no image models take"),
        (saved("BMP"), "no image models take"),  # an image, but no type models take
        (saved("PNG")[:20], "no image models take"),  # cut inside its header
        (png_header_only(100_000, 100_000), "over 50,000,000 pixels"),  # past Pillow's own cap
        (png_header_only(10_000, 10_000), "10000 x 10000 pixels, over 50,000,000"),
    ],
    ids=["html", "empty", "bmp", "cut-header", "gigapixel-bomb", "100-megapixels"],
)
def test_what_is_no_image_a_model_takes_or_too_many_pixels_is_refused_saying_why(
    data: bytes, why: str
) -> None:
    with pytest.raises(UnusableImage, match=why):
        checked_image(data)


def test_the_pixel_cap_lets_a_48_megapixel_photo_through() -> None:
    assert MAX_IMAGE_PIXELS >= 8064 * 6048
    assert checked_image(png_header_only(8064, 6048)).media_type == "image/png"

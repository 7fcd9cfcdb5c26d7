"""The images of the message being answered, as image parts of the reply's model request.

Only the reply to the message that carried them gets them (an adapter attaches the loader to
that message only: bot/domain/images.py); evaluations read the stored message, which never
holds them, and the prompts of later messages show the attachment's title alone.
"""

from __future__ import annotations

from bot.domain.images import ImageBytes
from bot.domain.records import Memory


async def images_for_reply(memory: Memory) -> tuple[ImageBytes, ...]:
    """Downloaded on the first call, the same bytes after (a reply asked again)."""
    if memory.images is None:
        return ()
    return await memory.images()

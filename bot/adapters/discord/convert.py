"""Discord objects into Mnemo's models: pure functions, no network.

`to_memory` has the signature every platform's has (see bot/adapters/base.py): the platform's
message, who the bot is, the agent's id, and when it arrived; it returns an `Incoming` or None.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

import discord

from bot.adapters.base import Incoming
from bot.adapters.images import ImageFile, http_chunks, media_type_of
from bot.adapters.voice import VoiceFile
from bot.domain.quotes import Quoted, at_hand
from bot.domain.records import (
    Account,
    Attachment,
    Content,
    Memory,
    Room,
    account_id,
    message_id,
    room_id,
    world_id,
)

PLATFORM = "discord"
# Only these are people talking; joins, pins, boosts, thread notices… are system messages.
_CHAT_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


def intents() -> discord.Intents:
    """What Mnemo needs: guilds (channels, roles), guild and DM messages, and their text."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    # Privileged: without it, guild messages that do not mention the bot arrive empty.
    wanted.message_content = True
    return wanted


def world_of(guild_id: int | None, channel_id: int) -> str:
    """A guild is a world; a DM is its own world (snowflakes never collide across kinds)."""
    return world_id(PLATFORM, guild_id if guild_id is not None else channel_id)


def account_of(user: discord.abc.User) -> Account:
    # The account is shared by every server, so it carries the global name: a nickname set
    # in one server must not show up in another's prompts.
    return Account(
        id=account_id(PLATFORM, user.id),
        platform=PLATFORM,
        platform_id=str(user.id),
        name=user.global_name or user.name,
        username=user.name,
        is_bot=user.bot,
    )


def to_memory(
    message: discord.Message,
    me: discord.abc.User,
    *,
    agent_id: str,
    received_at: datetime | None = None,
) -> Incoming | None:
    """The message as Mnemo sees it, or None for anything Mnemo must not read: its own
    messages, other bots and webhooks, system messages, and empty messages.

    `received_at` is not needed: Discord timestamps are precise to the millisecond.
    """
    bot_user = me
    author = message.author
    if author.id == bot_user.id or author.bot or message.webhook_id is not None:
        return None
    if message.type not in _CHAT_TYPES:
        return None
    # clean_content shows mentions as @Name, which the model can read.
    text = message.clean_content.strip()
    attachments = [_attachment(a) for a in message.attachments]
    if not text and not attachments:
        return None
    guild_id = _guild_id(message)
    channel_id = message.channel.id
    room = Room(
        id=room_id(PLATFORM, channel_id),
        world_id=world_of(guild_id, channel_id),
        platform=PLATFORM,
        kind="dm" if guild_id is None else "group",
        name=_channel_name(message),
        platform_id=str(channel_id),
    )
    reference = message.reference
    in_reply_to = None
    if reference is not None and reference.message_id is not None:
        in_reply_to = message_id(PLATFORM, reference.channel_id or channel_id, reference.message_id)
    others = [u for u in message.mentions if u.id != bot_user.id]
    memory = Memory(
        id=message_id(PLATFORM, channel_id, message.id),
        user_id=account_id(PLATFORM, author.id),
        agent_id=agent_id,
        room_id=room.id,
        world_id=room.world_id,
        content=Content(
            text=text,
            source=PLATFORM,
            url=message.jump_url,
            in_reply_to=in_reply_to,
            attachments=attachments,
        ),
        created_at=message.created_at,
        mentions=[account_id(PLATFORM, u.id) for u in others],
        mentions_agent=_mentions_bot(message, bot_user),
        replies_to_agent=_replies_to(message, bot_user),
    )
    if reference is not None:
        # The gateway usually delivers the message replied to; when not, the adapter fetches it.
        replied = reference.resolved or reference.cached_message
        if isinstance(replied, discord.Message):
            memory.carry_quote(at_hand(quote_of(replied, bot_user, agent_id)))
    return Incoming(memory, account_of(author), room, tuple(account_of(u) for u in others))


def quote_of(replied: discord.Message, me: discord.abc.User, agent_id: str) -> Quoted | None:
    """A message replied to, as prompts show it beside the reply; None without words."""
    text = replied.clean_content.strip()
    if not text:
        return None
    if replied.author.id == me.id:
        return Quoted(agent_id, text)
    author = replied.author
    return Quoted(account_id(PLATFORM, author.id), text, name=author.global_name or author.name)


def _guild_id(message: discord.Message) -> int | None:
    if message.guild is not None:
        return message.guild.id
    # A guild not (yet) in the cache still marks the message as a guild message.
    return getattr(message.channel, "guild_id", None)


def _channel_name(message: discord.Message) -> str:
    channel = message.channel
    name = getattr(channel, "name", None)
    if name:
        return f"#{name}"
    return f"DM with {message.author.display_name}"


def _attachment(attachment: discord.Attachment) -> Attachment:
    # Metadata only: the file stays on Discord's CDN.
    return Attachment(
        id=str(attachment.id),
        url=attachment.url,
        title=attachment.filename,
        content_type=attachment.content_type,
        size=attachment.size,
    )


def images_of(message: discord.Message) -> list[ImageFile]:
    """The message's attachments whose type is an image, each read from Discord's CDN only
    when called, and only as far as the size limit (`Attachment.read` reads it whole)."""
    return [
        ImageFile(a.filename, media_type, a.size, partial(http_chunks, a.url))
        for a in message.attachments
        if (media_type := media_type_of(a.content_type))
    ]


def voice_of(message: discord.Message) -> VoiceFile | None:
    """The message's voice message (Discord's flag, an audio attachment), read from Discord's
    CDN only when called, and only as far as the size limit; None when it is not one."""
    if not message.flags.voice:
        return None
    for attachment in message.attachments:
        if (attachment.content_type or "").lower().startswith("audio/"):
            chunks = partial(http_chunks, attachment.url)
            return VoiceFile(attachment.filename, attachment.content_type, attachment.size, chunks)
    return None


def _mentions_bot(message: discord.Message, bot_user: discord.abc.User) -> bool:
    if any(user.id == bot_user.id for user in message.mentions):
        return True
    # @Mnemo may pick the role Discord made for the bot instead of the bot itself.
    return any(
        role.tags is not None and role.tags.bot_id == bot_user.id for role in message.role_mentions
    )


def _replies_to(message: discord.Message, bot_user: discord.abc.User) -> bool:
    reference = message.reference
    if reference is None:
        return False
    replied = reference.resolved or reference.cached_message
    return isinstance(replied, discord.Message) and replied.author.id == bot_user.id

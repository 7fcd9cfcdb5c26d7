"""Telegram objects into Mnemo's models: pure functions, no network.

`to_memory` has the signature every platform's has (see bot/adapters/base.py): the platform's
message, who the bot is, the agent's id, and when it arrived; it returns an `Incoming` or None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from telegram import Chat, Message, MessageEntity, User
from telegram.constants import ChatType

from bot.adapters.base import Incoming
from bot.adapters.images import media_type_of
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
    to_millis,
    world_id,
)

PLATFORM = "telegram"


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is on Telegram, and whom it knows: `usernames` maps the lower-case
    usernames seen so far to user ids, so `@name` mentions of people become account ids."""

    user_id: int
    username: str
    usernames: Mapping[str, int] = field(default_factory=dict)


def account_of(user: User) -> Account:
    return Account(
        id=account_id(PLATFORM, user.id),
        platform=PLATFORM,
        platform_id=str(user.id),
        name=user.full_name,
        username=user.username,
        is_bot=user.is_bot,
    )


def room_of(chat: Chat) -> Room:
    """A group or supergroup is its own world; so is a private chat, where nothing learned
    is ever shown anywhere else."""
    private = chat.type == ChatType.PRIVATE
    return Room(
        id=room_id(PLATFORM, chat.id),
        world_id=world_id(PLATFORM, chat.id),
        platform=PLATFORM,
        kind="dm" if private else "group",
        name=chat.full_name if private else chat.title,
        platform_id=str(chat.id),
    )


def to_memory(
    message: Message,
    me: BotIdentity,
    *,
    agent_id: str,
    received_at: datetime | None = None,
    edited: bool = False,
) -> Incoming | None:
    """The message as Mnemo sees it, or None for what Mnemo ignores: its own and other bots'
    messages, edits (unless `edited`: the message as it reads after one), channel posts,
    service messages (joins, pins, title changes, ...) and messages with neither text nor an
    attachment.

    `received_at` orders messages sent within the same second (Telegram dates have
    one-second resolution).
    """
    if message.edit_date is not None and not edited:
        return None
    if message.chat.type == ChatType.CHANNEL or message.is_automatic_forward:
        return None
    user = message.from_user
    if user is None or user.is_bot or user.id == me.user_id:
        return None
    text = message.text or message.caption or ""
    attachments = _attachments(message)
    if not text.strip() and not attachments:
        return None
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    mentions_agent, mentioned, profiles = _mentions(entities, me)
    reply = _replied_to(message)
    created = to_millis(message.date)
    if received_at is not None:
        created = max(created, to_millis(received_at))
    memory = Memory(
        id=message_id(PLATFORM, message.chat.id, message.message_id),
        user_id=account_id(PLATFORM, user.id),
        agent_id=agent_id,
        room_id=room_id(PLATFORM, message.chat.id),
        world_id=world_id(PLATFORM, message.chat.id),
        content=Content(
            text=text,
            source=PLATFORM,
            url=message.link,
            in_reply_to=None
            if reply is None
            else message_id(PLATFORM, message.chat.id, reply.message_id),
            attachments=attachments,
        ),
        created_at=created,
        mentions=mentioned,
        mentions_agent=mentions_agent,
        replies_to_agent=reply is not None
        and reply.from_user is not None
        and reply.from_user.id == me.user_id,
    )
    # The update carries the message replied to: shown beside this one when it is not stored.
    memory.carry_quote(at_hand(_quote_of(message, reply, me, agent_id)))
    # The language the sender's app is set to: the bot's own lines to them are in it.
    memory.carry_locale(user.language_code)
    return Incoming(memory, account_of(user), room_of(message.chat), profiles)


def _quote_of(
    message: Message, reply: Message | None, me: BotIdentity, agent_id: str
) -> Quoted | None:
    """The message replied to as the update delivers it: the part the person picked to quote
    (Telegram's `quote`), else its whole text or caption."""
    if reply is None or reply.from_user is None:
        return None
    picked = message.quote.text if message.quote is not None else None
    text = picked or reply.text or reply.caption or ""
    if not text.strip():
        return None
    author = reply.from_user
    if author.id == me.user_id:
        return Quoted(agent_id, text)
    return Quoted(account_id(PLATFORM, author.id), text, name=author.full_name)


def _replied_to(message: Message) -> Message | None:
    reply = message.reply_to_message
    # In forum groups every message "replies" to its topic's opening service message.
    if reply is None or reply.forum_topic_created is not None:
        return None
    return reply


def _mentions(
    entities: Mapping[MessageEntity, str], me: BotIdentity
) -> tuple[bool, list[str], tuple[Account, ...]]:
    """Whether the bot is mentioned; the account ids of the people who are (by @username when
    known); and the profiles of those mentioned by a text mention, which carries the user
    (an @username alone does not say a person's name)."""
    to_agent = False
    ids: list[str] = []
    profiles: list[Account] = []
    for entity, text in entities.items():
        user_id: int | None = None
        if entity.type == MessageEntity.MENTION:
            name = text.removeprefix("@").casefold()
            if name == me.username.casefold():
                to_agent = True
                continue
            user_id = me.usernames.get(name)
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            user_id = entity.user.id
            if user_id == me.user_id:
                to_agent = True
                continue
            profiles.append(account_of(entity.user))
        if user_id is not None and (account := account_id(PLATFORM, user_id)) not in ids:
            ids.append(account)
    return to_agent, ids, tuple(profiles)


def _attachments(message: Message) -> list[Attachment]:
    """Metadata only: files are never downloaded."""
    found: list[Attachment] = []
    if message.photo:
        largest = message.photo[-1]
        found.append(
            Attachment(id=largest.file_id, content_type="image/jpeg", size=largest.file_size)
        )
    for media in (message.document, message.video, message.audio, message.voice):
        if media is not None:
            found.append(
                Attachment(
                    id=media.file_id,
                    title=getattr(media, "file_name", None),
                    content_type=getattr(media, "mime_type", None),
                    size=media.file_size,
                )
            )
    return found


@dataclass(frozen=True)
class TelegramImage:
    """An image a message carries, as Telegram describes it (downloaded by the adapter)."""

    file_id: str
    media_type: str | None
    size: int | None
    name: str


def images_of(message: Message, max_bytes: int) -> list[TelegramImage]:
    """The images of a message a model may see: a photo in the largest size Telegram has
    within `max_bytes` (the smallest when none is: the limit then leaves it out), or a
    document sent as a file whose type is an image."""
    found: list[TelegramImage] = []
    if message.photo:
        fitting = [p for p in message.photo if p.file_size is None or p.file_size <= max_bytes]
        photo = fitting[-1] if fitting else message.photo[0]  # sizes come smallest first
        found.append(TelegramImage(photo.file_id, "image/jpeg", photo.file_size, "photo"))
    document = message.document
    if document is not None and (media_type := media_type_of(document.mime_type)):
        name = document.file_name or "image"
        found.append(TelegramImage(document.file_id, media_type, document.file_size, name))
    return found


def author_of_reply(message: Message) -> int | None:
    reply = _replied_to(message)
    return None if reply is None or reply.from_user is None else reply.from_user.id


def text_mention(message: Message) -> User | None:
    """The first person mentioned by a text mention (people without a username)."""
    for entity in message.entities:
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            return entity.user
    return None

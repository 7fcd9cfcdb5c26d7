"""Telegram's side of the command layer (bot/commands/command_set.py): `/name args` messages become
`Request`s, the answer goes back in the chat, `/forgetme` asks with buttons, and the menu
lists the commands each person may use. Who is an admin: a configured admin id, or (when
MNEMO_TELEGRAM_GROUP_ADMINS is on) an administrator of the group the command is used in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cachetools import TTLCache
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeAllChatAdministrators,
    BotCommandScopeChat,
    BotCommandScopeDefault,
    Chat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    MessageEntity,
    Update,
)
from telegram.constants import ChatType
from telegram.error import Forbidden, TelegramError

from bot.adapters.telegram.convert import (
    PLATFORM,
    account_of,
    author_of_reply,
    room_of,
    text_mention,
)
from bot.adapters.telegram.markdown import answer_html
from bot.adapters.telegram.send import HTML
from bot.commands.command_set import (
    FORGET_ME_PROMPT,
    Answer,
    CommandInfo,
    Commands,
    Request,
    admin_accounts,
    command_parts,
)
from bot.config.settings import PlatformSettings
from bot.domain.records import account_id
from bot.i18n import N_, Texts, available_languages, texts_for

log = logging.getLogger(__name__)

# The layer's words, as on every surface; the buttons (or "/forgetme yes") confirm. In
# English, shown in the asker's language (bot/i18n).
SURE = N_("Sure?")
FORGET_PROMPT = f"{FORGET_ME_PROMPT} {SURE}"  # in English; each language's is made alike
FORGET_DATA = re.compile(r"^forgetme:(yes|no):(-?\d+)$")
SENT_PRIVATELY = N_("I sent it to you in a private message.")
START_A_CHAT = N_(
    "I can't write to you privately yet: open a chat with {bot}, press Start, then ask again."
)
PRIVATE_FAILED = N_("Sorry, I could not send it to you privately; please try again in a moment.")
# What `_send_private` did.
SENT, NOT_STARTED, FAILED = "sent", "not started", "failed"
CAPTION_LIMIT = 1024  # Telegram's limit for a document's caption
TEXT_LIMIT = 4096
# The groups whose administrators are cached at once (each for `admin_cache_seconds`).
GROUPS_CACHED = 4096


class Chats(Protocol):
    """What the commands need of the adapter: its bot and a way to send into a chat."""

    @property
    def bot(self) -> Bot | None: ...

    async def send(
        self,
        chat_id: int,
        text: str,
        reply_to: int | None = None,
        thread: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
        *,
        answer: bool = False,
    ) -> Message | None: ...


class TelegramCommands:
    def __init__(
        self,
        commands: Commands,
        settings: PlatformSettings,
        chats: Chats,
        *,
        usernames: Mapping[str, int],
        bot_user_id: Callable[[], int],
        admin_cache_seconds: float = 60.0,
    ) -> None:
        self.commands = commands
        self.settings = settings
        self.chats = chats
        self.admin_cache_seconds = admin_cache_seconds
        self._usernames = usernames
        self._bot_user_id = bot_user_id
        self._admins = admin_accounts(settings, PLATFORM)
        # Each group's administrators, asked again after `admin_cache_seconds`; expired groups
        # are dropped (a plain dict kept every group the bot ever checked), at most
        # GROUPS_CACHED at once.
        self._group_admins: TTLCache[int, frozenset[int]] = TTLCache(
            maxsize=GROUPS_CACHED, ttl=admin_cache_seconds
        )

    def names(self) -> list[str]:
        """Every command name PTB should route here (`/start` is Telegram's way in)."""
        return ["start", *(info.name for info in self.commands.all())]

    async def on_command(self, message: Message) -> None:
        user = message.from_user
        assert user is not None
        name, args = command_parts(message.text or "")
        account, room = account_of(user), room_of(message.chat)
        await self.commands.services.note_profiles([account], room)
        is_admin = await self._is_admin(user.id, message.chat)
        if name == "start":
            name = "help"
        mentioned = text_mention(message)
        if mentioned is not None:
            # The mention's text is a name, not search words: the person is the subject.
            for entity, shown in message.parse_entities([MessageEntity.TEXT_MENTION]).items():
                if entity.user is not None and entity.user.id == mentioned.id:
                    args = args.replace(shown, " ", 1).strip()
        author = author_of_reply(message)
        request = Request(
            platform=PLATFORM,
            account_id=account.id,
            world_id=room.world_id,
            room_id=room.id,
            is_admin=is_admin,
            args=args,
            subject_id=None if mentioned is None else account_id(PLATFORM, mentioned.id),
            replied_to=(
                None
                if author is None or author == self._bot_user_id()
                else account_id(PLATFORM, author)
            ),
            resolve_person=self._resolve_person,
            locale=user.language_code,
        )
        reply_to = message.message_id if room.kind == "group" else None
        thread = message.message_thread_id if message.is_topic_message else None
        if name == "forgetme" and args.lower() not in ("yes", "y", "confirm"):
            await self._ask_to_forget(message, await self.commands.texts(request), reply_to, thread)
            return
        answer = await self.commands.run(name, request)
        if answer.private or answer.attachment is not None:
            texts = await self.commands.texts(request)
            await self._deliver_privately(message, answer, texts, reply_to, thread)
            return
        # Rendered as replies are (HTML), with the ids in it as code, not literal backticks.
        await self.chats.send(message.chat.id, answer.text, reply_to, thread, answer=True)

    async def _deliver_privately(
        self,
        message: Message,
        answer: Answer,
        texts: Texts,
        reply_to: int | None,
        thread: int | None,
    ) -> None:
        """An answer for the asker only goes to their private chat with the bot; asked in a
        group, the group is told where it went (or how to let the bot write to them)."""
        user = message.from_user
        assert user is not None
        in_private = message.chat.type == ChatType.PRIVATE
        # A private chat's id is the user's id: the bot may write there once they started it.
        outcome = await self._send_private(user.id, answer)
        if outcome == SENT:
            if not in_private:
                sent = texts.gettext(SENT_PRIVATELY)
                await self.chats.send(message.chat.id, sent, reply_to, thread)
            return
        text = (
            texts.gettext(START_A_CHAT).format(bot=self._bot_username())
            if outcome == NOT_STARTED
            else texts.gettext(PRIVATE_FAILED)
        )
        await self.chats.send(message.chat.id, text, reply_to, thread)

    async def _send_private(self, user_id: int, answer: Answer) -> str:
        bot = self.chats.bot
        if bot is None:
            return FAILED
        try:
            if answer.attachment is None:
                for part in answer_html(answer.text):
                    await bot.send_message(user_id, part, parse_mode=HTML)
                return SENT
            caption = answer.text if len(answer.text) <= CAPTION_LIMIT else None
            if caption is None:
                await bot.send_message(user_id, answer.text[:TEXT_LIMIT])
            await bot.send_document(
                user_id,
                InputFile(answer.attachment.data, filename=answer.attachment.filename),
                caption=caption,
            )
        except Forbidden as error:
            # "bot can't initiate conversation with a user", or they blocked the bot.
            log.info("telegram: cannot write to user %s privately (%s)", user_id, error)
            return NOT_STARTED
        except TelegramError as error:
            log.warning("telegram: sending a private answer failed (%s)", error)
            return FAILED
        return SENT

    def _bot_username(self) -> str:
        bot = self.chats.bot
        try:
            username = None if bot is None else bot.username
        except RuntimeError:  # PTB: the bot is not initialised (never asked getMe)
            username = None
        return f"@{username}" if username else "me"

    async def _ask_to_forget(
        self, message: Message, texts: Texts, reply_to: int | None, thread: int | None
    ) -> None:
        user = message.from_user
        assert user is not None
        yes, no = texts.gettext("Yes, forget me"), texts.gettext("No")
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(yes, callback_data=f"forgetme:yes:{user.id}"),
                    InlineKeyboardButton(no, callback_data=f"forgetme:no:{user.id}"),
                ]
            ]
        )
        prompt = f"{texts.gettext(FORGET_ME_PROMPT)} {texts.gettext(SURE)}"
        await self.chats.send(message.chat.id, prompt, reply_to, thread, keyboard)

    async def on_forget_pressed(self, update: Update) -> None:
        query = update.callback_query
        bot = self.chats.bot
        if query is None or query.message is None or query.data is None or bot is None:
            return
        match = FORGET_DATA.match(query.data)
        if match is None:
            return
        choice, owner = match.group(1), int(match.group(2))
        chat = query.message.chat
        room = room_of(chat)
        # Whoever pressed: the answers below are theirs to read, in their language.
        request = Request(
            platform=PLATFORM,
            account_id=account_id(PLATFORM, query.from_user.id),
            world_id=room.world_id,
            room_id=room.id,
            is_admin=False,
            locale=query.from_user.language_code,
        )
        texts = await self.commands.texts(request)
        if not _offered(query.message, query.data):
            # A user-API client can send any data for any message: only a button the bot put
            # on this very message counts, or one person's data could answer (and overwrite)
            # another person's prompt.
            log.warning("telegram: callback data not offered by its message, ignored")
            await _answer(
                query, texts.gettext("This button is not valid here; send /forgetme again.")
            )
            return
        if query.from_user.id != owner:
            await _answer(query, texts.gettext("This button is for the person who asked."))
            return
        # Answered at once: Telegram shows a spinner on the button until then.
        pressed = texts.gettext("Forgetting…") if choice == "yes" else texts.gettext("Kept.")
        await _answer(query, pressed)
        if choice == "yes":
            text = await self.commands.forget_me(request)  # the owner pressed it
        else:
            text = texts.gettext("Okay, I'll keep remembering.")
        try:
            await bot.edit_message_text(text, chat_id=chat.id, message_id=query.message.message_id)
        except TelegramError as error:
            log.info("telegram: could not update the confirmation (%s); sending anew", error)
            await self.chats.send(chat.id, text)

    async def register_menu(self, bot: Bot) -> None:
        """The menu: everyone sees the user commands; admins see all of them. Once in the
        operator's language for everyone, then once per other language with a catalog, which
        Telegram shows to the people whose app is set to it."""
        default = self.commands.services.languages.default
        await self._register_menu(bot, texts_for(default), None)
        for language in available_languages():
            if language != default:
                await self._register_menu(bot, texts_for(language), language)

    async def _register_menu(self, bot: Bot, texts: Texts, language: str | None) -> None:
        listed = self.commands.all()

        def entry(info: CommandInfo) -> BotCommand:
            return BotCommand(info.name, texts.gettext(info.description))

        everyone = [entry(c) for c in listed if not c.admin_only]
        everything = everyone + [entry(c) for c in listed if c.admin_only]
        scopes: list[tuple[list[BotCommand], Any]] = [(everyone, BotCommandScopeDefault())]
        if self.settings.telegram_group_admins:
            scopes.append((everything, BotCommandScopeAllChatAdministrators()))
        admin_chats = sorted(int(i) for i in self.settings.admin_ids_for(PLATFORM) if i.isdigit())
        scopes += [(everything, BotCommandScopeChat(chat)) for chat in admin_chats]
        for commands, scope in scopes:
            try:
                await bot.set_my_commands(commands, scope=scope, language_code=language)
            except TelegramError as error:
                # E.g. an admin who never opened a chat with the bot: the menu is a nicety.
                log.info("telegram: could not set the command menu for %s (%s)", scope.type, error)

    async def _resolve_person(self, who: str) -> str | None:
        """The account id for `@username` or a numeric user id, if known."""
        who = who.strip()
        if who.isdigit():
            return account_id(PLATFORM, int(who))
        name = who.removeprefix("@").casefold()
        if name in self._usernames:
            return account_id(PLATFORM, self._usernames[name])
        store = self.commands.services.store
        account = await store.accounts.find_by_username(PLATFORM, name)
        return None if account is None else account.id

    async def _is_admin(self, user_id: int, chat: Chat) -> bool:
        if account_id(PLATFORM, user_id) in self._admins:
            return True
        if not self.settings.telegram_group_admins:
            return False
        if chat.type not in (ChatType.GROUP, ChatType.SUPERGROUP):
            return False
        return user_id in await self._administrators(chat.id)

    async def _administrators(self, chat_id: int) -> frozenset[int]:
        """The group's administrators, cached briefly: every admin command would ask again."""
        cached = self._group_admins.get(chat_id)
        if cached is not None:
            return cached
        bot = self.chats.bot
        if bot is None:
            return frozenset()
        try:
            members = await bot.get_chat_administrators(chat_id)
        except TelegramError as error:
            log.warning("telegram: cannot list the administrators of %s (%s)", chat_id, error)
            return frozenset()
        ids = frozenset(member.user.id for member in members)
        self._group_admins[chat_id] = ids
        return ids


async def _answer(query: Any, text: str) -> None:
    try:
        await query.answer(text)
    except TelegramError as error:
        log.debug("telegram: answering a button press failed (%s)", error)


def _offered(message: object, data: str) -> bool:
    """Whether `data` is the callback data of a button on `message` (the message the press
    came from, as Telegram sends it: one too old to be accessible has no buttons)."""
    markup = getattr(message, "reply_markup", None)
    keyboard = getattr(markup, "inline_keyboard", None) or ()
    return any(button.callback_data == data for row in keyboard for button in row)

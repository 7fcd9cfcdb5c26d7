"""The Telegram adapter, on python-telegram-bot 22: lifecycle, messages in, replies out.

Telegram objects never leave this package: `convert.to_memory` turns them into Mnemo's
models, the runtime talks back through a `send` callback, and `commands.py` is Telegram's side
of the command layer. The PTB `Application` is driven by hand (initialize, start,
start_polling / start_webhook) rather than `run_polling()`, so it shares the event loop with
Discord and the scheduler.

Ordering: PTB hands updates over one at a time; each is put on its chat's lane (a FIFO queue
with one worker, bot/adapters/lanes.py), so a chat is answered in the order people wrote while
different chats are served at the same time. That is simpler to reason about than PTB's
`concurrent_updates` plus locks: a lock does not guarantee its waiters start in arrival order,
a queue does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from cachetools import FIFOCache
from telegram import Bot, InlineKeyboardMarkup, Message, Update
from telegram.error import (
    InvalidToken,
    NetworkError,
    TelegramError,
)
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_incrementing,
)

from bot.adapters.base import AdapterServices, Incoming
from bot.adapters.errors import PlatformError, PlatformStartupError
from bot.adapters.images import Chunks, ImageFile, ImageLimits, http_chunks, image_loader
from bot.adapters.lanes import RoomLanes
from bot.adapters.telegram.commands import FORGET_DATA, TelegramCommands
from bot.adapters.telegram.convert import PLATFORM, BotIdentity, images_of, to_memory
from bot.adapters.telegram.keeping import KeptFirst, proceed
from bot.adapters.telegram.send import ChatReplies, keep_typing, send_text
from bot.adapters.telegram.updates import PollingRequest, start_updates
from bot.adapters.telegram.webhook import WebhookServer
from bot.adapters.voice import Hearing, VoiceFile
from bot.cancelling import cancel_and_wait
from bot.commands.command_set import Commands
from bot.config.settings import PlatformSettings
from bot.domain.records import Memory, Room, utcnow
from bot.runtime.intake.intake import AtDoor
from bot.runtime.types import Send

log = logging.getLogger(__name__)

USERNAMES_KEPT = 50_000

TYPING_INTERVAL = 4.0  # Telegram shows "typing…" for 5 s per chat action
# Flood waits (429) the rate limiter waits out and retries before a send gives up.
FLOOD_RETRIES = 3
BAD_TOKEN = "telegram: the bot token was rejected (Unauthorized); check TELEGRAM_TOKEN"


# ---------------------------------------------------------------------- the adapter
class TelegramAdapter:
    name = PLATFORM

    def __init__(
        self,
        settings: PlatformSettings,
        *,
        base_url: str | None = None,
        poll_timeout: float = 10.0,
        learn_wait: float = 30.0,
        admin_cache_seconds: float = 60.0,
        typing_interval: float = TYPING_INTERVAL,
        stop_grace: float = 10.0,
        edit_interval: float | None = None,
    ) -> None:
        """`edit_interval`: seconds between two edits of a streamed reply (None: Telegram's
        pace for the chat, send.py)."""
        if settings.telegram_token is None:
            raise PlatformStartupError("telegram: TELEGRAM_TOKEN is not set")
        self.settings = settings
        self.base_url = base_url or settings.telegram_api_url  # a self-hosted Bot API server
        self.poll_timeout = poll_timeout
        # Before answering about what was learned, the chat learns for at most this long.
        self.learn_wait = learn_wait
        self.admin_cache_seconds = admin_cache_seconds
        self.typing_interval = typing_interval
        self.stop_grace = stop_grace
        self.edit_interval = edit_interval
        # The usernames seen (lower case) to user ids, for `@name` mentions; the least
        # recently seen go first past USERNAMES_KEPT.
        self._usernames: FIFOCache[str, int] = FIFOCache(maxsize=USERNAMES_KEPT)
        self._commands: TelegramCommands | None = None
        self._recovery: asyncio.Task[int] | None = None
        self._lanes: RoomLanes[int] = RoomLanes(PLATFORM)
        self._app: Application | None = None
        self._services: AdapterServices | None = None
        self._identity: BotIdentity | None = None
        self._closed = asyncio.Event()
        self._failure: str | None = None
        self._last_received = utcnow()
        # Webhook mode: the server Telegram POSTs to; what it may acknowledge (keeping.py).
        self._webhook: WebhookServer | None = None
        self._kept = KeptFirst(self.send)
        # None: the model does not see images, and none is ever downloaded.
        self._image_limits = ImageLimits.of(settings)
        self._hearing: Hearing | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def identity(self) -> BotIdentity:
        if self._identity is None:
            raise RuntimeError("the Telegram adapter is not started")
        return self._identity

    async def start(self, services: AdapterServices) -> None:
        """Log in, register the commands and start receiving updates; returns once running.

        Raises PlatformStartupError with one line (never the token) when that is impossible.
        """
        self._services = services
        # None: no transcription model, and voice notes are kept unheard.
        self._hearing = Hearing.of(services.transcriber, self.settings.max_voice_mb)
        self._commands = TelegramCommands(
            Commands(services.commands, learn_wait=self.learn_wait),
            self.settings,
            self,
            usernames=self._usernames,
            bot_user_id=lambda: self.identity.user_id,
            admin_cache_seconds=self.admin_cache_seconds,
        )
        app = self._build()
        self._app = app
        try:
            await self._initialize(app)
            me = app.bot.bot
            # Known before the first update arrives: every message is judged against it.
            self._identity = BotIdentity(me.id, me.username or "", self._usernames)
            await app.start()
            # Messages a crash left unanswered in Telegram chats are queued in their chats'
            # lanes before any update is fetched, so each chat is answered in the order its
            # people wrote (answered in the background: it takes model calls).
            self._recovery = asyncio.create_task(
                services.answer_unanswered(PLATFORM, self._sender_for, self._in_lane),
                name="telegram-recovery",
            )
            await asyncio.sleep(0)  # the recovery queues its chats' work now
            self._webhook = await start_updates(
                app, self.settings, poll_timeout=self.poll_timeout, kept=self._kept.acknowledged
            )
        except BaseException:
            if self._recovery is not None:
                self._recovery.cancel()
            await self._shutdown(app)
            self._app = None
            raise
        await self._require_commands().register_menu(app.bot)
        log.info("telegram: running as @%s", me.username)
        # Plugins may speak in a chat later, with no message to answer (a follow-up).
        services.plugin_rooms.connect(PLATFORM, lambda room: self._sender_for(room, None))

    async def stop(self) -> None:
        if self._services is not None:
            self._services.plugin_rooms.disconnect(PLATFORM)
        if self._recovery is not None and not self._recovery.done():
            self._recovery.cancel()
        app, self._app = self._app, None
        if app is None:
            return
        await self._shutdown(app)
        self._closed.set()
        log.info("telegram: stopped")

    async def wait_idle(self) -> None:
        """Wait until every update received so far has been handled (replies sent)."""
        if self._recovery is not None:
            await asyncio.wait([self._recovery])
        app = self._app
        if app is not None:
            await app.update_queue.join()
        await self._lanes.join()

    async def wait_closed(self) -> None:
        """Returns when the adapter stops; raises PlatformError if it stopped by failing."""
        await self._closed.wait()
        if self._failure is not None:
            raise PlatformError(self._failure)

    def _build(self) -> Application:
        token = self.settings.telegram_token
        assert token is not None
        builder = (
            ApplicationBuilder()
            .token(token.get_secret_value())
            # Mnemo schedules with its own APScheduler; PTB's job queue would be a second one.
            .job_queue(None)
            # Telegram's flood limits for every request (send.py).
            .rate_limiter(AIORateLimiter(max_retries=FLOOD_RETRIES))
            .get_updates_request(
                PollingRequest(self._token_rejected, self._fetched_kept, self._kept.unconfirmed)
            )
        )
        if self.settings.telegram_webhook_url is not None:
            builder = builder.updater(None)  # our own webhook server (webhook.py)
        if self.base_url is not None:
            base = self.base_url.rstrip("/")
            builder = builder.base_url(base).base_file_url(base.replace("/bot", "/file/bot"))
        app = builder.build()
        names = self._require_commands().names()
        app.add_handler(CommandHandler(names, self._on_command, filters.UpdateType.MESSAGE))
        app.add_handler(CallbackQueryHandler(self._on_callback, pattern=FORGET_DATA))
        # Commands for other bots (`/facts@otherbot`) and unknown ones fail both handlers.
        app.add_handler(MessageHandler(~filters.COMMAND, self._on_message))
        app.add_error_handler(self._on_error)
        return app

    async def _initialize(self, app: Application, attempts: int = 3) -> None:
        """Connect (getMe), trying an unreachable Bot API again after 1 s, then 2 s, ..."""

        def retrying_note(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            log.warning("telegram: Bot API unreachable (%s); retrying", _describe(error))

        problem: str | None = None
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(NetworkError),
                stop=stop_after_attempt(attempts),
                wait=wait_incrementing(start=1, increment=1),
                before_sleep=retrying_note,
                reraise=True,
            ):
                with attempt:
                    await app.initialize()
        except InvalidToken:
            # PTB's own message quotes the token: it is dropped here, and the one-line
            # error is raised outside this block so the original is not even its context.
            problem = BAD_TOKEN
        except NetworkError as error:
            problem = f"telegram: cannot reach the Bot API ({_describe(error)})"
        if problem is not None:
            raise PlatformStartupError(problem)

    async def _shutdown(self, app: Application) -> None:
        """Stop in reverse: no new updates, finish the chats in progress, then disconnect."""
        steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
        webhook, self._webhook = self._webhook, None
        if webhook is not None:
            steps.append(("webhook", webhook.stop))
        if app.updater is not None and app.updater.running:
            # Its last getUpdates confirms what was fetched, once it is kept (updates.py).
            steps.append(("updater", app.updater.stop))
        if app.running:
            # Hand what was fetched to the chats (PTB drops what is still queued when it stops).
            steps.append(("pending updates", lambda: asyncio.wait_for(app.update_queue.join(), 5)))
        steps.append(("chats", lambda: self._lanes.close(self.stop_grace)))
        if app.running:
            steps.append(("application", app.stop))
        steps.append(("connection", app.shutdown))
        for what, step in steps:
            try:
                await step()
            except Exception as error:
                log.warning("telegram: stopping the %s failed (%s)", what, _describe(error))

    def _token_rejected(self) -> None:
        if self._failure is None:
            self._failure = "telegram: the bot token was rejected (Unauthorized) while running"
            log.error(self._failure)
            self._closed.set()

    # ------------------------------------------------------------------ incoming
    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None:
            if update.edited_message is not None:
                self._on_edit(update.edited_message)
            return  # channel posts and the like: nothing to say or learn
        self._learn_usernames(message)
        incoming = to_memory(
            message,
            self.identity,
            agent_id=self._require_services().agent_id,
            received_at=self._received_at(),
        )
        if incoming is None:
            return
        if self._hearing is not None and message.voice is not None:
            # Heard before it is kept: the kept copy (and all that follows) is the words said.
            # PTB hands updates over one at a time, so this holds the next ones meanwhile,
            # for at most the download's and the model's time-outs.
            heard = await self._heard(message, incoming.memory, self._hearing)
            incoming = replace(incoming, memory=heard)
        self._carry_images(message, incoming)
        # Kept before Telegram is told it arrived (keeping.py), in its lane's order.
        services = self._require_services()
        kept = self._kept.start(services.keep_first, message, incoming)
        self._lanes.submit(message.chat.id, lambda: self._handle(message, incoming, kept))
        await self._kept.settle(update.update_id, kept)

    def _on_edit(self, message: Message) -> None:
        """A message edited: in its chat's lane (after the message itself is handled), the
        stored words follow the edit and are learned from again; nothing is answered."""
        services = self._require_services()
        incoming = to_memory(message, self.identity, agent_id=services.agent_id, edited=True)
        if incoming is None:
            return
        memory = incoming.memory

        async def apply() -> None:
            try:
                await services.edited(memory)
            except Exception as error:  # the database away: the edit is not applied
                log.warning(
                    "telegram: the edit of message %s/%s was not applied (%s)",
                    message.chat.id,
                    message.message_id,
                    _describe(error),
                )

        self._lanes.submit(message.chat.id, apply)

    def _carry_images(self, message: Message, incoming: Incoming) -> None:
        """With a model that sees images: how to download the message's photo or image file,
        called only if Mnemo answers it (bot/adapters/images.py)."""
        limits = self._image_limits
        if limits is None:
            return
        files = [
            ImageFile(image.name, image.media_type, image.size, _downloader(message, image.file_id))
            for image in images_of(message, limits.max_bytes)
        ]
        where = f"telegram message {message.chat.id}/{message.message_id}"
        incoming.memory.carry_images(image_loader(files, limits, where=where))

    @staticmethod
    async def _heard(message: Message, memory: Memory, hearing: Hearing) -> Memory:
        """`memory` with its voice note's words as its text (bot/adapters/voice.py)."""
        voice = message.voice
        assert voice is not None
        name = f"voice-{voice.file_unique_id}.ogg"
        where = f"telegram message {message.chat.id}/{message.message_id}"
        chunks = _downloader(message, voice.file_id)
        file = VoiceFile(name, voice.mime_type, voice.file_size, chunks)
        return await hearing.heard(memory, file, where=where)

    async def _fetched_kept(self) -> None:
        """Before a getUpdates call confirms what was fetched: every fetched update handled."""
        app = self._app
        if app is not None and app.running:
            await app.update_queue.join()

    async def _handle(self, message: Message, incoming: Incoming, kept: Awaitable[AtDoor]) -> None:
        if not await proceed(kept):
            return  # journaled (the replay answers it), refused, or not kept (sent again)
        services = self._require_services()
        reply_to = message.message_id if incoming.room.kind == "group" else None
        thread = message.message_thread_id if message.is_topic_message else None
        replied = asyncio.Event()
        # Only the first reply quotes the message; the rest follow it.
        replies = ChatReplies(
            self, message.chat.id, thread, reply_to, replied, edit_interval=self.edit_interval
        )
        await services.note_profiles(incoming.mentioned)
        await services.handle(
            incoming.memory,
            replies.sender(),
            typing=lambda: self._typing(message.chat.id, thread, replied),
            account=incoming.account,
            room=incoming.room,
        )

    async def _on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return
        self._learn_usernames(message)
        commands = self._require_commands()
        self._lanes.submit(message.chat.id, lambda: commands.on_command(message))

    async def _on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None or query.message is None:
            return
        commands = self._require_commands()
        self._lanes.submit(query.message.chat.id, lambda: commands.on_forget_pressed(update))

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram: error while handling an update: %s", _describe(context.error))

    def _learn_usernames(self, message: Message) -> None:
        for user in (message.from_user, getattr(message.reply_to_message, "from_user", None)):
            if user is not None and user.username:
                self._usernames[user.username.casefold()] = user.id

    def _received_at(self) -> datetime:
        # Strictly increasing, so messages keep their order even within one millisecond.
        now = max(utcnow(), self._last_received + timedelta(milliseconds=1))
        self._last_received = now
        return now

    def _require_commands(self) -> TelegramCommands:
        if self._commands is None:
            raise RuntimeError("the Telegram adapter is not started")
        return self._commands

    def _require_services(self) -> AdapterServices:
        if self._services is None:
            raise RuntimeError("the Telegram adapter is not started")
        return self._services

    def _in_lane(self, room: Room, work: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
        return self._lanes.submit(int(room.platform_id or 0), work)

    def _sender_for(self, room: Room, message: Memory | None) -> Send:
        """How to answer, after a restart, a message of this chat that a crash left
        unanswered (its Telegram message is gone from memory: the reply quotes nothing)."""
        chat_id = int(room.platform_id or 0)
        return ChatReplies(self, chat_id, edit_interval=self.edit_interval).sender()

    # ------------------------------------------------------------------ outgoing
    @property
    def bot(self) -> Bot | None:
        return None if self._app is None else self._app.bot

    async def send(
        self,
        chat_id: int,
        text: str,
        reply_to: int | None = None,
        thread: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
        *,
        markdown: bool = False,
        answer: bool = False,
    ) -> Message | None:
        """Send `text` in parts (send.py); `markdown` for the model's replies, `answer` for a
        command's."""
        return await send_text(
            self.bot, chat_id, text, reply_to, thread, markup, markdown=markdown, answer=answer
        )

    @contextlib.asynccontextmanager
    async def _typing(
        self, chat_id: int, thread: int | None, replied: asyncio.Event
    ) -> AsyncIterator[None]:
        task = asyncio.create_task(
            keep_typing(self, chat_id, thread, self.typing_interval, until=replied)
        )
        # Let it ask for the indicator now: a reply ready at once would otherwise be sent
        # before the task first runs, and the person would never see "typing…".
        await asyncio.sleep(0)
        try:
            yield
        finally:
            await cancel_and_wait(task)


# ---------------------------------------------------------------------- helpers
def _downloader(message: Message, file_id: str) -> Chunks:
    """How to read a file of the message as it arrives, as far as the reader wants (PTB's
    download reads a file whole, and Telegram often declares no size)."""
    bot = message.get_bot()

    async def chunks() -> AsyncGenerator[bytes, None]:
        file = await bot.get_file(file_id)
        if file.file_path is None:
            raise TelegramError("getFile gave no file path")
        async with aclosing(http_chunks(file.file_path)) as body:
            async for chunk in body:
                yield chunk

    return chunks


def _describe(error: BaseException | None) -> str:
    """An error for a log line: its type and message (PTB messages never carry the token,
    except `InvalidToken` from initialize(), which is never logged)."""
    if error is None:
        return "unknown error"
    if isinstance(error, InvalidToken):
        return "InvalidToken"
    return f"{type(error).__name__}: {error}"

"""The Telegram adapter, on python-telegram-bot 22.

Telegram objects never leave this module: `to_memory`, `account_of` and `room_of` turn them into
Mnemo's models, and the runtime talks back through a `send` callback. The PTB `Application` is
driven by hand (initialize, start, start_polling / start_webhook) rather than `run_polling()`,
so it shares the event loop with Discord and the scheduler.

Ordering: PTB hands updates over one at a time; each is put on its chat's lane (a FIFO queue
with one worker), so a chat is answered in the order people wrote while different chats are
served at the same time. That is simpler to reason about than PTB's `concurrent_updates` plus
locks: a lock does not guarantee its waiters start in arrival order, a queue does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from telegram import (
    BotCommand,
    BotCommandScopeAllChatAdministrators,
    BotCommandScopeChat,
    BotCommandScopeDefault,
    Chat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ChatAction, ChatType
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from bot import admin
from bot.adapters.split import TELEGRAM_LIMIT, split_message
from bot.adapters.startup import PlatformError, PlatformStartupError
from bot.config import PlatformSettings
from bot.models import (
    Account,
    Attachment,
    Content,
    Memory,
    Room,
    account_id,
    message_id,
    room_id,
    to_millis,
    utcnow,
    world_id,
)
from bot.runtime import AgentRuntime

log = logging.getLogger(__name__)

PLATFORM = "telegram"
TYPING_INTERVAL = 4.0  # Telegram shows "typing…" for 5 s per chat action
BAD_TOKEN = "telegram: the bot token was rejected (Unauthorized); check TELEGRAM_TOKEN"

USER_COMMANDS = (
    ("me", "What I know about you here"),
    ("forgetme", "Forget everything about you here"),
    ("help", "What I can do"),
)
ADMIN_COMMANDS = (
    ("facts", "Admins: facts learned here [@user] [text] [page]"),
    ("forget", "Admins: forget a fact (id prefix) or a person (@user)"),
    ("goals", "Admins: goals here"),
    ("goal", "Admins: add a goal, /goal NAME: step; step"),
    ("stats", "Admins: what I have learned here"),
)
_ADMIN_NAMES = frozenset(name for name, _ in ADMIN_COMMANDS)
_ALL_NAMES = ("start", *(n for n, _ in USER_COMMANDS), *_ADMIN_NAMES)

HELP = (
    "I remember what people tell me, and only in the chat where they said it.\n"
    "/me - what I know about you here\n"
    "/forgetme - forget everything about you here\n"
    "Admins: /facts [@user] [text] [page], /forget <fact id | @user>, /goals, "
    "/goal NAME: step; step, /stats"
)
FORGET_PROMPT = (
    "This deletes everything I learned about you in this chat and your messages here. Sure?"
)
_FORGET_DATA = re.compile(r"^forgetme:(yes|no):(-?\d+)$")
# Page numbers are small; Telegram user ids are not (see _parse_facts_arguments).
_MAX_PAGE_DIGITS = 4
_MIN_USER_ID_DIGITS = 5


# ---------------------------------------------------------------------- pure conversion
@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is on Telegram, and which agent it speaks for."""

    user_id: int
    username: str
    agent_id: str


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
    update: Update | Message,
    bot: BotIdentity,
    *,
    usernames: Mapping[str, int] | None = None,
    received_at: datetime | None = None,
) -> Memory | None:
    """The Memory for a person's new message, or None for what Mnemo ignores: its own and other
    bots' messages, edits, channel posts, service messages (joins, pins, title changes, ...)
    and messages with neither text nor an attachment.

    `usernames` maps known lower-case usernames to user ids, so `@name` mentions of people
    become account ids. `received_at` orders messages sent within the same second (Telegram
    dates have one-second resolution).
    """
    message = update.message if isinstance(update, Update) else update
    if message is None or message.edit_date is not None:
        return None
    if message.chat.type == ChatType.CHANNEL or message.is_automatic_forward:
        return None
    user = message.from_user
    if user is None or user.is_bot or user.id == bot.user_id:
        return None
    text = message.text or message.caption or ""
    attachments = _attachments(message)
    if not text.strip() and not attachments:
        return None
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    mentions_agent, mentioned = _mentions(entities, bot, usernames or {})
    reply = _replied_to(message)
    created = to_millis(message.date)
    if received_at is not None:
        created = max(created, to_millis(received_at))
    return Memory(
        id=message_id(PLATFORM, message.chat.id, message.message_id),
        user_id=account_id(PLATFORM, user.id),
        agent_id=bot.agent_id,
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
        and reply.from_user.id == bot.user_id,
    )


def _replied_to(message: Message) -> Message | None:
    reply = message.reply_to_message
    # In forum groups every message "replies" to its topic's opening service message.
    if reply is None or reply.forum_topic_created is not None:
        return None
    return reply


def _mentions(
    entities: Mapping[MessageEntity, str], bot: BotIdentity, usernames: Mapping[str, int]
) -> tuple[bool, list[str]]:
    to_agent = False
    people: list[str] = []
    for entity, text in entities.items():
        user_id: int | None = None
        if entity.type == MessageEntity.MENTION:
            name = text.removeprefix("@").casefold()
            if name == bot.username.casefold():
                to_agent = True
                continue
            user_id = usernames.get(name)
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            user_id = entity.user.id
            if user_id == bot.user_id:
                to_agent = True
                continue
        if user_id is not None and (account := account_id(PLATFORM, user_id)) not in people:
            people.append(account)
    return to_agent, people


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


# ---------------------------------------------------------------------- per-chat lanes
Job = Callable[[], Awaitable[None]]


class ChatLanes:
    """One FIFO worker per chat: a chat's jobs run in order, different chats concurrently."""

    def __init__(self, *, max_active: int = 64) -> None:
        self._queues: dict[int, deque[Job]] = {}
        self._workers: dict[int, asyncio.Task[None]] = {}
        # Bounds the chats served at once, so a flood of chats cannot exhaust connections.
        self._active = asyncio.Semaphore(max_active)
        self._closed = False

    def submit(self, chat_id: int, job: Job) -> None:
        if self._closed:
            log.debug("dropping job for chat %s: shutting down", chat_id)
            return
        self._queues.setdefault(chat_id, deque()).append(job)
        if chat_id not in self._workers:
            self._workers[chat_id] = asyncio.create_task(
                self._drain(chat_id), name=f"telegram-chat:{chat_id}"
            )

    async def _drain(self, chat_id: int) -> None:
        queue = self._queues[chat_id]
        try:
            while queue:
                job = queue.popleft()
                async with self._active:
                    try:
                        await job()
                    except Exception:
                        log.exception("telegram: handling a message in chat %s failed", chat_id)
        finally:
            # No await between the empty check and this: a submit() cannot slip in between.
            self._workers.pop(chat_id, None)
            self._queues.pop(chat_id, None)

    async def join(self) -> None:
        """Wait until no chat has work left (including work submitted meanwhile)."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def close(self, grace: float) -> None:
        """Stop taking jobs; let queued ones finish for `grace` seconds, then cancel."""
        self._closed = True
        workers = list(self._workers.values())
        if not workers:
            return
        _, pending = await asyncio.wait(workers, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("telegram: %d chats were still busy at shutdown", len(pending))
            await asyncio.gather(*pending, return_exceptions=True)


# ---------------------------------------------------------------------- the adapter
class _PollingRequest(HTTPXRequest):
    """The getUpdates connection. PTB's polling loop gives up silently when the token stops
    working (revoked in @BotFather); this tells the adapter so the failure is reported."""

    def __init__(self, on_rejected: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_rejected = on_rejected

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        code, payload = await super().do_request(*args, **kwargs)
        if code == HTTPStatus.UNAUTHORIZED:
            self._on_rejected()
        return code, payload


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
    ) -> None:
        if settings.telegram_token is None:
            raise PlatformStartupError("telegram: TELEGRAM_TOKEN is not set")
        self.settings = settings
        self.base_url = base_url
        self.poll_timeout = poll_timeout
        # Before listing what was learned, wait this long for the chat's pending evaluations.
        self.learn_wait = learn_wait
        self.admin_cache_seconds = admin_cache_seconds
        self.typing_interval = typing_interval
        self.stop_grace = stop_grace
        self._admin_ids = settings.admin_ids_for(PLATFORM)
        self._group_admins: dict[int, tuple[float, frozenset[int]]] = {}
        self._usernames: dict[str, int] = {}
        self._lanes = ChatLanes()
        self._app: Application | None = None
        self._runtime: AgentRuntime | None = None
        self._identity: BotIdentity | None = None
        self._closed = asyncio.Event()
        self._failure: str | None = None
        self._last_received = utcnow()

    # ------------------------------------------------------------------ lifecycle
    @property
    def identity(self) -> BotIdentity:
        if self._identity is None:
            raise RuntimeError("the Telegram adapter is not started")
        return self._identity

    async def start(self, runtime: AgentRuntime) -> None:
        """Log in, register the commands and start receiving updates; returns once running.

        Raises PlatformStartupError with one line (never the token) when that is impossible.
        """
        self._runtime = runtime
        app = self._build()
        self._app = app
        try:
            await self._initialize(app)
            me = app.bot.bot
            # Known before the first update arrives: every message is judged against it.
            self._identity = BotIdentity(me.id, me.username or "", runtime.agent_id)
            await app.start()
            await self._start_updates(app)
        except BaseException:
            await self._shutdown(app)
            self._app = None
            raise
        await self._register_commands(app)
        log.info("telegram: running as @%s", me.username)

    async def stop(self) -> None:
        app, self._app = self._app, None
        if app is None:
            return
        await self._shutdown(app)
        self._closed.set()
        log.info("telegram: stopped")

    async def wait_idle(self) -> None:
        """Wait until every update received so far has been handled (replies sent)."""
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
            .get_updates_request(_PollingRequest(self._token_rejected, connection_pool_size=1))
        )
        if self.base_url is not None:
            base = self.base_url.rstrip("/")
            builder = builder.base_url(base).base_file_url(base.replace("/bot", "/file/bot"))
        app = builder.build()
        commands = CommandHandler(list(_ALL_NAMES), self._on_command, filters.UpdateType.MESSAGE)
        app.add_handler(commands)
        app.add_handler(CallbackQueryHandler(self._on_callback, pattern=_FORGET_DATA))
        # Commands for other bots (`/facts@otherbot`) and unknown ones fail both handlers.
        app.add_handler(MessageHandler(~filters.COMMAND, self._on_message))
        app.add_error_handler(self._on_error)
        return app

    async def _initialize(self, app: Application, attempts: int = 3) -> None:
        for attempt in range(1, attempts + 1):
            problem: str | None = None
            try:
                await app.initialize()
                return
            except InvalidToken:
                # PTB's own message quotes the token: it is dropped here, and the one-line
                # error is raised outside this block so the original is not even its context.
                problem = BAD_TOKEN
            except NetworkError as error:
                if attempt == attempts:
                    problem = f"telegram: cannot reach the Bot API ({_describe(error)})"
                else:
                    log.warning("telegram: Bot API unreachable (%s); retrying", _describe(error))
            if problem is not None:
                raise PlatformStartupError(problem)
            await asyncio.sleep(attempt)

    async def _start_updates(self, app: Application) -> None:
        assert app.updater is not None
        url = self.settings.telegram_webhook_url
        if url is None:
            # Network errors while polling are logged and retried by PTB's loop, forever.
            await app.updater.start_polling(
                timeout=timedelta(seconds=self.poll_timeout), bootstrap_retries=3
            )
            return
        if importlib.util.find_spec("tornado") is None:
            raise PlatformStartupError(
                "telegram: MNEMO_TELEGRAM_WEBHOOK_URL needs python-telegram-bot[webhooks] "
                "(tornado); install it or unset the URL to poll instead"
            )
        token = self.settings.telegram_token
        assert token is not None
        await app.updater.start_webhook(
            listen=self.settings.telegram_webhook_listen,
            port=self.settings.telegram_webhook_port,
            url_path=urlsplit(url).path.lstrip("/"),
            webhook_url=url,
            # Telegram echoes it in a header, so forged updates from others are refused.
            secret_token=_webhook_secret(token.get_secret_value()),
            bootstrap_retries=3,
        )

    async def _shutdown(self, app: Application) -> None:
        """Stop in reverse: no new updates, finish the chats in progress, then disconnect."""
        steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
        if app.updater is not None and app.updater.running:
            steps.append(("updater", app.updater.stop))
        if app.running:
            # Fetched updates are already confirmed to Telegram: hand them to their chats
            # now, or they would be lost (PTB drops what is still queued when it stops).
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

    async def _register_commands(self, app: Application) -> None:
        """The menu: everyone sees the user commands; admins see all of them."""
        everyone = [BotCommand(name, text) for name, text in USER_COMMANDS]
        everything = everyone + [BotCommand(name, text) for name, text in ADMIN_COMMANDS]
        scopes: list[tuple[list[BotCommand], Any]] = [(everyone, BotCommandScopeDefault())]
        if self.settings.telegram_group_admins:
            scopes.append((everything, BotCommandScopeAllChatAdministrators()))
        scopes += [(everything, BotCommandScopeChat(int(i))) for i in sorted(self._admin_ids)]
        for commands, scope in scopes:
            try:
                await app.bot.set_my_commands(commands, scope=scope)
            except TelegramError as error:
                # E.g. an admin who never opened a chat with the bot: the menu is a nicety.
                log.info("telegram: could not set the command menu for %s (%s)", scope.type, error)

    # ------------------------------------------------------------------ incoming
    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None:
            return  # edits, channel posts and the like: nothing to say or learn
        self._learn_usernames(message)
        memory = to_memory(
            update, self.identity, usernames=self._usernames, received_at=self._received_at()
        )
        if memory is None or message.from_user is None:
            return
        account, room = account_of(message.from_user), room_of(message.chat)
        self._lanes.submit(message.chat.id, lambda: self._handle(message, memory, account, room))

    async def _handle(self, message: Message, memory: Memory, account: Account, room: Room) -> None:
        runtime = self._require_runtime()
        reply_to = message.message_id if room.kind == "group" else None
        thread = message.message_thread_id if message.is_topic_message else None
        quote = reply_to

        async def send(content: Content) -> None:
            # Only the first reply quotes the message; the rest follow it.
            nonlocal quote
            await self._send(message.chat.id, content.text, quote, thread)
            quote = None

        await runtime.handle(
            memory,
            send,
            typing=lambda: self._typing(message.chat.id, thread),
            account=account,
            room=room,
        )

    async def _on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return
        self._learn_usernames(message)
        self._lanes.submit(message.chat.id, lambda: self._command(message))

    async def _on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None or query.message is None:
            return
        self._lanes.submit(query.message.chat.id, lambda: self._forget_pressed(update))

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram: error while handling an update: %s", _describe(context.error))

    def _learn_usernames(self, message: Message) -> None:
        for user in (message.from_user, getattr(message.reply_to_message, "from_user", None)):
            if user is not None and user.username:
                self._usernames[user.username.casefold()] = user.id
        while len(self._usernames) > 50_000:  # oldest first: dicts keep insertion order
            self._usernames.pop(next(iter(self._usernames)))

    def _received_at(self) -> datetime:
        # Strictly increasing, so messages keep their order even within one millisecond.
        now = max(utcnow(), self._last_received + timedelta(milliseconds=1))
        self._last_received = now
        return now

    def _require_runtime(self) -> AgentRuntime:
        if self._runtime is None:
            raise RuntimeError("the Telegram adapter is not started")
        return self._runtime

    # ------------------------------------------------------------------ outgoing
    async def _send(
        self,
        chat_id: int,
        text: str,
        reply_to: int | None = None,
        thread: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message | None:
        """Send `text` in parts of at most 4,096 characters; returns the last part sent."""
        parts = split_message(text, TELEGRAM_LIMIT)
        last: Message | None = None
        for index, part in enumerate(parts):
            last = await self._send_part(
                chat_id,
                part,
                reply_to if index == 0 else None,
                thread,
                markup if index == len(parts) - 1 else None,
            )
        return last

    async def _send_part(
        self,
        chat_id: int,
        text: str,
        reply_to: int | None,
        thread: int | None,
        markup: InlineKeyboardMarkup | None,
        attempts: int = 3,
    ) -> Message | None:
        app = self._app
        if app is None:
            return None
        reply = (
            None
            if reply_to is None
            else ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
        )
        for attempt in range(1, attempts + 1):
            try:
                return await app.bot.send_message(
                    chat_id,
                    text,
                    reply_parameters=reply,
                    message_thread_id=thread,
                    reply_markup=markup,
                )
            except RetryAfter as error:
                await asyncio.sleep(_seconds(error) + 0.5)
            except TimedOut as error:
                # It may have arrived: sending again could say it twice.
                log.warning("telegram: sending to %s timed out (%s)", chat_id, error)
                return None
            except NetworkError as error:
                log.warning("telegram: sending to %s failed (%s); retrying", chat_id, error)
                await asyncio.sleep(attempt)
            except (Forbidden, BadRequest) as error:
                # Blocked by the user, removed from the group, ...: nothing to retry.
                log.warning("telegram: cannot send to %s (%s)", chat_id, error)
                return None
        log.error("telegram: gave up sending to %s after %d attempts", chat_id, attempts)
        return None

    @contextlib.asynccontextmanager
    async def _typing(self, chat_id: int, thread: int | None) -> AsyncIterator[None]:
        task = asyncio.create_task(self._keep_typing(chat_id, thread))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep_typing(self, chat_id: int, thread: int | None) -> None:
        # The indicator lasts about 5 s, so it is renewed until the reply is ready.
        while self._app is not None:
            try:
                await self._app.bot.send_chat_action(
                    chat_id, ChatAction.TYPING, message_thread_id=thread
                )
            except TelegramError as error:
                log.debug("telegram: typing indicator failed (%s)", error)
            await asyncio.sleep(self.typing_interval)

    # ------------------------------------------------------------------ commands
    async def _command(self, message: Message) -> None:
        user = message.from_user
        assert user is not None
        runtime = self._require_runtime()
        name, argument = _command_parts(message.text or "")
        account, room = account_of(user), room_of(message.chat)
        await runtime.store.accounts.upsert(account)
        await runtime.store.rooms.upsert(room)
        scope = admin.Scope(world_id=room.world_id, room_id=room.id, user_id=account.id)
        if name in _ADMIN_NAMES and not await self._is_admin(user.id, message.chat):
            answer: str | None = f"Sorry, /{name} is only for admins."
        else:
            try:
                answer = await self._run_command(name, argument, message, scope)
            except Exception:
                log.exception("telegram: /%s failed", name)
                answer = f"Sorry, /{name} failed; the details are in the bot's log."
        if answer is None:
            return
        reply_to = message.message_id if room.kind == "group" else None
        thread = message.message_thread_id if message.is_topic_message else None
        await self._send(message.chat.id, answer, reply_to, thread)

    async def _run_command(
        self, name: str, argument: str, message: Message, scope: admin.Scope
    ) -> str | None:
        runtime = self._require_runtime()
        match name:
            case "start" | "help":
                return HELP
            case "me":
                return await self._after_learning(scope, lambda: admin.describe_me(runtime, scope))
            case "forgetme":
                return await self._forget_me_command(argument, message, scope)
            case "facts":
                return await self._facts(argument, message, scope)
            case "forget":
                return await self._forget(argument, message, scope)
            case "goals":
                return await self._after_learning(scope, lambda: admin.list_goals(runtime, scope))
            case "goal":
                spec = admin.parse_goal_spec(argument)
                if spec is None:
                    return "Usage: /goal NAME: first step; second step"
                goal = await admin.add_goal(
                    runtime, scope, spec[0], spec[1], owner_id=scope.user_id
                )
                return "Added goal:\n" + admin.format_goal(goal)
            case "stats":
                return await self._after_learning(scope, lambda: admin.stats(runtime, scope))
        return None

    async def _after_learning(
        self, scope: admin.Scope, answer: Callable[[], Awaitable[str]]
    ) -> str:
        """Answer once the chat's pending evaluations are done, so what was just said counts."""
        runtime = self._require_runtime()
        done = await runtime.evaluations.join(scope.room_id, self.learn_wait)
        text = await answer()
        return text if done else text + "\n(still learning from the latest messages)"

    async def _facts(self, argument: str, message: Message, scope: admin.Scope) -> str:
        runtime = self._require_runtime()
        who, search, page = _parse_facts_arguments(argument, message)
        subject: str | None = None
        if who is not None:
            subject = await self._resolve_person(who)
            if subject is None:
                return f"I don't know {who} here yet."
        elif (author := _author_of_reply(message)) is not None and author != self.identity.user_id:
            # "/facts" in reply to someone's message: that person's facts.
            subject = account_id(PLATFORM, author)
        return await self._after_learning(
            scope,
            lambda: admin.list_facts(runtime, scope, subject_id=subject, search=search, page=page),
        )

    async def _forget(self, argument: str, message: Message, scope: admin.Scope) -> str:
        runtime = self._require_runtime()
        target = argument.strip()
        if not target:
            return "Usage: /forget <fact id from /facts> or /forget @user"
        person = _text_mention(message)
        if person is not None or target.startswith("@"):
            subject = (
                account_id(PLATFORM, person.id)
                if person is not None
                else await self._resolve_person(target.split()[0])
            )
            if subject is None:
                return f"I don't know {target.split()[0]} here yet."
            await runtime.evaluations.join(scope.room_id, self.learn_wait)
            return await admin.forget_person(runtime, scope, subject)
        return await admin.forget_fact(runtime, scope, target.split()[0])

    async def _forget_me_command(
        self, argument: str, message: Message, scope: admin.Scope
    ) -> str | None:
        if argument.strip().lower() in ("yes", "y", "confirm"):
            return await self._forget_me(scope)
        user = message.from_user
        assert user is not None
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("Yes, forget me", callback_data=f"forgetme:yes:{user.id}"),
                    InlineKeyboardButton("No", callback_data=f"forgetme:no:{user.id}"),
                ]
            ]
        )
        group = message.chat.type != ChatType.PRIVATE
        thread = message.message_thread_id if message.is_topic_message else None
        reply_to = message.message_id if group else None
        await self._send(message.chat.id, FORGET_PROMPT, reply_to, thread, keyboard)
        return None

    async def _forget_me(self, scope: admin.Scope) -> str:
        runtime = self._require_runtime()
        # Let running evaluations finish first, or they could re-learn what is being forgotten.
        await runtime.evaluations.join(scope.room_id, self.learn_wait)
        return await admin.forget_me(runtime, scope)

    async def _forget_pressed(self, update: Update) -> None:
        query = update.callback_query
        app = self._app
        if query is None or query.message is None or query.data is None or app is None:
            return
        match = _FORGET_DATA.match(query.data)
        if match is None:
            return
        choice, owner = match.group(1), int(match.group(2))
        if query.from_user.id != owner:
            await _answer(query, "This button is for the person who asked.")
            return
        chat = query.message.chat
        room = room_of(chat)
        scope = admin.Scope(room.world_id, room.id, account_id(PLATFORM, owner))
        # Answered at once: Telegram shows a spinner on the button until then.
        await _answer(query, "Forgetting…" if choice == "yes" else "Kept.")
        text = await self._forget_me(scope) if choice == "yes" else "Okay, I'll keep remembering."
        try:
            await app.bot.edit_message_text(
                text, chat_id=chat.id, message_id=query.message.message_id
            )
        except TelegramError as error:
            log.info("telegram: could not update the confirmation (%s); sending anew", error)
            await self._send(chat.id, text)

    async def _resolve_person(self, who: str) -> str | None:
        """The account id for `@username` or a numeric user id, if known."""
        who = who.strip()
        if who.isdigit():
            return account_id(PLATFORM, int(who))
        name = who.removeprefix("@").casefold()
        if name in self._usernames:
            return account_id(PLATFORM, self._usernames[name])
        return await _account_id_by_username(self._require_runtime(), name)

    async def _is_admin(self, user_id: int, chat: Chat) -> bool:
        if str(user_id) in self._admin_ids:
            return True
        if not self.settings.telegram_group_admins:
            return False
        if chat.type not in (ChatType.GROUP, ChatType.SUPERGROUP):
            return False
        return user_id in await self._administrators(chat.id)

    async def _administrators(self, chat_id: int) -> frozenset[int]:
        """The group's administrators, cached briefly: every admin command would ask again."""
        cached = self._group_admins.get(chat_id)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        app = self._app
        if app is None:
            return frozenset()
        try:
            members = await app.bot.get_chat_administrators(chat_id)
        except TelegramError as error:
            log.warning("telegram: cannot list the administrators of %s (%s)", chat_id, error)
            return frozenset()
        ids = frozenset(member.user.id for member in members)
        self._group_admins[chat_id] = (time.monotonic() + self.admin_cache_seconds, ids)
        return ids


# ---------------------------------------------------------------------- helpers
def _command_parts(text: str) -> tuple[str, str]:
    """`/facts@mnemo_bot sarah 2` → ("facts", "sarah 2")."""
    head, _, rest = text.strip().partition(" ")
    name = head.removeprefix("/").split("@", 1)[0].lower()
    return name, rest.strip()


def _author_of_reply(message: Message) -> int | None:
    reply = _replied_to(message)
    return None if reply is None or reply.from_user is None else reply.from_user.id


def _text_mention(message: Message) -> User | None:
    for entity in message.entities:
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            return entity.user
    return None


def _parse_facts_arguments(argument: str, message: Message) -> tuple[str | None, str | None, int]:
    """`[@user | user id] [search text] [page]`: a first `@name` or long number is the person,
    a last short number the page, the rest the text to search for."""
    person = _text_mention(message)
    if person is not None:
        for entity, shown in message.parse_entities([MessageEntity.TEXT_MENTION]).items():
            if entity.user is not None and entity.user.id == person.id:
                argument = argument.replace(shown, " ", 1)
    words = argument.split()
    who: str | None = str(person.id) if person is not None else None
    if who is None and words:
        first = words[0]
        if first.startswith("@") or (first.isdigit() and len(first) >= _MIN_USER_ID_DIGITS):
            who = words.pop(0)
    page = 1
    if words and words[-1].isdigit() and len(words[-1]) <= _MAX_PAGE_DIGITS:
        page = max(int(words.pop()), 1)
    return who, " ".join(words) or None, page


async def _account_id_by_username(runtime: AgentRuntime, username: str) -> str | None:
    account = await runtime.store.accounts.find_by_username(PLATFORM, username)
    return None if account is None else account.id


async def _answer(query: Any, text: str) -> None:
    try:
        await query.answer(text)
    except TelegramError as error:
        log.debug("telegram: answering a button press failed (%s)", error)


def _webhook_secret(token: str) -> str:
    """A stable secret derived from the token, in the alphabet Telegram allows."""
    return hashlib.sha256(f"mnemo-webhook:{token}".encode()).hexdigest()


def _seconds(error: RetryAfter) -> float:
    value: Any = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _describe(error: BaseException | None) -> str:
    """An error for a log line: its type and message (PTB messages never carry the token,
    except `InvalidToken` from initialize(), which is never logged)."""
    if error is None:
        return "unknown error"
    if isinstance(error, InvalidToken):
        return "InvalidToken"
    return f"{type(error).__name__}: {error}"

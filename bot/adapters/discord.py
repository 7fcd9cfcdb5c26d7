"""Discord: messages in, replies out, and the slash commands, on discord.py 2.7.

`DiscordAdapter.start()` logs in and runs the gateway as a task in the current event loop, so
Discord shares the loop with Telegram. Each message becomes a Memory through the pure
`to_memory()`; discord.py objects never leave this module. Messages of one channel are handled
in order (a lock per channel) while channels run concurrently. The slash commands only parse
options, check who may call them and show what bot/admin.py answers, always ephemerally.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
from discord import app_commands

from bot import admin
from bot.adapters.split import DISCORD_LIMIT, split_message
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
    world_id,
)
from bot.runtime import AgentRuntime, Send

log = logging.getLogger(__name__)

PLATFORM = "discord"
# Only these are people talking; joins, pins, boosts, thread notices… are system messages.
_CHAT_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
# Network trouble (log-in, sends, typing): one log line or one start-up line, no traceback.
_NETWORK_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)

TOKEN_REJECTED = "discord: the bot token was rejected; check DISCORD_TOKEN"
NO_TOKEN = "discord: DISCORD_TOKEN is not set"
INTENT_MISSING = (
    "discord: the Message Content intent is not enabled for this bot; turn it on in the "
    "Developer Portal (your application → Bot → Privileged Gateway Intents)"
)
REFUSED = (
    "Only people with the Manage Server permission (or the bot's configured admins) "
    "can use this command."
)
FORGET_ME_PROMPT = (
    "This deletes everything I learned about you here and every message of yours I kept "
    "here. It cannot be undone."
)
FORGET_ME_CANCELLED = "Cancelled: I forgot nothing."
FORGET_ME_EXPIRED = "No answer, so I forgot nothing. Use /forgetme again if you meant it."
STILL_LEARNING = "(still learning from the latest messages)"

# An answer of bot/admin.py for a scope.
Answer = Callable[[AgentRuntime, admin.Scope], Awaitable[str]]


def intents() -> discord.Intents:
    """What Mnemo needs: guilds (channels, roles), guild and DM messages, and their text."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    # Privileged: without it, guild messages that do not mention the bot arrive empty.
    wanted.message_content = True
    return wanted


# --------------------------------------------------------------------------- messages in
@dataclass(frozen=True)
class Incoming:
    """A Discord message as Mnemo sees it: the memory, who said it, where, and who was named."""

    memory: Memory
    account: Account
    room: Room
    mentioned: tuple[Account, ...] = ()


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
    message: discord.Message, bot_user: discord.abc.User, *, agent_id: str
) -> Incoming | None:
    """The Memory for a message people wrote, or None for anything Mnemo must not read:
    its own messages, other bots and webhooks, system messages, and empty messages."""
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
    return Incoming(memory, account_of(author), room, tuple(account_of(u) for u in others))


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


# --------------------------------------------------------------------------- replies out
class ChannelLocks:
    """One lock per channel, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[int, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, channel_id: int) -> AsyncIterator[None]:
        lock, users = self._locks.get(channel_id, (asyncio.Lock(), 0))
        self._locks[channel_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[channel_id]
            if users <= 1:
                del self._locks[channel_id]
            else:
                self._locks[channel_id] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


def typing_in(channel: discord.abc.Messageable) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """The runtime's `typing` callback: "Mnemo is typing…" while the model works.

    A channel where the bot may not type must not cost the reply, so failures are ignored.
    """

    @asynccontextmanager
    async def typing() -> AsyncIterator[None]:
        indicator = channel.typing()
        entered = False
        try:
            await indicator.__aenter__()
            entered = True
        except (discord.HTTPException, *_NETWORK_ERRORS) as error:
            log.debug("discord: cannot show typing in %s: %s", _where(channel), error)
        try:
            yield
        finally:
            if entered:
                await indicator.__aexit__(None, None, None)

    return typing


def sender_for(message: discord.Message, *, reply: bool) -> Send:
    """The runtime's `send` callback: long replies in parts of at most 2,000 characters.

    In a server the first part is a Discord reply to the message (without a ping), so it is
    clear whom Mnemo answers in a busy channel.
    """
    channel = message.channel
    reference: list[discord.MessageReference] = (
        [message.to_reference(fail_if_not_exists=False)] if reply else []
    )

    async def send(content: Content) -> None:
        for part in split_message(content.text, DISCORD_LIMIT):
            options: dict[str, Any] = {}
            if reference:
                options = {"reference": reference.pop(), "mention_author": False}
            try:
                await channel.send(part, **options)
            except discord.HTTPException as error:
                log.warning(
                    "discord: cannot send to %s (HTTP %s); is Send Messages allowed?",
                    _where(channel),
                    error.status,
                )
                return
            except _NETWORK_ERRORS as error:
                log.warning("discord: cannot send to %s (%s)", _where(channel), error)
                return

    return send


def _where(channel: object) -> str:
    name = getattr(channel, "name", None)
    return f"#{name} ({channel.id})" if name else f"channel {getattr(channel, 'id', '?')}"


# --------------------------------------------------------------------------- slash commands
def interaction_scope(interaction: discord.Interaction) -> admin.Scope:
    """Where a command was used: only what was learned in that server (or DM) is shown."""
    channel_id = interaction.channel_id
    assert channel_id is not None  # slash commands are always used in a channel
    return admin.Scope(
        world_id=world_of(interaction.guild_id, channel_id),
        room_id=room_id(PLATFORM, channel_id),
        user_id=account_id(PLATFORM, interaction.user.id),
    )


async def answer(interaction: discord.Interaction, text: str) -> None:
    """Reply privately; a long answer continues in follow-ups."""
    parts = split_message(text, DISCORD_LIMIT) or ["(nothing)"]
    for part in parts:
        if interaction.response.is_done():
            await interaction.followup.send(part, ephemeral=True)
        else:
            await interaction.response.send_message(part, ephemeral=True)


def objectives_of(text: str) -> list[str]:
    # The same parsing as the console and Telegram's `/goal NAME: a; b`.
    return admin.split_objectives(text)


class ForgetMeView(discord.ui.View):
    """The confirmation for /forgetme: nothing is deleted until its owner presses the button."""

    def __init__(
        self,
        origin: discord.Interaction,
        *,
        forget: Callable[[], Awaitable[str]],
        timeout: float = 120.0,
    ) -> None:
        super().__init__(timeout=timeout)
        self.origin = origin
        self.owner_id = origin.user.id
        self._forget = forget

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.owner_id

    async def on_timeout(self) -> None:
        # Buttons that no longer answer would only confuse: say that nothing happened.
        with contextlib.suppress(discord.HTTPException):
            await self.origin.edit_original_response(content=FORGET_ME_EXPIRED, view=None)

    @discord.ui.button(label="Forget me", style=discord.ButtonStyle.danger)
    async def confirm(
        self, interaction: discord.Interaction, button: discord.ui.Button[ForgetMeView]
    ) -> None:
        self.stop()
        # Acknowledge first (buttons gone, so no second press); deleting may take a while.
        await interaction.response.edit_message(content="Forgetting…", view=None)
        await interaction.edit_original_response(content=await self._forget())

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(
        self, interaction: discord.Interaction, button: discord.ui.Button[ForgetMeView]
    ) -> None:
        self.stop()
        await interaction.response.edit_message(content=FORGET_ME_CANCELLED, view=None)


# --------------------------------------------------------------------------- the adapter
class DiscordAdapter:
    name = "discord"

    def __init__(
        self,
        settings: PlatformSettings,
        *,
        ready_timeout: float = 60.0,
        learn_wait: float = 30.0,
        stop_grace: float = 20.0,
    ) -> None:
        self.settings = settings
        self.ready_timeout = ready_timeout
        # On stop, messages being answered get this long to finish before disconnecting.
        self.stop_grace = stop_grace
        # How long commands wait for the channel's pending evaluations (what was just said).
        self.learn_wait = learn_wait
        # The model's text must never ping @everyone, a role, or people.
        self.client = discord.Client(
            intents=intents(), allowed_mentions=discord.AllowedMentions.none()
        )
        self.tree = app_commands.CommandTree(self.client)
        self.tree.on_error = self._on_command_error
        self.admins = frozenset(int(i) for i in settings.admin_ids_for(PLATFORM) if i.isdigit())
        self.locks = ChannelLocks()
        self._runtime: AgentRuntime | None = None
        self._gateway: asyncio.Task[None] | None = None
        self._synced_once = False
        self._background: set[asyncio.Task[Any]] = set()
        self._handling: set[asyncio.Task[Any]] = set()
        self._stopping = False
        for handler in (
            self.on_message,
            self.on_ready,
            self.on_guild_join,
            self.on_disconnect,
            self.on_resumed,
        ):
            self.client.event(handler)
        for command in self._commands():
            self.tree.add_command(command)

    @property
    def runtime(self) -> AgentRuntime:
        if self._runtime is None:
            raise RuntimeError("DiscordAdapter.start() (or bind()) was not called")
        return self._runtime

    def bind(self, runtime: AgentRuntime) -> None:
        """Attach the runtime without connecting (start() does this too)."""
        self._runtime = runtime

    # ------------------------------------------------------------------ lifecycle
    async def start(self, runtime: AgentRuntime) -> None:
        """Log in, connect in this event loop, and return once Discord says ready."""
        token = self.settings.discord_token
        if token is None or not token.get_secret_value().strip():
            raise PlatformStartupError(NO_TOKEN)
        self.bind(runtime)
        try:
            await self.client.login(token.get_secret_value())
        except discord.LoginFailure:
            await self.client.close()
            raise PlatformStartupError(TOKEN_REJECTED) from None
        except discord.HTTPException as error:
            await self.client.close()
            raise PlatformStartupError(
                f"discord: log-in failed (HTTP {error.status}); try again later"
            ) from None
        except _NETWORK_ERRORS as error:
            await self.client.close()
            raise PlatformStartupError(
                f"discord: cannot reach Discord ({type(error).__name__})"
            ) from None
        self._gateway = asyncio.create_task(
            self.client.connect(reconnect=True), name="discord-gateway"
        )
        await self._wait_ready(self._gateway)

    async def _wait_ready(self, gateway: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self.client.wait_until_ready())
        done, _ = await asyncio.wait(
            {ready, gateway}, timeout=self.ready_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready in done:
            log.info("discord: connected as %s", self.client.user)
            return
        ready.cancel()
        if gateway in done:
            error = gateway.exception() if not gateway.cancelled() else None
            await self.client.close()
            raise PlatformStartupError(_gateway_problem(error)) from None
        await self.stop()
        raise PlatformStartupError(
            f"discord: connected, but Discord did not finish start-up in {self.ready_timeout:g}s"
        )

    async def wait_closed(self) -> None:
        """Return when the gateway has stopped; PlatformError when it stopped failing.

        discord.py reconnects by itself after drops and outages; the gateway ends on its own
        only for what reconnecting cannot fix (a reset token, an intent switched off).
        """
        gateway = self._gateway
        if gateway is None:
            return
        try:
            # Shielded: the supervisor cancelling this wait must not cut the connection.
            await asyncio.shield(gateway)
        except asyncio.CancelledError:
            if not gateway.cancelled():
                raise
        except Exception as error:
            raise PlatformError(_gateway_problem(error) + "; Discord is offline") from None

    async def stop(self) -> None:
        """Take no new messages, let the ones being answered finish, then disconnect."""
        self._stopping = True
        if self._handling:
            _, late = await asyncio.wait(set(self._handling), timeout=self.stop_grace)
            if late:
                log.warning("discord: stopping with %d messages still being answered", len(late))
        await self.client.close()
        gateway, self._gateway = self._gateway, None
        if gateway is not None and not gateway.done():
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, Exception):
                await asyncio.wait_for(gateway, 10)
        for task in list(self._background):
            task.cancel()

    # ------------------------------------------------------------------ gateway events
    async def on_ready(self) -> None:
        # READY comes again after a reconnect that could not resume; sync only once.
        if self._synced_once:
            log.info("discord: ready again after a reconnect")
            return
        self._synced_once = True
        self._spawn(self.sync_commands(list(self.client.guilds)))

    async def on_guild_join(self, guild: discord.Guild) -> None:
        log.info("discord: joined server %s (%s)", guild.name, guild.id)
        if not self.settings.discord_global_sync:
            self._spawn(self.sync_guild(guild))

    async def on_disconnect(self) -> None:
        log.warning("discord: connection lost; discord.py is reconnecting")

    async def on_resumed(self) -> None:
        log.info("discord: connection resumed")

    async def on_message(self, message: discord.Message) -> None:
        runtime, me = self._runtime, self.client.user
        if runtime is None or me is None or self._stopping:
            return
        incoming = to_memory(message, me, agent_id=runtime.agent_id)
        if incoming is None:
            return
        task = asyncio.current_task()
        if task is not None:
            self._handling.add(task)
        try:
            # Queued before any await: discord.py starts a task per event in arrival order,
            # and the lock (first come, first served) keeps that order within the channel.
            async with self.locks.hold(message.channel.id):
                await self._handle(runtime, message, incoming)
        except Exception:
            log.exception("discord: message %s in %s failed", message.id, _where(message.channel))
        finally:
            self._handling.discard(task)  # type: ignore[arg-type]

    async def _handle(
        self, runtime: AgentRuntime, message: discord.Message, incoming: Incoming
    ) -> None:
        for person in incoming.mentioned:
            await runtime.store.accounts.upsert(person)
        await runtime.handle(
            incoming.memory,
            sender_for(message, reply=incoming.room.kind == "group"),
            typing=typing_in(message.channel),
            account=incoming.account,
            room=incoming.room,
        )

    # ------------------------------------------------------------------ command sync
    async def sync_commands(self, guilds: Iterable[discord.abc.Snowflake]) -> None:
        """Register the slash commands: per server (instant) or globally (up to an hour)."""
        if self.settings.discord_global_sync:
            try:
                synced = await self.tree.sync()
            except discord.HTTPException as error:
                log.warning("discord: global slash-command sync failed (HTTP %s)", error.status)
                return
            log.info("discord: %d slash commands registered globally", len(synced))
            return
        for guild in guilds:
            await self.sync_guild(guild)

    async def sync_guild(self, guild: discord.abc.Snowflake) -> None:
        self.tree.copy_global_to(guild=guild)
        try:
            synced = await self.tree.sync(guild=guild)
        except discord.Forbidden:
            log.warning(
                "discord: cannot register slash commands in server %s; re-invite the bot with "
                "the applications.commands scope",
                guild.id,
            )
            return
        except discord.HTTPException as error:
            log.warning(
                "discord: slash-command sync failed in %s (HTTP %s)", guild.id, error.status
            )
            return
        log.info("discord: %d slash commands registered in server %s", len(synced), guild.id)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ commands
    def is_admin(self, interaction: discord.Interaction) -> bool:
        """Manage Server in this server, or a configured admin id (the only way in DMs)."""
        if interaction.user.id in self.admins:
            return True
        if interaction.guild_id is None:
            return False
        permissions = interaction.permissions
        return permissions.manage_guild or permissions.administrator

    async def _refuse(self, interaction: discord.Interaction) -> bool:
        """True (after telling them) when the caller may not use an admin command."""
        if self.is_admin(interaction):
            return False
        log.info("discord: refused an admin command to user %s", interaction.user.id)
        await interaction.response.send_message(REFUSED, ephemeral=True)
        return True

    async def _on_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        log.error("discord: slash command failed", exc_info=error)
        with contextlib.suppress(discord.HTTPException):
            await answer(interaction, "Sorry, that failed on my side. Please try again later.")

    async def _forget_me(self, scope: admin.Scope) -> str:
        # Running evaluations first, or they could re-learn what is being forgotten.
        await self.runtime.evaluations.join(scope.room_id, self.learn_wait)
        return await admin.forget_me(self.runtime, scope)

    async def _after_learning(
        self, interaction: discord.Interaction, scope: admin.Scope, answer_for: Answer
    ) -> None:
        """Answer once the channel's pending evaluations are done, so what was just said
        counts. Deferred first: Discord drops an interaction not acknowledged in 3 seconds."""
        if not interaction.response.is_done():
            await interaction.response.defer(ephemeral=True, thinking=True)
        done = await self.runtime.evaluations.join(scope.room_id, self.learn_wait)
        text = await answer_for(self.runtime, scope)
        await answer(interaction, text if done else f"{text}\n{STILL_LEARNING}")

    def _commands(self) -> list[app_commands.Command[Any, ..., None]]:
        @app_commands.command(name="me", description="What I have learned about you here")
        async def me(interaction: discord.Interaction) -> None:
            await self._after_learning(
                interaction, interaction_scope(interaction), admin.describe_me
            )

        @app_commands.command(
            name="forgetme", description="Delete everything I learned about you here"
        )
        async def forgetme(interaction: discord.Interaction) -> None:
            scope = interaction_scope(interaction)
            view = ForgetMeView(interaction, forget=lambda: self._forget_me(scope))
            await interaction.response.send_message(FORGET_ME_PROMPT, view=view, ephemeral=True)

        @app_commands.command(name="facts", description="Admins: what I have learned here")
        @app_commands.describe(
            member="Only facts about this person",
            search="Only facts containing this text",
            page="Page number (10 facts per page)",
        )
        async def facts(
            interaction: discord.Interaction,
            member: discord.User | None = None,
            search: str | None = None,
            page: app_commands.Range[int, 1, 10_000] = 1,
        ) -> None:
            if await self._refuse(interaction):
                return
            subject = account_id(PLATFORM, member.id) if member is not None else None

            async def listing(runtime: AgentRuntime, scope: admin.Scope) -> str:
                return await admin.list_facts(
                    runtime, scope, subject_id=subject, search=search, page=page
                )

            await self._after_learning(interaction, interaction_scope(interaction), listing)

        @app_commands.command(
            name="forget", description="Admins: forget one fact, or everything about a member"
        )
        @app_commands.describe(
            fact="The id (first characters are enough) shown by /facts",
            member="Forget everything about this person here",
        )
        async def forget(
            interaction: discord.Interaction,
            fact: str | None = None,
            member: discord.User | None = None,
        ) -> None:
            if await self._refuse(interaction):
                return
            if (fact is None) == (member is None):
                await answer(interaction, "Give either a fact id or a member, not both.")
                return
            scope = interaction_scope(interaction)
            await interaction.response.defer(ephemeral=True, thinking=True)
            if member is not None:
                # Running evaluations first, or they could re-learn what is being forgotten.
                await self.runtime.evaluations.join(scope.room_id, self.learn_wait)
                subject = account_id(PLATFORM, member.id)
                text = await admin.forget_person(self.runtime, scope, subject)
            else:
                text = await admin.forget_fact(self.runtime, scope, fact or "")
            await answer(interaction, text)

        @app_commands.command(name="goals", description="Admins: goals and their objectives here")
        async def goals(interaction: discord.Interaction) -> None:
            if await self._refuse(interaction):
                return
            await self._after_learning(
                interaction, interaction_scope(interaction), admin.list_goals
            )

        @app_commands.command(name="goal", description="Admins: add a goal for this channel")
        @app_commands.describe(
            name="What the goal is", objectives="Steps towards it, separated by ;"
        )
        async def goal(
            interaction: discord.Interaction,
            name: app_commands.Range[str, 1, 200],
            objectives: str,
        ) -> None:
            if await self._refuse(interaction):
                return
            scope = interaction_scope(interaction)
            created = await admin.add_goal(
                self.runtime, scope, name.strip(), objectives_of(objectives), owner_id=scope.user_id
            )
            await answer(interaction, "Added goal:\n" + admin.format_goal(created))

        @app_commands.command(name="stats", description="Admins: what I have stored here")
        async def stats(interaction: discord.Interaction) -> None:
            if await self._refuse(interaction):
                return
            await self._after_learning(interaction, interaction_scope(interaction), admin.stats)

        return [me, forgetme, facts, forget, goals, goal, stats]


def _gateway_problem(error: BaseException | None) -> str:
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return INTENT_MISSING
    if isinstance(error, discord.ConnectionClosed) and error.code == 4004:
        return TOKEN_REJECTED
    if isinstance(error, discord.ConnectionClosed):
        return f"discord: the gateway closed the connection (code {error.code})"
    if error is None:
        return "discord: the gateway connection ended before start-up finished"
    return f"discord: the gateway connection failed ({type(error).__name__})"

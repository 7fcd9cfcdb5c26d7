"""The Discord adapter, on discord.py 2.7: lifecycle, messages in, replies out.

`DiscordAdapter.start()` logs in and runs the gateway as a task in the current event loop, so
Discord shares the loop with Telegram. Each message becomes an `Incoming` through the pure
`convert.to_memory()`; discord.py objects never leave this package. Messages of one channel
are handled in order (a lane per channel, bot/adapters/lanes.py) while channels run
concurrently. The slash commands are `commands.py`: Discord's side of the command layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import discord
from discord import app_commands

from bot.adapters.base import AdapterServices, Incoming
from bot.adapters.discord.commands import DiscordCommands, answer
from bot.adapters.discord.convert import (
    PLATFORM,
    images_of,
    intents,
    quote_of,
    to_memory,
    voice_of,
)
from bot.adapters.discord.registration import CommandSync, Registrations
from bot.adapters.errors import PlatformError, PlatformStartupError
from bot.adapters.images import ImageLimits, image_loader
from bot.adapters.lanes import RoomLanes
from bot.adapters.split import DISCORD_LIMIT, split_message
from bot.adapters.streaming import EDIT_INTERVAL, EditedReply, StreamingSender
from bot.adapters.voice import Hearing
from bot.commands.command_set import Commands
from bot.config.settings import PlatformSettings
from bot.domain.quotes import Quoted, QuoteLoader
from bot.domain.records import Content, Memory, Room
from bot.runtime.types import Send

log = logging.getLogger(__name__)

# Network trouble (log-in, sends, typing): one log line or one start-up line, no traceback.
_NETWORK_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)

TOKEN_REJECTED = "discord: the bot token was rejected; check DISCORD_TOKEN"
NO_TOKEN = "discord: DISCORD_TOKEN is not set"
INTENT_MISSING = (
    "discord: the Message Content intent is not enabled for this bot; turn it on in the "
    "Developer Portal (your application → Bot → Privileged Gateway Intents)"
)


# --------------------------------------------------------------------------- replies out
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


def sender_for(
    message: discord.Message, *, reply: bool, edit_interval: float = EDIT_INTERVAL
) -> Send:
    """The runtime's `send` callback: long replies in parts of at most 2,000 characters.

    In a server the first part is a Discord reply to the message (without a ping), so it is
    clear whom Mnemo answers in a busy channel.
    """
    reference = message.to_reference(fail_if_not_exists=False) if reply else None
    return channel_sender(message.channel, reference, edit_interval=edit_interval)


def channel_sender(
    channel: discord.abc.Messageable,
    reference: discord.MessageReference | None = None,
    *,
    edit_interval: float = EDIT_INTERVAL,
) -> StreamingSender:
    """Send into `channel` in parts, or stream a reply as one message edited as it grows
    (bot/adapters/streaming.py); the first part replies to `reference` when given."""
    replies = ChannelReplies(channel, reference, edit_interval=edit_interval)
    return StreamingSender(replies.send, replies.open_stream)


class ChannelReplies:
    """The replies to one message in one channel (`PlatformMessages` for a streamed one).

    discord.py keeps to Discord's rate limits itself (it waits out a 429 and the buckets);
    a streamed reply is edited at most once per `EDIT_INTERVAL` on top of that."""

    def __init__(
        self,
        channel: discord.abc.Messageable,
        reference: discord.MessageReference | None = None,
        *,
        edit_interval: float = EDIT_INTERVAL,
    ) -> None:
        self.channel = channel
        self._references = [reference] if reference is not None else []
        self.edit_interval = edit_interval

    async def send(self, content: Content) -> None:
        for part in self.parts(content.text):
            if await self.post(part, first=False) is None:
                return

    def open_stream(self) -> EditedReply[discord.Message]:
        return EditedReply(self, interval=self.edit_interval)

    def parts(self, text: str) -> list[str]:
        return split_message(text, DISCORD_LIMIT)

    async def post(self, part: str, *, first: bool) -> discord.Message | None:
        options: dict[str, Any] = {}
        if self._references:
            # Only the reply's first message replies to the person's (without a ping).
            options = {"reference": self._references.pop(), "mention_author": False}
        try:
            return await self.channel.send(part, **options)
        except discord.HTTPException as error:
            log.warning(
                "discord: cannot send to %s (HTTP %s); is Send Messages allowed?",
                _where(self.channel),
                error.status,
            )
        except _NETWORK_ERRORS as error:
            log.warning("discord: cannot send to %s (%s)", _where(self.channel), error)
        return None

    async def edit(self, message: discord.Message, part: str) -> bool:
        try:
            await message.edit(content=part)
            return True
        except (discord.HTTPException, *_NETWORK_ERRORS) as error:
            log.warning("discord: cannot edit a reply in %s (%s)", _where(self.channel), error)
            return False

    async def delete(self, message: discord.Message) -> None:
        try:
            await message.delete()
        except (discord.HTTPException, *_NETWORK_ERRORS) as error:
            log.warning("discord: cannot take back a reply in %s (%s)", _where(self.channel), error)


def _shards_of(client: discord.Client) -> str:
    if not isinstance(client, discord.AutoShardedClient):
        return ""
    ids = ", ".join(str(shard) for shard in sorted(client.shards))
    return f" (shards {ids} of {client.shard_count})"


def _where(channel: object) -> str:
    name = getattr(channel, "name", None)
    number = getattr(channel, "id", "?")
    return f"#{name} ({number})" if name else f"channel {number}"


# --------------------------------------------------------------------------- the adapter
def gateway_client(settings: PlatformSettings) -> discord.Client:
    """One gateway connection, or the shards the settings give this process: discord.py's
    `AutoShardedClient` runs them on one client (each guild's events arrive on its shard)."""
    # The model's text must never ping @everyone, a role, or people.
    options: dict[str, Any] = {
        "intents": intents(),
        "allowed_mentions": discord.AllowedMentions.none(),
    }
    shards = settings.discord_shards
    if shards is None:
        return discord.Client(**options)
    if shards == "auto":  # as many as Discord recommends (GET /gateway/bot), all here
        return discord.AutoShardedClient(**options)
    if settings.discord_shard_ids:  # unset: all `shards` here
        options["shard_ids"] = settings.discord_shard_ids
    return discord.AutoShardedClient(shard_count=shards, **options)


class DiscordAdapter:
    name = PLATFORM

    def __init__(
        self,
        settings: PlatformSettings,
        *,
        state_dir: Path | None = None,
        ready_timeout: float = 60.0,
        learn_wait: float = 30.0,
        stop_grace: float = 20.0,
        edit_interval: float = EDIT_INTERVAL,
    ) -> None:
        self.settings = settings
        # None: the model does not see images, and none is ever downloaded.
        self._image_limits = ImageLimits.of(settings)
        # Seconds between two edits of a streamed reply (bot/adapters/streaming.py).
        self.edit_interval = edit_interval
        self.ready_timeout = ready_timeout
        # On stop, messages being answered get this long to finish before disconnecting.
        self.stop_grace = stop_grace
        # How long commands wait for the channel to learn from what was just said.
        self.learn_wait = learn_wait
        self.client = gateway_client(settings)
        # Every command is in the tree's global list, so an interaction finds its command
        # wherever it was registered; which scope each is registered in is registration.py's.
        self.tree = app_commands.CommandTree(self.client)
        # What was registered with Discord last (in the data folder): synced only on change.
        self.command_sync = CommandSync(
            self.client,
            self.tree,
            Registrations(state_dir),
            everything_global=settings.discord_global_sync,
        )
        self.tree.error(self._on_command_error)
        self.slash = DiscordCommands(settings, lambda: self.commands)
        self._commands: Commands | None = None
        self.lanes: RoomLanes[int] = RoomLanes(PLATFORM)
        self._services: AdapterServices | None = None
        self._hearing: Hearing | None = None
        self._gateway: asyncio.Task[None] | None = None
        self._synced_once = False
        self._background: set[asyncio.Task[Any]] = set()
        self._stopping = False
        for handler in (
            self.on_message,
            self.on_raw_message_edit,
            self.on_ready,
            self.on_guild_join,
            self.on_disconnect,
            self.on_resumed,
        ):
            self.client.event(handler)
        for command in self.slash.built_in():
            self.tree.add_command(command)

    @property
    def services(self) -> AdapterServices:
        if self._services is None:
            raise RuntimeError("DiscordAdapter.start() (or bind()) was not called")
        return self._services

    @property
    def commands(self) -> Commands:
        if self._commands is None:
            raise RuntimeError("DiscordAdapter.start() (or bind()) was not called")
        return self._commands

    def bind(self, services: AdapterServices) -> None:
        """Attach Mnemo's services without connecting (start() does this too); the plugins'
        commands join the slash commands."""
        if self._services is services:
            return
        self._services = services
        # None: no transcription model, and voice messages are kept unheard.
        self._hearing = Hearing.of(services.transcriber, self.settings.max_voice_mb)
        self._commands = Commands(services.commands, learn_wait=self.learn_wait)
        for command in self.slash.from_plugins(self._commands.all()):
            self.tree.add_command(command, override=True)

    # ------------------------------------------------------------------ lifecycle
    async def start(self, services: AdapterServices) -> None:
        """Log in, connect in this event loop, and return once Discord says ready."""
        token = self.settings.discord_token
        if token is None or not token.get_secret_value().strip():
            raise PlatformStartupError(NO_TOKEN)
        self.bind(services)
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
        # Plugins may speak in a channel later, with no message to answer (a follow-up).
        services.plugin_rooms.connect(PLATFORM, self._room_sender)
        # Messages a crash left unanswered in Discord channels are answered now (in the
        # background: it takes model calls).
        self._spawn(self._answer_unanswered(services))

    def _room_sender(self, room: Room) -> Send:
        return channel_sender(self.client.get_partial_messageable(int(room.platform_id or 0)))

    async def _answer_unanswered(self, services: AdapterServices) -> None:
        def sender(room: Room, message: Memory | None) -> Send:
            # The Discord message is gone from memory after a restart: the reply quotes nothing.
            return channel_sender(self.client.get_partial_messageable(int(room.platform_id or 0)))

        def in_lane(room: Room, work: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
            return self.lanes.submit(int(room.platform_id or 0), work)

        await services.answer_unanswered(PLATFORM, sender, in_lane)

    async def _wait_ready(self, gateway: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self.client.wait_until_ready())
        done, _ = await asyncio.wait(
            {ready, gateway}, timeout=self.ready_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready in done:
            log.info("discord: connected as %s%s", self.client.user, _shards_of(self.client))
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
        if self._services is not None:
            self._services.plugin_rooms.disconnect(PLATFORM)
        await self.lanes.close(self.stop_grace)
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
        self._spawn(self.command_sync.sync_guild(guild))

    async def on_disconnect(self) -> None:
        log.warning("discord: connection lost; discord.py is reconnecting")

    async def on_resumed(self) -> None:
        log.info("discord: connection resumed")

    async def on_message(self, message: discord.Message) -> None:
        services, me = self._services, self.client.user
        if services is None or me is None or self._stopping:
            return
        incoming = to_memory(message, me, agent_id=services.agent_id)
        if incoming is None:
            return
        if incoming.memory.quote_loader is None:
            incoming.memory.carry_quote(_quote_fetcher(message, me, services.agent_id))
        if self._image_limits is not None and message.attachments:
            # Downloaded only if Mnemo answers it (bot/adapters/images.py).
            where = f"discord message {message.channel.id}/{message.id}"
            loader = image_loader(images_of(message), self._image_limits, where=where)
            incoming.memory.carry_images(loader)
        # Queued before any await: discord.py starts a task per event in arrival order, so
        # the channel's lane gets them in that order. This task ends once it is answered.
        handled = self.lanes.submit(
            message.channel.id, lambda: self._handle(services, message, incoming)
        )
        await asyncio.wait([handled])

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        """A message edited (raw: whether or not discord.py still caches it). In its
        channel's lane, after the message itself: the stored words follow the edit and are
        learned from again; nothing is answered. An update without `content` (a link
        preview added) is not new words."""
        services, me = self._services, self.client.user
        if services is None or me is None or self._stopping or "content" not in payload.data:
            return
        incoming = to_memory(payload.message, me, agent_id=services.agent_id)
        if incoming is None:
            return
        memory = incoming.memory

        async def apply() -> None:
            try:
                await services.edited(memory)
            except Exception:
                log.exception("discord: the edit of message %s was not applied", memory.id)

        await asyncio.wait([self.lanes.submit(payload.channel_id, apply)])

    async def _handle(
        self, services: AdapterServices, message: discord.Message, incoming: Incoming
    ) -> None:
        try:
            memory = incoming.memory
            voice = voice_of(message) if self._hearing is not None else None
            if self._hearing is not None and voice is not None:
                # In the channel's lane: heard in order, while other channels go on.
                where = f"discord message {message.channel.id}/{message.id}"
                memory = await self._hearing.heard(memory, voice, where=where)
            await services.note_profiles(incoming.mentioned)
            await services.handle(
                memory,
                sender_for(
                    message,
                    reply=incoming.room.kind == "group",
                    edit_interval=self.edit_interval,
                ),
                typing=typing_in(message.channel),
                account=incoming.account,
                room=incoming.room,
            )
        except Exception:
            log.exception("discord: message %s in %s failed", message.id, _where(message.channel))

    # ------------------------------------------------------------------ command sync
    async def sync_commands(self, guilds: Iterable[discord.abc.Snowflake]) -> None:
        """Register the commands that changed since the last time: nothing when none did."""
        await self.command_sync.sync(guilds)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _on_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        log.error("discord: slash command failed", exc_info=error)
        with contextlib.suppress(discord.HTTPException):
            await answer(interaction, "Sorry, that failed on my side. Please try again later.")


def _quote_fetcher(
    message: discord.Message, me: discord.abc.User, agent_id: str
) -> QuoteLoader | None:
    """How to fetch the message `message` replies to when the gateway did not deliver it:
    from its channel, as far as the bot may read it there (Read Message History); called only
    if it is not stored and Mnemo answers. None for no reply, or a deleted message."""
    reference = message.reference
    if reference is None or reference.message_id is None:
        return None
    if isinstance(reference.resolved, discord.DeletedReferencedMessage):
        return None
    if reference.channel_id not in (None, message.channel.id):
        return None  # a message of another channel: not what the conversation here saw
    wanted = reference.message_id

    async def fetch() -> Quoted | None:
        try:
            replied = await message.channel.fetch_message(wanted)
        except (discord.HTTPException, *_NETWORK_ERRORS) as error:  # gone, or not readable
            log.info("discord: message %s replied to is not readable (%s)", wanted, error)
            return None
        return quote_of(replied, me, agent_id)

    return fetch


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

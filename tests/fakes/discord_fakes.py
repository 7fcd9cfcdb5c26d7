"""A Discord for tests, built from discord.py's own parsers: no network, no mocks of Mnemo.

Two levels:

* `FakeDiscord` works on a client's real `ConnectionState`: guilds come from GUILD_CREATE
  payloads, messages from MESSAGE_CREATE payloads (through the same channel resolution the
  gateway uses), so the adapter sees exactly the objects it would see live. Sends and typing
  go through the real `channel.send()` / `channel.typing()` into `RecordingHTTP`, which
  records the request payloads and answers like Discord does.

      fake = FakeDiscord(adapter.client, tree=adapter.tree)
      sarah = fake.person("Sarah")
      guild = fake.guild("Book Club")
      await adapter.on_message(fake.message(sarah, f"hi {fake.mention(fake.bot)}", guild=guild))
      assert fake.http.sent[0].content == "..."

  Slash commands are called through their callbacks with a `FakeInteraction`, which records
  what the user would see (`send_message`, `defer`, follow-ups, edits).

* `FakeDiscordServer` is a local Discord API and gateway (aiohttp, loopback only) for the
  start-up path: log-in with a token, IDENTIFY, READY, GUILD_CREATE, slash-command sync, and
  MESSAGE_CREATE pushed through the websocket. `pointed_at(server)` points discord.py at it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import discord
import yarl
from aiohttp import WSMsgType, web
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route

JOINED = "2024-01-01T00:00:00+00:00"
# The permission bits a freshly invited bot and ordinary members have in our fake guilds.
MEMBER_PERMISSIONS = discord.Permissions(
    view_channel=True, send_messages=True, read_message_history=True, use_application_commands=True
)
_MENTION = re.compile(r"<@!?(\d{15,20})>")
_ROLE_MENTION = re.compile(r"<@&(\d{15,20})>")


class Snowflakes:
    """Increasing snowflake ids stamped with the current time, so `created_at` is now and
    later messages sort after earlier ones, as on Discord."""

    def __init__(self) -> None:
        self._last = 0

    def __call__(self) -> int:
        self._last = max(self._last + 1, discord.utils.time_snowflake(datetime.now(UTC)))
        return self._last


@dataclass(frozen=True)
class Person:
    """A Discord user as payloads describe them."""

    id: int
    name: str
    bot: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.name.lower(),
            "global_name": self.name,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
        }


def role_payload(
    role_id: int, name: str, *, permissions: int = 0, position: int = 0, bot_id: int | None = None
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": str(role_id),
        "name": name,
        "permissions": str(permissions),
        "position": position,
        "color": 0,
        "hoist": False,
        "managed": bot_id is not None,
        "mentionable": False,
    }
    if bot_id is not None:
        payload["tags"] = {"bot_id": str(bot_id)}
    return payload


def member_payload(person: Person, roles: Sequence[int] = ()) -> dict[str, Any]:
    return {
        "user": person.payload(),
        "roles": [str(r) for r in roles],
        "joined_at": JOINED,
        "deaf": False,
        "mute": False,
        "flags": 0,
    }


def text_channel_payload(
    channel_id: int, guild_id: int, name: str, position: int
) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": 0,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
    }


def thread_payload(thread_id: int, guild_id: int, parent_id: int, name: str, owner: int) -> dict:
    return {
        "id": str(thread_id),
        "type": 11,
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "name": name,
        "owner_id": str(owner),
        "message_count": 0,
        "member_count": 1,
        "rate_limit_per_user": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": JOINED,
            "locked": False,
        },
    }


@dataclass(frozen=True)
class GuildIds:
    """The ids of one fake guild's fixed roles."""

    guild: int
    moderators: int
    bot_role: int


def guild_payload(
    ids: GuildIds,
    name: str,
    *,
    owner: Person,
    bot: Person,
    channels: Sequence[tuple[int, str]],
    threads: Sequence[tuple[int, int, str]] = (),
) -> dict[str, Any]:
    """A GUILD_CREATE payload: @everyone, a Moderators role with Manage Server, the bot's
    managed role, text channels and threads (id, parent id, name)."""
    return {
        "id": str(ids.guild),
        "name": name,
        "owner_id": str(owner.id),
        "unavailable": False,
        "member_count": 2,
        "large": False,
        "roles": [
            # Discord gives @everyone the guild's own id.
            role_payload(ids.guild, "@everyone", permissions=MEMBER_PERMISSIONS.value),
            role_payload(
                ids.moderators,
                "Moderators",
                permissions=discord.Permissions(manage_guild=True).value,
                position=1,
            ),
            role_payload(ids.bot_role, bot.name, position=2, bot_id=bot.id),
        ],
        "channels": [
            text_channel_payload(cid, ids.guild, cname, i)
            for i, (cid, cname) in enumerate(channels)
        ],
        "threads": [
            thread_payload(tid, ids.guild, parent, tname, owner.id)
            for tid, parent, tname in threads
        ],
        "members": [member_payload(bot, [ids.bot_role])],
        "emojis": [],
        "stickers": [],
    }


# Discord's message flag for a voice message, and the one file such a message carries.
IS_VOICE_MESSAGE = 1 << 13
VOICE_FILE = "voice-message.ogg"


def message_payload(
    message_id: int,
    channel_id: int,
    author: Person,
    content: str,
    *,
    guild_id: int | None = None,
    author_roles: Sequence[int] = (),
    mentions: Sequence[Person] = (),
    mention_roles: Sequence[int] = (),
    attachments: Sequence[dict[str, Any]] = (),
    kind: int = 0,
    reference: dict[str, Any] | None = None,
    webhook_id: int | None = None,
    flags: int = 0,
) -> dict[str, Any]:
    """A MESSAGE_CREATE payload as the gateway sends it."""
    payload: dict[str, Any] = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "author": author.payload(),
        "content": content,
        "timestamp": discord.utils.snowflake_time(message_id).isoformat(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [p.payload() for p in mentions],
        "mention_roles": [str(r) for r in mention_roles],
        "attachments": list(attachments),
        "embeds": [],
        "pinned": False,
        "type": kind,
        "flags": flags,
    }
    if guild_id is not None:
        payload["guild_id"] = str(guild_id)
        if webhook_id is None:
            payload["member"] = {
                k: v for k, v in member_payload(author, author_roles).items() if k != "user"
            }
    if webhook_id is not None:
        payload["webhook_id"] = str(webhook_id)
    if reference is not None:
        payload["message_reference"] = reference["message_reference"]
        if "referenced_message" in reference:
            payload["referenced_message"] = reference["referenced_message"]
    return payload


# --------------------------------------------------------------------------- recording HTTP
@dataclass(frozen=True)
class SentMessage:
    """One message the bot posted: what Discord received."""

    channel_id: int
    content: str
    payload: dict[str, Any]
    message_id: int | None = None

    @property
    def reply_to(self) -> int | None:
        reference = self.payload.get("message_reference")
        return int(reference["message_id"]) if reference else None


@dataclass(frozen=True)
class EditedMessage:
    """One edit of a message the bot posted: its new content, and when (time.monotonic)."""

    message_id: int
    content: str
    at: float


class RecordingHTTP:
    """Stands in for `discord.http.HTTPClient` on the calls a running bot makes."""

    def __init__(self, bot: Person, snowflakes: Snowflakes) -> None:
        self.bot = bot
        self._snowflakes = snowflakes
        self.sent: list[SentMessage] = []
        self.typing: list[int] = []
        # Slash commands registered, by guild id (None: global), and each registration call.
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self.registrations: list[int | None] = []
        self.payloads: dict[int, dict[str, Any]] = {}
        self.edits: list[EditedMessage] = []
        self.deleted: list[int] = []
        self.fail_sends_with: int | None = None
        # Messages fetched by id (`fetch_message`), and those the bot may not read.
        self.fetched: list[int] = []
        self.hidden: set[int] = set()

    async def send_message(self, channel_id: int, *, params: Any) -> dict[str, Any]:
        payload = dict(params.payload or {})
        if self.fail_sends_with is not None:
            raise _http_error(self.fail_sends_with)
        message = message_payload(
            self._snowflakes(), int(channel_id), self.bot, payload.get("content") or ""
        )
        self.sent.append(
            SentMessage(int(channel_id), payload.get("content") or "", payload, int(message["id"]))
        )
        self.payloads[int(message["id"])] = message
        return message

    async def edit_message(
        self, channel_id: int, message_id: int, *, params: Any
    ) -> dict[str, Any]:
        """PATCH a message: recorded with the time it came (time.monotonic)."""
        payload = dict(params.payload or {})
        message = self.payloads.get(int(message_id))
        if message is None:
            raise _http_error(404)
        content = payload.get("content") or ""
        self.edits.append(EditedMessage(int(message_id), content, time.monotonic()))
        message = {**message, "content": content, "edited_timestamp": message["timestamp"]}
        self.payloads[int(message_id)] = message
        return message

    async def delete_message(
        self, channel_id: int, message_id: int, *, reason: str | None = None
    ) -> None:
        if self.payloads.pop(int(message_id), None) is None:
            raise _http_error(404)
        self.deleted.append(int(message_id))

    async def get_message(self, channel_id: int, message_id: int) -> dict[str, Any]:
        """GET a message (`channel.fetch_message`): any this fake made, in its channel."""
        if int(message_id) in self.hidden:
            raise _http_error(403)  # no Read Message History there
        message = self.payloads.get(int(message_id))
        if message is None or int(message["channel_id"]) != int(channel_id):
            raise _http_error(404)
        self.fetched.append(int(message_id))
        return message

    def text_of(self, message_id: int) -> str | None:
        """What a message reads now (after its edits); None once deleted."""
        message = self.payloads.get(int(message_id))
        return None if message is None else str(message.get("content") or "")

    async def send_typing(self, channel_id: int) -> None:
        self.typing.append(int(channel_id))

    async def close(self) -> None:
        """`Client.close()` closes its HTTP session: nothing is open here."""

    async def bulk_upsert_guild_commands(
        self, application_id: int, guild_id: int, payload: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return self._register(application_id, guild_id, payload)

    async def bulk_upsert_global_commands(
        self, application_id: int, payload: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return self._register(application_id, None, payload)

    def _register(
        self, application_id: int, guild_id: int | None, payload: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.commands[guild_id] = payload
        self.registrations.append(guild_id)
        return [_registered(c, application_id, guild_id, self._snowflakes()) for c in payload]

    @property
    def texts(self) -> list[str]:
        return [m.content for m in self.sent]


def _registered(
    command: dict[str, Any], application_id: int, guild_id: int | None, command_id: int
) -> dict[str, Any]:
    data = {**command, "id": str(command_id), "application_id": str(application_id)}
    data["version"] = "1"
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
    return data


class _FakeResponse:
    def __init__(self, status: int) -> None:
        self.status = status
        self.reason = "Forbidden" if status == 403 else "Error"


def _http_error(status: int) -> discord.HTTPException:
    body = {"message": "Missing Permissions", "code": 50013}
    kind = discord.Forbidden if status == 403 else discord.HTTPException
    return kind(_FakeResponse(status), body)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the fake world
class FakeCDN:
    """Discord's CDN on loopback, for attachments' files: each served in chunks with no
    Content-Length (so only what is read counts), the URLs downloaded and the bytes each
    download wrote before the reader stopped (`served`)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}  # by path, "/attachments/<channel>/<name>"
        self.downloads: list[str] = []
        self.served: list[int] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeCDN:
        app = web.Application()
        app.router.add_get("/attachments/{channel}/{name}", self._serve)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        assert site._server is not None and site._server.sockets  # type: ignore[attr-defined]
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        data = self.files.get(request.path)
        if data is None:
            return web.Response(status=404, text="404: Not Found")
        self.downloads.append(str(request.url))
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        written = 0
        try:
            for start in range(0, len(data), 64 * 1024):
                chunk = data[start : start + 64 * 1024]
                await response.write(chunk)
                written += len(chunk)
            await response.write_eof()
        except ConnectionError:
            pass  # the reader stopped
        finally:
            self.served.append(written)
        return response


# Where attachments point without a FakeCDN: a loopback port nothing listens on, so a download
# fails at once and never reaches the real CDN.
NO_CDN = "http://127.0.0.1:9"


class FakeDiscord:
    """Guilds, people, DMs and messages on a client's real ConnectionState.

    Must be created inside the running event loop (discord.py's typing and views use it).
    Attachments' files are served by `cdn` (none: their downloads fail).
    """

    def __init__(
        self,
        client: discord.Client,
        *,
        tree: app_commands.CommandTree[Any] | None = None,
        bot_name: str = "Mnemo",
        cdn: FakeCDN | None = None,
    ) -> None:
        self.cdn = cdn
        self.snowflakes = Snowflakes()
        self.bot = Person(self.snowflakes(), bot_name, bot=True)
        self.application_id = self.bot.id
        self.http = RecordingHTTP(self.bot, self.snowflakes)
        self.client = client
        self.state = client._connection
        # What Client.login() would have set up.
        self.state.loop = asyncio.get_running_loop()
        self.state.http = self.http  # type: ignore[assignment]
        self.client.http = self.http  # type: ignore[assignment]
        self.state.user = discord.ClientUser(state=self.state, data=self.bot.payload())
        self.state.application_id = self.application_id
        if tree is not None:
            tree._http = self.http  # type: ignore[assignment]
        self._guilds: dict[int, GuildIds] = {}
        self._dms: dict[int, int] = {}
        self._people: dict[int, Person] = {self.bot.id: self.bot}

    # people -------------------------------------------------------------------------------
    def person(self, name: str, *, bot: bool = False, id: int | None = None) -> Person:
        person = Person(id or self.snowflakes(), name, bot=bot)
        self._people[person.id] = person
        return person

    def mention(self, who: Person | discord.Role) -> str:
        return f"<@&{who.id}>" if isinstance(who, discord.Role) else f"<@{who.id}>"

    # places -------------------------------------------------------------------------------
    def guild(
        self,
        name: str,
        *,
        owner: Person | None = None,
        channels: Sequence[str] = ("general",),
        threads: Sequence[tuple[str, str]] = (),
    ) -> discord.Guild:
        """A guild the bot is in (GUILD_CREATE); `threads` are (parent channel, thread name)."""
        ids = GuildIds(*(self.snowflakes() for _ in range(3)))
        channel_ids = [(self.snowflakes(), c) for c in channels]
        by_name = {c: i for i, c in channel_ids}
        thread_ids = [(self.snowflakes(), by_name[parent], t) for parent, t in threads]
        payload = guild_payload(
            ids,
            name,
            owner=owner or self.person(f"{name} owner"),
            bot=self.bot,
            channels=channel_ids,
            threads=thread_ids,
        )
        guild = self.state._add_guild_from_data(payload)  # type: ignore[arg-type]
        self._guilds[guild.id] = ids
        return guild

    def channel(self, guild: discord.Guild, name: str = "general") -> discord.abc.GuildChannel:
        found = discord.utils.get(guild.text_channels, name=name) or discord.utils.get(
            guild.threads, name=name
        )
        if found is None:
            raise KeyError(f"no channel {name!r} in {guild.name}")
        return found

    def bot_role(self, guild: discord.Guild) -> discord.Role:
        role = guild.get_role(self._guilds[guild.id].bot_role)
        assert role is not None
        return role

    def member(
        self, guild: discord.Guild, person: Person, *, manage_server: bool = False
    ) -> discord.Member:
        return discord.Member(
            data=member_payload(person, self._roles(guild, manage_server)),  # type: ignore[arg-type]
            guild=guild,
            state=self.state,
        )

    def dm_channel_id(self, person: Person) -> int:
        return self._dms.setdefault(person.id, self.snowflakes())

    def _roles(self, guild: discord.Guild, manage_server: bool) -> list[int]:
        return [self._guilds[guild.id].moderators] if manage_server else []

    # messages -----------------------------------------------------------------------------
    def message(
        self,
        author: Person,
        text: str,
        *,
        guild: discord.Guild | None = None,
        channel: str = "general",
        reply_to: discord.Message | None = None,
        reply_ping: bool = False,
        reply_delivered: bool = True,
        attachments: Sequence[tuple[str, str, int]] = (),
        files: Mapping[str, bytes] | None = None,
        kind: int = 0,
        webhook: bool = False,
        manage_server: bool = False,
        voice: bytes | None = None,
    ) -> discord.Message:
        """A message as the gateway delivers it. Mentions are read from `text` (<@id>,
        <@&id>) like Discord does; `attachments` are (filename, content type, size), and
        `files` the bytes the CDN (`cdn`) serves for them, by filename. `voice`: a voice message
        with these bytes (Discord's IS_VOICE_MESSAGE flag, one `voice-message.ogg`).
        `reply_delivered`: False for a reply whose message replied to the gateway left out
        (Discord sends only its reference then: the bot fetches it)."""
        if voice is not None:
            attachments = [*attachments, (VOICE_FILE, "audio/ogg", len(voice))]
            files = {**(files or {}), VOICE_FILE: voice}
        where = self.channel(guild, channel).id if guild is not None else self.dm_channel_id(author)
        cdn = self.cdn.base_url if self.cdn is not None else NO_CDN
        people = self._people_in(text)
        reference = None
        if reply_to is not None:
            replied = self._payload_of(reply_to)
            reference = {
                "message_reference": {
                    "message_id": str(reply_to.id),
                    "channel_id": str(reply_to.channel.id),
                    **({"guild_id": str(guild.id)} if guild is not None else {}),
                },
                "referenced_message": replied,
            }
            if not reply_delivered:
                del reference["referenced_message"]
            if reply_ping:
                people.append(Person(reply_to.author.id, reply_to.author.name, reply_to.author.bot))
        message_id = self.snowflakes()
        payload = message_payload(
            message_id,
            where,
            author,
            text,
            guild_id=guild.id if guild is not None else None,
            author_roles=self._roles(guild, manage_server) if guild is not None else (),
            mentions=people,
            mention_roles=[int(r) for r in _ROLE_MENTION.findall(text)],
            attachments=[
                {
                    "id": str(self.snowflakes()),
                    "filename": filename,
                    "content_type": content_type,
                    "size": size,
                    "url": f"{cdn}/attachments/{where}/{filename}",
                    "proxy_url": f"{cdn}/attachments/{where}/{filename}",
                }
                for filename, content_type, size in attachments
            ],
            kind=kind,
            reference=reference,
            webhook_id=self.snowflakes() if webhook else None,
            flags=IS_VOICE_MESSAGE if voice is not None else 0,
        )
        self.http.payloads[message_id] = payload
        for attachment in payload["attachments"]:
            data = (files or {}).get(attachment["filename"])
            if data is not None and self.cdn is not None:
                self.cdn.files[yarl.URL(attachment["url"]).path] = data
        return self.parse(payload)

    def edit(self, message: discord.Message, text: str) -> discord.RawMessageUpdateEvent:
        """Its author edits `message` to `text`: the MESSAGE_UPDATE event as discord.py's
        gateway handling builds it (`on_raw_message_edit`'s argument)."""
        payload = {
            **self._payload_of(message),
            "content": text,
            "edited_timestamp": datetime.now(UTC).isoformat(),
        }
        self.http.payloads[message.id] = payload
        return discord.RawMessageUpdateEvent(data=payload, message=self.parse(payload))  # type: ignore[arg-type]

    def parse(self, payload: dict[str, Any]) -> discord.Message:
        """discord.py's MESSAGE_CREATE handling, minus the dispatch."""
        channel, _ = self.state._get_guild_channel(payload)  # type: ignore[arg-type]
        return discord.Message(state=self.state, channel=channel, data=payload)  # type: ignore[arg-type]

    def _people_in(self, text: str) -> list[Person]:
        return [
            self._people.get(int(i)) or Person(int(i), f"user{i}") for i in _MENTION.findall(text)
        ]

    def _payload_of(self, message: discord.Message) -> dict[str, Any]:
        payload = self.http.payloads.get(message.id)
        if payload is None:
            raise KeyError(f"message {message.id} was not made by this FakeDiscord")
        return payload

    # interactions -------------------------------------------------------------------------
    def interaction(
        self,
        person: Person,
        *,
        guild: discord.Guild | None = None,
        channel: str = "general",
        manage_server: bool = False,
        locale: discord.Locale = discord.Locale.american_english,
    ) -> FakeInteraction:
        """A slash-command use by `person` in a guild channel, or in their DM with the bot,
        from a Discord client set to `locale`."""
        if guild is None:
            dm = self.state.add_dm_channel(
                {"id": str(self.dm_channel_id(person)), "type": 1, "recipients": [person.payload()]}  # type: ignore[typeddict-item]
            )
            user: discord.User | discord.Member = self.state.store_user(person.payload())  # type: ignore[arg-type]
            return FakeInteraction(
                user=user,
                guild=None,
                channel=dm,
                permissions=discord.Permissions.none(),
                locale=locale,
            )
        where = self.channel(guild, channel)
        member = self.member(guild, person, manage_server=manage_server)
        permissions = where.permissions_for(member)
        return FakeInteraction(
            user=member, guild=guild, channel=where, permissions=permissions, locale=locale
        )


# --------------------------------------------------------------------------- interactions
@dataclass
class Shown:
    """Something the user saw in answer to an interaction."""

    kind: Literal["message", "followup", "edit", "defer"]
    content: str | None
    ephemeral: bool
    view: discord.ui.View | None = None
    # A file sent with it: (file name, bytes).
    file: tuple[str, bytes] | None = None


def _read(file: discord.File | None) -> tuple[str, bytes] | None:
    return None if file is None else (file.filename, file.fp.read())


class FakeInteractionResponse:
    def __init__(self, interaction: FakeInteraction) -> None:
        self._interaction = interaction
        self._done = False

    def is_done(self) -> bool:
        return self._done

    def _respond(self) -> None:
        if self._done:
            raise discord.InteractionResponded(self._interaction)  # type: ignore[arg-type]
        self._done = True

    async def send_message(
        self,
        content: str | None = None,
        *,
        ephemeral: bool = False,
        view: discord.ui.View | None = None,
        file: discord.File | None = None,
        **_: Any,
    ) -> None:
        self._respond()
        self._interaction.shown.append(Shown("message", content, ephemeral, view, _read(file)))

    async def defer(self, *, ephemeral: bool = False, thinking: bool = False) -> None:
        self._respond()
        self._interaction.shown.append(Shown("defer", None, ephemeral))

    async def edit_message(
        self, *, content: str | None = None, view: discord.ui.View | None = None, **_: Any
    ) -> None:
        self._respond()
        self._interaction.shown.append(Shown("edit", content, self._interaction.ephemeral, view))


class FakeFollowup:
    def __init__(self, interaction: FakeInteraction) -> None:
        self._interaction = interaction

    async def send(
        self,
        content: str | None = None,
        *,
        ephemeral: bool = False,
        view: discord.ui.View | None = None,
        file: discord.File | None = None,
        **_: Any,
    ) -> None:
        if not self._interaction.response.is_done():
            raise RuntimeError("a follow-up before the interaction was answered fails on Discord")
        self._interaction.shown.append(Shown("followup", content, ephemeral, view, _read(file)))


@dataclass
class FakeInteraction:
    """What slash-command callbacks use of `discord.Interaction`, recording the answers."""

    user: discord.User | discord.Member
    guild: discord.Guild | None
    channel: discord.abc.Messageable
    permissions: discord.Permissions
    shown: list[Shown] = field(default_factory=list)
    # As Discord dates it (its id's time): now.
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # The language of the person's Discord client.
    locale: discord.Locale = discord.Locale.american_english

    def __post_init__(self) -> None:
        self.response = FakeInteractionResponse(self)
        self.followup = FakeFollowup(self)

    @property
    def guild_id(self) -> int | None:
        return self.guild.id if self.guild is not None else None

    @property
    def channel_id(self) -> int:
        return self.channel.id  # type: ignore[attr-defined]

    @property
    def ephemeral(self) -> bool:
        return any(s.ephemeral for s in self.shown if s.kind in ("message", "defer"))

    async def edit_original_response(
        self, *, content: str | None = None, view: discord.ui.View | None = None, **_: Any
    ) -> None:
        self.shown.append(Shown("edit", content, self.ephemeral, view))

    @property
    def text(self) -> str:
        """Everything shown, in order, as the user would read it."""
        return "\n".join(s.content for s in self.shown if s.content)

    @property
    def view(self) -> discord.ui.View | None:
        views = [s.view for s in self.shown if s.view is not None]
        return views[-1] if views else None

    def button(self, label: str) -> discord.ui.Button[Any]:
        """A button of the last view shown, to press with `await button.callback(other)`."""
        assert self.view is not None, "no view was shown"
        for item in self.view.children:
            if isinstance(item, discord.ui.Button) and item.label == label:
                return item
        raise KeyError(f"no button {label!r}")


# --------------------------------------------------------------------------- fake server
@dataclass
class ServerGuild:
    payload: dict[str, Any]

    @property
    def id(self) -> int:
        return int(self.payload["id"])


class FakeDiscordServer:
    """Discord's REST API and gateway on loopback: enough for log-in, start-up and sync.

    `token` is the one valid token (anything else gets 401 / close code 4004);
    `message_content_allowed=False` closes IDENTIFY with 4014 like a bot whose Message
    Content intent is off in the Developer Portal.
    """

    def __init__(
        self, *, token: str, message_content_allowed: bool = True, recommended_shards: int = 1
    ) -> None:
        self.token = token
        self.message_content_allowed = message_content_allowed
        # What GET /gateway/bot recommends (an AutoShardedClient without a count asks).
        self.recommended_shards = recommended_shards
        # Each gateway connection's shard (id, count), from its IDENTIFY.
        self.shard_of: dict[web.WebSocketResponse, tuple[int, int]] = {}
        self.snowflakes = Snowflakes()
        self.bot = Person(self.snowflakes(), "Mnemo", bot=True)
        self.guilds: list[ServerGuild] = []
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self.sent: list[tuple[int, dict[str, Any]]] = []
        # Answers to interactions, in order: (interaction id, what the user sees).
        self.answers: list[tuple[int, InteractionAnswer]] = []
        self._interaction_tokens: dict[str, int] = {}
        self._dms: dict[int, int] = {}
        self.identified: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self.resumed = 0
        self.message_arrived = asyncio.Event()
        self._changed = asyncio.Condition()
        self._sockets: list[web.WebSocketResponse] = []
        self._sequence = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def add_guild(self, name: str, *, channels: Sequence[str] = ("general",)) -> ServerGuild:
        ids = GuildIds(*(self.snowflakes() for _ in range(3)))
        owner = Person(self.snowflakes(), f"{name} owner")
        payload = guild_payload(
            ids,
            name,
            owner=owner,
            bot=self.bot,
            channels=[(self.snowflakes(), c) for c in channels],
        )
        guild = ServerGuild(payload)
        self.guilds.append(guild)
        return guild

    async def __aenter__(self) -> FakeDiscordServer:
        app = web.Application()
        api = "/api/v10"
        app.router.add_get(f"{api}/users/@me", self._me)
        app.router.add_get(f"{api}/oauth2/applications/@me", self._application)
        app.router.add_put(f"{api}/applications/{{app}}/guilds/{{guild}}/commands", self._sync)
        app.router.add_put(f"{api}/applications/{{app}}/commands", self._sync)
        app.router.add_post(f"{api}/channels/{{channel}}/messages", self._send)
        app.router.add_post(f"{api}/channels/{{channel}}/typing", self._typing)
        app.router.add_get(f"{api}/gateway/bot", self._gateway_bot)
        app.router.add_post(f"{api}/interactions/{{id}}/{{token}}/callback", self._callback)
        app.router.add_post(f"{api}/webhooks/{{app}}/{{token}}", self._followup)
        app.router.add_patch(
            f"{api}/webhooks/{{app}}/{{token}}/messages/{{message}}", self._followup
        )
        app.router.add_get("/gateway", self._gateway)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_: object) -> None:
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # REST ---------------------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        self.requests.append(f"{request.method} {request.path}")
        return request.headers.get("Authorization") == f"Bot {self.token}"

    @staticmethod
    def _unauthorized() -> web.Response:
        return _json({"message": "401: Unauthorized", "code": 0}, status=401)

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return _json(self.bot.payload())

    async def _application(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        owner = Person(self.snowflakes(), "Owner")
        return _json(
            {
                "id": str(self.bot.id),
                "name": self.bot.name,
                "description": "",
                "icon": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": owner.payload(),
                "verify_key": "0" * 64,
                "flags": 0,
            }
        )

    async def _sync(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        payload = await request.json()
        guild = request.match_info.get("guild")
        guild_id = int(guild) if guild else None
        self.commands[guild_id] = payload
        await self._notify()
        app = int(request.match_info["app"])
        return _json([_registered(c, app, guild_id, self.snowflakes()) for c in payload])

    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        channel = int(request.match_info["channel"])
        payload = await request.json()
        self.sent.append((channel, payload))
        self.message_arrived.set()
        await self._notify()
        return _json(
            message_payload(self.snowflakes(), channel, self.bot, payload.get("content", ""))
        )

    async def _typing(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return web.Response(status=204)

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return _json(
            {
                "url": self.gateway_url,
                "shards": self.recommended_shards,
                "session_start_limit": limit,
            }
        )

    # interactions -------------------------------------------------------------------------
    def offered(self, name: str, guild: ServerGuild | None) -> dict[str, Any] | None:
        """The registered command `/name` as Discord offers it in a server or in the DM with
        the bot: a server's own commands, then the global ones allowed in that context
        (`contexts`: 0 servers, 1 the bot's DM; missing means both, the old
        `dm_permission` decides for DMs). None: Discord shows no such command there."""
        context = 0 if guild is not None else 1
        scopes = ([guild.id] if guild is not None else []) + [None]
        for scope in scopes:
            for command in self.commands.get(scope, []):
                if command["name"] != name:
                    continue
                contexts = command.get("contexts")
                if contexts is None:
                    allowed = context == 0 or command.get("dm_permission", True)
                else:
                    allowed = context in contexts
                if allowed:
                    return command
        return None

    async def use_command(
        self,
        author: Person,
        name: str,
        *,
        guild: ServerGuild | None = None,
        options: Sequence[dict[str, Any]] = (),
        manage_server: bool = False,
    ) -> int:
        """A person uses `/name` in a server's first channel or in their DM with the bot:
        INTERACTION_CREATE on the gateway, as Discord sends it. Raises LookupError when
        Discord would not offer that command there (not registered for that context)."""
        command = self.offered(name, guild)
        if command is None:
            where = f"server {guild.id}" if guild is not None else "a DM"
            raise LookupError(f"Discord offers no /{name} in {where}")
        data = {"id": str(self.snowflakes()), "name": name, "type": 1, "options": list(options)}
        return await self._interact(author, 2, data, guild=guild, manage_server=manage_server)

    async def press(
        self,
        author: Person,
        answer: InteractionAnswer,
        label: str,
        *,
        guild: ServerGuild | None = None,
    ) -> int:
        """A person presses the button `label` under an interaction's answer."""
        custom_id = dict(answer.buttons)[label]
        assert answer.message_id is not None
        channel = self._channel_of(author, guild)
        message = message_payload(answer.message_id, int(channel["id"]), self.bot, answer.text)
        message["flags"] = 64 if answer.ephemeral else 0
        extra = {"message": message}
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._interact(author, 3, data, guild=guild, extra=extra)

    def dm_channel_id(self, person: Person) -> int:
        """The id of the person's DM channel with the bot."""
        return int(self._channel_of(person, None)["id"])

    def _channel_of(self, author: Person, guild: ServerGuild | None) -> dict[str, Any]:
        if guild is not None:
            return dict(guild.payload["channels"][0])
        dm = self._dms.setdefault(author.id, self.snowflakes())
        return {"id": str(dm), "type": 1, "recipients": [author.payload()]}

    async def _interact(
        self,
        author: Person,
        kind: int,
        data: dict[str, Any],
        *,
        guild: ServerGuild | None,
        manage_server: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> int:
        interaction_id = self.snowflakes()
        token = f"interaction-{interaction_id}"
        self._interaction_tokens[token] = interaction_id
        channel = self._channel_of(author, guild)
        payload: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(self.bot.id),
            "type": kind,
            "data": data,
            "token": token,
            "version": 1,
            "locale": "en-US",
            "attachment_size_limit": 8_388_608,
            "entitlements": [],
            "app_permissions": str(MEMBER_PERMISSIONS.value),
            "channel_id": channel["id"],
            "channel": channel,
            **(extra or {}),
        }
        if guild is not None:
            roles = [guild.payload["roles"][1]["id"]] if manage_server else []
            permissions = MEMBER_PERMISSIONS | discord.Permissions(manage_guild=manage_server)
            member = member_payload(author, [int(r) for r in roles])
            payload.update(
                guild_id=str(guild.id),
                member={**member, "permissions": str(permissions.value)},
                context=0,
                authorizing_integration_owners={"0": str(guild.id)},
            )
        else:
            payload.update(
                user=author.payload(), context=1, authorizing_integration_owners={"0": "0"}
            )
        await self.push("INTERACTION_CREATE", payload)
        return interaction_id

    def answered(self, interaction_id: int) -> list[InteractionAnswer]:
        return [answer for i, answer in self.answers if i == interaction_id]

    async def _callback(self, request: web.Request) -> web.Response:
        interaction_id = int(request.match_info["id"])
        if self._interaction_tokens.get(request.match_info["token"]) != interaction_id:
            return _json({"message": "Unknown interaction", "code": 10062}, status=404)
        body = await _body(request)
        data = body.get("data") or {}
        kind = int(body["type"])
        message_id = self.snowflakes()
        self.answers.append((interaction_id, InteractionAnswer.of(kind, data, message_id)))
        await self._notify()
        return _json(
            {
                "interaction": {
                    "id": str(interaction_id),
                    "type": 2,
                    "response_message_id": str(message_id),
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
                }
            }
        )

    async def _followup(self, request: web.Request) -> web.Response:
        interaction_id = self._interaction_tokens.get(request.match_info["token"])
        if interaction_id is None:
            return _json({"message": "Unknown Webhook", "code": 10015}, status=404)
        body = await _body(request)
        kind = EDIT if request.method == "PATCH" else FOLLOW_UP
        message_id = self.snowflakes()
        self.answers.append((interaction_id, InteractionAnswer.of(kind, body, message_id)))
        await self._notify()
        channel = self.snowflakes()
        return _json(message_payload(message_id, channel, self.bot, body.get("content", "")))

    # gateway ------------------------------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 45_000}}))
        async for frame in socket:
            if frame.type is not WSMsgType.TEXT:
                break
            message = json.loads(frame.data)
            if message["op"] == 1:
                await socket.send_str(json.dumps({"op": 11}))
            elif message["op"] == 2:
                await self._identify(socket, message["d"])
            elif message["op"] == 6:  # RESUME after a dropped connection
                self.resumed += 1
                await self._dispatch(socket, "RESUMED", {})
                await self._notify()
        if socket in self._sockets:
            self._sockets.remove(socket)
        self.shard_of.pop(socket, None)
        return socket

    def guilds_of(self, shard: tuple[int, int]) -> list[ServerGuild]:
        """The guilds Discord serves on a shard: (guild_id >> 22) % shard count."""
        shard_id, count = shard
        return [g for g in self.guilds if shard_for(g.id, count) == shard_id]

    def _serves(self, socket: web.WebSocketResponse, guild_id: int | None) -> bool:
        shard_id, count = self.shard_of.get(socket, (0, 1))
        # Direct messages arrive on shard 0 only.
        return shard_id == (0 if guild_id is None else shard_for(guild_id, count))

    async def _identify(self, socket: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.identified.append({k: v for k, v in data.items() if k != "token"})
        shard_id, count = data.get("shard") or (0, 1)
        self.shard_of[socket] = (int(shard_id), int(count))
        if data.get("token") != self.token:
            await socket.close(code=4004, message=b"Authentication failed.")
            return
        wants_content = bool(
            int(data.get("intents", 0)) & discord.Intents(message_content=True).value
        )
        if wants_content and not self.message_content_allowed:
            await socket.close(code=4014, message=b"Disallowed intent(s).")
            return
        await self._dispatch(
            socket,
            "READY",
            {
                "v": 10,
                "user": self.bot.payload(),
                "guilds": [
                    {"id": str(g.id), "unavailable": True}
                    for g in self.guilds_of(self.shard_of[socket])
                ],
                "shard": list(self.shard_of[socket]),
                "session_id": "fake-session",
                "resume_gateway_url": self.gateway_url,
                "application": {"id": str(self.bot.id), "flags": 0},
            },
        )
        for guild in self.guilds_of(self.shard_of[socket]):
            await self._dispatch(socket, "GUILD_CREATE", guild.payload)

    async def _dispatch(self, socket: web.WebSocketResponse, event: str, data: Any) -> None:
        frame = {"op": 0, "t": event, "s": next(self._sequence), "d": data}
        await socket.send_str(json.dumps(frame))

    async def push(self, event: str, data: dict[str, Any]) -> None:
        """Send a gateway event (e.g. MESSAGE_CREATE) to the connection of the shard that
        serves its guild (shard 0 for direct messages), as Discord does."""
        guild_id = int(data["guild_id"]) if data.get("guild_id") else None
        for socket in list(self._sockets):
            if self._serves(socket, guild_id):
                await self._dispatch(socket, event, data)

    async def until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until `condition()` holds; checked whenever the server saw something new."""

        async def check() -> None:
            async with self._changed:
                await self._changed.wait_for(condition)

        await asyncio.wait_for(check(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def drop(self, code: int) -> None:
        """Close every gateway connection with `code`: 4000 is a drop the client resumes
        from; 4004 means the token is no longer valid (e.g. reset in the portal)."""
        for socket in list(self._sockets):
            await socket.close(code=code)

    def message(self, guild: ServerGuild, author: Person, text: str) -> dict[str, Any]:
        channel = int(guild.payload["channels"][0]["id"])
        return message_payload(self.snowflakes(), channel, author, text, guild_id=guild.id)

    @property
    def gateway_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/gateway"


@dataclass(frozen=True)
class InteractionAnswer:
    """What a person saw of an interaction's answer (a callback, a follow-up, an edit)."""

    # Discord's callback types: 4 a message, 5 "thinking…" (deferred), 7 the message with
    # the button updated; and FOLLOW_UP, EDIT (the original answer edited later).
    kind: int
    text: str
    ephemeral: bool
    message_id: int | None = None
    # The buttons shown with it: label -> custom id.
    buttons: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls, kind: int, data: dict[str, Any], message_id: int | None = None
    ) -> InteractionAnswer:
        flags = int(data.get("flags") or 0)
        buttons = tuple(
            (str(c.get("label")), str(c.get("custom_id")))
            for row in data.get("components") or []
            for c in row.get("components") or []
            if c.get("type") == 2
        )
        return cls(kind, str(data.get("content") or ""), bool(flags & 64), message_id, buttons)


FOLLOW_UP = 0
EDIT = -1


async def _body(request: web.Request) -> dict[str, Any]:
    """A JSON body, or a multipart one's `payload_json` (a message with a file)."""
    if request.content_type == "application/json":
        return dict(await request.json())
    form = await request.post()
    payload = form.get("payload_json")
    return dict(json.loads(str(payload))) if payload is not None else {}


def shard_for(guild_id: int, shard_count: int) -> int:
    """The shard Discord serves a guild on."""
    return (guild_id >> 22) % shard_count


def _json(data: Any, status: int = 200) -> web.Response:
    # discord.py decodes a body only when Content-Type is exactly application/json.
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


@contextmanager
def pointed_at(server: FakeDiscordServer) -> Iterator[None]:
    """Point discord.py's REST base URL and gateway at `server` for the duration."""
    base, gateway = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    Route.BASE = f"{server.url}/api/v10"  # type: ignore[misc]
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(server.gateway_url)  # type: ignore[misc]
    try:
        yield
    finally:
        Route.BASE = base  # type: ignore[misc]
        DiscordWebSocket.DEFAULT_GATEWAY = gateway  # type: ignore[misc]

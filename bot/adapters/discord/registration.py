"""Registering the slash commands with Discord, only when they changed.

Registering is one PUT per scope (global, or one server). Doing it for every server at every
start does not scale (a bot in 2,500 servers would make 2,500 calls at each restart, and
Discord rate-limits them), and it is needless: the commands change only when Mnemo or its
plugins do. So the hash of each scope's payload is kept in the data folder
(`discord-commands.json`), and a scope is registered again only when its payload's hash differs.

Without a data folder (tests, a throw-away run) the record lives in memory: every process then
registers once at start, as before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
import discord
from discord import app_commands

from bot.adapters.discord.translation import CatalogTranslator

log = logging.getLogger(__name__)

FILE_NAME = "discord-commands.json"
GLOBAL = "global"
_NETWORK_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


def scope_of(guild_id: int | None) -> str:
    return GLOBAL if guild_id is None else f"guild:{guild_id}"


def payload_hash(payload: list[dict[str, Any]]) -> str:
    """The same commands give the same hash whatever their order."""
    ordered = sorted(payload, key=lambda command: str(command.get("name")))
    encoded = json.dumps(ordered, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()


class Registrations:
    """Hashes of the command payloads last registered, by scope (`global`, `guild:<id>`)."""

    def __init__(self, folder: Path | None) -> None:
        self.path = None if folder is None else folder / FILE_NAME
        self._hashes: dict[str, str] = self._read()

    def unchanged(self, guild_id: int | None, payload: list[dict[str, Any]]) -> bool:
        return self._hashes.get(scope_of(guild_id)) == payload_hash(payload)

    def known(self, guild_id: int | None) -> bool:
        """Something was registered in this scope by this data folder's Mnemo."""
        return scope_of(guild_id) in self._hashes

    def empty(self, guild_id: int | None) -> bool:
        return self._hashes.get(scope_of(guild_id)) == payload_hash([])

    def record(
        self, guild_id: int | None, payload: list[dict[str, Any]], *, save: bool = True
    ) -> None:
        self._hashes[scope_of(guild_id)] = payload_hash(payload)
        if save:
            self.save()

    def _read(self) -> dict[str, str]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            # Unreadable: registering everything once more is the safe way back.
            log.warning(
                "discord: %s is unreadable (%s); registering commands again", self.path, error
            )
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Written whole then renamed: a crash mid-write leaves the old record, not half.
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".discord-commands")
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(self._hashes, file, indent=1, sort_keys=True)
            os.replace(temporary, self.path)
        except OSError as error:
            # Only costs a needless sync at the next start.
            log.warning(
                "discord: cannot record the registered commands in %s (%s)", self.path, error
            )


class CommandSync:
    """Registers the tree's commands with Discord, each scope only when its payload changed.

    Personal commands (usable in DMs) go globally; admin commands (`guild_only`) into each
    server, or globally too when `everything_global` (MNEMO_DISCORD_GLOBAL_SYNC), still
    offered in servers only.
    """

    def __init__(
        self,
        client: discord.Client,
        tree: app_commands.CommandTree[Any],
        registrations: Registrations,
        *,
        everything_global: bool,
    ) -> None:
        self.client = client
        self.tree = tree
        self.registrations = registrations
        self.everything_global = everything_global

    async def payloads(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What to register: (globally, in each server), each description in every language
        with a catalog (`CatalogTranslator`)."""
        everywhere: list[dict[str, Any]] = []
        per_server: list[dict[str, Any]] = []
        translator = CatalogTranslator()
        for command in self.tree.get_commands():
            payload = await command.get_translated_payload(self.tree, translator)
            if command.guild_only and not self.everything_global:
                per_server.append(payload)
            else:
                everywhere.append(payload)
        return everywhere, per_server

    async def sync(self, guilds: Iterable[discord.abc.Snowflake]) -> None:
        everywhere, per_server = await self.payloads()
        await self._register(None, everywhere)
        try:
            for guild in guilds:
                # The record is written once at the end, not once per server.
                await self.sync_guild(guild, per_server, save=False)
        finally:
            self.registrations.save()

    async def sync_guild(
        self,
        guild: discord.abc.Snowflake,
        per_server: list[dict[str, Any]] | None = None,
        *,
        save: bool = True,
    ) -> None:
        if per_server is None:
            _, per_server = await self.payloads()
        if self.everything_global:
            # A server keeps no commands of its own then, but one that got some before the
            # switch would show them twice: those are removed, once.
            if not self.registrations.known(guild.id) or self.registrations.empty(guild.id):
                return
            per_server = []
        await self._register(guild.id, per_server, save=save)

    async def _register(
        self, guild_id: int | None, payload: list[dict[str, Any]], *, save: bool = True
    ) -> None:
        where = "globally" if guild_id is None else f"in server {guild_id}"
        if self.registrations.unchanged(guild_id, payload):
            log.debug("discord: slash commands %s unchanged", where)
            return
        application_id = self.client.application_id
        if application_id is None:
            log.warning("discord: cannot register slash commands before logging in")
            return
        http = self.client.http
        try:
            if guild_id is None:
                await http.bulk_upsert_global_commands(application_id, payload=payload)
            else:
                await http.bulk_upsert_guild_commands(application_id, guild_id, payload=payload)
        except discord.Forbidden:
            log.warning(
                "discord: cannot register slash commands in server %s; re-invite the bot with "
                "the applications.commands scope",
                guild_id,
            )
            return
        except discord.HTTPException as error:
            log.warning("discord: slash-command sync %s failed (HTTP %s)", where, error.status)
            return
        except _NETWORK_ERRORS as error:
            log.warning("discord: slash-command sync %s failed (%s)", where, error)
            return
        self.registrations.record(guild_id, payload, save=save)
        log.info("discord: %d slash commands registered %s", len(payload), where)

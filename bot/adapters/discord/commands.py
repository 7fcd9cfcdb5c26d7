"""Discord's side of the command layer (bot/commands/command_set.py): one slash command per command,
answered privately (ephemeral). The built-in ones have typed options (a member picker, a
page number); a plugin's command takes its arguments as one text option, described by its
usage. Who is an admin: a configured admin id (the only way in DMs), or a member with Manage
Server in that server.

Two kinds, registered differently (adapter.py syncs them):

- personal commands, which everyone uses about themselves (/help, /privacy, /me, /forgetme,
  /export, /mydata, /optout, /optin, /reset, /new, /forget for one's own facts, and /facts for
  `/facts history`): registered globally, usable in servers and in a DM with the bot (Discord
  never shows a server's commands in DMs); their admin forms (/forget member:) are checked per
  call;
- admin commands (/stats, /learning, the plugins' admin commands): servers only, and
  shown only to members with Manage Server until a server's Integrations settings say
  otherwise (`default_permissions`). Mnemo still checks every call itself.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

from bot.adapters.discord.convert import PLATFORM, world_of
from bot.adapters.split import DISCORD_LIMIT, split_message
from bot.commands.command_set import (
    BUILT_IN,
    CONFIRM_BY_BUTTON,
    FORGET_ME_PROMPT,
    Answer,
    CommandInfo,
    Commands,
    Request,
    admin_accounts,
)
from bot.commands.fact_history import SUBCOMMAND, open_to_all
from bot.config.settings import PlatformSettings
from bot.domain.records import account_id, room_id
from bot.i18n import N_, SOURCE_TEXTS, Texts

log = logging.getLogger(__name__)

# In English, shown in the asker's language (bot/i18n).
REFUSED = N_(
    "Only people with the Manage Server permission (or the bot's configured admins) "
    "can use this command."
)
FORGET_ME_CANCELLED = N_("Cancelled: I forgot nothing.")
FORGET_ME_EXPIRED = N_("No answer, so I forgot nothing. Use /forgetme again if you meant it.")
FORGET_ME_LABEL = N_("Forget me")
FORGET_THEM_LABEL = N_("Forget them")

SlashCommand = app_commands.Command[Any, ..., None]

# Personal commands: in servers, and in the DM with the bot. Not in group DMs: a bot installed
# to servers is not in those.
EVERYWHERE = app_commands.AppCommandContext(guild=True, dm_channel=True, private_channel=False)
SERVERS_ONLY = app_commands.AppCommandContext(guild=True, dm_channel=False, private_channel=False)
# Installed to servers only: a user install would put the bot where it reads nothing.
SERVER_INSTALL = app_commands.AppInstallationType(guild=True, user=False)
# Who sees an admin command in a server's command picker, until the server changes it.
ADMIN_PERMISSIONS = discord.Permissions(manage_guild=True)


def is_personal(info: CommandInfo) -> bool:
    """Everyone may use it, or a form of it (`/facts history`, their own), for themselves."""
    return not info.admin_only or open_to_all(info.name, SUBCOMMAND)


def shaped(command: SlashCommand, info: CommandInfo) -> SlashCommand:
    """Where Discord offers the command, and to whom (see the module's docstring)."""
    personal = is_personal(info)
    command.allowed_contexts = EVERYWHERE if personal else SERVERS_ONLY
    command.allowed_installs = SERVER_INSTALL
    command.guild_only = not personal
    command.default_permissions = None if personal else ADMIN_PERMISSIONS
    return command


def _built_in_info(name: str) -> CommandInfo:
    return next(info for info in BUILT_IN if info.name == name)


async def answer(interaction: discord.Interaction, reply: str | Answer) -> None:
    """Reply privately (every answer here is ephemeral: only the asker sees it); a long
    answer continues in follow-ups, and a file goes with the last part."""
    reply = Answer.of(reply)
    parts = split_message(reply.text, DISCORD_LIMIT) or ["(nothing)"]
    for number, part in enumerate(parts, start=1):
        extra: dict[str, Any] = {}
        if number == len(parts) and reply.attachment is not None:
            data = io.BytesIO(reply.attachment.data)
            extra["file"] = discord.File(data, filename=reply.attachment.filename)
        if interaction.response.is_done():
            await interaction.followup.send(part, ephemeral=True, **extra)
        else:
            await interaction.response.send_message(part, ephemeral=True, **extra)


class ForgetMeView(discord.ui.View):
    """The confirmation for /forgetme: nothing is deleted until its owner presses the button."""

    def __init__(
        self,
        origin: discord.Interaction,
        *,
        forget: Callable[[], Awaitable[str]],
        timeout: float = 120.0,
        confirm_label: str = FORGET_ME_LABEL,
        texts: Texts = SOURCE_TEXTS,
    ) -> None:
        super().__init__(timeout=timeout)
        self.origin = origin
        self.owner_id = origin.user.id
        self._forget = forget
        self._texts = texts
        # The same view asks an admin before forgetting someone else ("Forget them").
        self.confirm.label = texts.gettext(confirm_label)
        self.cancel.label = texts.gettext("Cancel")

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return interaction.user.id == self.owner_id

    async def on_timeout(self) -> None:
        # Buttons that no longer answer would only confuse: say that nothing happened.
        with contextlib.suppress(discord.HTTPException):
            expired = self._texts.gettext(FORGET_ME_EXPIRED)
            await self.origin.edit_original_response(content=expired, view=None)

    @discord.ui.button(label="Forget me", style=discord.ButtonStyle.danger)
    async def confirm(
        self, interaction: discord.Interaction, button: discord.ui.Button[ForgetMeView]
    ) -> None:
        self.stop()
        # Acknowledge first (buttons gone, so no second press); deleting may take a while.
        forgetting = self._texts.gettext("Forgetting…")
        await interaction.response.edit_message(content=forgetting, view=None)
        await interaction.edit_original_response(content=await self._forget())

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(
        self, interaction: discord.Interaction, button: discord.ui.Button[ForgetMeView]
    ) -> None:
        self.stop()
        cancelled = self._texts.gettext(FORGET_ME_CANCELLED)
        await interaction.response.edit_message(content=cancelled, view=None)


class DiscordCommands:
    """The slash commands, built from the command layer's list."""

    def __init__(self, settings: PlatformSettings, commands: Callable[[], Commands]) -> None:
        self.admins = admin_accounts(settings, PLATFORM)
        # The layer exists once the adapter is bound; the built-in slash commands before.
        self._commands = commands

    def is_admin(self, interaction: discord.Interaction) -> bool:
        """Manage Server in this server, or a configured admin id (the only way in DMs)."""
        if account_id(PLATFORM, interaction.user.id) in self.admins:
            return True
        if interaction.guild_id is None:
            return False
        permissions = interaction.permissions
        return permissions.manage_guild or permissions.administrator

    def request(
        self, interaction: discord.Interaction, args: str = "", subject_id: str | None = None
    ) -> Request:
        channel_id = interaction.channel_id
        assert channel_id is not None  # slash commands are always used in a channel
        return Request(
            platform=PLATFORM,
            account_id=account_id(PLATFORM, interaction.user.id),
            world_id=world_of(interaction.guild_id, channel_id),
            room_id=room_id(PLATFORM, channel_id),
            is_admin=self.is_admin(interaction),
            args=args,
            subject_id=subject_id,
            # The messages' own clock: a fresh start dates from here (`/reset`).
            sent_at=interaction.created_at,
            # The asker's Discord client language ("es-ES"): answers are in it (bot/i18n).
            locale=interaction.locale.value,
        )

    async def run(
        self,
        interaction: discord.Interaction,
        name: str,
        args: str = "",
        subject_id: str | None = None,
    ) -> None:
        """Check, acknowledge, and show what the command layer answers."""
        commands = self._commands()
        info = commands.find(name)
        assert info is not None, name
        request = self.request(interaction, args, subject_id)
        if info.admin_only and not request.is_admin and not open_to_all(info.name, args):
            log.info("discord: refused /%s to user %s", name, interaction.user.id)
            refused = (await commands.texts(request)).gettext(REFUSED)
            await interaction.response.send_message(refused, ephemeral=True)
            return
        if info.slow and not interaction.response.is_done():
            # Discord drops an interaction not acknowledged in 3 seconds; learning may take longer.
            await interaction.response.defer(ephemeral=True, thinking=True)
        await answer(interaction, await commands.run(name, request))

    async def confirm_forget_person(
        self, interaction: discord.Interaction, member: discord.User | discord.Member
    ) -> None:
        """`/forget member:`: a whole person, so the admin confirms first, as with /forgetme."""
        commands = self._commands()
        person = account_id(PLATFORM, member.id)
        request = self.request(interaction, subject_id=person)
        texts = await commands.texts(request)
        if not self.is_admin(interaction):
            log.info("discord: refused /forget to user %s", interaction.user.id)
            await interaction.response.send_message(texts.gettext(REFUSED), ephemeral=True)
            return
        view = ForgetMeView(
            interaction,
            forget=lambda: commands.forget_person(person, request),
            confirm_label=FORGET_THEM_LABEL,
            texts=texts,
        )
        prompt = await commands.forget_person_prompt(
            person, how=CONFIRM_BY_BUTTON, name=member.display_name, texts=texts
        )
        await interaction.response.send_message(prompt, view=view, ephemeral=True)

    # ------------------------------------------------------------------ the slash commands
    def built_in(self) -> list[SlashCommand]:
        @app_commands.command(name="me", description=N_("What I have learned about you here"))
        async def me(interaction: discord.Interaction) -> None:
            await self.run(interaction, "me")

        @app_commands.command(
            name="forgetme", description=N_("Delete everything I learned about you here")
        )
        async def forgetme(interaction: discord.Interaction) -> None:
            request = self.request(interaction)
            commands = self._commands()
            texts = await commands.texts(request)
            view = ForgetMeView(
                interaction, forget=lambda: commands.forget_me(request), texts=texts
            )
            prompt = texts.gettext(FORGET_ME_PROMPT)
            await interaction.response.send_message(prompt, view=view, ephemeral=True)

        @app_commands.command(
            name="export",
            description=N_("Everything I keep about you here, as a file only you see"),
        )
        async def export(interaction: discord.Interaction) -> None:
            await self.run(interaction, "export")

        @app_commands.command(name="mydata", description=N_("The same as /export"))
        async def mydata(interaction: discord.Interaction) -> None:
            await self.run(interaction, "mydata")

        @app_commands.command(name="help", description=N_("What I can do"))
        async def help(interaction: discord.Interaction) -> None:
            await self.run(interaction, "help")

        @app_commands.command(name="reset", description=_built_in_info("reset").description)
        async def reset(interaction: discord.Interaction) -> None:
            await self.run(interaction, "reset")

        @app_commands.command(name="new", description=_built_in_info("new").description)
        async def new(interaction: discord.Interaction) -> None:
            await self.run(interaction, "new")

        @app_commands.command(
            name="facts",
            description=N_("How what I know about you changed; admins: what I have learned here"),
        )
        @app_commands.describe(
            member=N_("Only facts about this person"),
            search=N_("Only facts containing this text; 'history': how what I know changed"),
            page=N_("Page number (10 facts per page)"),
        )
        async def facts(
            interaction: discord.Interaction,
            member: discord.User | None = None,
            search: str | None = None,
            page: app_commands.Range[int, 1, 10_000] = 1,
        ) -> None:
            subject = account_id(PLATFORM, member.id) if member is not None else None
            # The page goes last, so a number ending the search text stays search text.
            await self.run(interaction, "facts", f"{search or ''} {page}".strip(), subject)

        @app_commands.command(
            name="forget",
            description=N_(
                "Forget one of your facts; admins: any fact, or everything about a member"
            ),
        )
        @app_commands.describe(
            fact=N_(
                "The id from /me or /facts (its first characters are enough); add yes to confirm"
            ),
            member=N_("Admins: forget everything about this person here"),
        )
        async def forget(
            interaction: discord.Interaction,
            fact: str | None = None,
            member: discord.User | None = None,
        ) -> None:
            if (fact is None) == (member is None) and self.is_admin(interaction):
                texts = await self._commands().texts(self.request(interaction))
                await answer(
                    interaction, texts.gettext("Give either a fact id or a member, not both.")
                )
                return
            if member is not None:
                await self.confirm_forget_person(interaction, member)
                return
            await self.run(interaction, "forget", fact or "")

        @app_commands.command(name="stats", description=N_("Admins: what I have stored here"))
        async def stats(interaction: discord.Interaction) -> None:
            await self.run(interaction, "stats")

        # The consent commands take no options: their descriptions are the command layer's.
        @app_commands.command(name="privacy", description=_built_in_info("privacy").description)
        async def privacy(interaction: discord.Interaction) -> None:
            await self.run(interaction, "privacy")

        @app_commands.command(name="optout", description=_built_in_info("optout").description)
        async def optout(interaction: discord.Interaction) -> None:
            await self.run(interaction, "optout")

        @app_commands.command(name="optin", description=_built_in_info("optin").description)
        async def optin(interaction: discord.Interaction) -> None:
            await self.run(interaction, "optin")

        made: list[SlashCommand] = [
            me,
            forgetme,
            export,
            mydata,
            help,
            reset,
            new,
            facts,
            forget,
            stats,
            privacy,
            optout,
            optin,
        ]
        return [shaped(command, _built_in_info(command.name)) for command in made]

    def from_plugins(self, listed: list[CommandInfo]) -> list[SlashCommand]:
        """A slash command for each plugin command: its arguments as one text option."""
        built_in = {command.name for command in self.built_in()}
        return [self._plugin_command(info) for info in listed if info.name not in built_in]

    def _plugin_command(self, info: CommandInfo) -> SlashCommand:
        async def run(interaction: discord.Interaction, args: str | None = None) -> None:
            await self.run(interaction, info.name, args or "")

        described = app_commands.describe(args=(info.usage or "What follows the command")[:100])
        command: SlashCommand = app_commands.Command(
            name=info.name, description=info.description[:100], callback=described(run)
        )
        return shaped(command, info)

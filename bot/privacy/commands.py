"""The consent commands' answers, for the shared command layer (bot/commands/command_set.py lists
them and runs them on every surface): /optout, /optin, /learning off|on [server], /privacy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from bot.i18n import N_, SOURCE_TEXTS, Texts
from bot.privacy.consent import LearningState
from bot.privacy.notice import built_in_notice, here_now
from bot.privacy.policy import PrivacyPolicy

# What bot/commands/command_set.py lists in BUILT_IN (as CommandInfo fields): the command layer
# imports this module, so this module does not import it back.
COMMANDS: tuple[dict[str, Any], ...] = (
    {"name": "privacy", "description": N_("What I keep about you, for how long, how to remove it")},
    {"name": "optout", "description": N_("Stop me keeping or learning from what you say here")},
    {"name": "optin", "description": N_("Let me remember what you say here again")},
    {
        "name": "learning",
        "description": N_("Admins: turn learning off or on here (or in the whole server)"),
        "usage": "off|on [server]",
        "admin_only": True,
    },
)


class Named(Protocol):
    @property
    def name(self) -> str: ...


class Request(Protocol):
    """What these commands read of the command layer's `Request`."""

    @property
    def account_id(self) -> str: ...
    @property
    def world_id(self) -> str: ...
    @property
    def room_id(self) -> str: ...
    @property
    def args(self) -> str: ...


LEARNING_USAGE = N_("Usage: /learning off|on [server]")
# Words that make /learning apply to the whole server (Discord) or group (Telegram).
_WHOLE_WORLD = ("server", "world", "group", "everywhere", "all")


# The bot's name in a world (its character there, as `/character` chose it), by world id.
NameIn = Callable[[str], Awaitable[str]]
# An answer, given the catalog of the asker's language (bot/i18n).
Handler = Callable[[Request, Texts], Awaitable[str]]


def handlers(
    policy: PrivacyPolicy, bot_name_in: NameIn, listed: Callable[[], Iterable[Named]]
) -> dict[str, Handler]:
    """The answers to /privacy, /optout, /optin and /learning, by command name."""
    return PrivacyCommands(policy, bot_name_in, listed).handlers()


class PrivacyCommands:
    def __init__(
        self,
        policy: PrivacyPolicy,
        bot_name_in: NameIn,
        listed: Callable[[], Iterable[Named]],
    ) -> None:
        self.policy = policy
        # /privacy names the bot as people there know it, not the process's default character.
        self.bot_name_in = bot_name_in
        # The commands this bot has (plugins vary): /privacy names only real ones.
        self._listed = listed

    def handlers(self) -> dict[str, Handler]:
        return {
            "optout": self.opt_out,
            "optin": self.opt_in,
            "learning": self.learning,
            "privacy": self.privacy,
        }

    async def opt_out(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        changed = await self.policy.consent.opt_out(
            user_id=request.account_id, world_id=request.world_id
        )
        if not changed:
            return texts.gettext("You have already opted out here. Send /optin to change that.")
        return texts.gettext(
            "Done: from now on I keep nothing you say here and learn nothing from it "
            "(commands still work). What I already know stays until you use /forgetme. "
            "Send /optin to change your mind."
        )

    async def opt_in(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        changed = await self.policy.consent.opt_in(
            user_id=request.account_id, world_id=request.world_id
        )
        state = await self._state(request)
        if not changed:
            text = texts.gettext("You had not opted out here.")
        else:
            text = texts.gettext("Welcome back: I'll remember what you say here again.")
        if state.room_off or state.world_off:
            still = texts.gettext(
                "(An admin turned learning off here, so for now I still keep nothing.)"
            )
            text += f" {still}"
        return text

    async def learning(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        words = request.args.lower().split()
        switch = words[0] if words else None
        whole = any(word in _WHOLE_WORLD for word in words[1:])
        if switch not in (None, "on", "off") or len(words) > 2 or (len(words) == 2 and not whole):
            return texts.gettext(LEARNING_USAGE)
        if switch is None:
            return here_now(await self._state(request), texts)
        changed = await self.policy.consent.set_learning(
            world_id=request.world_id,
            room_id=None if whole else request.room_id,
            on=switch == "on",
            by=request.account_id,
        )
        # Whole sentences for each place: a translation may put the place anywhere.
        if switch == "off":
            if not changed:
                return (
                    texts.gettext("Learning was already off for this whole server.")
                    if whole
                    else texts.gettext("Learning was already off in this chat.")
                )
            if whole:
                return texts.gettext(
                    "Learning is off for this whole server: from now on I keep nothing said "
                    "there and learn nothing from it, for everyone (commands still work). "
                    "Send /learning on server to resume."
                )
            return texts.gettext(
                "Learning is off in this chat: from now on I keep nothing said there and "
                "learn nothing from it, for everyone (commands still work). "
                "Send /learning on to resume."
            )
        if whole:
            text = (
                texts.gettext("Learning is on again for this whole server.")
                if changed
                else texts.gettext("Learning was not off for this whole server.")
            )
        else:
            text = (
                texts.gettext("Learning is on again in this chat.")
                if changed
                else texts.gettext("Learning was not off in this chat.")
            )
        state = await self._state(request)
        if not whole and state.world_off:
            text += " " + texts.gettext(
                "It is still off for the whole server: /learning on server."
            )
        elif whole and state.room_off:
            text += " " + texts.gettext("It is still off in this chat: /learning on.")
        return text

    async def privacy(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        if self.policy.operator_text is not None:
            return self.policy.operator_text  # the operator's words, in their language
        return built_in_notice(
            bot_name=await self.bot_name_in(request.world_id),
            retention=self.policy.retention,
            commands={command.name for command in self._listed()},
            state=await self._state(request),
            texts=texts,
        )

    async def _state(self, request: Request) -> LearningState:
        return await self.policy.consent.state(
            user_id=request.account_id, room_id=request.room_id, world_id=request.world_id
        )

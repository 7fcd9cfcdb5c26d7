"""The consent commands' answers, for the shared command layer (bot/commands/command_set.py lists
them and runs them on every surface): /optout, /optin, /learning off|on [server], /privacy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from bot.privacy.consent import LearningState
from bot.privacy.notice import built_in_notice, describe_state
from bot.privacy.policy import PrivacyPolicy

# What bot/commands/command_set.py lists in BUILT_IN (as CommandInfo fields): the command layer
# imports this module, so this module does not import it back.
COMMANDS: tuple[dict[str, Any], ...] = (
    {"name": "privacy", "description": "What I keep about you, for how long, how to remove it"},
    {"name": "optout", "description": "Stop me keeping or learning from what you say here"},
    {"name": "optin", "description": "Let me remember what you say here again"},
    {
        "name": "learning",
        "description": "Admins: turn learning off or on here (or in the whole server)",
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


LEARNING_USAGE = "Usage: /learning off|on [server]"
# Words that make /learning apply to the whole server (Discord) or group (Telegram).
_WHOLE_WORLD = ("server", "world", "group", "everywhere", "all")


# The bot's name in a world (its character there, as `/character` chose it), by world id.
NameIn = Callable[[str], Awaitable[str]]


def handlers(
    policy: PrivacyPolicy, bot_name_in: NameIn, listed: Callable[[], Iterable[Named]]
) -> dict[str, Callable[[Request], Awaitable[str]]]:
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

    def handlers(self) -> dict[str, Callable[[Request], Awaitable[str]]]:
        return {
            "optout": self.opt_out,
            "optin": self.opt_in,
            "learning": self.learning,
            "privacy": self.privacy,
        }

    async def opt_out(self, request: Request) -> str:
        changed = await self.policy.consent.opt_out(
            user_id=request.account_id, world_id=request.world_id
        )
        if not changed:
            return "You have already opted out here. Send /optin to change that."
        return (
            "Done: from now on I keep nothing you say here and learn nothing from it "
            "(commands still work). What I already know stays until you use /forgetme. "
            "Send /optin to change your mind."
        )

    async def opt_in(self, request: Request) -> str:
        changed = await self.policy.consent.opt_in(
            user_id=request.account_id, world_id=request.world_id
        )
        state = await self._state(request)
        if not changed:
            text = "You had not opted out here."
        else:
            text = "Welcome back: I'll remember what you say here again."
        if state.room_off or state.world_off:
            text += " (An admin turned learning off here, so for now I still keep nothing.)"
        return text

    async def learning(self, request: Request) -> str:
        words = request.args.lower().split()
        switch = words[0] if words else None
        whole = any(word in _WHOLE_WORLD for word in words[1:])
        if switch not in (None, "on", "off") or len(words) > 2 or (len(words) == 2 and not whole):
            return LEARNING_USAGE
        if switch is None:
            return "Here, now: " + describe_state(await self._state(request))
        where = "for this whole server" if whole else "in this chat"
        changed = await self.policy.consent.set_learning(
            world_id=request.world_id,
            room_id=None if whole else request.room_id,
            on=switch == "on",
            by=request.account_id,
        )
        if switch == "off":
            if not changed:
                return f"Learning was already off {where}."
            return (
                f"Learning is off {where}: from now on I keep nothing said there and learn "
                f"nothing from it, for everyone (commands still work). "
                f"Send /learning on{' server' if whole else ''} to resume."
            )
        text = f"Learning is on again {where}." if changed else f"Learning was not off {where}."
        state = await self._state(request)
        if not whole and state.world_off:
            text += " It is still off for the whole server: /learning on server."
        elif whole and state.room_off:
            text += " It is still off in this chat: /learning on."
        return text

    async def privacy(self, request: Request) -> str:
        if self.policy.operator_text is not None:
            return self.policy.operator_text
        return built_in_notice(
            bot_name=await self.bot_name_in(request.world_id),
            retention=self.policy.retention,
            commands={command.name for command in self._listed()},
            state=await self._state(request),
        )

    async def _state(self, request: Request) -> LearningState:
        return await self.policy.consent.state(
            user_id=request.account_id, room_id=request.room_id, world_id=request.world_id
        )

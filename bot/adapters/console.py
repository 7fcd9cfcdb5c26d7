"""The console chat: one person, one room, a prompt. Works with piped standard input too.

The console is for one trusted person at this machine: no reply rate limit (the caller turns it
off, see bot.cli), and the person is shown by the name they gave (`--name`, or the name the
bot learned from them, kept for later sessions) rather than by their login name.

Standard input is read by a daemon thread so Ctrl-C never waits on a blocked `readline()`.
Every line is stored before the next is read, so leaving (Ctrl-C, Ctrl-D, /quit) loses nothing
already said; pending evaluations finish first, or resume on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import re
import sys
import threading
from typing import TextIO

from bot import admin
from bot.models import (
    Account,
    Content,
    Memory,
    Room,
    account_id,
    message_id,
    new_id,
    room_id,
    world_id,
)
from bot.runtime import AgentRuntime

log = logging.getLogger(__name__)

HELP = """Commands:
  /help               this help
  /facts [text]       what I have learned here (optionally containing text)
  /goals              goals and their objectives
  /goal NAME: A; B    add a goal with objectives A and B
  /forget             forget everything about you
  /quit               leave (Ctrl-D works too)"""

_EOF = None
# A learned fact that names its subject: "root's name is Sarah", "Their name is Sarah Lee",
# "The user is called Sam". Possessives of something else ("Sarah's dog's name is Biscuit")
# do not match: the possessor may not contain an apostrophe.
_NAME_FACT = re.compile(
    r"^(?:[\w .-]+'s|[Tt]heir|[Hh]is|[Hh]er|[Mm]y)\s+name\s+is\s+"
    r"(?P<name>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)\.?$"
    r"|^[\w .-]+\s+(?:is\s+called|goes\s+by)\s+(?P<called>[A-Z][\w'-]*)\.?$"
)
# Enough of the person's facts to find their name among them.
_NAME_SCAN_LIMIT = 200


def told_name(fact_text: str) -> str | None:
    """The person's name, if this fact about them states it."""
    match = _NAME_FACT.match(fact_text.strip())
    if match is None:
        return None
    return match.group("name") or match.group("called")


class ConsoleChat:
    name = "console"

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        user_name: str | None = None,
        display_name: str | None = None,
        stdin: TextIO = sys.stdin,
        stdout: TextIO = sys.stdout,
        learn_timeout: float = 120.0,
    ) -> None:
        self.runtime = runtime
        self.stdin = stdin
        self.stdout = stdout
        self.interactive = stdin.isatty()
        self.learn_timeout = learn_timeout
        name = user_name or _login_name()
        # The identity is the login (one person per machine account); the name shown is theirs.
        self._given_name = display_name.strip() if display_name and display_name.strip() else None
        self.account = Account(
            id=account_id("console", name),
            platform="console",
            platform_id=name,
            name=self._given_name or name,
        )
        self.room = Room(
            id=room_id("console", name),
            world_id=world_id("console", name),
            platform="console",
            kind="dm",
            name="console",
        )
        self._last: Memory | None = None

    def say(self, text: str) -> None:
        print(text, file=self.stdout, flush=True)

    async def run(self) -> None:
        if self._given_name is None:
            # A name learned in an earlier session is still theirs.
            accounts = self.runtime.store.accounts
            known = (await accounts.get_many([self.account.id])).get(self.account.id)
            if known is not None:
                self.account = self.account.model_copy(update={"name": known.name})
        await self.runtime.store.accounts.upsert(self.account)
        await self.runtime.store.rooms.upsert(self.room)
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        _start_reader(self.stdin, lines, asyncio.get_running_loop())
        while True:
            if self.interactive:
                print("you> ", end="", file=self.stdout, flush=True)
            line = await lines.get()
            if line is _EOF:
                if self.interactive:
                    print(file=self.stdout, flush=True)  # Ctrl-D: leave the prompt's line clean
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not await self.command(text):
                    break
                continue
            await self.chat(text)
        await self.finish()

    async def chat(self, text: str) -> None:
        memory = Memory(
            # A typed line has no platform id to redeliver, so each gets a fresh one.
            id=message_id("console", self.room.id, new_id()),
            user_id=self.account.id,
            agent_id=self.runtime.agent_id,
            room_id=self.room.id,
            world_id=self.room.world_id,
            content=Content(text=text, source="console"),
        )
        self._last = memory

        async def send(content: Content) -> None:
            self.say(f"{self.runtime.character.name}: {content.text}")

        await self.runtime.handle(memory, send, account=self.account, room=self.room)
        await self._use_told_name()

    async def command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, argument = text.partition(" ")
        argument = argument.strip()
        scope = admin.Scope(self.room.world_id, self.room.id, self.account.id)
        match name.lower():
            case "/quit" | "/exit":
                return False
            case "/help":
                self.say(HELP)
            case "/facts":
                await self.learn_now()
                self.say(await admin.list_facts(self.runtime, scope, search=argument or None))
            case "/goals":
                await self.learn_now()
                self.say(await admin.list_goals(self.runtime, scope))
            case "/goal":
                spec = admin.parse_goal_spec(argument)
                if spec is None:
                    self.say("Usage: /goal NAME: objective one; objective two")
                else:
                    goal = await admin.add_goal(
                        self.runtime, scope, spec[0], spec[1], owner_id=self.account.id
                    )
                    self.say("Added goal:\n" + admin.format_goal(goal))
            case "/forget":
                await self.runtime.evaluations.join(self.room.id, self.learn_timeout)
                self.say(await admin.forget_me(self.runtime, scope))
            case _:
                self.say(f"Unknown command {name}. Type /help.")
        return True

    async def learn_now(self) -> None:
        """Before showing what was learned, learn from what was said (in this session or an
        earlier one that ended before the facts were extracted)."""
        last = self._last or await self._last_said()
        if last is None:
            return
        if not await self.runtime.flush_room(last, timeout=self.learn_timeout):
            self.say("(still learning; this list may be incomplete)")
        await self._use_told_name()

    async def _use_told_name(self) -> None:
        """Show the person by the name they told the bot, once a fact about them states it.

        A name given with `--name` is kept: the person chose it for this session.
        """
        if self._given_name is not None:
            return
        facts, _ = await self.runtime.store.facts.page(
            self.room.world_id, subject_id=self.account.id, limit=_NAME_SCAN_LIMIT
        )
        for fact in facts:
            name = told_name(fact.text)
            if name is not None:
                if name != self.account.name:
                    self.account = self.account.model_copy(update={"name": name})
                    await self.runtime.store.accounts.upsert(self.account)
                return

    async def _last_said(self) -> Memory | None:
        recent = await self.runtime.store.memories.recent(self.room.id, 5)
        said = [m for m in recent if m.user_id == self.account.id]
        return said[-1] if said else None

    async def finish(self) -> None:
        """Learn from what was said before leaving, so nothing waits for the idle flush."""
        if self._last is not None:
            await self.runtime.flush_room(self._last, timeout=self.learn_timeout)
        if not await self.runtime.evaluations.join(self.room.id, self.learn_timeout):
            log.warning("leaving with evaluations still running; they resume on next start")


def _login_name() -> str:
    try:
        return getpass.getuser() or "you"
    except Exception:
        return "you"


def _start_reader(
    stream: TextIO, lines: asyncio.Queue[str | None], loop: asyncio.AbstractEventLoop
) -> None:
    def pump() -> None:
        try:
            for line in stream:
                loop.call_soon_threadsafe(lines.put_nowait, line)
        except (OSError, ValueError):
            log.debug("stdin closed", exc_info=True)
        finally:
            # A closed loop means we are exiting anyway.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lines.put_nowait, _EOF)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()

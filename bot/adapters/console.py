"""The console chat: one person, one room, a prompt. Works with piped standard input too.

The console is for one trusted person at this machine: no reply rate limit (the caller turns it
off, see bot.app.cli), and the person is shown by the name they gave (`--name`, or the name the
bot learned from them, kept for later sessions). Their login is only a handle (the account's
id and username): it is never shown to the model as their name, or "Hi, my name is Sarah"
would be learned as "root's name is Sarah". Until they give a name they are "User".

It is an adapter like the others (`start(services)`, `wait_closed()`, `stop()`): a typed line
becomes an `Incoming` through `to_memory`, goes through the room's lane, and commands are the
shared command layer's, with the person at the console as its admin.

Standard input is read by a daemon thread so Ctrl-C never waits on a blocked `readline()`.
Every line is stored before the next is read, so leaving (Ctrl-C, Ctrl-D, /quit) loses nothing
already said; pending evaluations finish first, or resume on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import mimetypes
import os
import re
import shlex
import sys
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TextIO

from bot.adapters.base import AdapterServices, Incoming
from bot.adapters.images import (
    CHUNK_BYTES,
    Chunks,
    ImageFile,
    ImageLimits,
    image_loader,
    media_type_of,
)
from bot.adapters.lanes import RoomLanes
from bot.adapters.streaming import PrintedReply, StreamingSender
from bot.adapters.voice import Hearing, VoiceFile
from bot.cancelling import cancel_and_wait
from bot.commands.command_set import (
    FORGET_ME_PROMPT,
    FORGOTTEN,
    Attachment,
    Commands,
    Request,
    command_parts,
)
from bot.domain.records import (
    Account,
    Content,
    Memory,
    Room,
    account_id,
    message_id,
    new_id,
    room_id,
    to_millis,
    utcnow,
    world_id,
)
from bot.domain.records import Attachment as FileAttachment
from bot.i18n import N_
from bot.privacy.forgetting import forget_exports

log = logging.getLogger(__name__)

PLATFORM = "console"
# The console's own words, in English: shown in the world's language (bot/i18n).
QUIT_HELP = N_("/quit - leave (Ctrl-D works too)")
IMAGE_HELP = N_("/image PATH [caption] - send a picture from this machine, as a photo in a chat")
VOICE_HELP = N_("/voice PATH - send a recording from this machine, as a voice note in a chat")
DEFAULT_EXPORTS = Path("data") / "exports"
# The person at the console before they give a name: not their login, which is no name.
UNNAMED = "User"
# /forgetme asks; the console takes the next line as the answer.
CONFIRM_FORGET = N_('Type "yes" to confirm; anything else cancels.')
NOTHING_FORGOTTEN = N_('Nothing was forgotten: /forgetme needs the answer "yes".')
_YES = frozenset({"yes", "y"})
# An answer that only cancels: not said to the bot as chat.
_NO = frozenset({"no", "n", "cancel", "stop", "nope"})

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


@dataclass(frozen=True)
class ConsoleSession:
    """Who is typing, and where: one person, one room (its own world)."""

    account: Account
    room: Room


def to_memory(
    line: str,
    me: ConsoleSession,
    *,
    agent_id: str,
    received_at: datetime | None = None,
    attachments: Sequence[FileAttachment] = (),
) -> Incoming | None:
    """A typed line as Mnemo sees it; None for a blank one without `attachments` (what
    `/image` sends). The same signature as every platform's `to_memory` (see
    bot/adapters/base.py)."""
    text = line.strip()
    if not text and not attachments:
        return None
    memory = Memory(
        # A typed line has no platform id to redeliver, so each gets a fresh one.
        id=message_id(PLATFORM, me.room.id, new_id()),
        user_id=me.account.id,
        agent_id=agent_id,
        room_id=me.room.id,
        world_id=me.room.world_id,
        content=Content(text=text, source=PLATFORM, attachments=list(attachments)),
        created_at=utcnow() if received_at is None else to_millis(received_at),
    )
    return Incoming(memory, me.account, me.room)


def _reader(path: Path) -> Chunks:
    async def read() -> AsyncGenerator[bytes, None]:
        # In chunks, like a download: a file past the size limit is not read whole.
        file = await asyncio.to_thread(path.open, "rb")
        try:
            while chunk := await asyncio.to_thread(file.read, CHUNK_BYTES):
                yield chunk
        finally:
            file.close()

    return read


def recording_at(args: str) -> tuple[FileAttachment, VoiceFile] | str:
    """What `/voice PATH` sends: the attachment as stored (the file name, never the path on
    this machine) and how to read the recording; or what to tell the person when there is no
    such file."""
    path = Path(args.strip().strip("'\"")).expanduser()
    if not args.strip() or not path.is_file():
        return f"No recording at {args.strip()}." if args.strip() else f"Usage: {VOICE_HELP}"
    content_type = mimetypes.guess_type(path.name)[0] or "audio/ogg"
    size = path.stat().st_size
    attachment = FileAttachment(id=new_id(), title=path.name, content_type=content_type, size=size)
    return attachment, VoiceFile(path.name, content_type, size, _reader(path))


def picture_at(args: str) -> tuple[FileAttachment, ImageFile, str] | str:
    """What `/image PATH [caption]` sends: the attachment as stored (the file name, never the
    path on this machine), how to read the picture, and the caption; or what to tell the
    person when there is no such file."""
    try:
        path_text, *words = shlex.split(args)
    except ValueError:  # an unclosed quote, or nothing at all
        path_text, words = "", []
    path = Path(path_text).expanduser()
    if not path_text or not path.is_file():
        return f"No picture at {path_text}." if path_text else f"Usage: {IMAGE_HELP}"
    content_type = mimetypes.guess_type(path.name)[0]
    size = path.stat().st_size
    attachment = FileAttachment(id=new_id(), title=path.name, content_type=content_type, size=size)
    return (
        attachment,
        ImageFile(path.name, media_type_of(content_type), size, _reader(path)),
        " ".join(words),
    )


# Seconds a message being answered gets to finish when the person leaves.
STOP_GRACE = 5.0


class ConsoleChat:
    name = PLATFORM

    def __init__(
        self,
        *,
        user_name: str | None = None,
        display_name: str | None = None,
        stdin: TextIO = sys.stdin,
        stdout: TextIO = sys.stdout,
        learn_timeout: float = 120.0,
        exports_dir: Path = DEFAULT_EXPORTS,
        images: ImageLimits | None = None,
        stream_replies: bool | None = None,
        max_voice_mb: float = 10.0,
    ) -> None:
        """`stream_replies`: print replies as the model writes them (None: when the output
        is a terminal, where a person watches it; MNEMO_STREAM_REPLIES=false turns it off
        everywhere)."""
        self._services: AdapterServices | None = None
        # The model sees images (`/image` sends the picture itself): the limits; None: the
        # picture's file name alone, as on the platforms.
        self.images = images
        # `/voice` recordings larger than this are kept unheard (MNEMO_MAX_VOICE_MB).
        self.max_voice_mb = max_voice_mb
        self.stdin = stdin
        self.stdout = stdout
        self.interactive = stdin.isatty()
        self.stream_replies = stdout.isatty() if stream_replies is None else stream_replies
        self.learn_timeout = learn_timeout
        # Where /export writes its file (the data folder's `exports`).
        self.exports_dir = exports_dir
        name = user_name or _login_name()
        # The identity is the login (one person per machine account), kept as a handle; the
        # name shown, and given to the model, is one they chose.
        self._given_name = display_name.strip() if display_name and display_name.strip() else None
        self.account = Account(
            id=account_id("console", name),
            platform="console",
            platform_id=name,
            username=name,
            name=self._given_name or UNNAMED,
        )
        self.room = Room(
            id=room_id("console", name),
            world_id=world_id("console", name),
            platform="console",
            kind="dm",
            name="console",
        )
        self._last: Memory | None = None
        self._commands: Commands | None = None
        self._lanes: RoomLanes[str] = RoomLanes(PLATFORM)
        self._conversation: asyncio.Task[None] | None = None
        self._recovery: asyncio.Task[int] | None = None
        # /forgetme asked to confirm: the next line answers it.
        self._confirming_forget = False

    @property
    def services(self) -> AdapterServices:
        if self._services is None:
            raise RuntimeError("the console is not started")
        return self._services

    @property
    def commands(self) -> Commands:
        if self._commands is None:
            raise RuntimeError("the console is not started")
        return self._commands

    # ------------------------------------------------------------------ lifecycle
    async def start(self, services: AdapterServices) -> None:
        """Greet nobody (the caller prints the banner); read lines until /quit or Ctrl-D."""
        self._services = services
        # The same commands as on Discord and Telegram; the person at this machine is the admin.
        self._commands = Commands(services.commands, learn_wait=self.learn_timeout)
        if self._given_name is None:
            # A name learned in an earlier session is still theirs. (Earlier versions stored
            # the login as the name: that is no name they gave.)
            known = (await services.accounts.get_many([self.account.id])).get(self.account.id)
            if known is not None and known.name not in (self.account.platform_id, UNNAMED):
                self.account = self.account.model_copy(update={"name": known.name})
        await services.note_profiles([self.account], self.room)
        # Plugins may speak later with nothing typed (a follow-up): printed like a reply.
        services.plugin_rooms.connect(PLATFORM, self._room_sender)
        # What a crash left unanswered here is answered first, in this room's lane.
        self._recovery = asyncio.create_task(
            services.answer_unanswered(
                PLATFORM, lambda room, message: self._room_sender(room), self._in_lane
            ),
            name="console-recovery",
        )
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        _start_reader(self.stdin, lines, asyncio.get_running_loop())
        self._conversation = asyncio.create_task(self._converse(lines), name="console")

    async def wait_closed(self) -> None:
        """Return when the person has left (/quit, Ctrl-D, end of piped input)."""
        if self._conversation is not None:
            await asyncio.shield(self._conversation)

    async def stop(self) -> None:
        """Leave now (Ctrl-C, SIGTERM): what was said is stored; learning resumes next time.
        A message being answered gets a moment to finish: its reply, once shown, is stored
        with the message (a reply shown but not stored would be given again next time)."""
        if self._services is not None:
            self._services.plugin_rooms.disconnect(PLATFORM)
        conversation = self._conversation
        if conversation is not None and not conversation.done():
            await cancel_and_wait(conversation)
        await cancel_and_wait(self._recovery)
        await self._lanes.close(grace=STOP_GRACE)

    async def run(self, services: AdapterServices) -> None:
        """Start, converse until the person leaves, stop."""
        await self.start(services)
        try:
            await self.wait_closed()
        finally:
            await self.stop()

    async def _converse(self, lines: asyncio.Queue[str | None]) -> None:
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
            if self._confirming_forget and await self._answer_forget(text):
                continue
            if text.startswith("/") and command_parts(text)[0] == "image":
                await self.image(command_parts(text)[1])
                continue
            if text.startswith("/") and command_parts(text)[0] == "voice":
                await self.voice(command_parts(text)[1])
                continue
            if text.startswith("/"):
                if not await self.command(text):
                    break
                continue
            await self.chat(text)
        await self.finish()

    # ------------------------------------------------------------------ messages
    def _in_lane(self, room: Room, work: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
        """This person's room only: another login's leftovers wait for their own console
        (or are learned from once too old to answer)."""
        if room.id == self.room.id:
            return self._lanes.submit(room.id, work)
        skipped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        skipped.set_result(None)
        return skipped

    def _room_sender(self, room: Room) -> Callable[[Content], Awaitable[None]]:
        async def send(content: Content) -> None:
            # Said while the person may be at the prompt: on a line of its own, then the
            # prompt again.
            if self.interactive:
                print(file=self.stdout)
            self.say(f"{self._speaker()}: {content.text}")
            if self.interactive:
                print("you> ", end="", file=self.stdout, flush=True)

        return send

    def say(self, text: str) -> None:
        print(text, file=self.stdout, flush=True)

    def _speaker(self) -> str:
        """The console world's character (`/character`), as last read."""
        return self.services.worlds.kept(self.room.world_id).character.name

    async def chat(
        self,
        text: str,
        *,
        attachments: Sequence[FileAttachment] = (),
        images: Sequence[ImageFile] = (),
        voice: VoiceFile | None = None,
    ) -> None:
        services = self.services
        incoming = to_memory(
            text,
            ConsoleSession(self.account, self.room),
            agent_id=services.agent_id,
            attachments=attachments,
        )
        if incoming is None:
            return
        if images:
            where = f"console message {incoming.memory.id}"
            incoming.memory.carry_images(image_loader(images, self.images, where=where))
        hearing = Hearing.of(services.transcriber, self.max_voice_mb)
        if voice is not None and hearing is not None:
            where = f"console message {incoming.memory.id}"
            heard = await hearing.heard(incoming.memory, voice, where=where)
            incoming = replace(incoming, memory=heard)
        self._last = incoming.memory

        async def send(content: Content) -> None:
            self.say(f"{self._speaker()}: {content.text}")

        def printed() -> PrintedReply:
            return PrintedReply(self.stdout, self._speaker(), erase=self.stdout.isatty())

        sender = StreamingSender(send, printed) if self.stream_replies else send

        async def handle() -> None:
            await services.handle(
                incoming.memory, sender, account=incoming.account, room=incoming.room
            )

        # One room, one line at a time: the lane keeps the console's shape the others' shape.
        await asyncio.wait([self._lanes.submit(self.room.id, handle)])
        if not self._database_away():
            await self._use_told_name()

    async def voice(self, args: str) -> None:
        """`/voice PATH`: a recording on this machine, sent as a voice note would be on Discord
        or Telegram (heard only with a transcription model)."""
        found = recording_at(args)
        if isinstance(found, str):
            self.say(found)
            return
        attachment, recording = found
        await self.chat("", attachments=[attachment], voice=recording)

    async def image(self, args: str) -> None:
        """`/image PATH [caption]`: a picture on this machine, sent as a photo with its caption
        would be on Discord or Telegram (read only if the model sees images)."""
        found = picture_at(args)
        if isinstance(found, str):
            self.say(found)
            return
        attachment, picture, caption = found
        await self.chat(caption, attachments=[attachment], images=[picture])

    async def command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        name, args = command_parts(text)
        if name in ("quit", "exit"):
            return False
        request = self._request(args)
        info = self.commands.find(name)
        if info is not None and info.slow and not self._database_away():
            # Learning may find their name: shown in the answer already. (The command's own
            # wait for learning then finds the same job done.)
            await self.commands.learned(self.room.id)
            await self._use_told_name()
        answer = await self.commands.run(name, request)
        texts = await self.commands.texts(request)
        text = answer.text
        if answer.attachment is not None:
            written = texts.gettext("Written to {path}").format(path=self._write(answer.attachment))
            text += f"\n{written}"
        prompt = texts.gettext(FORGET_ME_PROMPT)
        if name == "forgetme" and answer.text.startswith(prompt):
            # The answer comes on the next line: "/forgetme yes" is not needed here.
            self._confirming_forget = True
            text = f"{prompt} {texts.gettext(CONFIRM_FORGET)}"
        if name == "help":
            own = [texts.gettext(line) for line in (IMAGE_HELP, VOICE_HELP, QUIT_HELP)]
            text = "\n".join([text, *own])
        self.say(text)
        if name == "forgetme" and answer.text.startswith(texts.gettext(FORGOTTEN)):
            # Its /export files on disk quote what was just forgotten.
            forget_exports(self.exports_dir, self.account.id, self.room.world_id)
            self._forgotten()
        return True

    async def _answer_forget(self, text: str) -> bool:
        """The line after /forgetme's question: "yes" forgets; anything else says plainly
        that nothing was forgotten (a privacy request never fails silently). True when the
        line was only that answer; False when it is still to be handled (chat, a command)."""
        self._confirming_forget = False
        answer = text.strip().rstrip(".!").strip().casefold()
        texts = await self.commands.texts(self._request())
        if answer in _YES:
            done = await self.commands.forget_me(self._request())
            self.say(done)
            if done.startswith(texts.gettext(FORGOTTEN)):
                self._forgotten()
            return True
        if text.startswith("/") and command_parts(text)[0] == "forgetme":
            return False  # asked again: that command answers
        self.say(texts.gettext(NOTHING_FORGOTTEN))
        return answer in _NO

    def _request(self, args: str = "") -> Request:
        return Request(
            platform=PLATFORM,
            account_id=self.account.id,
            world_id=self.room.world_id,
            room_id=self.room.id,
            is_admin=True,
            args=args,
        )

    def _write(self, attachment: Attachment) -> Path:
        """An attachment (`/export`) as a file only this machine account can read."""
        self.exports_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.exports_dir / attachment.filename
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(attachment.data)
        return path.resolve()

    def _forgotten(self) -> None:
        """After /forgetme: unnamed again (the told name was forgotten)."""
        if self._given_name is None:
            self.account = self.account.model_copy(update={"name": UNNAMED})

    async def _use_told_name(self) -> None:
        """Show the person by the name they told the bot, once a fact about them states it.

        A name given with `--name` is kept: the person chose it for this session.
        """
        if self._given_name is not None:
            return
        facts, _ = await self.services.facts.page(
            self.room.world_id, subject_id=self.account.id, limit=_NAME_SCAN_LIMIT
        )
        for fact in facts:
            name = told_name(fact.text)
            if name is not None:
                if name != self.account.name:
                    self.account = self.account.model_copy(update={"name": name})
                    await self.services.note_profiles([self.account])
                return

    def _database_away(self) -> bool:
        """MongoDB unreachable: messages wait in the outage journal, and what needs the
        database besides (learning before an answer, the name the person told) is skipped
        rather than ending the chat."""
        outage = self.services.outage
        return outage is not None and outage.waiting

    async def finish(self) -> None:
        """Learn from what was said before leaving, so nothing waits for the idle flush."""
        if self._database_away():
            log.warning("leaving while MongoDB is unreachable: the journal is replayed next start")
            return
        if self._last is not None:
            await self.services.evaluations.flush_room(self._last, timeout=self.learn_timeout)
        if not await self.services.evaluations.join(self.room.id, self.learn_timeout):
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

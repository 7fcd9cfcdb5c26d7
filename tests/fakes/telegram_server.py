"""A local fake of the Telegram Bot API, so python-telegram-bot's real code runs in tests.

    async with FakeTelegramServer() as server:
        adapter = TelegramAdapter(settings, base_url=server.base_url)
        await adapter.start(app.adapter_services)
        sarah = server.user("Sarah")
        server.push_message(server.private_chat(sarah), sarah, "hi")
        [reply] = await server.wait_for_sent(1)

It speaks the wire format PTB uses (form-encoded POSTs to `/bot<token>/<method>`, values
JSON-encoded, answers `{"ok": true, "result": ...}`), so updates arrive as real `telegram.Update`
objects parsed by PTB itself. A wrong token gets `401 Unauthorized`, as from the real API.
Only loopback is used; nothing here reaches the internet.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from types import TracebackType
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]

DEFAULT_TOKEN = "123456789:AAE-fake-token-for-tests_0123456789"
# Text-valued parameters PTB sends as they are; every other value is JSON-encoded.
_TEXT_PARAMETERS = frozenset(
    {"text", "caption", "callback_query_id", "parse_mode", "action", "url", "secret_token"}
)
_MENTION = re.compile(r"(?<![\w@])@(\w{3,32})")
_COMMAND = re.compile(r"^/\w+(@\w+)?")


@dataclass(frozen=True)
class FakeUser:
    id: int
    first_name: str
    username: str | None = None
    is_bot: bool = False
    last_name: str | None = None
    # The language their app is set to (an IETF tag, "es"), as Telegram sends it.
    language_code: str | None = None

    def to_dict(self) -> JSONDict:
        data: JSONDict = {"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name}
        if self.last_name:
            data["last_name"] = self.last_name
        if self.language_code:
            data["language_code"] = self.language_code
        if self.username:
            data["username"] = self.username
        return data


@dataclass(frozen=True)
class FakeChat:
    id: int
    type: str  # "private", "group", "supergroup" or "channel"
    title: str | None = None
    first_name: str | None = None
    username: str | None = None

    def to_dict(self) -> JSONDict:
        data: JSONDict = {"id": self.id, "type": self.type}
        for key in ("title", "first_name", "username"):
            value = getattr(self, key)
            if value:
                data[key] = value
        return data


@dataclass(frozen=True)
class SentMessage:
    """A message the bot sent, as the server recorded it: `text` is what people read (with
    `parse_mode=HTML`, the text without its tags), `html` what was sent, if it was HTML."""

    message_id: int
    chat_id: int
    text: str
    reply_to_message_id: int | None = None
    message_thread_id: int | None = None
    reply_markup: JSONDict | None = None
    parse_mode: str | None = None
    html: str | None = None
    # The formatting Telegram made of the HTML: (tag, the text it covers).
    formatted: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class EditedMessage:
    """An editMessageText the server accepted: `text` is what people read after it, `at`
    when it arrived (time.monotonic), to check the edits' pace."""

    message_id: int
    chat_id: int
    text: str
    at: float
    html: str | None = None


@dataclass(frozen=True)
class SentDocument:
    """A file the bot sent (sendDocument), as the server received it."""

    message_id: int
    chat_id: int
    filename: str
    data: bytes
    caption: str | None = None


@dataclass(frozen=True)
class UploadedFile:
    """A file field of a multipart request."""

    filename: str
    data: bytes


@dataclass(frozen=True)
class Call:
    """Any Bot API call the bot made, with its decoded parameters."""

    method: str
    params: JSONDict


@dataclass
class _Poll:
    updates: list[JSONDict] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class FakeTelegramServer:
    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_username: str = "mnemo_bot",
        bot_name: str = "Mnemo",
        long_poll_cap: float = 0.5,
        first_user_id: int = 1001,
    ) -> None:
        """`first_user_id`: two fake servers in one test need different ids, as two bots on
        the real Telegram see the same people and chats under the same ids."""
        self.token = token
        self.bot = FakeUser(
            id=int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 42,
            first_name=bot_name,
            username=bot_username,
            is_bot=True,
        )
        # Long polls are answered within this many seconds so stopping a bot is quick.
        self.long_poll_cap = long_poll_cap
        # True: every HTML message is refused as Telegram refuses entities it cannot parse.
        self.refuse_html = False
        # sendMessage calls answered "429 Too Many Requests" before the next ones succeed.
        self.flood_waits = 0
        self.flood_wait_seconds = 1
        # sendMessage calls that came before the "retry after" of the 429 before them was up:
        # Telegram counts those against the bot (a longer wait); a bot should make none.
        self.early_retries = 0
        self._flood_until = 0.0
        self.sent: list[SentMessage] = []
        self.edits: list[EditedMessage] = []
        # (chat id, message id) of each message the bot deleted.
        self.deleted: list[tuple[int, int]] = []
        self.documents: list[SentDocument] = []
        # Users who opened a private chat with the bot (Telegram's "Start"): only they can be
        # written to privately; anyone else gets "403 Forbidden: bot can't initiate ...".
        self.started: set[int] = set()
        self.calls: list[Call] = []
        self.administrators: dict[int, list[FakeUser]] = {}
        # Files people sent, by file_id (getFile, then a GET of /file/bot<token>/<path>), and
        # the file_ids downloaded, in order.
        self.files: dict[str, bytes] = {}
        self.downloads: list[str] = []
        # Files whose size Telegram does not give (a document sent without `file_size`):
        # getFile leaves it out and the download comes in chunks with no Content-Length.
        # `served`: the bytes each of their downloads wrote before the bot stopped reading.
        self.undeclared: set[str] = set()
        self.served: list[int] = []
        self._poll = _Poll()
        self._next_update = itertools.count(1)
        self._next_message: dict[int, itertools.count[int]] = {}
        self._next_user = itertools.count(first_user_id)
        self._messages: dict[tuple[int, int], JSONDict] = {}
        self._changed = asyncio.Condition()
        self._revoked = False
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        """What `ApplicationBuilder().base_url(...)` takes: PTB appends the token."""
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    async def __aenter__(self) -> FakeTelegramServer:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_route("GET", "/file/bot{token}/files/{file_id}", self._download)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def revoke_token(self) -> None:
        """From now on every call is refused, as when the token is revoked in @BotFather."""
        self._revoked = True

    # ------------------------------------------------------------------ people and chats
    def user(
        self,
        first_name: str,
        *,
        username: str | None = None,
        is_bot: bool = False,
        language_code: str | None = None,
    ) -> FakeUser:
        return FakeUser(
            id=next(self._next_user),
            first_name=first_name,
            username=username,
            is_bot=is_bot,
            language_code=language_code,
        )

    def private_chat(self, user: FakeUser) -> FakeChat:
        self.started.add(user.id)
        return FakeChat(
            id=user.id, type="private", first_name=user.first_name, username=user.username
        )

    def group(self, title: str, *, chat_id: int | None = None, supergroup: bool = True) -> FakeChat:
        chat_id = chat_id if chat_id is not None else -1_000_000_000_000 - next(self._next_user)
        return FakeChat(id=chat_id, type="supergroup" if supergroup else "group", title=title)

    def channel(self, title: str) -> FakeChat:
        return FakeChat(id=-1_000_000_000_000 - next(self._next_user), type="channel", title=title)

    def set_administrators(self, chat: FakeChat, users: Sequence[FakeUser]) -> None:
        self.administrators[chat.id] = list(users)

    # ------------------------------------------------------------------ pushing updates
    def push_message(
        self,
        chat: FakeChat,
        user: FakeUser | None,
        text: str | None = None,
        *,
        reply_to: int | JSONDict | SentMessage | None = None,
        entities: Sequence[JSONDict] | None = None,
        text_mentions: Sequence[tuple[str, FakeUser]] = (),
        photo: bool | Sequence[bytes] = False,
        document: JSONDict | None = None,
        caption: str | None = None,
        voice: bytes | None = None,
        voice_size: int | None = None,
        extra: JSONDict | None = None,
        edited: bool = False,
    ) -> JSONDict:
        """Queue a `message` (or `edited_message`) update; returns the message as sent.

        Entities are worked out as Telegram does: `@name` mentions and a leading `/command`;
        `text_mentions` adds (shown name, user) mentions of people without a username.
        `photo`: True for two sizes with no file behind them, or the file of each size,
        smallest first, which getFile serves. A `document` with a `data` key is served too;
        without a `file_size` key, as a file of undeclared size (`undeclared`). `voice`: a
        voice note (OGG/Opus, as Telegram's apps record them) with these bytes, served by
        getFile, declared as `voice_size` bytes (default: its length).
        """
        message = self._new_message(chat, user)
        if text is not None:
            message["text"] = text
            found = [*_entities(text), *_text_mentions(text, text_mentions)]
            if entities is not None or found:
                message["entities"] = [*found, *(entities or ())]
        if caption is not None:
            message["caption"] = caption
            if found_caption := _entities(caption):
                message["caption_entities"] = found_caption
        if photo is True:
            message["photo"] = [
                _photo_size("small", 90, 1_200),
                _photo_size("large", 1280, 98_000),
            ]
        elif photo:
            sizes = []
            for number, data in enumerate(photo):
                size = _photo_size(
                    f"{message['message_id']}-{number}", 90 * (number + 1), len(data)
                )
                self.files[size["file_id"]] = data
                sizes.append(size)
            message["photo"] = sizes
        if document is not None:
            document = dict(document)
            data = document.pop("data", None)
            message["document"] = {"file_id": "doc", "file_unique_id": "doc-u", **document}
            if data is not None:
                self.files[message["document"]["file_id"]] = data
                if "file_size" not in document:
                    self.undeclared.add(message["document"]["file_id"])
        if voice is not None:
            file_id = f"voice-{chat.id}-{message['message_id']}"
            message["voice"] = {
                "file_id": file_id,
                "file_unique_id": f"{file_id}-u",
                "duration": 3,
                "mime_type": "audio/ogg",
                "file_size": len(voice) if voice_size is None else voice_size,
            }
            self.files[file_id] = voice
        if reply_to is not None:
            message["reply_to_message"] = self._original(chat.id, reply_to)
        message.update(extra or {})
        self._messages[(chat.id, message["message_id"])] = message
        if edited:
            message["edit_date"] = message["date"] + 1
        kind = "message"
        if edited:
            kind = "edited_message"
        elif chat.type == "channel":
            kind = "channel_post"
        self.push_update({kind: message})
        return message

    def push_edit(self, original: JSONDict, text: str) -> JSONDict:
        """Queue an `edited_message` update for a message pushed earlier."""
        edited = {**original, "text": text, "edit_date": int(time.time())}
        self.push_update({"edited_message": edited})
        return edited

    def push_service(self, chat: FakeChat, user: FakeUser, **service: Any) -> JSONDict:
        """A service message, e.g. `new_chat_members=[...]`, `new_chat_title="x"`,
        `pinned_message={...}`: no text, only the event."""
        message = self._new_message(chat, user)
        message.update(
            {
                key: [u.to_dict() for u in value]
                if isinstance(value, list) and value and isinstance(value[0], FakeUser)
                else value
                for key, value in service.items()
            }
        )
        self.push_update({"message": message})
        return message

    def push_callback(self, user: FakeUser, message: SentMessage | JSONDict, data: str) -> str:
        """Someone pressed an inline button under `message`; returns the query id."""
        query_id = f"cq-{next(self._next_update)}"
        original = self._original(
            message.chat_id if isinstance(message, SentMessage) else message["chat"]["id"],
            message,
        )
        self.push_update(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user.to_dict(),
                    "chat_instance": f"ci-{original['chat']['id']}",
                    "message": original,
                    "data": data,
                }
            }
        )
        return query_id

    def push_update(self, update: JSONDict) -> int:
        update_id = next(self._next_update)
        self._poll.updates.append({"update_id": update_id, **update})
        self._poll.arrived.set()
        return update_id

    def _new_message(self, chat: FakeChat, user: FakeUser | None) -> JSONDict:
        counter = self._next_message.setdefault(chat.id, itertools.count(1))
        message: JSONDict = {
            "message_id": next(counter),
            "date": int(time.time()),
            "chat": chat.to_dict(),
        }
        if user is not None:
            message["from"] = user.to_dict()
        return message

    def _original(self, chat_id: int, reply_to: int | JSONDict | SentMessage) -> JSONDict:
        if isinstance(reply_to, SentMessage):
            reply_to = reply_to.message_id
        if isinstance(reply_to, int):
            found = self._messages.get((chat_id, reply_to))
            if found is None:
                raise KeyError(f"no message {reply_to} in chat {chat_id}")
            reply_to = found
        # Telegram nests one level only: the replied-to message carries no reply of its own.
        return {k: v for k, v in reply_to.items() if k != "reply_to_message"}

    # ------------------------------------------------------------------ waiting
    async def wait_for_sent(
        self, count: int, timeout: float = 10.0, *, chat_id: int | None = None
    ) -> list[SentMessage]:
        """The bot's sent messages (in `chat_id`, if given) once there are `count` of them."""

        def ready() -> list[SentMessage] | None:
            sent = [m for m in self.sent if chat_id is None or m.chat_id == chat_id]
            return sent if len(sent) >= count else None

        return await self._wait(ready, timeout, lambda: f"{count} sent messages, got {self.sent}")

    async def wait_for_calls(
        self, method: str, count: int = 1, timeout: float = 10.0
    ) -> list[Call]:
        def ready() -> list[Call] | None:
            calls = self.calls_to(method)
            return calls if len(calls) >= count else None

        return await self._wait(
            ready, timeout, lambda: f"{count} {method} calls, got {len(self.calls_to(method))}"
        )

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    async def drained(self, timeout: float = 10.0) -> None:
        """Wait until the bot has fetched every queued update."""
        await self._wait(
            lambda: True if not self._poll.updates else None,
            timeout,
            lambda: f"{len(self._poll.updates)} updates never fetched",
        )

    async def _wait(
        self, ready: Callable[[], Any], timeout: float, describe: Callable[[], str]
    ) -> Any:
        async def until() -> Any:
            async with self._changed:
                while (result := ready()) is None:
                    await self._changed.wait()
                return result

        try:
            return await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout}s waiting for {describe()}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ the API
    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token or self._revoked:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        handler = getattr(self, f"_api_{method.lower()}", None)
        if handler is None:
            return _error(404, "Not Found")
        params = await _params(request)
        self.calls.append(Call(method, params))
        try:
            result = await handler(params)
        except _ApiError as error:
            return _error(error.code, error.description, error.retry_after)
        finally:
            await self._notify()
        return web.json_response({"ok": True, "result": result})

    async def _api_getme(self, params: JSONDict) -> JSONDict:
        return {
            **self.bot.to_dict(),
            "can_join_groups": True,
            "can_read_all_group_messages": True,
            "supports_inline_queries": False,
        }

    async def _api_getupdates(self, params: JSONDict) -> list[JSONDict]:
        offset = int(params.get("offset") or 0)
        # Telegram forgets the updates below the offset: they were confirmed.
        self._poll.updates = [u for u in self._poll.updates if u["update_id"] >= offset]
        if not self._poll.updates:
            self._poll.arrived.clear()
            wait = min(float(params.get("timeout") or 0), self.long_poll_cap)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poll.arrived.wait(), wait)
        limit = int(params.get("limit") or 100)
        updates = self._poll.updates[:limit]
        if updates and offset == 0:
            log.debug("handing out %d updates", len(updates))
        return updates

    async def _api_sendmessage(self, params: JSONDict) -> JSONDict:
        chat_id = int(params["chat_id"])
        if chat_id > 0 and chat_id not in self.started:
            raise _ApiError(403, "Forbidden: bot can't initiate conversation with a user")
        if time.monotonic() < self._flood_until:
            self.early_retries += 1
        if self.flood_waits > 0:
            self.flood_waits -= 1
            self._flood_until = time.monotonic() + self.flood_wait_seconds
            raise _ApiError(
                429,
                f"Too Many Requests: retry after {self.flood_wait_seconds}",
                retry_after=self.flood_wait_seconds,
            )
        sent_text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        formatted: tuple[tuple[str, str], ...] = ()
        text = sent_text
        if parse_mode == "HTML":
            if self.refuse_html:
                raise _ApiError(400, "Bad Request: can't parse entities: unsupported start tag")
            text, formatted = parse_telegram_html(sent_text)
        elif parse_mode is not None:
            raise _ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode}")
        if not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if _utf16_length(text) > 4096:
            raise _ApiError(400, "Bad Request: message is too long")
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        thread = params.get("message_thread_id")
        counter = self._next_message.setdefault(chat_id, itertools.count(1))
        message: JSONDict = {
            "message_id": next(counter),
            "from": self.bot.to_dict(),
            "chat": self._chat_of(chat_id),
            "date": int(time.time()),
            "text": text,
        }
        original = self._messages.get((chat_id, reply_to)) if reply_to else None
        if original is not None:
            message["reply_to_message"] = self._original(chat_id, original)
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        self._messages[(chat_id, message["message_id"])] = message
        self.sent.append(
            SentMessage(
                message_id=message["message_id"],
                chat_id=chat_id,
                text=text,
                reply_to_message_id=reply_to,
                message_thread_id=int(thread) if thread is not None else None,
                reply_markup=params.get("reply_markup"),
                parse_mode=parse_mode,
                html=sent_text if parse_mode == "HTML" else None,
                formatted=formatted,
            )
        )
        return message

    async def _api_senddocument(self, params: JSONDict) -> JSONDict:
        chat_id = int(params["chat_id"])
        if chat_id > 0 and chat_id not in self.started:
            raise _ApiError(403, "Forbidden: bot can't initiate conversation with a user")
        document = params.get("document")
        if not isinstance(document, UploadedFile):
            raise _ApiError(400, "Bad Request: there is no document in the request")
        caption = params.get("caption")
        counter = self._next_message.setdefault(chat_id, itertools.count(1))
        message: JSONDict = {
            "message_id": next(counter),
            "from": self.bot.to_dict(),
            "chat": self._chat_of(chat_id),
            "date": int(time.time()),
            "document": {
                "file_id": f"doc-{len(self.documents) + 1}",
                "file_unique_id": f"doc-u-{len(self.documents) + 1}",
                "file_name": document.filename,
                "file_size": len(document.data),
            },
        }
        if caption:
            message["caption"] = caption
        self.documents.append(
            SentDocument(message["message_id"], chat_id, document.filename, document.data, caption)
        )
        return message

    async def _api_getfile(self, params: JSONDict) -> JSONDict:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        described: JSONDict = {"file_id": file_id, "file_unique_id": f"{file_id}-u"}
        if file_id not in self.undeclared:
            described["file_size"] = len(self.files[file_id])
        return {**described, "file_path": f"files/{file_id}"}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token or self._revoked:
            return _error(401, "Unauthorized")
        file_id = request.match_info["file_id"]
        if file_id not in self.files:
            return _error(404, "Not Found")
        self.downloads.append(file_id)
        data = self.files[file_id]
        if file_id not in self.undeclared:
            return web.Response(body=data, content_type="application/octet-stream")
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()  # no Content-Length: the size shows only as it comes
        await response.prepare(request)
        written = 0
        try:
            for start in range(0, len(data), 64 * 1024):
                await response.write(data[start : start + 64 * 1024])
                written += len(data[start : start + 64 * 1024])
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass  # the bot stopped reading
        finally:
            self.served.append(written)
        return response

    async def _api_editmessagetext(self, params: JSONDict) -> JSONDict | bool:
        chat_id = int(params["chat_id"])
        key = (chat_id, int(params["message_id"]))
        message = self._messages.get(key)
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        sent_text = str(params["text"])
        text = sent_text
        if params.get("parse_mode") == "HTML":
            if self.refuse_html:
                raise _ApiError(400, "Bad Request: can't parse entities: unsupported start tag")
            text, _ = parse_telegram_html(sent_text)
        if not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if text == message.get("text") and not params.get("reply_markup"):
            # Telegram refuses an edit that changes nothing.
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        self.edits.append(
            EditedMessage(
                key[1],
                chat_id,
                text,
                time.monotonic(),
                sent_text if params.get("parse_mode") == "HTML" else None,
            )
        )
        message = {**message, "text": text, "edit_date": int(time.time())}
        message.pop("reply_markup", None)
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        self._messages[key] = message
        return message

    async def _api_deletemessage(self, params: JSONDict) -> bool:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if self._messages.pop(key, None) is None:
            raise _ApiError(400, "Bad Request: message to delete not found")
        self.deleted.append(key)
        return True

    def text_of(self, chat_id: int, message_id: int) -> str | None:
        """What a message the bot sent reads now (after its edits); None once deleted."""
        message = self._messages.get((chat_id, message_id))
        return None if message is None else str(message.get("text", ""))

    async def _api_getchatadministrators(self, params: JSONDict) -> list[JSONDict]:
        chat_id = int(params["chat_id"])
        if chat_id > 0:
            raise _ApiError(400, "Bad Request: there are no administrators in the private chat")
        return [_administrator(user) for user in self.administrators.get(chat_id, [])]

    async def _api_sendchataction(self, params: JSONDict) -> bool:
        return True

    async def _api_answercallbackquery(self, params: JSONDict) -> bool:
        return True

    async def _api_setmycommands(self, params: JSONDict) -> bool:
        return True

    async def _api_deletemycommands(self, params: JSONDict) -> bool:
        return True

    async def _api_deletewebhook(self, params: JSONDict) -> bool:
        return True

    async def _api_setwebhook(self, params: JSONDict) -> bool:
        return True

    async def _api_close(self, params: JSONDict) -> bool:
        return True

    async def _api_logout(self, params: JSONDict) -> bool:
        return True

    def _chat_of(self, chat_id: int) -> JSONDict:
        for (known, _), message in reversed(self._messages.items()):
            if known == chat_id:
                return dict(message["chat"])
        return {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}


class _ApiError(Exception):
    def __init__(self, code: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.retry_after = retry_after


def _error(code: int, description: str, retry_after: int | None = None) -> web.Response:
    body: JSONDict = {"ok": False, "error_code": code, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=code)


# The tags Telegram's HTML style takes (https://core.telegram.org/bots/api#html-style).
_STYLE_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "tg-spoiler", "span"}
)
_TELEGRAM_TAGS = _STYLE_TAGS | {"a", "code", "pre", "blockquote", "tg-emoji"}


class _TelegramHTML(HTMLParser):
    """Telegram's reading of an HTML message: the text shown and what is formatted, or
    "can't parse entities" for what Telegram refuses (an unknown tag, a tag not closed or
    closed out of order, code holding other entities, a quote in a quote)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.open: list[tuple[str, int]] = []
        self.formatted: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _TELEGRAM_TAGS:
            raise _ApiError(400, f"Bad Request: can't parse entities: unsupported tag {tag}")
        inside = [name for name, _ in self.open]
        if inside and inside[-1] == "pre" and tag == "code":
            pass  # <pre><code class="language-x"> is one entity
        elif any(name in ("code", "pre") for name in inside):
            raise _ApiError(400, "Bad Request: can't parse entities: code can't contain entities")
        elif tag in ("code", "pre") and any(name in _STYLE_TAGS or name == "a" for name in inside):
            raise _ApiError(400, "Bad Request: can't parse entities: code inside other entities")
        if tag == "blockquote" and "blockquote" in inside:
            raise _ApiError(400, "Bad Request: can't parse entities: nested blockquotes")
        if tag == "a" and not dict(attrs).get("href"):
            raise _ApiError(400, "Bad Request: can't parse entities: a link without href")
        self.open.append((tag, len("".join(self.text))))

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1][0] != tag:
            raise _ApiError(
                400, f"Bad Request: can't parse entities: can't find end tag for \"{tag}\""
            )
        name, start = self.open.pop()
        self.formatted.append((name, "".join(self.text)[start:]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_telegram_html(source: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The text Telegram shows for an HTML message, and its formatted spans."""
    if re.search(r"&(?!(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);)", source):
        raise _ApiError(400, "Bad Request: can't parse entities: unescaped &")
    reader = _TelegramHTML()
    reader.feed(source)
    reader.close()
    if reader.open:
        raise _ApiError(400, "Bad Request: can't parse entities: a tag is not closed")
    # convert_charrefs: the text already has &lt; and the like turned into characters.
    return "".join(reader.text), tuple(reader.formatted)


async def _params(request: web.Request) -> JSONDict:
    """PTB posts form fields whose values are JSON-encoded, except plain strings."""
    if request.content_type == "application/json":
        body = await request.json()
        return dict(body) if isinstance(body, dict) else {}
    form = await request.post()
    params: JSONDict = {}
    for key, value in form.items():
        if not isinstance(value, str):
            # An uploaded file (multipart): kept whole, for tests to read.
            params[key] = UploadedFile(str(value.filename), value.file.read())
            continue
        if key in _TEXT_PARAMETERS:
            params[key] = value
            continue
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


def _utf16_length(text: str) -> int:
    """Telegram measures entity offsets in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _entity(kind: str, text: str, start: int, end: int, **extra: Any) -> JSONDict:
    return {
        "type": kind,
        "offset": _utf16_length(text[:start]),
        "length": _utf16_length(text[start:end]),
        **extra,
    }


def _entities(text: str) -> list[JSONDict]:
    found = []
    command = _COMMAND.match(text)
    if command:
        found.append(_entity("bot_command", text, 0, command.end()))
    for match in _MENTION.finditer(text):
        if command and match.start() < command.end():
            continue
        found.append(_entity("mention", text, match.start(), match.end()))
    return found


def _text_mentions(text: str, mentions: Sequence[tuple[str, FakeUser]]) -> list[JSONDict]:
    found = []
    for shown, user in mentions:
        start = text.index(shown)
        found.append(_entity("text_mention", text, start, start + len(shown), user=user.to_dict()))
    return found


def _photo_size(name: str, width: int, size: int) -> JSONDict:
    return {
        "file_id": f"photo-{name}",
        "file_unique_id": f"photo-{name}-u",
        "width": width,
        "height": width,
        "file_size": size,
    }


def _administrator(user: FakeUser) -> JSONDict:
    rights = (
        "can_be_edited", "is_anonymous", "can_manage_chat", "can_delete_messages",
        "can_manage_video_chats", "can_restrict_members", "can_promote_members",
        "can_change_info", "can_invite_users", "can_post_stories", "can_edit_stories",
        "can_delete_stories",
    )  # fmt: skip
    return {
        "status": "administrator",
        "user": user.to_dict(),
        **{right: right not in ("can_be_edited", "is_anonymous") for right in rights},
    }

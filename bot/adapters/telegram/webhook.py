"""The Telegram webhook: Telegram POSTs each update here, and hears 200 only once it is kept.

python-telegram-bot's own webhook server (`Updater.start_webhook`) answers 200 as soon as an
update is queued, and Telegram never sends an acknowledged update again: a process killed
before the message was stored lost it for good. This is PTB's "custom webhook" set-up instead
(an `Application` built with `updater(None)`, updates parsed with `Update.de_json` and handed to
`Application.process_update`), on aiohttp, which the bot already runs for its metrics. The
adapter's message handler makes the message safe before it returns (its job written, or
journaled); only then is Telegram answered. An update that could not be kept is answered 503,
so Telegram sends it again; the message's stable id makes the second delivery a no-op if the
first one did get through.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from http import HTTPStatus

from aiohttp import web
from telegram import Update
from telegram.ext import Application

from bot.adapters.errors import PlatformStartupError

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookServer:
    def __init__(
        self,
        app: Application,
        *,
        listen: str,
        port: int,
        path: str,
        secret: str,
        kept: Callable[[int], bool],
    ) -> None:
        """`kept(update_id)`: after the update was processed, whether it is safe to
        acknowledge (the adapter's handler records the ones it could not keep)."""
        self._app = app
        self._listen = listen
        self._port = port
        self._path = "/" + path.lstrip("/")
        self._secret = secret
        self._kept = kept
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        server = web.Application()
        server.router.add_post(self._path, self._receive)
        self._runner = web.AppRunner(server, access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self._listen, self._port).start()
        except OSError as error:
            await self.stop()
            raise PlatformStartupError(
                f"telegram: cannot listen for the webhook on {self._listen}:{self._port} "
                f"({error.strerror or error}); check MNEMO_TELEGRAM_WEBHOOK_PORT"
            ) from None

    async def stop(self) -> None:
        """No new updates: Telegram keeps what it could not deliver and sends it later."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self._secret.encode()):
            return web.Response(status=HTTPStatus.FORBIDDEN)
        try:
            update = Update.de_json(await request.json(), self._app.bot)
        except Exception as error:  # not JSON, or not an update: Telegram never sends that
            log.warning("telegram: webhook request is not an update (%s)", type(error).__name__)
            return web.Response(status=HTTPStatus.BAD_REQUEST)
        await self._app.process_update(update)
        if not self._kept(update.update_id):
            return web.Response(status=HTTPStatus.SERVICE_UNAVAILABLE)
        return web.Response(status=HTTPStatus.OK)

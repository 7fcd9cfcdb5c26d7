"""How updates reach the Telegram adapter: long polling (the default) or a webhook.

Either way Telegram is told an update arrived only once the adapter has kept its message
(written its job, or journaled it): polling confirms an update with the next getUpdates call's
offset, which waits until every update fetched before has been handled; the webhook
(webhook.py) answers each POST once its update has been handled.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from telegram.error import NetworkError, TelegramError
from telegram.ext import Application
from telegram.request import HTTPXRequest, RequestData
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_incrementing,
)

from bot.adapters.errors import PlatformStartupError
from bot.adapters.telegram.webhook import WebhookServer
from bot.config.settings import PlatformSettings

# How long a getUpdates call waits for the updates fetched before it to be kept. Past it the
# call fails (PTB's loop retries it) rather than confirm what is not kept yet.
KEEP_WAIT = 30.0
# Pauses before asking again for an update that could not be kept.
RETRY_FIRST = 0.5
RETRY_MAX = 30.0


class PollingRequest(HTTPXRequest):
    """The getUpdates connection. PTB's polling loop gives up silently when the token stops
    working (revoked in @BotFather); this tells the adapter so the failure is reported.

    Each getUpdates call confirms to Telegram every update below its offset, and PTB raises
    the offset as soon as it has queued the updates fetched. So each call first waits for
    `before_fetch` (every update fetched so far handled, i.e. kept): a process killed in
    between has confirmed nothing it had not kept, and gets the rest again when it restarts.
    """

    def __init__(
        self,
        on_rejected: Callable[[], None],
        before_fetch: Callable[[], Awaitable[object]] | None = None,
        unconfirmed: Callable[[], int | None] | None = None,
        **kwargs: Any,
    ) -> None:
        # One connection: a getUpdates call at a time (the one PTB's polling loop makes).
        super().__init__(**{"connection_pool_size": 1, **kwargs})
        self._on_rejected = on_rejected
        self._before_fetch = before_fetch
        # The oldest update handled but not kept: the offset is held at it, so Telegram sends
        # it again (PTB's loop would confirm it with the next call).
        self._unconfirmed = unconfirmed
        self._retry_delay = RETRY_FIRST

    # PTB calls this with its four timeouts as keywords; they pass through **kwargs unchanged
    # (PTB's own signature types them with private DefaultValue types).
    async def do_request(  # type: ignore[override]
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        **kwargs: Any,
    ) -> tuple[int, bytes]:
        if self._before_fetch is not None:
            try:
                await asyncio.wait_for(self._before_fetch(), KEEP_WAIT)
            except TimeoutError:
                raise NetworkError("updates fetched earlier are not kept yet") from None
        floor = self._unconfirmed() if self._unconfirmed is not None else None
        offset = request_data.parameters.get("offset") if request_data is not None else None
        if floor is not None and request_data is not None and isinstance(offset, int):
            if offset > floor:
                # Not kept (a full disk, say): ask again after a pause that grows, not at once
                # (but not before the last call of a shutdown, a short poll: timeout 0).
                if request_data.parameters.get("timeout"):
                    await asyncio.sleep(self._retry_delay)
                    self._retry_delay = min(self._retry_delay * 2, RETRY_MAX)
                request_data = _WithOffset(request_data, floor)
        else:
            self._retry_delay = RETRY_FIRST
        code, payload = await super().do_request(url, method, request_data, **kwargs)
        if code == HTTPStatus.UNAUTHORIZED:
            self._on_rejected()
        return code, payload


# PTB marks RequestData @final for typing only (how it is built is PTB's internal detail);
# this subclass overrides only the two documented properties its HTTP layer reads.
class _WithOffset(RequestData):  # type: ignore[misc]
    """A getUpdates request with its offset lowered: updates from `offset` on stay unconfirmed."""

    __slots__ = ("_offset", "_original")

    def __init__(self, original: RequestData, offset: int) -> None:
        super().__init__()
        self._original = original
        self._offset = offset

    @property
    def parameters(self) -> dict[str, Any]:
        return {**self._original.parameters, "offset": self._offset}

    @property
    def json_parameters(self) -> dict[str, str]:
        return {**self._original.json_parameters, "offset": str(self._offset)}


async def start_updates(
    app: Application,
    settings: PlatformSettings,
    *,
    poll_timeout: float,
    kept: Callable[[int], bool],
) -> WebhookServer | None:
    """Start receiving: polling (returns None), or the webhook server (returned, to stop)."""
    url = settings.telegram_webhook_url
    if url is None:
        assert app.updater is not None
        # Network errors while polling are logged and retried by PTB's loop, forever.
        await app.updater.start_polling(
            timeout=timedelta(seconds=poll_timeout), bootstrap_retries=3
        )
        return None
    secret = secret_of(settings)
    server = WebhookServer(
        app,
        listen=settings.telegram_webhook_listen,
        port=settings.telegram_webhook_port,
        path=urlsplit(url).path,
        secret=secret,
        kept=kept,
    )
    await server.start()  # listening before Telegram is told where to send
    try:
        # Telegram echoes the secret in a header, so forged updates from others are refused.
        await _set_webhook(app, url, secret)
    except BaseException:
        await server.stop()
        raise
    return server


async def _set_webhook(app: Application, url: str, secret: str, attempts: int = 3) -> None:
    """Register the webhook, trying network trouble again after 1 s, then 2 s, ..."""
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(NetworkError),
            stop=stop_after_attempt(attempts),
            wait=wait_incrementing(start=1, increment=1),
            reraise=True,
        ):
            with attempt:
                await app.bot.set_webhook(url=url, secret_token=secret)
    except TelegramError as error:  # its message never holds the token
        raise PlatformStartupError(
            f"telegram: setting the webhook failed ({type(error).__name__}: {error})"
        ) from None


def secret_of(settings: PlatformSettings) -> str:
    """The webhook's secret: MNEMO_TELEGRAM_WEBHOOK_SECRET, else derived from the token (the
    same in every process behind the load balancer)."""
    if settings.telegram_webhook_secret is not None:
        return settings.telegram_webhook_secret.get_secret_value()
    token = settings.telegram_token
    assert token is not None
    return webhook_secret(token.get_secret_value())


def webhook_secret(token: str) -> str:
    """A stable secret derived from the token, in the alphabet Telegram allows."""
    return hashlib.sha256(f"mnemo-webhook:{token}".encode()).hexdigest()

"""How updates reach the Telegram adapter: long polling (the default) or a webhook."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from datetime import timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from telegram.ext import Application
from telegram.request import HTTPXRequest

from bot.adapters.errors import PlatformStartupError
from bot.config import PlatformSettings


class PollingRequest(HTTPXRequest):
    """The getUpdates connection. PTB's polling loop gives up silently when the token stops
    working (revoked in @BotFather); this tells the adapter so the failure is reported."""

    def __init__(self, on_rejected: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_rejected = on_rejected

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        code, payload = await super().do_request(*args, **kwargs)
        if code == HTTPStatus.UNAUTHORIZED:
            self._on_rejected()
        return code, payload


async def start_updates(
    app: Application, settings: PlatformSettings, *, poll_timeout: float
) -> None:
    assert app.updater is not None
    url = settings.telegram_webhook_url
    if url is None:
        # Network errors while polling are logged and retried by PTB's loop, forever.
        await app.updater.start_polling(
            timeout=timedelta(seconds=poll_timeout), bootstrap_retries=3
        )
        return
    if importlib.util.find_spec("tornado") is None:
        raise PlatformStartupError(
            "telegram: MNEMO_TELEGRAM_WEBHOOK_URL needs python-telegram-bot[webhooks] "
            "(tornado); install it or unset the URL to poll instead"
        )
    await app.updater.start_webhook(
        listen=settings.telegram_webhook_listen,
        port=settings.telegram_webhook_port,
        url_path=urlsplit(url).path.lstrip("/"),
        webhook_url=url,
        # Telegram echoes it in a header, so forged updates from others are refused.
        secret_token=secret_of(settings),
        bootstrap_retries=3,
    )


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

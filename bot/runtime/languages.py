"""Languages: which catalog (bot/i18n) the bot's own words to a person are looked up in.

In order: the world's choice (`/language`, kept with its other settings in `world_settings`),
else the language the person's app is set to (Telegram's `language_code`, Discord's
interaction `locale`), when it has a catalog, else the operator's MNEMO_LANGUAGE. A world's
choice read here is kept for `ttl` seconds (a change made in this process at once), so the
bot's few lines of its own cost no read each; while the database is away, what was kept is
used, or nothing (`texts_now`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from pymongo.errors import PyMongoError

from bot.i18n import Texts, match_language, texts_for
from bot.storage.world_settings import WorldSettingsStore

log = logging.getLogger(__name__)

# Seconds a world's language read here serves before it is read again (as WorldChoices').
LANGUAGE_TTL_SECONDS = 30.0
# Seconds the read may take before the line goes out without it (a database that stopped
# answering and is not known to be away yet: /help must not wait for its time-out).
LANGUAGE_READ_SECONDS = 2.0


@dataclass(frozen=True)
class _Kept:
    language: str | None
    read_at: float


class Languages:
    def __init__(
        self,
        store: WorldSettingsStore,
        default: str,
        *,
        ttl: float = LANGUAGE_TTL_SECONDS,
        read_seconds: float = LANGUAGE_READ_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        # MNEMO_LANGUAGE, a code with a catalog (checked by the settings).
        self.default = default
        self._ttl = ttl
        self._read_seconds = read_seconds
        self._clock = clock
        self._kept: dict[str, _Kept] = {}

    async def chosen(self, world_id: str) -> str | None:
        """The language the world's admins chose, None for none (or a code whose catalog
        is no longer installed, which is then left aside)."""
        kept = self._kept.get(world_id)
        if kept is not None and self._clock() - kept.read_at < self._ttl:
            return kept.language
        settings = await self.store.get(world_id)
        return self._keep(world_id, None if settings is None else settings.language)

    def language(self, chosen: str | None, locale: str | None) -> str:
        """The language to speak: the world's choice, else the person's, else the default."""
        return chosen or match_language(locale) or self.default

    async def texts(self, world_id: str, locale: str | None = None) -> Texts:
        """The catalog for a person (with `locale`, their app's) in the world."""
        try:
            chosen = await asyncio.wait_for(self.chosen(world_id), self._read_seconds)
        except (PyMongoError, TimeoutError) as error:
            # The bot's line must still go out (it may be the one saying the database is away).
            log.info(
                "the language of world %s could not be read (%s)", world_id, type(error).__name__
            )
            chosen = self._chosen_kept(world_id)
        return texts_for(self.language(chosen, locale))

    def texts_now(self, world_id: str, locale: str | None = None) -> Texts:
        """`texts` without a read: for what is said while the database is away."""
        return texts_for(self.language(self._chosen_kept(world_id), locale))

    async def change(self, world_id: str, language: str | None) -> None:
        """Store the admins' choice (None: back to the person's or the operator's)."""
        settings = await self.store.change(world_id, language=language)
        self._keep(world_id, settings.language)

    def _chosen_kept(self, world_id: str) -> str | None:
        kept = self._kept.get(world_id)
        return None if kept is None else kept.language

    def _keep(self, world_id: str, stored: str | None) -> str | None:
        language = match_language(stored)
        if stored and language is None:
            log.warning("world %s chose the language %r, which has no catalog", world_id, stored)
        self._kept[world_id] = _Kept(language, self._clock())
        return language

"""WorldChoices: the character and model names each world runs with, as its admins chose them
(`/character`, `/model`), kept in `world_settings` (bot/storage/world_settings.py).

How a choice reaches every call, across processes: the reply path reads the world's document
in the same aggregation as the room's window (bot/runtime/composing.py; no extra round trip),
so every reply uses what is stored now, whichever process made the change. What was read is
kept here per world; the paths that have no such read (evaluations, should-respond before
the window, plugins' commands) use it for at most `ttl` seconds, then read it again. A change
made in this process replaces the kept entry at once; one made in another process reaches
this one's evaluations within `ttl` seconds, and its replies on the next message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.domain.characters import CharacterCatalog, WorldChoice
from bot.storage.window_reads import Read
from bot.storage.world_settings import COLLECTION, WorldSettings, WorldSettingsStore

log = logging.getLogger(__name__)

# Seconds a world's choice read by one path serves the paths that read none of their own.
CHOICE_TTL_SECONDS = 30.0
# Under this name a window read carries the world's settings document.
WORLD_SETTINGS_READ = "world_settings"


@dataclass(frozen=True)
class _Kept:
    choice: WorldChoice
    read_at: float


class WorldChoices:
    def __init__(
        self,
        store: WorldSettingsStore,
        catalog: CharacterCatalog,
        *,
        default_models: Mapping[str, str] | None = None,
        ttl: float = CHOICE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.catalog = catalog
        # The process's model names by class ("small", "large"), shown as the defaults; empty
        # with the offline model, which has no model names.
        self.default_models = dict(default_models or {})
        self._ttl = ttl
        self._clock = clock
        self._kept: dict[str, _Kept] = {}

    @property
    def default(self) -> WorldChoice:
        default = self.catalog.default
        return WorldChoice(default.character, default.key)

    # ------------------------------------------------------------------ reading
    @staticmethod
    def read(world_id: str) -> list[Read]:
        """The window read's part that brings the world's settings document along."""
        return Read.by_ids(COLLECTION, [world_id])

    def from_documents(self, world_id: str, documents: list[dict[str, Any]]) -> WorldChoice:
        """The world's choice from what a window read found (and kept for the other paths)."""
        settings = WorldSettings.from_document(documents[0]) if documents else None
        return self._keep(world_id, settings)

    async def of(self, world_id: str) -> WorldChoice:
        """The world's choice: kept if read less than `ttl` seconds ago, else read now."""
        kept = self._kept.get(world_id)
        if kept is not None and self._clock() - kept.read_at < self._ttl:
            return kept.choice
        return self._keep(world_id, await self.store.get(world_id))

    def kept(self, world_id: str) -> WorldChoice:
        """The choice last read for the world (at this message's intake, for a reply), or the
        default when none was read: for synchronous callers (should-respond)."""
        kept = self._kept.get(world_id)
        return self.default if kept is None else kept.choice

    # ------------------------------------------------------------------ changing
    async def change(self, world_id: str, **choices: str | None) -> WorldChoice:
        """Store the admins' choice and use it in this process at once."""
        return self._keep(world_id, await self.store.change(world_id, **choices))

    def _keep(self, world_id: str, settings: WorldSettings | None) -> WorldChoice:
        choice = self._choice(settings)
        self._kept[world_id] = _Kept(choice, self._clock())
        return choice

    def _choice(self, settings: WorldSettings | None) -> WorldChoice:
        if settings is None:
            return self.default
        installed = self.catalog.default
        missing = None
        if settings.character:
            found = self.catalog.find(settings.character)
            if found is None:
                # Removed since it was chosen: the default speaks until an admin chooses again.
                log.warning(
                    "world %s chose character %r, which is not installed; using %s",
                    settings.world_id,
                    settings.character,
                    installed.key,
                )
                missing = settings.character
            else:
                installed = found
        return WorldChoice(
            installed.character,
            installed.key,
            small_model=settings.small_model or None,
            large_model=settings.large_model or None,
            missing_character=missing,
        )

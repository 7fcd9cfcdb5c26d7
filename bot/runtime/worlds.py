"""WorldChoices: the character and model names each world runs with, as its admins chose them
(`/character`, `/model`), kept in `world_settings` (bot/storage/world_settings.py).

How a choice reaches every call, across processes: the reply path reads the world's document
in the same aggregation as the room's window (bot/runtime/composing.py; no extra round trip),
so every reply uses what is stored now, whichever process made the change. What was read is
kept here per world; the paths that have no such read (evaluations, should-respond before
the window, plugins' commands) use it for at most `ttl` seconds, then read it again. A change
made in this process replaces the kept entry at once; one made in another process reaches
this one's evaluations within `ttl` seconds, and its replies on the next message.

Which model names a world may run on is the operator's decision (`MNEMO_MODEL_CHOICES`): a
stored name outside that list (chosen before the operator removed it, or written into the
database by hand) is never used; the process's model stands in and `/model` says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.config.services import MODEL_NAME
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
        model_choices: Sequence[str] = (),
        ttl: float = CHOICE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.catalog = catalog
        # The process's model names by class ("small", "large"), shown as the defaults; empty
        # with the offline model, which has no model names.
        self.default_models = dict(default_models or {})
        # The names a world may choose instead (MNEMO_MODEL_CHOICES), as the operator spelt them.
        self.model_choices = tuple(model_choices)
        self._ttl = ttl
        self._clock = clock
        self._kept: dict[str, _Kept] = {}
        # (world, name) pairs already logged as not allowed: one warning each, not one a read.
        self._warned: set[tuple[str, str]] = set()

    def allowed(self, name: str) -> str | None:
        """The operator's spelling of `name` when it is one of MNEMO_MODEL_CHOICES, else None.

        Exact, or the same ASCII letters in another case ("GPT-4o" for "gpt-4o"); nothing
        else: not a name with spaces, invisible or look-alike characters, nor a longer one.
        What is kept and sent to the endpoint is always the operator's own string."""
        if name in self.model_choices:
            return name
        if not MODEL_NAME.fullmatch(name):
            return None
        folded = [choice for choice in self.model_choices if choice.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None

    def _usable(self, world_id: str, size: str, name: str | None) -> tuple[str | None, str | None]:
        """(the model name to use, the refused name) for a stored choice of class `size`."""
        if not name:
            return None, None
        if name == self.default_models.get(size):
            return name, None  # the operator's own setting for that class
        allowed = self.allowed(name)
        if allowed is not None:
            return allowed, None
        if (world_id, name) not in self._warned:
            self._warned.add((world_id, name))
            log.warning(
                "world %s chose the %s model %r, which MNEMO_MODEL_CHOICES does not allow; "
                "using the configured one",
                world_id,
                size,
                name[:120],
            )
        return None, name

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
        small, refused_small = self._usable(settings.world_id, "small", settings.small_model)
        large, refused_large = self._usable(settings.world_id, "large", settings.large_model)
        return WorldChoice(
            installed.character,
            installed.key,
            small_model=small,
            large_model=large,
            missing_character=missing,
            refused_small_model=refused_small,
            refused_large_model=refused_large,
        )

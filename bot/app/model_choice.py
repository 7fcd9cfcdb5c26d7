"""Choose the language model from settings (the OpenAI-compatible client, or the offline one),
and what each world may choose instead: the installed characters and the default model names
that `/character` and `/model` choose among (bot/runtime/worlds.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config.base import BUILTIN_CHARACTERS
from bot.domain.characters import Character, character_catalog
from bot.plugin.offline_model import OfflineModel
from bot.runtime.worlds import WorldChoices

if TYPE_CHECKING:
    from bot.config.settings import ModelSettings, Settings
    from bot.llm.accounting import UsageLedger
    from bot.llm.base import LanguageModel
    from bot.plugin.api import OfflineAnswer
    from bot.plugin.loading import Registry
    from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)


def make_model(
    settings: ModelSettings,
    ledger: UsageLedger,
    offline_answers: Mapping[str, Sequence[OfflineAnswer]] | None = None,
) -> LanguageModel:
    """The offline model when neither an API key nor a base URL is set, else OpenAIModel.

    `offline_answers` (task -> the plugins' answer functions) is what the offline model
    dispatches to; a real model ignores it."""
    if settings.offline:
        log.debug("no OPENAI_API_KEY and no OPENAI_BASE_URL: using the offline model")
        return OfflineModel(ledger, offline_answers)
    # Imported here: the `openai` package takes about a second of CPU to import, which every
    # start without a model (the console's first run, each test process) would pay for nothing.
    from bot.llm.openai_model import OpenAIModel

    return OpenAIModel(settings, ledger)


def world_choices(
    settings: Settings, character: Character, store: MongoStore, registry: Registry
) -> WorldChoices:
    """What worlds may choose: the process's character (every world's default) and the other
    characters installed where the `MNEMO_CHARACTER` setting looks for them (the working
    folder's `characters/`, then the ones shipped with Mnemo, and the folder of the configured
    file), then the plugins' characters; the default model names are the settings' (none for
    the offline model), and the model names they may choose are the operator's
    MNEMO_MODEL_CHOICES."""
    configured = Path(settings.runtime.character)
    folders = list(dict.fromkeys([Path("characters"), BUILTIN_CHARACTERS, configured.parent]))
    catalog = character_catalog(
        character, configured.stem, folders=folders, extra=registry.characters
    )
    model = settings.model
    defaults = {} if model.offline else {"small": model.small_model, "large": model.large_model}
    return WorldChoices(
        store.worlds, catalog, default_models=defaults, model_choices=model.model_choices
    )

"""Choose the language model from settings: the OpenAI-compatible client, or the offline one."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.llm.openai_model import OpenAIModel
from bot.plugin.offline_model import OfflineModel

if TYPE_CHECKING:
    from bot.config.settings import ModelSettings
    from bot.llm.accounting import UsageLedger
    from bot.llm.base import LanguageModel
    from bot.plugin.api import OfflineAnswer

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
    return OpenAIModel(settings, ledger)

"""Facts: Mnemo learns durable facts about the people it talks to (the GET_FACTS evaluator)
and brings the relevant ones into the prompt (the `facts` provider)."""

from __future__ import annotations

from bot import Plugin

from . import offline
from .evaluator import MARK, NAME, fact_evaluator
from .provider import facts_provider
from .settings import FactsSettings

__all__ = [
    "MARK",
    "NAME",
    "FactsSettings",
    "fact_evaluator",
    "facts_provider",
    "plugin",
]

plugin = Plugin(
    name="facts",
    description="Learns facts about people from conversations and recalls the relevant ones.",
    evaluators=[fact_evaluator],
    providers=[facts_provider],
    settings_model=FactsSettings,
    # Without a language model: "what do you remember about me?" and acknowledgements.
    offline_answers={"reply": offline.reply},
)

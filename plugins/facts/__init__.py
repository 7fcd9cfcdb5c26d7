"""Facts: Mnemo learns durable facts about the people it talks to (the GET_FACTS evaluator)
and brings the relevant ones into the prompt (the `facts` provider)."""

from __future__ import annotations

from bot import Plugin

from . import offline
from .evaluator import MARK, NAME, fact_evaluator
from .settings import FactsSettings

__all__ = [
    "MARK",
    "NAME",
    "FactsSettings",
    "fact_evaluator",
    "plugin",
]

plugin = Plugin(
    name="facts",
    description="Learns facts about people from what they say, with the words they said it in.",
    evaluators=[fact_evaluator],
    settings_model=FactsSettings,
    # Without a language model: "what do you remember about me?" and acknowledgements.
    offline_answers={"reply": offline.reply},
)

"""Recall: the relevant earlier messages of the conversation, brought back into the prompt
(elizaOS's "relevant past messages") by Mnemo's hybrid vector + keyword retrieval."""

from __future__ import annotations

from bot import Plugin

from .provider import relevant_messages_provider, setup
from .settings import RecallSettings

__all__ = ["RecallSettings", "plugin", "relevant_messages_provider"]

plugin = Plugin(
    name="recall",
    description="Brings earlier messages of the conversation that bear on the current one "
    "into the prompt.",
    providers=[relevant_messages_provider],
    settings_model=RecallSettings,
    setup=setup,
)

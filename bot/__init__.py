"""Mnemo. A plugin needs only this module:

    from bot import Plugin, Evaluator, Provider, Action, Command, Context, CommandContext

The rest of the package is Mnemo's own and may change; what is exported here is the plugin
API (defined in `bot.plugin.api`, documented in docs/plugins.md).
"""

from bot.domain.records import Account, Content, Memory, Room, stable_id, utcnow
from bot.domain.state import State
from bot.llm.base import JsonAnswer, ModelClass, ModelError
from bot.llm.parsing import parse_json_array, parse_json_object
from bot.plugin.api import (
    Action,
    Agent,
    Collections,
    Command,
    CommandContext,
    Context,
    Conversations,
    Evaluator,
    EvaluatorExample,
    ExampleTurn,
    ModelHandle,
    OfflineAnswer,
    OfflineRequest,
    Plugin,
    PluginContext,
    Provided,
    Provider,
)

__all__ = [
    "Account",
    "Action",
    "Agent",
    "Collections",
    "Command",
    "CommandContext",
    "Content",
    "Context",
    "Conversations",
    "Evaluator",
    "EvaluatorExample",
    "ExampleTurn",
    "JsonAnswer",
    "Memory",
    "ModelClass",
    "ModelError",
    "ModelHandle",
    "OfflineAnswer",
    "OfflineRequest",
    "Plugin",
    "PluginContext",
    "Provided",
    "Provider",
    "Room",
    "State",
    "parse_json_array",
    "parse_json_object",
    "stable_id",
    "utcnow",
]

"""Mnemo's plugin SDK. A plugin needs only this module:

    from bot import Plugin, Evaluator, Provider, Action, Command, Context, CommandContext

with `bot.offline` for its offline answers and `bot.testing` for its tests. The rest of the
package is Mnemo's own and may change; what is exported here is the plugin API (defined in
`bot.plugin.api`, documented in docs/plugins.md), and
`tests/unit/architecture/test_architecture.py` checks that the built-in plugins need nothing else.
"""

from bot.domain.characters import Character, load_character
from bot.domain.records import (
    Account,
    Content,
    Document,
    Fact,
    FactType,
    Memory,
    Room,
    Trigger,
    epoch_millis,
    new_id,
    now_ms,
    reply_id,
    stable_id,
    utcnow,
)
from bot.domain.state import State
from bot.knowledge.retrieval import MessageRetriever, RetrieverOptions
from bot.llm.base import Example, JsonAnswer, ModelClass, ModelError
from bot.llm.parsing import parse_json, parse_json_array, parse_json_object
from bot.memory.claims import Claim, Learned
from bot.plugin.api import (
    Action,
    Agent,
    Collections,
    Command,
    CommandContext,
    Context,
    Conversations,
    Delivery,
    Evaluator,
    EvaluatorExample,
    ExampleTurn,
    FactMemory,
    ModelHandle,
    OfflineAnswer,
    OfflineRequest,
    Plugin,
    PluginContext,
    Provided,
    Provider,
    Rooms,
    RoomSender,
    Task,
    TaskContext,
    WorldVoice,
    one_message,
)
from bot.runtime.prompts import format_example

__all__ = [
    "Account",
    "Action",
    "Agent",
    "Character",
    "Claim",
    "Collections",
    "Command",
    "CommandContext",
    "Content",
    "Context",
    "Conversations",
    "Delivery",
    "Document",
    "Evaluator",
    "EvaluatorExample",
    "Example",
    "ExampleTurn",
    "Fact",
    "FactMemory",
    "FactType",
    "JsonAnswer",
    "Learned",
    "Memory",
    "MessageRetriever",
    "ModelClass",
    "ModelError",
    "ModelHandle",
    "OfflineAnswer",
    "OfflineRequest",
    "Plugin",
    "PluginContext",
    "Provided",
    "Provider",
    "RetrieverOptions",
    "Room",
    "RoomSender",
    "Rooms",
    "State",
    "Task",
    "TaskContext",
    "Trigger",
    "WorldVoice",
    "epoch_millis",
    "format_example",
    "load_character",
    "new_id",
    "now_ms",
    "one_message",
    "parse_json",
    "parse_json_array",
    "parse_json_object",
    "reply_id",
    "stable_id",
    "utcnow",
]

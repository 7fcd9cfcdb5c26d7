"""Built-in prompt templates and the formatters that fill them (the renderer is bot.llm.templating).

A character's `templates` override these by name (`messageHandlerTemplate`,
`evaluationTemplate`; plugins' templates by the names they give), as in elizaOS, and
`systemTemplate` (the character's part of a reply, sent as the system message). The built-ins
are deliberately lean: every line here is paid for in prompt tokens on every message. They
show only literal, valid JSON and no placeholders in answer positions: real models copy what a
template shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.llm.base import JsonAnswer

# Re-exported: the renderer lives below this module and bot.plugin.api (no import cycle).
from bot.llm.templating import fill_names as fill_names
from bot.llm.templating import render as render

if TYPE_CHECKING:
    from bot.domain.characters import Character
    from bot.plugin.api import Action, Evaluator, EvaluatorExample

# The character's standing text: sent as the system message, apart from the conversation.
# Short for small models: who it is, the bio and the style rules. The lore, the trait list and
# the example conversations are left out: a 0.5B model gave them back as its replies ("Hey
# Priya, I finally started the new job today", an example's line); a character that wants
# them back overrides this template ({{lore}}, {{adjectives}}, {{messageExamples}}).
SYSTEM_TEMPLATE = """{{identity}}
{{bio}}
Style: {{style}}"""

# The user message of a reply: what is known, the conversation, the task. The answer's shape
# is described, not shown with a placeholder (a model copies placeholders as answers), and in
# few words: every word here is one a small model may copy into its reply.
MESSAGE_HANDLER_TEMPLATE = """{{providers}}
# Conversation
{{recentMessages}}

# Task
Write {{agentName}}'s reply to {{senderName}}'s last message, in new words of your own.
{{actions}}Answer with one JSON object: "text" is the reply; "action" is {{actionChoice}}."""

# No placeholder name to copy (["EVALUATOR_NAME"] came back verbatim from a real model): the
# two examples are real answers, all of the candidates or none of them.
EVALUATION_TEMPLATE = """TASK: Decide which evaluation functions to run on this conversation \
between {{senderName}} and {{agentName}}.

{{recentMessages}}

Evaluator functions:
{{evaluators}}

Choose the evaluators this conversation gives something to do; none if nothing fits.
Available names: {{evaluatorNames}}
Answer with one JSON object whose "evaluators" array holds the chosen names, copied exactly.
To run all of them: {"evaluators": {{evaluatorNamesJson}}}
To run none: {"evaluators": []}"""

BUILTIN_TEMPLATES: Mapping[str, str] = {
    "systemTemplate": SYSTEM_TEMPLATE,
    "messageHandlerTemplate": MESSAGE_HANDLER_TEMPLATE,
    "evaluationTemplate": EVALUATION_TEMPLATE,
}


def bullet(lines: Iterable[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)


def character_values(character: Character, *, max_lore: int = 5, max_examples: int = 2) -> dict:
    """The character's part of the reply prompt."""
    examples = []
    for conversation in character.message_examples[:max_examples]:
        names = {"user1": "Friend", "user2": "Friend 2", "agentName": character.name}
        turns = [f"{fill_names(m.user, names)}: {m.content.text}" for m in conversation]
        examples.append("\n".join(turns))
    style = [*character.style.all, *character.style.chat]
    return {
        "system": character.system or "",
        "identity": character.system or f"You are {character.name}.",
        "agentName": character.name,
        "bio": " ".join(character.bio),
        "lore": bullet(character.lore[:max_lore]),
        "adjectives": ", ".join(character.adjectives),
        "style": "; ".join(style),
        "messageExamples": (
            "# How " + character.name + " talks\n" + "\n\n".join(examples) if examples else ""
        ),
    }


def action_choice(actions: Sequence[Action]) -> str:
    """What the reply's "action" may be: "NONE", or one of the actions listed above it."""
    return '"NONE" or one action name from the list' if actions else '"NONE"'


def format_actions(actions: Sequence[Action]) -> str:
    if not actions:
        return ""
    lines = [f"- {a.name}: {a.description}" for a in actions]
    return "Actions, only when one fits:\n" + "\n".join(lines) + "\n"


def format_example(example: EvaluatorExample, names: Mapping[str, str]) -> str:
    turns = "\n".join(f"{fill_names(t.user, names)}: {t.text}" for t in example.messages)
    outcome = fill_names(example.outcome, names)
    return f"{fill_names(example.context, names)}\n{turns}\nOutcome: {outcome}"


_EXAMPLE_NAMES = {"user1": "Alex", "user2": "Sam", "user3": "Riley"}


def format_evaluators(evaluators: Sequence[Evaluator], *, examples_each: int = 1) -> str:
    """Name, description and a worked example per candidate (kept to one to bound tokens)."""
    blocks = []
    for evaluator in evaluators:
        block = f"{evaluator.name}: {evaluator.description}"
        for example in evaluator.examples[:examples_each]:
            turns = " / ".join(
                f"{fill_names(t.user, _EXAMPLE_NAMES)}: {t.text}" for t in example.messages
            )
            block += f"\n  e.g. {turns}"
        blocks.append(block)
    return "\n".join(blocks)


def names_json(names: Sequence[str]) -> str:
    return json.dumps(list(names))


def reply_answer(action_names: Sequence[str]) -> JsonAnswer:
    """The reply's shape for structured output; the model's own temperature (it is prose)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "action": {"type": "string", "enum": ["NONE", *action_names]},
        },
        "required": ["text", "action"],
        "additionalProperties": False,
    }
    return JsonAnswer("reply", schema, temperature=None)


def selection_answer(names: Sequence[str]) -> JsonAnswer:
    """The evaluator selection's shape: only the candidates' names can be chosen."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "evaluators": {"type": "array", "items": {"type": "string", "enum": list(names)}}
        },
        "required": ["evaluators"],
        "additionalProperties": False,
    }
    return JsonAnswer("evaluator_selection", schema)

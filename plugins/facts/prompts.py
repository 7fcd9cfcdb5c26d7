"""The reading: what the model is asked about one person's messages, and the examples it sees.

One person at a time, their own words only: no character text, no replies of the bot, no
other speaker's lines (a line of theirs could be a forged one). For each message the model
lists what it says about the person's own life as notes, each with what it is about (the
attribute a newer value replaces: "home city") and the words of the message that say it (the
value, copied). The answer's shape has one key per message (`m1`, `m2`, ...), so a small
model goes through every message instead of stopping after the first.

The examples are worked turns of the conversation (a small model learns an answer's shape from
a turn it "gave" far better than from a description), in several languages, with labels in
the language of the message; their people are not real users, and a note copied from them
holds nothing the message says, so the evidence check drops it.

elizaOS's `factsTemplate` is still honoured: a character that overrides it gets its own
prompt, filled with this person's messages, and its claims are read as claims.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot import Example, Fact, JsonAnswer, one_message

TEMPLATE_NAME = "factsTemplate"

SYSTEM = (
    "You write down facts a person tells about their own life, for a memory. For each "
    "message, list each fact as one short sentence about the person, in the language of the "
    "message, with the exact words of the message it comes from, and what it is about in a "
    'few words ("goal" for an aim they set themselves). Questions and requests tell no fact. '
    "Answer with JSON only."
)

# (speaker, their messages, known facts, the answer)
Shot = tuple[str, tuple[str, ...], tuple[str, ...], dict[str, list[dict[str, str]]]]
_SHOTS: tuple[Shot, ...] = (
    (
        "Ana",
        (
            "Morning! I moved to Porto in May and I teach piano now.",
            "My goal this year is to run a half marathon. Any tips for a metronome app?",
        ),
        ("home city: Ana lives in Lisbon",),
        {
            "m1": [
                {"fact": "Ana lives in Porto", "quote": "I moved to Porto", "about": "home city"},
                {"fact": "Ana teaches piano", "quote": "I teach piano", "about": "job"},
            ],
            "m2": [
                {
                    "fact": "Ana's goal is to run a half marathon",
                    "quote": "My goal this year is to run a half marathon",
                    "about": "goal",
                }
            ],
        },
    ),
    (
        "Jonas",
        (
            "Kannst du mir helfen, eine Mail an meinen Vermieter zu schreiben?",
            "Ich wohne seit März in Köln, mit meinem Hund Bello.",
        ),
        (),
        {
            "m1": [],
            "m2": [
                {
                    "fact": "Jonas wohnt in Köln",
                    "quote": "Ich wohne seit März in Köln",
                    "about": "home city",
                },
                {
                    "fact": "Jonas hat einen Hund namens Bello",
                    "quote": "mit meinem Hund Bello",
                    "about": "dog's name",
                },
            ],
        },
    ),
    (
        "chen",
        ("lol yeah my cat Miso is 3 now", "what should i get her for her bday"),
        (),
        {
            "m1": [
                {"fact": "Chen has a cat named Miso", "quote": "my cat Miso", "about": "cat's name"}
            ],
            "m2": [],
        },
    ),
)


def system_text(language: str | None) -> str:
    """The reading's instruction, with the operator's facts language when there is one."""
    if language is None:
        return SYSTEM
    return SYSTEM.replace("in the language of the message", f"in {language}")


def render_messages(name: str, messages: Sequence[str]) -> str:
    """One message a line, numbered, each one unit (`one_message`: its own line breaks
    indented under it), so no line of it can read as another message or speaker's."""
    return "\n".join(
        f"m{number}. {one_message(name, text)}" for number, text in enumerate(messages, start=1)
    )


def render_known(known: Sequence[str]) -> str:
    return "Known facts: " + "; ".join(known) if known else ""


def reading_prompt(name: str, messages: Sequence[str], known: Sequence[str]) -> str:
    """The person's messages (and what is noted about them already, so a changed value is
    filed under the same "about")."""
    head = render_known(known)
    body = render_messages(name, messages)
    return f"{head}\n{body}" if head else body


EXAMPLES: tuple[Example, ...] = tuple(
    Example(reading_prompt(name, said, known), json.dumps(answer, ensure_ascii=False))
    for name, said, known, answer in _SHOTS
)


def known_lines(facts: Sequence[Fact]) -> list[str]:
    """The person's current facts as the prompt shows them, with what each is about ("home
    city: Ana lives in Porto"), so a new value is filed under the same attribute."""
    return [f"{f.attribute}: {f.text}" if f.attribute else f.text for f in facts]


_FACT = {
    "type": "object",
    "properties": {
        "fact": {"type": "string"},
        "quote": {"type": "string"},
        "about": {"type": "string"},
    },
    "required": ["fact", "quote", "about"],
    "additionalProperties": False,
}


def answer_format(messages: int) -> JsonAnswer:
    """One key per message, in order, each a list of facts: the structured output (a grammar
    on llama.cpp) walks the model through every message instead of the first one."""
    keys = [f"m{number}" for number in range(1, messages + 1)]
    return JsonAnswer(
        "facts",
        {
            "type": "object",
            "properties": {key: {"type": "array", "items": _FACT} for key in keys},
            "required": keys,
            "additionalProperties": False,
        },
    )


# Room for a few facts a message.
TOKENS_PER_MESSAGE = 90

"""The texts Mnemo itself puts in prompts: what a stored fact must never repeat.

A small real model put the character's description on a person ("Dmitri is a friendly presence
in the chat who actually listens") and copied action descriptions and examples into what it
answered. Grounding (bot/memory/grounding.py) refuses a claim sharing a long run of words
with any of these texts; this module gathers them from the character file, the built-in
templates and every registered plugin part (descriptions and examples).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bot.domain.characters import Character
from bot.memory.grounding import Grounding
from bot.plugin.loading import Registry
from bot.runtime.prompts import BUILTIN_TEMPLATES


def character_texts(character: Character) -> Iterator[str]:
    yield from (character.system or "", *character.bio, *character.lore, *character.topics)
    yield from (*character.adjectives, *character.post_examples)
    yield from (*character.style.all, *character.style.chat, *character.style.post)
    yield from character.templates.values()
    for conversation in character.message_examples:
        yield from (message.content.text for message in conversation)


def registry_texts(registry: Registry) -> Iterator[str]:
    for evaluator in registry.evaluators:
        yield evaluator.description
        for example in evaluator.examples:
            yield from (example.context, example.outcome, *(t.text for t in example.messages))
    for action in registry.actions:
        yield action.description
        for turns in action.examples:
            yield from (turn.text for turn in turns)
    for provider in registry.providers:
        yield getattr(provider, "description", "") or ""


def grounding_for(
    character: Character,
    registry: Registry,
    agent_id: str,
    *,
    others: Sequence[Character] = (),
) -> Grounding:
    """The grounding rules for this bot: its id and names, and its own texts to refuse.
    `others`: the characters a world may choose instead (`/character`): the bot speaks as
    them too, so their names are the bot's and their texts are its prompts'."""
    characters = [character, *others]
    names = tuple(dict.fromkeys(name for c in characters for name in c.names))
    grounding = Grounding(agent_id=agent_id, agent_names=names)
    grounding.add_machinery(
        *(text for c in characters for text in character_texts(c)),
        *registry_texts(registry),
        *BUILTIN_TEMPLATES.values(),
    )
    return grounding

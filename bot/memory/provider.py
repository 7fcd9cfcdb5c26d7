"""What the reply is shown of the memory: the facts about the people in the message.

elizaOS embeds the message and then ignores the embedding (it lists recent facts). Here the
facts about the speaker and the people they mention are ranked by similarity to the message,
falling back to the most recent ones when nothing is relevant, and only facts learned in the
message's own world are ever returned. A fact someone said of another person is shown as
theirs ("Quorra says: ..."), never as the person's own word.

Part of the core, not of a plugin: facts are Mnemo's memory, read for every reply whichever
plugins learn them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.domain.records import Fact, Memory
from bot.memory.at_hand import KnownFacts
from bot.memory.store import Knowledge

# Where the state files them: `state.values["facts"]` (the prompt text), `state.provided`
# (the facts, for the offline model and the plugins' offline answers).
FACTS = "facts"


@dataclass(frozen=True)
class FactsShown:
    text: str = ""
    facts: list[Fact] = field(default_factory=list)
    # The text's own format (its headings): a reply showing it shows the prompt.
    markup: list[str] = field(default_factory=list)


def about_whom(message: Memory) -> list[str]:
    """The people a message's facts are about: its sender and whoever it mentions."""
    return list(dict.fromkeys([message.user_id, *message.mentions]))


async def relevant_facts(
    knowledge: Knowledge, message: Memory, *, limit: int, known: KnownFacts | None = None
) -> list[Fact]:
    """The facts about the message's people most relevant to it (the most recent when none
    is), of the message's world only."""
    if limit <= 0:
        return []
    subjects = about_whom(message)
    facts = await knowledge.search_facts(
        message.content.text,
        subject_ids=subjects,
        world_id=message.world_id,
        limit=limit,
        known=known,
    )
    # Scope is the one promise that must never break, whatever the index returns.
    return [f for f in facts if f.world_id == message.world_id and f.subject_id in subjects]


def shown(facts: Sequence[Fact], message: Memory, names: Mapping[str, str]) -> FactsShown:
    """The facts as the reply prompt shows them, a block per person; `names` are the display
    names of their subjects and of whoever told them (`people_named`)."""
    blocks = []
    for subject in about_whom(message):
        about = [f for f in facts if f.subject_id == subject]
        if about:
            lines = "\n".join(f"- {line}" for line in shown_lines(about, names))
            blocks.append(f"Facts about {names.get(subject, 'someone')}:\n{lines}")
    headings = [block.partition("\n")[0] for block in blocks]
    return FactsShown("\n\n".join(blocks), list(facts), headings)


def shown_lines(facts: Sequence[Fact], names: Mapping[str, str]) -> list[str]:
    """Each fact as the prompt shows it: what someone else said of the person, as theirs."""
    return [
        f"{names.get(f.said_by, 'someone else')} says: {f.text}" if f.said_by else f.text
        for f in facts
    ]


def people_named(facts: Sequence[Fact], message: Memory) -> set[str]:
    """Whose names the facts' lines need: their subjects and whoever told them."""
    return {*about_whom(message), *(f.said_by for f in facts if f.said_by)}

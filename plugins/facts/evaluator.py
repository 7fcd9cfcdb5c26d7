"""GET_FACTS: learn durable facts about people from the conversation since the last extraction.

Differences from elizaOS's fact evaluator (seeds/000), each a defect there:
- every fact has a subject, the account it is about (elizaOS files every fact under the agent);
- the prompt shows the known facts, the actors' descriptions and the examples, so
  `already_known` / `in_bio` are informed rather than guessed;
- a claim already stored (same text, or a paraphrase by embedding distance) is not stored again;
- facts keep their source messages and when they were learned;
- extraction reads the messages since the room's extraction mark, not a fixed window, and the
  mark only moves once the facts are stored, so a failure is retried rather than lost.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace

from bot.llm.base import ModelClass, ModelError, evaluator_task
from bot.models import Account, Fact, Memory
from bot.plugins import Context, Evaluator
from bot.prompts import render
from bot.state import State

from .claims import Claim, People, describe_account, keep, parse_claims
from .prompts import EXAMPLES, FACTS_TEMPLATE, TEMPLATE_NAME, render_examples
from .settings import FactsSettings

log = logging.getLogger(__name__)

NAME = "GET_FACTS"
# Room mark: created_at of the newest message facts were extracted from.
MARK = "facts_extracted_at"


def settings_of(ctx: Context) -> FactsSettings:
    # Outside a registry (a plugin called directly) the settings come from the environment.
    return ctx.settings if isinstance(ctx.settings, FactsSettings) else FactsSettings()


def reflection_interval(conversation_length: int) -> int:
    """Extract every ceil(conversation_length / 2) messages, as elizaOS does."""
    return max(1, math.ceil(conversation_length / 2))


async def pending_messages(ctx: Context, settings: FactsSettings) -> list[Memory]:
    """The room's messages not yet extracted, up to the message being evaluated."""
    store = ctx.runtime.store
    mark = await store.get_room_mark(ctx.message.room_id, MARK)
    until = ctx.message.created_at
    return await store.memories_since(
        ctx.message.room_id, mark, until=until, limit=settings.max_messages
    )


def _has_user_messages(ctx: Context, messages: Sequence[Memory]) -> bool:
    return any(m.user_id != ctx.runtime.agent_id for m in messages)


async def validate(ctx: Context) -> bool:
    settings = settings_of(ctx)
    if ctx.state.data.get("trigger") == "idle":
        # The room went quiet (or someone asked what was learned): learn whatever is new.
        return _has_user_messages(ctx, await pending_messages(ctx, settings))
    every = reflection_interval(ctx.runtime.options.conversation_length)
    # The message's own position in the room, recorded when it was stored: exact even when
    # the job runs late in a busy room (a count read now could step over the multiple).
    position = ctx.state.data.get("position")
    if position is None:
        position = await ctx.runtime.store.count_memories(ctx.message.room_id)
    if position % every != 0:
        return False
    return _has_user_messages(ctx, await pending_messages(ctx, settings))


async def handle(ctx: Context) -> list[Fact]:
    """Extract, store and return the new facts; move the room's mark past what was read."""
    settings = settings_of(ctx)
    runtime, message = ctx.runtime, ctx.message
    window = await pending_messages(ctx, settings)
    users = [m for m in window if m.user_id != runtime.agent_id]
    if not users:
        return []
    if len(window) == settings.max_messages:
        log.info(
            "room %s: %d or more messages since the last extraction; reading the newest",
            message.room_id,
            settings.max_messages,
        )
    state = await _extraction_state(ctx, window, settings)
    prompt = render(runtime.template(TEMPLATE_NAME, FACTS_TEMPLATE), state.values)
    try:
        raw = await runtime.model.generate_text(
            prompt, model_class=ModelClass.LARGE, task=evaluator_task(NAME), state=state
        )
    except ModelError as error:
        log.warning("fact extraction failed in room %s: %s; will retry", message.room_id, error)
        return []
    claims = parse_claims(raw)
    if claims is None:
        # Nothing could be read: leave the mark so the next extraction reads these again.
        return []
    people = People(
        agent_id=runtime.agent_id,
        agent_names=tuple(runtime.character.names),
        actors=state.actors,
        fallback_id=users[-1].user_id,
    )
    facts = [
        _fact(claim, people.subject_of(claim), users, message)
        for claim in claims
        if keep(claim, settings.keep_types)
    ]
    stored: list[Fact] = []
    if facts:
        writes = await runtime.knowledge.add_facts(
            facts, near_duplicate_distance=settings.near_duplicate_distance
        )
        stored = [w.fact for w in writes if w.stored]
        skipped = len(writes) - len(stored)
        if skipped:
            log.info("room %s: %d claim(s) were already known", message.room_id, skipped)
    # Only now: had storing failed, the same messages would be read again next time.
    await runtime.store.set_room_mark(message.room_id, MARK, window[-1].created_at)
    log.info(
        "room %s: read %d messages, %d claims, stored %d facts",
        message.room_id,
        len(window),
        len(claims),
        len(stored),
    )
    return stored


def _fact(claim: Claim, subject_id: str, users: Sequence[Memory], message: Memory) -> Fact:
    own = [m.id for m in users if m.user_id == subject_id]
    return Fact(
        text=claim.claim,
        type=claim.type,
        subject_id=subject_id,
        room_id=message.room_id,
        world_id=message.world_id,
        agent_id=message.agent_id,
        # The subject's own messages said it; failing that (told by someone else), the window.
        source_message_ids=own or [m.id for m in users],
    )


async def _extraction_state(
    ctx: Context, window: Sequence[Memory], settings: FactsSettings
) -> State:
    """A copy of the state about the extracted messages (the offline model reads it)."""
    runtime, message = ctx.runtime, ctx.message
    people = {m.user_id for m in window} | {p for m in window for p in m.mentions}
    people -= {runtime.agent_id}
    missing = sorted(people - set(ctx.state.actors))
    actors: dict[str, Account] = dict(ctx.state.actors)
    if missing:
        actors.update(await runtime.store.get_accounts(missing))
    actors = {i: a for i, a in actors.items() if i in people}
    known = await runtime.store.facts_about(
        [*sorted(actors), runtime.agent_id], message.world_id, limit=settings.known_facts
    )
    state = replace(
        ctx.state,
        recent_messages=list(window),
        actors=actors,
        facts=known,
        values=dict(ctx.state.values),
        data=dict(ctx.state.data),
    )
    examples = render_examples()
    state.values.update(
        recentMessages=runtime.format_messages(state, list(window)),
        actors=_actors_block(ctx, actors),
        knownFacts=_known_block(known, state),
        evaluationExamples=examples,
        # A character's own factsTemplate may use either name.
        examples=examples,
    )
    return state


def _actors_block(ctx: Context, actors: dict[str, Account]) -> str:
    character = ctx.runtime.character
    bio = " ".join(character.bio).strip() or "(no description)"
    lines = [f"{character.name} (the assistant, you): {bio}"]
    lines += [describe_account(account) for account in actors.values()]
    return "\n".join(lines)


def _known_block(known: Sequence[Fact], state: State) -> str:
    if not known:
        return "None"
    lines = []
    # Oldest first reads like a story; facts_about returns newest first.
    for fact in reversed(known):
        name = state.name_of(fact.subject_id)
        about = "" if name.casefold() in fact.text.casefold() else f"(about {name}) "
        lines.append(f"- {about}{fact.text}")
    return "\n".join(lines)


fact_evaluator = Evaluator(
    name=NAME,
    similes=(
        "GET_CLAIMS",
        "EXTRACT_CLAIMS",
        "EXTRACT_FACTS",
        "EXTRACT_CLAIM",
        "EXTRACT_INFORMATION",
    ),
    description=(
        "Extract factual information about the people in the conversation, the current events "
        "in the world, and anything else that might be important to remember."
    ),
    handler=handle,
    validate=validate,
    examples=EXAMPLES,
    # Learn in groups too, where the bot overhears far more than it answers.
    always_run=True,
)

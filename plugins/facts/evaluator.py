"""GET_FACTS: learn durable facts about people from the conversation since the last extraction.

Differences from elizaOS's fact evaluator (seeds/000), each a defect there:
- every fact has a subject, the account it is about (elizaOS files every fact under the agent);
- the prompt shows the known facts, the actors' descriptions and the examples, so
  `already_known` / `in_bio` are informed rather than guessed;
- a claim already stored (same text, or a paraphrase by embedding distance) is not stored again;
- facts change: the prompt shows the known facts that resemble what was said, with short ids,
  and each claim says whether it is new or updates, retracts or repeats one of them; an update
  closes the old fact (kept as history), all in the one extraction call;
- facts keep their source messages and when they were learned;
- extraction reads the messages since the room's extraction mark, not a fixed window, and the
  mark only moves once the facts are stored, so a failure is retried rather than lost.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bot import (
    FIRST_PERSON,
    FIRST_PERSON_WORDS,
    TAKEN_BACK,
    Account,
    Context,
    Evaluator,
    Fact,
    JsonAnswer,
    Memory,
    ModelClass,
    ModelError,
    OfflineRequest,
    State,
    epoch_millis,
    fact_text_key,
    in_third_person,
    is_transcript_line,
    reply_id,
    stable_id,
    supported,
)

from . import offline
from .claims import (
    FACT_REFS,
    IN_BIO,
    NOT_A_PARTICIPANT,
    Attribution,
    Claim,
    People,
    describe_account,
    named_naturally,
    not_kept,
    parse_claims,
    told_name,
)
from .copies import COPIED_EXAMPLE, copies_an_example, example_claims
from .prompts import EXAMPLES, FACTS_TEMPLATE, TEMPLATE_NAME, render_examples
from .settings import FactsSettings

log = logging.getLogger(__name__)

NAME = "GET_FACTS"
# Room mark: created_at of the newest message facts were extracted from.
MARK = "facts_extracted_at"
# The most parts one reply is stored in (the reply, then what an action says).
MAX_REPLY_PARTS = 3
# Similar facts are looked up for this many of the window's latest user messages.
SIMILAR_FROM_MESSAGES = 8
# The most recent facts shown beside the similar ones (names, what was said last time).
RECENT_KNOWN_FACTS = 4
# The answer's shape, sent as `response_format` where the endpoint takes structured output
# (a grammar on llama.cpp's servers): an object, as `response_format` requires, listing the
# claims. Every field is required (OpenAI's strict mode); `fact` is null for a new claim.
FACTS_ANSWER = JsonAnswer(
    "facts",
    {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "claim": {"type": "string"},
                        "subject": {"type": "string"},
                        "type": {"type": "string", "enum": ["fact", "status", "opinion"]},
                        "change": {
                            "type": "string",
                            "enum": ["new", "update", "retract", "repeat"],
                        },
                        "fact": {"type": ["string", "null"]},
                        "in_bio": {"type": "boolean"},
                    },
                    "required": ["claim", "subject", "type", "change", "fact", "in_bio"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["claims"],
        "additionalProperties": False,
    },
)
# Why (part of) an answer was not used: counted per reason by the model handle's `reject`.
UNREADABLE = "unreadable answer"
MALFORMED = "malformed claim"
UNKNOWN_FACT = "unknown fact id"
# What the examples' claims say without their people: a claim saying the same about a real
# person, unsupported by what was said, is a copy.
EXAMPLE_CLAIMS = example_claims(EXAMPLES)
# Room for about a dozen claims with their fields.
FACTS_ANSWER_TOKENS = 1200


def settings_of(ctx: Context) -> FactsSettings:
    # Outside a registry (a plugin called directly) the settings come from the environment.
    return ctx.settings if isinstance(ctx.settings, FactsSettings) else FactsSettings()


def reflection_interval(conversation_length: int) -> int:
    """Extract every ceil(conversation_length / 2) messages, as elizaOS does."""
    return max(1, math.ceil(conversation_length / 2))


async def pending_messages(ctx: Context, settings: FactsSettings) -> list[Memory]:
    """The room's messages not yet extracted, up to the message being evaluated."""
    mark = await ctx.conversations.mark(ctx.message.room_id, MARK)
    return await ctx.conversations.since(
        ctx.message.room_id, mark, until=ctx.message.created_at, limit=settings.max_messages
    )


def _has_user_messages(ctx: Context, messages: Sequence[Memory]) -> bool:
    return any(m.user_id != ctx.agent.id for m in messages)


async def validate(ctx: Context) -> list[Memory] | None:
    """The messages to extract from (handed to `handle`, which need not read them again),
    or None when it is not time to extract."""
    settings = settings_of(ctx)
    if ctx.trigger != "idle":
        every = reflection_interval(settings.conversation_length)
        # The message's own position in the room, recorded when it was stored: exact even
        # when the job runs late in a busy room (a count read now could step over the multiple).
        position = ctx.state.data.get("position")
        if position is None:
            position = await ctx.conversations.count(ctx.message.room_id)
        if not await _crosses_multiple(ctx, position, every):
            return None
    # An idle trigger: the room went quiet (or someone asked what was learned), so learn
    # whatever is new.
    window = await pending_messages(ctx, settings)
    return window if _has_user_messages(ctx, window) else None


async def _crosses_multiple(ctx: Context, position: int, every: int) -> bool:
    """Whether the messages this evaluation stands for (the message and the replies stored
    with it, which end at `position`) cross a multiple of the interval. A message answered
    in two parts (an action's reply) moves the count by 3: testing only `position % every`
    would step over the multiple and skip the extraction."""
    past = position % every
    if past == 0:
        return True
    if past > MAX_REPLY_PARTS:
        return False
    # Only just past a multiple: it was crossed if the replies reach back to it. A reply's
    # id is derived from its message's, so they are read by id, wherever they sit.
    ids = [reply_id(ctx.message.id, ctx.agent.id, part) for part in range(MAX_REPLY_PARTS)]
    replies = await ctx.conversations.messages(ids)
    return past < 1 + len(replies)


async def handle(ctx: Context, window: list[Memory] | None = None) -> list[Fact]:
    """Extract, store and return the new facts; move the room's mark past what was read."""
    settings = settings_of(ctx)
    message = ctx.message
    if window is None:  # called directly rather than after validate
        window = await pending_messages(ctx, settings)
    users = [m for m in window if m.user_id != ctx.agent.id]
    if not users:
        return []
    if len(window) == settings.max_messages:
        log.info(
            "room %s: %d or more messages since the last extraction; reading the newest",
            message.room_id,
            settings.max_messages,
        )
    state = await _extraction_state(ctx, window, settings)
    prompt = ctx.model.render(TEMPLATE_NAME, FACTS_TEMPLATE, state.values)
    try:
        raw = await ctx.model.generate(
            prompt,
            model_class=ModelClass.LARGE,
            state=state,
            max_tokens=FACTS_ANSWER_TOKENS,
            # A JSON task: low temperature, and the claims' shape as structured output.
            json_answer=FACTS_ANSWER,
        )
    except ModelError as error:
        log.warning("fact extraction failed in room %s: %s; will retry", message.room_id, error)
        return []
    parsed = parse_claims(raw)
    if parsed is None:
        # Nothing could be read: leave the mark so the next extraction reads these again.
        ctx.model.reject(UNREADABLE, raw)
        return []
    if parsed.malformed:
        ctx.model.reject(MALFORMED, raw, count=parsed.malformed)
    claims = _not_copied(ctx, parsed.claims, state, users, raw)
    taken_back = 0
    if settings.merge_rules:
        claims, taken_back = _with_rule_claims(claims, state, prompt)
    # Everything a claim is checked against below, including a plugin's own prompt: a claim
    # that repeats a long run of it is the prompt, not a person (bot/memory/grounding.py).
    ctx.knowledge.grounding.add_machinery(ctx.model.template(TEMPLATE_NAME, FACTS_TEMPLATE))
    people = People(
        agent_id=ctx.agent.id,
        agent_names=ctx.agent.names,
        actors=state.actors,
        fallback_id=users[-1].user_id,
        messages=users,
        others=await _other_participants(ctx, claims, state) if claims else {},
    )
    plan = _reconcile(claims, state, people, users, message, settings)
    if plan.invented:
        ctx.model.reject(UNKNOWN_FACT, raw, count=plan.invented)
        log.warning(
            "room %s: ignored %d fact id(s) the model invented", message.room_id, plan.invented
        )
    rejected = [*plan.rejected, *[TAKEN_BACK] * taken_back]
    stored: list[Fact] = []
    if plan.facts:
        writes = await ctx.knowledge.add_facts(
            plan.facts,
            near_duplicate_distance=settings.near_duplicate_distance,
            replaces=plan.replaces,
            said=users,
            people={**people.others, **state.actors},
        )
        stored = [w.fact for w in writes if w.stored]
        for write in writes:
            if write.rejected is not None:
                # Counted in the ledger by the core; here for this run's model accounting.
                ctx.model.reject(write.rejected, raw)
        known = sum(1 for w in writes if w.duplicate_of is not None)
        if known:
            log.info("room %s: %d claim(s) were already known", message.room_id, known)
    for fact in stored:
        name = told_name(fact.text)
        if name is not None and fact.said_by is None and fact.subject_id != ctx.agent.id:
            # Shown by the name they told us in this world, on every surface of it (only a
            # name told by its owner: someone else's word renames no one).
            await ctx.knowledge.learn_name(fact.subject_id, name, fact.world_id)
    if plan.retract:
        await ctx.knowledge.retract_facts(
            plan.retract, world_id=message.world_id, when=_said_at(users), said=users
        )
    for reason in rejected:
        ctx.model.reject(reason, raw)
    await ctx.knowledge.gate.count([(message.world_id, reason) for reason in rejected])
    # Only now: had storing failed, the same messages would be read again next time.
    await ctx.conversations.set_mark(message.room_id, MARK, window[-1].created_at)
    log.info(
        "room %s: read %d messages, %d claims, stored %d facts",
        message.room_id,
        len(window),
        len(claims),
        len(stored),
    )
    return stored


def _with_rule_claims(claims: list[Claim], state: State, prompt: str) -> tuple[list[Claim], int]:
    """The model's claims, and the offline rules' claims it did not make (with the offline
    model both are the same claims, so nothing is added twice); and how many of the model's
    claims were dropped because their speaker took them back.

    A known fact the rules read as taken back ("I sold the Volvo", "I quit teaching") is
    closed even when the model says it again: a small model, shown "f1: Ben teaches maths",
    answered "Ben teaches maths ... (update f1)" to "I quit teaching", and that claim, being
    the same text as the rules' retraction, used to hide it, so the stale fact stayed."""
    request = OfflineRequest(task=NAME, prompt=prompt, state=state, model_class=ModelClass.LARGE)
    ruled = parse_claims(offline.extract(request) or "[]")
    if ruled is None:
        return claims, 0
    retractions = [claim for claim in ruled.claims if claim.change == "retract" and claim.fact]
    retracted_ids = {claim.fact for claim in retractions}
    retracted_texts = {fact_text_key(claim.claim) for claim in retractions}
    kept = [
        claim
        for claim in claims
        if fact_text_key(claim.claim) not in retracted_texts
        and not (claim.change == "repeat" and claim.fact in retracted_ids)
    ]
    made = {fact_text_key(claim.claim) for claim in kept}
    merged = [*kept, *(claim for claim in ruled.claims if fact_text_key(claim.claim) not in made)]
    return merged, len(claims) - len(kept)


async def _other_participants(
    ctx: Context, claims: Sequence[Claim], state: State
) -> dict[str, Account]:
    """The world's participants outside the window, read only when a claim names someone
    the window does not: a claim about them is theirs, not the speaker's."""
    window_names = {
        name.casefold()
        for account in state.actors.values()
        for name in (account.name, account.username)
        if name
    } | {name.casefold() for name in ctx.agent.names}
    named = {(c.subject or "").strip().lstrip("@").casefold() for c in claims}
    if named <= window_names | {""} and all(
        c.claim.split()[0].strip("',.").removesuffix("'s").casefold() in window_names
        or not c.claim[:1].isupper()
        for c in claims
        if c.claim.split()
    ):
        return {}
    everyone = await ctx.knowledge.participants(ctx.message.world_id)
    return {i: a for i, a in everyone.items() if i not in state.actors and i != ctx.agent.id}


def _not_copied(
    ctx: Context, claims: Sequence[Claim], state: State, users: Sequence[Memory], raw: str
) -> list[Claim]:
    """The claims that are not the prompt's examples put on a real person (counted)."""
    names = [account.name for account in state.actors.values()]
    said = [m.content.text for m in users]
    kept = [
        claim
        for claim in claims
        if not copies_an_example(claim.claim, [*names, claim.subject or ""], said, EXAMPLE_CLAIMS)
    ]
    if len(kept) < len(claims):
        ctx.model.reject(COPIED_EXAMPLE, raw, count=len(claims) - len(kept))
        log.warning(
            "room %s: ignored %d claim(s) copied from the prompt's examples",
            ctx.message.room_id,
            len(claims) - len(kept),
        )
    return kept


@dataclass
class Reconciliation:
    """What an extraction changes: facts to store (some replacing known ones), known facts
    that stopped being true (each with the claim saying so), why claims were not used, and
    how many short ids the model made up."""

    facts: list[Fact] = field(default_factory=list)
    replaces: dict[str, str] = field(default_factory=dict)
    retract: dict[str, Fact] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    invented: int = 0


def _reconcile(
    claims: Sequence[Claim],
    state: State,
    people: People,
    users: Sequence[Memory],
    message: Memory,
    settings: FactsSettings,
) -> Reconciliation:
    """Map each claim's short id back to the known fact it names (ids the prompt never showed
    are ignored) and sort the claims into new facts, updates and retractions."""
    refs: dict[str, str] = state.data.get(FACT_REFS, {})
    plan = Reconciliation()
    for claim in claims:
        target: str | None = None
        if claim.change != "new" and claim.fact is not None:
            target = refs.get(claim.fact)
            plan.invented += target is None
        if claim.change == "retract":
            attributed = people.attribute(claim)
            if target is not None and attributed.subject_id is not None:
                # Closed only if the core finds the claim grounded and of the fact's kind.
                plan.retract.setdefault(target, _fact(claim, attributed, users, message))
            continue
        if claim.change == "repeat" and target is not None:
            continue
        if claim.change == "repeat" or (claim.change == "update" and target is None):
            # Named nothing real: judge it as a new claim (dedup still catches a repeat).
            claim = claim.model_copy(update={"change": "new"})
        reason = not_kept(claim, settings.keep_types)
        if reason == IN_BIO and not _in_description(claim, people):
            # A small model marks claims "in_bio" at random: only what the description
            # says is in it; the rest is judged as the new claim it is.
            reason = not_kept(claim.model_copy(update={"in_bio": False}), settings.keep_types)
        if reason == "known":
            continue
        if reason is not None:
            plan.rejected.append(reason)
            continue
        attributed = people.attribute(claim)
        if attributed.rejected is not None or attributed.subject_id is None:
            plan.rejected.append(attributed.rejected or NOT_A_PARTICIPANT)
            continue
        said_of_them = _said_of_them(attributed, people)
        if said_of_them is None:
            plan.rejected.append(FIRST_PERSON)
            continue
        fact = _fact(claim, said_of_them, users, message)
        plan.facts.append(fact)
        if target is not None:
            plan.replaces[fact.id] = target
    return plan


def _in_description(claim: Claim, people: People) -> bool:
    """Whether the description of the person a claim is about says what it says."""
    subject, _ = people.named(claim)
    account = people.actors.get(subject or people.fallback_id)
    if account is None:
        return False
    names = [n for n in (account.name, account.username) if n]
    return supported(claim.claim, names=names, said=[describe_account(account)])


def _said_of_them(attributed: Attribution, people: People) -> Attribution | None:
    """The claim by its subject's name, not in the speaker's own words ("We have a rescue
    greyhound called Comet", as a real model answered): rewritten when the speaker speaks
    of themselves and it is plain, else None (not stored, counted)."""
    if not FIRST_PERSON_WORDS.search(attributed.text) or is_transcript_line(attributed.text):
        return attributed  # (a transcript line is the core's to refuse, and count as such)
    subject = people.actors.get(attributed.subject_id or "")
    if attributed.said_by != attributed.subject_id or subject is None:
        return None  # "my" of someone speaking of another: whose is unclear
    text = in_third_person(attributed.text, subject.name)
    return None if text is None else replace(attributed, text=text)


def _said_at(messages: Sequence[Memory]) -> int:
    return max(epoch_millis(m.created_at) for m in messages)


def _fact(claim: Claim, attributed: Attribution, users: Sequence[Memory], message: Memory) -> Fact:
    subject_id = attributed.subject_id or attributed.said_by or users[-1].user_id
    speaker = attributed.said_by or subject_id
    # The speaker's own messages are its sources: what grounding checks the claim against.
    own = [m for m in users if m.user_id == speaker]
    source = attributed.source if attributed.source in own else None
    # Valid from when it was said: the message most like the claim, else the speaker's last.
    said_at = epoch_millis(source.created_at) if source is not None else _said_at(own or users)
    return Fact(
        # The same claim from the same evaluated message always gets the same id, so a
        # redelivered or re-run extraction stores it once and closes nothing twice.
        id=stable_id("fact", message.id, subject_id, " ".join(claim.claim.casefold().split())),
        valid_from=said_at,
        text=named_naturally(attributed.text),
        type=claim.type,
        subject_id=subject_id,
        said_by=speaker if speaker != subject_id else None,
        room_id=message.room_id,
        world_id=message.world_id,
        agent_id=message.agent_id,
        source_message_ids=[m.id for m in own],
    )


async def _extraction_state(
    ctx: Context, window: Sequence[Memory], settings: FactsSettings
) -> State:
    """A copy of the state about the extracted messages (the offline model reads it)."""
    people = {m.user_id for m in window} | {p for m in window for p in m.mentions}
    people -= {ctx.agent.id}
    missing = sorted(people - set(ctx.state.actors))
    actors: dict[str, Account] = dict(ctx.state.actors)
    if missing:
        actors.update(await ctx.conversations.accounts(missing))
    actors = {i: a for i, a in actors.items() if i in people}
    known = await _known_facts(ctx, window, sorted(actors), settings)
    state = replace(
        ctx.state,
        recent_messages=list(window),
        actors=actors,
        # The offline answer reads the known facts where the provider files them.
        provided={**ctx.state.provided, offline.PROVIDED: known},
        values=dict(ctx.state.values),
        data=dict(ctx.state.data),
    )
    examples = render_examples()
    refs = {f"f{index}": fact.id for index, fact in enumerate(known, start=1)}
    state.data[FACT_REFS] = refs
    state.values.update(
        recentMessages=ctx.conversations.format(state, list(window)),
        actors=_actors_block(ctx, actors),
        knownFacts=_known_block(known, state),
        evaluationExamples=examples,
        # A character's own factsTemplate may use either name.
        examples=examples,
    )
    return state


def _actors_block(ctx: Context, actors: dict[str, Account]) -> str:
    bio = ctx.agent.bio or "(no description)"
    lines = [f"{ctx.agent.name} (the assistant, you): {bio}"]
    lines += [describe_account(account) for account in actors.values()]
    return "\n".join(lines)


async def _known_facts(
    ctx: Context, window: Sequence[Memory], people: list[str], settings: FactsSettings
) -> list[Fact]:
    """The current facts a claim could update, retract or repeat: those about the people in
    the window most similar to what they said, then their most recent ones."""
    message = ctx.message
    if not people or settings.known_facts <= 0:
        return []
    said = [m.content.text for m in window if m.user_id != ctx.agent.id]
    similar, recent = await asyncio.gather(
        ctx.knowledge.similar_facts(
            said[-SIMILAR_FROM_MESSAGES:],
            subject_ids=people,
            world_id=message.world_id,
            limit=settings.known_facts,
        ),
        ctx.knowledge.recent_facts(people, message.world_id, limit=RECENT_KNOWN_FACTS),
    )
    chosen = {fact.id: fact for fact in [*similar, *recent]}
    return list(chosen.values())[: settings.known_facts]


def _known_block(known: Sequence[Fact], state: State) -> str:
    """One line per known fact with its short id ("f1: Sarah lives in Seattle")."""
    if not known:
        return "None"
    lines = []
    for index, fact in enumerate(known, start=1):
        name = state.name_of(fact.subject_id)
        about = "" if name.casefold() in fact.text.casefold() else f"(about {name}) "
        lines.append(f"f{index}: {about}{fact.text}")
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
    offline=offline.extract,
    # The idle flush learns from quiet rooms whose newest message is past this mark.
    idle_mark=MARK,
)

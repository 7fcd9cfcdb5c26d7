"""GET_FACTS: learn durable facts about people from what they said since the last reading.

Differences from elizaOS's fact evaluator (seeds/000), each a defect there:
- one person at a time, their own words only: the model reads one speaker's messages, with no
  character text, no replies of the bot and no other speaker's lines (where a forged line would
  put words in someone's mouth), and the facts already known about that person only;
- every claim carries its evidence, the words of the message it rests on; the memory keeps it
  only when those words were said by the person and hold the claim's names, places and numbers
  (bot/memory/evidence.py), in any language: no English word list decides what was said;
- a fact is filed under what it is about ("home city", "employer"), so a newer value replaces
  the older one with history, even when the two share no words ("17 postcards", "25 postcards");
- every fact has a subject, the person who said it (elizaOS files every fact under the agent);
- reading goes from the room's mark, not a fixed window, and the mark moves only once the facts
  are stored, so a failure is retried rather than lost; an edited message is read again alone
  (`ctx.trigger == "edit"`), after the memory withdrew what its old words taught.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from bot import (
    Account,
    Context,
    Evaluator,
    Fact,
    Memory,
    ModelClass,
    ModelError,
    OfflineRequest,
    State,
    reply_id,
)
from bot.offline import find_words

from . import offline
from .claims import named_naturally, told_name
from .prompts import (
    EXAMPLES,
    TEMPLATE_NAME,
    TOKENS_PER_MESSAGE,
    answer_format,
    known_lines,
    reading_prompt,
    render_known,
    render_messages,
    system_text,
)
from .reading import claims_of, read_answer
from .settings import FactsSettings

log = logging.getLogger(__name__)

NAME = "GET_FACTS"
# Room mark: created_at of the newest message facts were extracted from.
MARK = "facts_extracted_at"
# The most parts one reply is stored in (the reply, then what an action says).
MAX_REPLY_PARTS = 3
# The most messages of one person one reading shows the model: more, and a small model
# loses track of which message said what. The rest are read in further calls.
READ_AT_MOST = 8
# Why an answer was not used at all (counted per reason by the model handle's `reject`).
UNREADABLE = "unreadable answer"


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


def _people_said(ctx: Context, messages: Sequence[Memory]) -> list[Memory]:
    return [m for m in messages if m.user_id != ctx.agent.id and m.content.text.strip()]


async def validate(ctx: Context) -> list[Memory] | None:
    """The messages to extract from (handed to `handle`, which need not read them again),
    or None when it is not time to extract."""
    settings = settings_of(ctx)
    if ctx.trigger == "edit":
        # Its new words, read again alone (what its old words taught is withdrawn already).
        return _people_said(ctx, [ctx.message]) or None
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
    return window if _people_said(ctx, window) else None


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
    """Read each person's messages since the mark, store what the memory keeps, and return
    the new facts; move the room's mark past what was read."""
    settings = settings_of(ctx)
    message = ctx.message
    if window is None:  # called directly rather than after validate
        window = await pending_messages(ctx, settings)
    said = _people_said(ctx, window)
    if not said:
        return []
    if len(window) == settings.max_messages:
        log.info(
            "room %s: %d or more messages since the last extraction; reading the newest",
            message.room_id,
            settings.max_messages,
        )
    people = await _people(ctx, said)
    stored: list[Fact] = []
    for person_id in dict.fromkeys(m.user_id for m in said):
        own = [m for m in said if m.user_id == person_id]
        for start in range(0, len(own), READ_AT_MOST):
            batch = own[start : start + READ_AT_MOST]
            read = await _read(ctx, people[person_id], batch, people, settings)
            if read is None:
                # Nothing could be read: leave the mark so the next extraction reads these again.
                return stored
            stored += read
    # Only now: had storing failed, the same messages would be read again next time. An
    # edited message was read past already: the mark stays where it is.
    if ctx.trigger != "edit":
        await ctx.conversations.set_mark(message.room_id, MARK, window[-1].created_at)
    log.info(
        "room %s: read %d messages of %d people, stored %d facts",
        message.room_id,
        len(said),
        len({m.user_id for m in said}),
        len(stored),
    )
    return stored


async def _people(ctx: Context, said: Sequence[Memory]) -> dict[str, Account]:
    """The accounts of everyone who spoke, and of those they mention."""
    wanted = {m.user_id for m in said} | {p for m in said for p in m.mentions}
    wanted.discard(ctx.agent.id)
    people = {i: a for i, a in ctx.state.actors.items() if i in wanted}
    missing = sorted(wanted - set(people))
    if missing:
        people.update(await ctx.conversations.accounts(missing))
    for person_id in {m.user_id for m in said} - set(people):
        # Someone whose account is gone (forgotten meanwhile): read under a neutral name.
        people[person_id] = Account(id=person_id, name="Someone", platform="test", platform_id="")
    return people


async def _read(
    ctx: Context,
    person: Account,
    messages: list[Memory],
    people: dict[str, Account],
    settings: FactsSettings,
) -> list[Fact] | None:
    """One reading: one person's messages to the model, its claims to the memory. None when
    the model could not answer or its answer held nothing readable."""
    name = ctx.state.name_of(person.id) if person.id in ctx.state.actors else person.name
    names = list(dict.fromkeys(n for n in (name, person.name, person.username) if n))
    known = (
        await ctx.memory.facts_about([person.id], limit=settings.known_facts)
        if settings.known_facts > 0
        else []
    )
    texts = [m.content.text for m in messages]
    state = _reading_state(ctx, person, messages, known, name)
    override = ctx.model.template(TEMPLATE_NAME, "")
    try:
        if override:
            # A character's own factsTemplate (elizaOS): its prompt, this person's messages.
            prompt = ctx.model.render(TEMPLATE_NAME, override, state.values)
            raw = await ctx.model.generate(
                prompt, model_class=ModelClass.LARGE, state=state, max_tokens=1200
            )
        else:
            raw = await ctx.model.generate(
                reading_prompt(name, texts, known_lines(known)),
                model_class=ModelClass.LARGE,
                state=state,
                max_tokens=TOKENS_PER_MESSAGE * len(messages) + 40,
                json_answer=answer_format(len(messages)),
                system=system_text(ctx.memory.language),
                examples=EXAMPLES,
            )
    except ModelError as error:
        log.warning("fact extraction failed in room %s: %s; will retry", ctx.message.room_id, error)
        return None
    reading = read_answer(raw)
    if reading is None:
        ctx.model.reject(UNREADABLE, raw)
        return None
    if settings.merge_rules and not ctx.model.is_offline:
        # The offline rules' reading of the same messages beside the model's: what the
        # model missed (a take-back, most often) is proposed too; the memory stores a fact
        # said twice once.
        answered = offline.extract(OfflineRequest(NAME, "", state, ModelClass.LARGE))
        rules = read_answer(answered) if answered is not None else None
        if rules is not None:
            reading.notes += rules.notes
    # A name they tell in these very messages names them too ("my name is Sarah and I live
    # in Seattle": "Sarah lives in Seattle"), when their own words hold it.
    said_text = "\n".join(texts)
    for note in reading.notes:
        told = told_name(named_naturally(note.fact)) if note.fact else None
        if told and told not in names and find_words(told, said_text) is not None:
            names.append(told)
    # Everyone else in the conversation: those in the reading and those the room shows.
    others = [
        ctx.state.name_of(other) if other in ctx.state.actors else people[other].name
        for other in {*people, *ctx.state.actors} - {person.id, ctx.agent.id}
    ]
    claims, not_proposed = claims_of(
        reading, person_id=person.id, names=names, messages=messages, others=others
    )
    learned = await ctx.memory.propose(claims, messages=messages, people=people)
    rejected = Counter(not_proposed) + learned.rejected
    for reason, count in rejected.items():
        ctx.model.reject(reason, raw, count=count)
    await ctx.memory.count_rejected(not_proposed)  # the memory counted its own
    for fact in learned.stored:
        told = told_name(named_naturally(fact.text))
        if told is not None and fact.said_by is None:
            # Shown by the name they told us in this world, on every surface of it (only a
            # name told by its owner: someone else's word renames no one).
            await ctx.memory.learn_name(fact.subject_id, told)
    return learned.stored


def _reading_state(
    ctx: Context, person: Account, messages: list[Memory], known: list[Fact], name: str
) -> State:
    """A copy of the state about this reading (the offline model reads it)."""
    state = replace(
        ctx.state,
        recent_messages=list(messages),
        actors={person.id: person},
        # The offline answer reads the known facts where the provider files them.
        provided={**ctx.state.provided, offline.PROVIDED: known},
        values=dict(ctx.state.values),
        data=dict(ctx.state.data),
    )
    state.values.update(
        recentMessages=render_messages(name, [m.content.text for m in messages]),
        actors=name,
        knownFacts=render_known(known_lines(known)) or "None",
    )
    return state


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
    # Learn in groups too, where the bot overhears far more than it answers.
    always_run=True,
    offline=offline.extract,
    # The idle flush learns from quiet rooms whose newest message is past this mark.
    idle_mark=MARK,
    # An edited message is read again: its new words replace what the old ones taught.
    reads_edits=True,
)

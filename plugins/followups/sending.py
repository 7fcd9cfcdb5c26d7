"""Sending what is due: a timed task run by every process (the `Task` of the plugin).

Each process claims only follow-ups of platforms it runs, one at a time, atomically (see
store.py): two processes never both send one. Before sending, the claim is checked against
what may have changed since it was planned: the world switched off, the person opted out or
learning switched off (then nothing is sent and the follow-up is closed), night in the room's
time zone, or the person already asked something today (then it waits). The question is
written, then sent; it is recorded `sent` right after. At most once: a process killed in
between leaves it claimed, and it is never sent again (store.py says why).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from bot import Content, Memory, ModelClass, ModelError, State, TaskContext, WorldVoice

from .prompts import (
    DATA_KEY,
    TEMPLATE,
    TEMPLATE_NAME,
    ask_words,
    plain_question,
    usable,
    when_words,
)
from .settings import FollowupsSettings
from .store import FollowUp, FollowUpStore
from .timing import Clock, ask_time, local, millis, night_until, zone_of

# Follow-ups sent per run and process at most (the rest wait for the next run).
BATCH = 20
# A send that raised is tried again after this long.
RETRY_MS = 15 * 60 * 1000
FACTS_SHOWN = 5
# A follow-up this late (the bot was down for days) is not asked: it would come out of nowhere.
STALE_MS = 3 * 24 * 3600 * 1000
# Asked ones are kept this long (the one-a-day rule, /export), then deleted.
KEEP_FINISHED_MS = 7 * 24 * 3600 * 1000


async def send_due(ctx: TaskContext[FollowupsSettings], clock: Clock, owner: str) -> int:
    """Send the follow-ups due now that this process can reach; returns how many were sent."""
    settings = ctx.settings
    store = FollowUpStore.of(ctx.collections)
    now = clock()
    lost = await store.abandon_stale(now, int(settings.sending_lease_seconds * 1000))
    if lost:
        ctx.log.warning("%d follow-up(s) claimed by a process that died: not sent", lost)
    await store.drop_finished(now - KEEP_FINISHED_MS)
    platforms = sorted(ctx.rooms.platforms)
    if not platforms:
        return 0
    sent = 0
    for _ in range(BATCH):
        followup = await store.claim_due(now, platforms, owner)
        if followup is None:
            break
        sent += await _deliver(ctx, store, followup, now)
    return sent


async def _deliver(
    ctx: TaskContext[FollowupsSettings], store: FollowUpStore, followup: FollowUp, now: int
) -> int:
    settings = ctx.settings
    choice = await store.world(followup.world_id)
    if choice.followups != "on" or now - followup.due_ms > STALE_MS:
        await store.close(followup, "cancelled")
        return 0
    zone = zone_of(choice.timezone, settings)
    moment = local(now, zone)
    morning = night_until(moment, settings)
    if morning is not None:
        await store.put_back(followup, due_ms=millis(morning), local_day=morning.date().isoformat())
        return 0
    today = moment.date()
    if await store.sent_on(followup.world_id, followup.person_id, today.isoformat(), followup.id):
        tomorrow = today + timedelta(days=1)
        later = ask_time(tomorrow, zone, settings)
        await store.put_back(followup, due_ms=millis(later), local_day=tomorrow.isoformat())
        return 0
    if not await ctx.rooms.allowed(followup.person_id, followup.room_id, followup.world_id):
        await store.close(followup, "cancelled")
        return 0
    question = await write_question(ctx, followup, today)
    try:
        delivery = await ctx.rooms.send(followup.room_id, question, about=followup.person_id)
    except Exception as error:
        # Raised: not sent (as far as the platform said). Tried again later, a few times.
        ctx.log.warning(
            "follow-up %s not sent (%s)", followup.id, type(error).__name__, exc_info=True
        )
        if followup.attempts + 1 >= settings.max_attempts:
            await store.close(followup, "lost")
        else:
            await store.put_back(
                followup, due_ms=now + RETRY_MS, local_day=today.isoformat(), failed=True
            )
        return 0
    if delivery == "sent":
        await store.sent(followup, now_ms=now, local_day=today.isoformat(), question=question)
        return 1
    if delivery == "not_connected":  # the platform stopped meanwhile: another run sends it
        await store.put_back(followup, due_ms=followup.due_ms, local_day=followup.local_day)
        return 0
    await store.close(followup, "cancelled")  # the room is gone, or the person opted out
    return 0


async def write_question(
    ctx: TaskContext[FollowupsSettings], followup: FollowUp, today: date
) -> str:
    """The question, in character (the LARGE model) from what the person said and what is
    known about them; the plain line when the model cannot answer or answers unusably."""
    facts = await _known(ctx, followup)
    voice = await _voice(ctx, followup)
    name = await _name_now(ctx, followup)
    data: dict[str, Any] = {
        "id": followup.id,
        "name": name,
        "topic": followup.topic,
        "kind": followup.kind,
        "when": when_words(date.fromisoformat(followup.event_day), today, followup.kind),
        "said": followup.said,
        "facts": facts,
    }
    values = {
        "agentName": voice.agent.name,
        "bio": voice.agent.bio,
        "name": name,
        "said": followup.said,
        "topic": followup.topic,
        "when": str(data["when"]) or followup.phrase,
        "ask": ask_words(followup.kind, followup.topic),
        "facts": "\n".join(f"- {fact}" for fact in facts) or "(nothing more)",
    }
    prompt = voice.model.render(TEMPLATE_NAME, TEMPLATE, values)
    message = Memory(
        id=followup.id,
        user_id=followup.person_id,
        agent_id=voice.agent.id,
        room_id=followup.room_id,
        world_id=followup.world_id,
        content=Content(text=followup.said),
    )
    state = State(
        message=message,
        agent_id=voice.agent.id,
        agent_name=voice.agent.name,
        sender=None,
        room=None,
        values=values,
        data={DATA_KEY: data},
    )
    try:
        raw = await voice.model.generate(
            prompt, model_class=ModelClass.LARGE, state=state, max_tokens=120
        )
    except ModelError as error:
        ctx.log.warning("follow-up question not written by the model (%s)", error)
        return plain_question(data)
    text = usable(raw, followup.key)
    if text is None:
        voice.model.reject("unusable follow-up question", raw)
        return plain_question(data)
    return text


async def _name_now(ctx: TaskContext[FollowupsSettings], followup: FollowUp) -> str:
    """What the person is called in the follow-up's world now: the name they told the bot
    there, else the platform's. Read when asking, not kept from when it was planned: the name
    is often told in the very message that planned it ("Hi, I'm Sarah, my exam is on
    Friday"), learned only after that message's state was read, and may change since."""
    try:
        accounts = await ctx.conversations.accounts([followup.person_id])
    except Exception:
        ctx.log.warning("the person's name for a follow-up unavailable", exc_info=True)
        return followup.person_name
    account = accounts.get(followup.person_id)
    return followup.person_name if account is None else account.in_world(followup.world_id).name


async def _voice(ctx: TaskContext[FollowupsSettings], followup: FollowUp) -> WorldVoice:
    """The bot as it is in the follow-up's world (its character, its model names)."""
    try:
        return await ctx.world(followup.world_id)
    except Exception:
        # The world's choice unreadable now: asked as the process's character rather than lost
        # (the follow-up is claimed already; a raise here would leave it unsent for good).
        ctx.log.warning("world choice for a follow-up unavailable", exc_info=True)
        return WorldVoice(followup.world_id, ctx.agent, ctx.model)


async def _known(ctx: TaskContext[FollowupsSettings], followup: FollowUp) -> list[str]:
    """What Mnemo knows about the person that is closest to what they said."""
    try:
        facts = await ctx.memory(followup.world_id).similar_facts(
            [followup.said], [followup.person_id], limit=FACTS_SHOWN
        )
    except Exception:
        # Vectors unavailable (Chroma down): the question is still asked, knowing less.
        ctx.log.warning("facts for a follow-up unavailable", exc_info=True)
        return []
    return [fact.text for fact in facts]

"""UPDATE_GOAL: track progress on the room's goals from the conversation (seeds/000)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from datetime import datetime

from bot import Context, Evaluator, Memory, ModelClass, ModelError

from . import offline
from .guard import plausible_progress
from .merge import plan_updates
from .prompts import (
    EXAMPLES,
    GOALS_TEMPLATE,
    TEMPLATE_NAME,
    answer_format,
    answer_tokens,
    format_goals,
)
from .store import Goal, GoalStore

log = logging.getLogger(__name__)

NAME = "UPDATE_GOAL"
# Room mark: created_at of the newest message the goals were checked against. Each check
# reads only what came since (elizaOS re-reads the whole window on every message).
MARK = "goals_checked_at"
CONTEXT_MESSAGES = 2
# At most this many messages are judged: the message that passed `validate` and the turns
# before it. The unchecked ones before those did not pass the lexical test themselves.
CHECKED_MESSAGES = CONTEXT_MESSAGES + 1


async def validate(ctx: Context) -> list[Goal] | None:
    """The room's goals in progress that the message may report progress on (handed to
    `handle`), or None: a message that shares no words with a goal costs no model call.
    Goal progress is judged as messages arrive: it declares no `idle_mark`, so no idle
    flush reaches it."""
    if ctx.message.user_id == ctx.agent.id:
        return None  # the bot's own words report nobody's progress
    goals = await GoalStore.of(ctx.collections).in_room(ctx.message.room_id, only_in_progress=True)
    return plausible_progress(ctx.message.content.text, goals) or None


async def handle(ctx: Context, goals: list[Goal] | None = None) -> list[Goal]:
    """Apply the model's updates to the room's in-progress goals; returns the changed goals."""
    message = ctx.message
    if goals is None:  # called directly rather than after validate
        goals = await GoalStore.of(ctx.collections).in_room(message.room_id, only_in_progress=True)
    if not goals:
        return []
    state = replace(
        ctx.state,
        # The offline answer reads the goals where the provider files them.
        provided={**ctx.state.provided, offline.PROVIDED: goals},
        values=dict(ctx.state.values),
        data=dict(ctx.state.data),
    )
    state.values["goals"] = format_goals(goals, state)
    mark = await ctx.conversations.mark(message.room_id, MARK)
    state.recent_messages = unchecked(ctx.state.recent_messages, mark)[-CHECKED_MESSAGES:]
    state.values["recentMessages"] = ctx.conversations.format(state, state.recent_messages)
    prompt = ctx.model.render(TEMPLATE_NAME, GOALS_TEMPLATE, state.values)
    try:
        raw = await ctx.model.generate(
            prompt,
            model_class=ModelClass.LARGE,
            state=state,
            max_tokens=answer_tokens(goals),
            json_answer=answer_format(goals),
        )
    except ModelError as error:
        log.warning("goal update failed in room %s: %s", message.room_id, error)
        return []
    plan = plan_updates(goals, raw)
    reasons = Counter(reason for reason, _item in plan.rejected)
    for reason, count in reasons.items():
        ctx.model.reject(reason, raw, count=count)
    if reasons:
        log.warning(
            "goal update in room %s: rejected %s",
            message.room_id,
            ", ".join(f"{count} x {reason}" for reason, count in sorted(reasons.items())),
        )
    for goal in plan.changed:
        await GoalStore.of(ctx.collections).replace(goal)
        log.info("goal %s (%s): %s", goal.id, goal.name, goal.status)
    # The mark moves only once the updates are written: a crash in between makes the re-run
    # (same ctx.job_id) judge the same messages again, and an update applied twice changes
    # nothing (completion sticks, the status follows the objectives). Marked first, a crash
    # would lose the update: the re-run would see no new messages.
    await ctx.conversations.set_mark(
        message.room_id, MARK, max(m.created_at for m in state.recent_messages)
    )
    return plan.changed


def unchecked(recent: list[Memory], mark: datetime | None) -> list[Memory]:
    """The messages since the last check, after a couple of earlier ones for context."""
    first_new = next(
        (i for i, m in enumerate(recent) if mark is None or m.created_at > mark), len(recent)
    )
    return recent[max(0, first_new - CONTEXT_MESSAGES) :]


goal_evaluator = Evaluator(
    name=NAME,
    similes=("UPDATE_GOALS", "EDIT_GOAL", "UPDATE_GOAL_STATUS", "UPDATE_OBJECTIVES"),
    description=(
        "Analyze the conversation and update the status of the goals based on the new "
        "information provided."
    ),
    handler=handle,
    validate=validate,
    examples=EXAMPLES,
    offline=offline.update,
)

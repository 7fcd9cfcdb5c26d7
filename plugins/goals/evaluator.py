"""UPDATE_GOAL: track progress on the room's goals from the conversation (seeds/000)."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from bot.llm.base import ModelClass, ModelError, evaluator_task
from bot.llm.parsing import parse_json_array
from bot.models import Goal, Memory
from bot.plugins import Context, Evaluator
from bot.prompts import render

from .merge import apply_update, parse_update
from .prompts import EXAMPLES, GOALS_TEMPLATE, TEMPLATE_NAME, format_goals

log = logging.getLogger(__name__)

NAME = "UPDATE_GOAL"
# Room mark: created_at of the newest message the goals were checked against. Each check
# reads only what came since (elizaOS re-reads the whole window on every message).
MARK = "goals_checked_at"
CONTEXT_MESSAGES = 2


async def validate(ctx: Context) -> bool:
    # The idle flush is for learning facts; goal progress is judged as messages arrive.
    if ctx.state.data.get("trigger", "message") != "message":
        return False
    goals = await ctx.runtime.store.goals_in_room(
        ctx.message.room_id, only_in_progress=True, limit=1
    )
    return bool(goals)


async def handle(ctx: Context) -> list[Goal]:
    """Apply the model's updates to the room's in-progress goals; returns the changed goals."""
    runtime, message = ctx.runtime, ctx.message
    goals = await runtime.store.goals_in_room(message.room_id, only_in_progress=True)
    if not goals:
        return []
    state = replace(
        ctx.state, goals=goals, values=dict(ctx.state.values), data=dict(ctx.state.data)
    )
    state.values["goals"] = format_goals(goals, state)
    mark = await runtime.store.get_room_mark(message.room_id, MARK)
    state.recent_messages = unchecked(ctx.state.recent_messages, mark)
    state.values["recentMessages"] = runtime.format_messages(state, state.recent_messages)
    prompt = render(runtime.template(TEMPLATE_NAME, GOALS_TEMPLATE), state.values)
    try:
        raw = await runtime.model.generate_text(
            prompt, model_class=ModelClass.LARGE, task=evaluator_task(NAME), state=state
        )
    except ModelError as error:
        log.warning("goal update failed in room %s: %s", message.room_id, error)
        return []
    await runtime.store.set_room_mark(
        message.room_id, MARK, max(m.created_at for m in state.recent_messages)
    )
    items = parse_json_array(raw)
    if items is None:
        log.warning("goal update answer is not a JSON array: %.200r", raw)
        return []
    current = {goal.id.lower(): goal for goal in goals}
    changed: dict[str, Goal] = {}
    for item in items:
        update = parse_update(item)
        if update is None:
            continue
        goal = current.get(update.id)
        if goal is None:
            # Only this room's in-progress goals may change: an id from elsewhere (or made
            # up) must not touch another room's goal.
            log.warning("ignoring update for unknown goal id %r", update.id)
            continue
        new = apply_update(goal, update)
        if new is not None:
            current[update.id] = changed[update.id] = new
    for goal in changed.values():
        await runtime.store.replace_goal(goal)
        log.info("goal %s (%s): %s", goal.id, goal.name, goal.status)
    return list(changed.values())


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
)

"""Goals: Mnemo follows the goals people set (the UPDATE_GOAL evaluator), shows them in the
prompt (the `goals` provider), starts tracking one when someone states it (CREATE_GOAL), and
lets admins list and add them (`/goals`, `/goal`) on every surface; each person sees their own
in `/me` (the `about` hook). The goals are kept in the
plugin's own collection (`plugin_goals_goals`, see store.py) and counted in `/stats`."""

from __future__ import annotations

from typing import Any

from bot import Plugin, PluginContext

from . import offline
from .about import about
from .action import create_goal_action, draft_from_text
from .commands import goal_command, goals_command
from .evaluator import NAME, goal_evaluator
from .learned import track_stated_goals
from .provider import goals_provider
from .store import COLLECTION, LEGACY_COLLECTION, Goal, GoalStore, Objective

__all__ = [
    "NAME",
    "Goal",
    "GoalStore",
    "Objective",
    "create_goal_action",
    "draft_from_text",
    "goal_evaluator",
    "goals_provider",
    "plugin",
]


async def setup(ctx: PluginContext) -> None:
    goals = GoalStore.of(ctx.collections)
    # Indexes are created at start-up (idempotent), not on the first message.
    await goals.ensure_indexes()
    # Goals kept while they were part of Mnemo's core (the `goals` collection) move into the
    # plugin's own collection once; the old collection is gone afterwards.
    moved = await ctx.collections.adopt(COLLECTION, legacy=LEGACY_COLLECTION)
    if moved:
        ctx.log.info("moved %d goals from the `%s` collection", moved, LEGACY_COLLECTION)


async def stats(ctx: PluginContext, world_id: str) -> list[str]:
    """`/stats`: how many goals this world has, and how many are still in progress."""
    goals = GoalStore.of(ctx.collections)
    total = await goals.count(world_id)
    in_progress = await goals.count(world_id, status="IN_PROGRESS")
    return [f"Goals: {total} ({in_progress} in progress)"]


async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    """The goals a person set in a world go with everything else about them."""
    return await GoalStore.of(ctx.collections).delete_of(user_id=person_id, world_id=world_id)


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, Any]:
    goals = await GoalStore.of(ctx.collections).in_world(world_id, limit=10_000)
    own = [goal for goal in goals if goal.user_id == person_id]
    return {
        "goals": [goal.model_dump(mode="json", exclude={"room_id", "world_id"}) for goal in own]
    }


plugin = Plugin(
    name="goals",
    description="Tracks people's goals and their objectives through the conversation.",
    evaluators=[goal_evaluator],
    providers=[goals_provider],
    actions=[create_goal_action],
    commands=[goals_command, goal_command],
    stores=[COLLECTION],
    setup=setup,
    stats=stats,
    forget=forget,
    export=export,
    # The person's own goals, in their `/me`.
    about=about,
    # The goals people state, read with their facts (the facts plugin's reading).
    learned=track_stated_goals,
    # Without a language model: a stated goal is offered to CREATE_GOAL.
    offline_answers={"reply": offline.reply},
)

"""Goals: Mnemo follows the goals people set (the UPDATE_GOAL evaluator), shows them in the
prompt (the `goals` provider), starts tracking one when someone states it (CREATE_GOAL), and
lets admins list and add them (`/goals`, `/goal`) on every surface."""

from __future__ import annotations

from typing import Any

from bot import Plugin, PluginContext

from . import offline
from .action import create_goal_action, draft_from_text
from .commands import goal_command, goals_command
from .evaluator import NAME, goal_evaluator
from .provider import goals_provider

__all__ = [
    "NAME",
    "create_goal_action",
    "draft_from_text",
    "goal_evaluator",
    "goals_provider",
    "plugin",
]


async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    """The goals a person set in a world go with everything else about them."""
    return await ctx.knowledge.store.goals.delete_of(user_id=person_id, world_id=world_id)


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, Any]:
    goals = await ctx.knowledge.store.goals.in_world(world_id, limit=10_000)
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
    forget=forget,
    export=export,
    # Without a language model: a stated goal is offered to CREATE_GOAL.
    offline_answers={"reply": offline.reply},
)

"""The goals' lines in the person's `/me` (the plugin's `about` hook): what they set out to
do here and how far along it is, so a member sees their own goals without `/goals`, which is
for admins (it lists everyone's)."""

from __future__ import annotations

from bot import PluginContext

from .store import Goal, GoalStore

# Goals listed at most (the newest; in progress ones first).
SHOWN = 10
_STATUS = {"IN_PROGRESS": "in progress", "DONE": "done", "FAILED": "given up"}


async def about(ctx: PluginContext, person_id: str, world_id: str) -> list[str]:
    """`/me`: the person's goals here, those in progress first."""
    goals = await GoalStore.of(ctx.collections).of_person(world_id, person_id, limit=SHOWN * 5)
    if not goals:
        return []
    # Stable: newest first within each status.
    ordered = sorted(goals, key=lambda goal: goal.status != "IN_PROGRESS")[:SHOWN]
    more = f", the newest {SHOWN} shown" if len(goals) > SHOWN else ""
    return [f"Your goals here ({len(goals)}{more}):", *(line(goal) for goal in ordered)]


def line(goal: Goal) -> str:
    status = _STATUS.get(goal.status, goal.status.lower())
    steps = goal.objectives
    if steps:
        done = sum(step.completed for step in steps)
        next_step = next((s.description for s in steps if not s.completed), None)
        status += f", {done} of {len(steps)} steps done"
        if next_step is not None and goal.status == "IN_PROGRESS":
            status += f"; next: {next_step}"
    return f"• {goal.name} ({status})"

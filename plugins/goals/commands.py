"""The goals plugin's commands, shown on every surface: `/goal` adds one, `/goals` lists them.

A goal added here belongs to the room it was typed in and to the person who typed it, like
one stated in conversation (CREATE_GOAL); both go through `add_goal`.
"""

from __future__ import annotations

import re

from bot import Command, CommandContext

from .store import Goal, GoalStore, Objective

MAX_NAME = 200
MAX_OBJECTIVE = 300
MAX_OBJECTIVES = 20
LIST_LIMIT = 50
USAGE = "NAME: first step; second step"

_OBJECTIVE_SPLIT = re.compile(r"\s*[;\n]\s*")


def parse_goal_spec(spec: str) -> tuple[str, list[str]] | None:
    """`Run a marathon: build to 30 miles a week; run a half` → name and objectives."""
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        return None
    return name, split_objectives(rest)


def split_objectives(text: str) -> list[str]:
    """`a; b` (or one per line) → ["a", "b"]."""
    return [o for o in _OBJECTIVE_SPLIT.split(text.strip()) if o]


async def add_goal(
    goals: GoalStore,
    *,
    world_id: str,
    room_id: str,
    name: str,
    objectives: list[str],
    owner_id: str | None,
) -> Goal:
    goal = Goal(
        name=name[:MAX_NAME],
        room_id=room_id,
        world_id=world_id,
        user_id=owner_id,
        objectives=[Objective(description=o[:MAX_OBJECTIVE]) for o in objectives[:MAX_OBJECTIVES]],
    )
    await goals.insert(goal)
    return goal


def format_goal(goal: Goal) -> str:
    done = sum(o.completed for o in goal.objectives)
    lines = [f"{goal.name} [{goal.status}] {done}/{len(goal.objectives)}  (`{goal.id[:8]}`)"]
    lines += [f"  {'☑' if o.completed else '☐'} {o.description}" for o in goal.objectives]
    return "\n".join(lines)


async def _add(ctx: CommandContext) -> str:
    spec = parse_goal_spec(ctx.args)
    if spec is None:
        return f"Usage: /goal {USAGE}"
    name, objectives = spec
    goal = await add_goal(
        GoalStore.of(ctx.collections),
        world_id=ctx.world_id,
        room_id=ctx.room_id,
        name=name,
        objectives=objectives,
        owner_id=ctx.account_id,
    )
    return "Added goal:\n" + format_goal(goal)


async def _list(ctx: CommandContext) -> str:
    goals = await GoalStore.of(ctx.collections).in_world(ctx.world_id, limit=LIST_LIMIT)
    if not goals:
        return "No goals here yet."
    return "\n".join(format_goal(goal) for goal in goals)


goal_command = Command(
    name="goal",
    description="Admins: add a goal for this room, with its steps",
    handler=_add,
    admin_only=True,
    usage=USAGE,
)
goals_command = Command(
    name="goals",
    description="Admins: goals here and their objectives",
    handler=_list,
    admin_only=True,
    # A goal finished in the last message is shown finished.
    after_learning=True,
)

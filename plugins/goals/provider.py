"""The `goals` provider: the room's goals in progress, for the reply prompt."""

from __future__ import annotations

from bot import Context, Provided, Provider

from .prompts import progress
from .store import GoalStore

HEADING = "Goals in progress here:"
# An objective's box, open and ticked (indexed by `completed`).
CHECKBOXES = ("[ ]", "[x]")


async def get_goals(ctx: Context) -> Provided:
    goals = await GoalStore.of(ctx.collections).in_room(ctx.message.room_id, only_in_progress=True)
    if not goals:
        return Provided(data=[])
    lines = [HEADING]
    markup = [HEADING, *CHECKBOXES]
    for goal in goals:
        known = goal.user_id is not None and goal.user_id in ctx.state.actors
        owner = f" ({ctx.state.name_of(goal.user_id)}'s)" if known and goal.user_id else ""
        done = progress(goal)
        lines.append(f"- {goal.name}{owner}: {done}")
        lines += [f"  {CHECKBOXES[o.completed]} {o.description}" for o in goal.objectives]
        markup.append(done)
    return Provided(text="\n".join(lines), data=goals, markup=markup)


goals_provider = Provider(
    name="goals",
    get=get_goals,
    description="The goals being worked on in this conversation, with their objectives.",
)

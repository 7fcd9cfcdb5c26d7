"""What the admin and user commands do, shared by every surface (console, Discord, Telegram).

Functions take the scope (the world the command was issued in) explicitly and return plain
text, so each adapter only decides who may call what and how to show the answer. Nothing
here ever reads outside the given world.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.evaluation import describe_queue
from bot.models import Goal, Memory, Objective
from bot.runtime import AgentRuntime

PAGE_SIZE = 10


@dataclass(frozen=True)
class Scope:
    """Where a command was issued: only what was learned in `world_id` is visible."""

    world_id: str
    room_id: str
    user_id: str


async def describe_me(runtime: AgentRuntime, scope: Scope) -> str:
    facts, _ = await runtime.store.facts.page(
        scope.world_id, subject_id=scope.user_id, limit=PAGE_SIZE * 5
    )
    if not facts:
        return "I haven't learned anything about you here yet."
    lines = "\n".join(f"• {fact.text}" for fact in facts)
    return f"What I know about you here ({len(facts)}):\n{lines}"


async def forget_me(runtime: AgentRuntime, scope: Scope) -> str:
    facts, messages = await runtime.knowledge.forget_person(
        user_id=scope.user_id, world_id=scope.world_id
    )
    return f"Done: I forgot {facts} facts about you and {messages} of your messages here."


async def list_facts(
    runtime: AgentRuntime,
    scope: Scope,
    *,
    subject_id: str | None = None,
    search: str | None = None,
    page: int = 1,
) -> str:
    page = max(page, 1)
    facts, total = await runtime.store.facts.page(
        scope.world_id,
        subject_id=subject_id,
        search=search or None,
        skip=(page - 1) * PAGE_SIZE,
        limit=PAGE_SIZE,
    )
    if total == 0:
        return "No facts learned here yet." if not search else f"No facts match {search!r}."
    names = await runtime.store.accounts.get_many(sorted({f.subject_id for f in facts}))
    pages = (total + PAGE_SIZE - 1) // PAGE_SIZE
    lines = [
        f"`{fact.id[:8]}` {fact.text}"
        + (f" — about {names[fact.subject_id].name}" if fact.subject_id in names else "")
        for fact in facts
    ]
    return f"Facts (page {page}/{pages}, {total} in all):\n" + "\n".join(lines)


async def forget_fact(runtime: AgentRuntime, scope: Scope, fact_prefix: str) -> str:
    """Delete one fact by its id or the id prefix shown in listings."""
    prefix = fact_prefix.strip().strip("`")
    if len(prefix) < 4:
        return "Give at least the first 4 characters of the fact id shown in /facts."
    matches = await runtime.store.facts.with_id_prefix(scope.world_id, prefix)
    if not matches:
        return f"No fact with id {prefix} here."
    if len(matches) > 1:
        return f"{len(matches)} facts start with {prefix}; give more of the id."
    await runtime.knowledge.delete_fact(matches[0].id, world_id=scope.world_id)
    return f"Forgot: {matches[0].text}"


async def forget_person(runtime: AgentRuntime, scope: Scope, user_id: str) -> str:
    facts, messages = await runtime.knowledge.forget_person(
        user_id=user_id, world_id=scope.world_id
    )
    return f"Forgot {facts} facts and {messages} messages of that person here."


def format_goal(goal: Goal) -> str:
    done = sum(o.completed for o in goal.objectives)
    lines = [f"{goal.name} [{goal.status}] {done}/{len(goal.objectives)}  (`{goal.id[:8]}`)"]
    lines += [f"  {'☑' if o.completed else '☐'} {o.description}" for o in goal.objectives]
    return "\n".join(lines)


async def list_goals(runtime: AgentRuntime, scope: Scope) -> str:
    goals = await runtime.store.goals.in_world(scope.world_id)
    if not goals:
        return "No goals here yet."
    return "\n".join(format_goal(goal) for goal in goals)


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
    runtime: AgentRuntime,
    scope: Scope,
    name: str,
    objectives: list[str],
    *,
    owner_id: str | None = None,
) -> Goal:
    goal = Goal(
        name=name[:200],
        room_id=scope.room_id,
        world_id=scope.world_id,
        user_id=owner_id,
        objectives=[Objective(description=o[:300]) for o in objectives[:20]],
    )
    await runtime.store.goals.insert(goal)
    return goal


async def stats(runtime: AgentRuntime, scope: Scope) -> str:
    _, facts = await runtime.store.facts.page(scope.world_id, limit=1)
    goals = await runtime.store.goals.in_world(scope.world_id, limit=10_000)
    messages = await runtime.store.memories.count_in_world(scope.world_id)
    evaluations = describe_queue(await runtime.evaluations.counts())
    return (
        f"Messages: {messages}\nFacts: {facts}\nGoals: {len(goals)} "
        f"({sum(g.status == 'IN_PROGRESS' for g in goals)} in progress)\n"
        f"Evaluations (all worlds): {evaluations}"
    )


def scope_of(memory: Memory) -> Scope:
    return Scope(world_id=memory.world_id, room_id=memory.room_id, user_id=memory.user_id)

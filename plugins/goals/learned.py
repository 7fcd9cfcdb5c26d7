"""Goals learned from the same reading of the conversation as facts: when the memory stores
a goal someone stated for themselves ("My goal this year is to run a marathon"), it is
tracked here too, not only when the reply model happens to pick CREATE_GOAL.

Only an aim stated as one: the reading's "goal" label is a small model's guess (Qwen2.5-0.5B
filed "Wren needs help organizing his garage", a request to the bot, as a goal in 12 of 28
LongMemEval conversations), so a goal is tracked only when the words it rests on state a goal
("my goal is", "I want to", "I'd like to", outside a question: `states_a_goal`, in English and
the languages of aims.py; CREATE_GOAL keeps to the English ones); the fact stays a fact either
way.

One goal per aim: a stated goal that names the same thing as one the person already tracks
(most of its words) is that goal, not a second one; "I want to run a marathon next year"
after `/goal Run a marathon: ...` is the marathon goal. Idempotent: the goal's id is derived
from the fact's, so a re-run of the same evaluation tracks nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from pymongo.errors import DuplicateKeyError

from bot import Context, Fact, stable_id

from .guard import content_words
from .store import Goal, GoalStore

# Of the shorter name's content words, this share in the other's makes two names one aim.
SAME_AIM = 0.6


def same_aim(a: str, b: str) -> bool:
    mine, theirs = content_words(a), content_words(b)
    if not mine or not theirs:
        return False
    shorter = min(len(mine), len(theirs))
    return len(mine & theirs) >= SAME_AIM * shorter


def goal_name(fact: Fact) -> str:
    """The goal as its fact says it, or in the person's own words when the fact is not in
    theirs: a small model writes "Nerea's goal is to get the C2 of Germany" for "mi objetivo
    este año es sacarme el C2 de alemán", and the goal is hers, in her language."""
    written = fact.value or fact.text
    quote = fact.evidence.quote if fact.evidence is not None else ""
    mine, theirs = content_words(written), content_words(quote)
    if quote and len(mine & theirs) * 2 < min(len(mine), len(theirs)):
        return quote[0].upper() + quote[1:]
    return written


async def track_stated_goals(ctx: Context, facts: Sequence[Fact]) -> list[Goal]:
    """Track each goal a person stated for themselves (a fact of type "goal", in their own
    word); returns the goals started."""
    from .action import states_a_goal  # action.py reads this module's same_aim

    stated = [
        f
        for f in facts
        if f.type == "goal"
        and f.said_by is None
        and states_a_goal(f.evidence.quote if f.evidence is not None else f.text)
    ]
    if not stated:
        return []
    goals = GoalStore.of(ctx.collections)
    started = []
    for fact in stated:
        mine = [
            g
            for g in await goals.in_room(fact.room_id, only_in_progress=True, limit=100)
            if g.user_id == fact.subject_id
        ]
        if any(same_aim(g.name, goal_name(fact)) for g in mine):
            continue
        goal = Goal(
            id=stable_id("goal", fact.id),
            name=goal_name(fact)[:200],
            room_id=fact.room_id,
            world_id=fact.world_id,
            user_id=fact.subject_id,
        )
        try:
            await goals.insert(goal)
        except DuplicateKeyError:
            continue  # tracked by an earlier run of this evaluation
        ctx.log.info("goal %s tracked from what %s said", goal.id, fact.subject_id)
        started.append(goal)
    return started

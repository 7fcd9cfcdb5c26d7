"""Goals: Mnemo follows the goals people set (the UPDATE_GOAL evaluator), shows them in the
prompt (the `goals` provider), starts tracking one when someone states it (CREATE_GOAL), and
lets admins list and add them (`/goals`, `/goal`) on every surface."""

from __future__ import annotations

from bot import Plugin

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

plugin = Plugin(
    name="goals",
    description="Tracks people's goals and their objectives through the conversation.",
    evaluators=[goal_evaluator],
    providers=[goals_provider],
    actions=[create_goal_action],
    commands=[goals_command, goal_command],
    # Without a language model: a stated goal is offered to CREATE_GOAL.
    offline_answers={"reply": offline.reply},
)

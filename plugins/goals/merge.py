"""Applying the model's goal updates: validated item by item, merged without surprises.

elizaOS spreads the model's object over the goal (`{...goal, ...update}`), so a typo'd status
or a stray field is written as is, and objectives match only on the exact description. Here:
- an update is read through a pydantic model; a malformed status drops the whole update;
- objectives match by normalised description and are never added or duplicated;
- the status follows the objectives: DONE when they are all done, whatever the model says;
  FAILED only when the model says so; otherwise IN_PROGRESS;
- an answer is read as a whole (`plan_updates`): updates naming an unknown goal, malformed
  ones, and every update of a goal the answer updates in two different ways are rejected,
  each with its reason (a real model copied the template's three statuses as three updates
  for one goal; "last wins" marked it FAILED).
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bot import parse_json, utcnow

from .store import Goal, GoalStatus, Objective

# Why (part of) an answer was not applied: counted per reason in the usage ledger.
UNREADABLE = "unreadable answer"
MALFORMED = "malformed update"
UNKNOWN_GOAL = "unknown goal id"
CONFLICTING = "conflicting updates for one goal"

log = logging.getLogger(__name__)


class ObjectiveUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    description: str
    completed: bool


class GoalUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    id: str
    status: GoalStatus | None = None
    # Raw items: each objective is validated on its own so one bad item does not sink the rest.
    objectives: list[Any] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("status", mode="before")
    @classmethod
    def _status_case(cls, value: object) -> object:
        # "done" and "Done" mean DONE; anything else that is not a status is malformed.
        return value.strip().upper() if isinstance(value, str) else value


def parse_update(item: object) -> GoalUpdate | None:
    try:
        return GoalUpdate.model_validate(item)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "item"
        log.info("ignoring goal update (%s: %s)", where, problem["msg"])
        return None


def answer_items(raw: str) -> list[Any] | None:
    """The update items of an answer: `{"updates": [...]}` as asked, a bare array (the seed's
    shape, from characters that keep its template), or one update object. Never an array
    found nested elsewhere: that would be an update's objectives taken for the answer."""
    value = parse_json(raw)
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        updates = value.get("updates")
        if isinstance(updates, list):
            return updates
        if "id" in value:
            return [value]
    return None


@dataclass
class GoalsPlan:
    """What an answer changes, and what of it was rejected (reason, item)."""

    changed: list[Goal] = field(default_factory=list)
    rejected: list[tuple[str, object]] = field(default_factory=list)


def _same(first: GoalUpdate, second: GoalUpdate) -> bool:
    def key(update: GoalUpdate) -> tuple[object, ...]:
        objectives = []
        for item in update.objectives or []:
            if isinstance(item, dict):
                description = normalise(str(item.get("description", "")))
                objectives.append((description, item.get("completed")))
            else:
                objectives.append((repr(item), None))
        return (update.status, tuple(sorted(objectives, key=repr)))

    return key(first) == key(second)


def plan_updates(goals: Sequence[Goal], raw: str) -> GoalsPlan:
    """Read a goals answer and apply it to `goals` (the room's in-progress goals).

    Every item is either applied or rejected with a reason: unreadable, malformed, naming a
    goal not among `goals` (made up, or another room's), or one of two different updates
    for the same goal (the answer contradicts itself, so neither is trusted).
    """
    plan = GoalsPlan()
    items = answer_items(raw)
    if items is None:
        plan.rejected.append((UNREADABLE, raw))
        return plan
    current = {goal.id.lower(): goal for goal in goals}
    by_goal: dict[str, list[tuple[GoalUpdate, object]]] = {}
    for item in items:
        update = parse_update(item)
        if update is None:
            plan.rejected.append((MALFORMED, item))
        elif update.id not in current:
            plan.rejected.append((UNKNOWN_GOAL, item))
        else:
            by_goal.setdefault(update.id, []).append((update, item))
    for goal_id, updates in by_goal.items():
        first = updates[0][0]
        if any(not _same(first, other) for other, _item in updates[1:]):
            plan.rejected.extend((CONFLICTING, item) for _update, item in updates)
            continue
        new = apply_update(current[goal_id], first)  # identical repeats count once
        if new is not None:
            plan.changed.append(new)
    return plan


def normalise(description: str) -> str:
    """Case, spacing and trailing punctuation do not make a different objective."""
    text = " ".join(unicodedata.normalize("NFKC", description).casefold().split())
    end = len(text)
    while end and (unicodedata.category(text[end - 1]).startswith("P") or text[end - 1].isspace()):
        end -= 1
    return text[:end]


def _objective_updates(goal: Goal, items: list[Any]) -> dict[str, bool]:
    """Normalised description -> completed, for the items naming one of the goal's objectives."""
    known = {normalise(o.description) for o in goal.objectives}
    found: dict[str, bool] = {}
    for item in items:
        try:
            update = ObjectiveUpdate.model_validate(item)
        except ValidationError:
            log.warning("goal %s: ignoring malformed objective %.200r", goal.id, item)
            continue
        key = normalise(update.description)
        if key not in known:
            # Models rename objectives (the seed's own first example does); adding them
            # would duplicate the real one, so only known objectives are updated.
            log.info("goal %s: ignoring unknown objective %r", goal.id, update.description)
            continue
        found[key] = found.get(key, False) or update.completed
    return found


def apply_update(goal: Goal, update: GoalUpdate) -> Goal | None:
    """The goal after the update, or None when nothing changes."""
    completed = _objective_updates(goal, update.objectives or [])
    # Completion sticks: models often echo a stale "completed": false for a finished step.
    objectives = [
        Objective(
            description=o.description,
            completed=o.completed or completed.get(normalise(o.description), False),
        )
        for o in goal.objectives
    ]
    status: GoalStatus
    if objectives and all(o.completed for o in objectives):
        status = "DONE"
    elif update.status == "FAILED":
        status = "FAILED"
    elif not objectives and update.status == "DONE":
        # Without objectives there is nothing to check the model's word against.
        status = "DONE"
    else:
        status = "IN_PROGRESS"
    if status == goal.status and objectives == goal.objectives:
        return None
    return goal.model_copy(
        update={"objectives": objectives, "status": status, "updated_at": utcnow()}
    )

"""The goal update prompt (the seed's template and examples) and how goals are shown."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot import EvaluatorExample, ExampleTurn, JsonAnswer, State

from .store import Goal

TEMPLATE_NAME = "goalsTemplate"

# Rewritten from the seed's template, whose format block a real model copied: unquoted ids
# (`"id": <goal uuid>`), `//` comments, and the status union `"IN_PROGRESS" | "DONE" | "FAILED"`
# (copied as three updates for one goal: the last won and the goal was marked FAILED). Here only
# literal, valid JSON is shown, and one worked example from another conversation.
GOALS_TEMPLATE = """TASK: Update Goals from the conversation below.

{{goals}}

# Conversation
{{recentMessages}}

# Instructions
- Update only a goal the conversation shows progress on, or that its owner says is finished \
or given up. When nothing changed, answer {"updates": []}.
- "id": the goal's id exactly as shown above, in quotes.
- "objectives": every objective of the goal, its description copied exactly, with \
"completed": true when the conversation shows it is done, else false.
- "status": "DONE" when every objective is completed; "FAILED" only when the owner gives the \
goal up; otherwise "IN_PROGRESS".
- At most one update per goal.

# Example, from another conversation
Goal: "Finish the final year project", id "34567-89012-34567-89012", objectives "Submit the \
first draft of the thesis" and "Complete the project prototype".
Student: I've submitted the first draft of my thesis. The prototype is almost done.
Answer:
{"updates": [{"id": "34567-89012-34567-89012", "status": "IN_PROGRESS", "objectives": \
[{"description": "Submit the first draft of the thesis", "completed": true}, \
{"description": "Complete the project prototype", "completed": false}]}]}

Answer with one JSON object and nothing else."""

# Answer tokens: the wrapper, then per goal its id and status, per objective its description.
_ANSWER_TOKENS = 30
_GOAL_TOKENS = 40
_OBJECTIVE_TOKENS = 30
_MAX_ANSWER_TOKENS = 2000


def answer_format(goals: Sequence[Goal]) -> JsonAnswer:
    """The answer's shape for structured output: only these goals' ids can be named."""
    objective = {
        "type": "object",
        "properties": {"description": {"type": "string"}, "completed": {"type": "boolean"}},
        "required": ["description", "completed"],
        "additionalProperties": False,
    }
    update = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": [goal.id for goal in goals]},
            "status": {"type": "string", "enum": ["IN_PROGRESS", "DONE", "FAILED"]},
            "objectives": {"type": "array", "items": objective},
        },
        "required": ["id", "status", "objectives"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {"updates": {"type": "array", "items": update}},
        "required": ["updates"],
        "additionalProperties": False,
    }
    return JsonAnswer("goal_updates", schema)


def answer_tokens(goals: Sequence[Goal]) -> int:
    """`max_tokens` for an answer updating every one of `goals`."""
    tokens = _ANSWER_TOKENS + sum(
        _GOAL_TOKENS + _OBJECTIVE_TOKENS * len(goal.objectives) for goal in goals
    )
    return min(tokens, _MAX_ANSWER_TOKENS)


# The seed's four examples, unchanged except the fourth outcome's missing closing brace.
EXAMPLES: tuple[EvaluatorExample, ...] = (
    EvaluatorExample(
        context="""Actors in the scene:
  {{user1}}: An avid reader and member of a book club.
  {{user2}}: The organizer of the book club.

  Goals:
  - Name: Finish reading "War and Peace"
    id: 12345-67890-12345-67890
    Status: IN_PROGRESS
    Objectives:
      - Read up to chapter 20 by the end of the month
      - Discuss the first part in the next meeting""",
        messages=(
            ExampleTurn("{{user1}}", "I've just finished chapter 20 of 'War and Peace'"),
            ExampleTurn("{{user2}}", "Were you able to grasp the complexities of the characters"),
            ExampleTurn("{{user1}}", "Yep. I've prepared some notes for our discussion"),
        ),
        outcome="""[
        {
          "id": "12345-67890-12345-67890",
          "status": "DONE",
          "objectives": [
            { "description": "Read up to chapter 20 by the end of the month", "completed": true },
            { "description": "Prepare notes for the next discussion", "completed": true }
          ]
        }
      ]""",
    ),
    EvaluatorExample(
        context="""Actors in the scene:
  {{user1}}: A fitness enthusiast working towards a marathon.
  {{user2}}: A personal trainer.

  Goals:
  - Name: Complete a marathon
    id: 23456-78901-23456-78901
    Status: IN_PROGRESS
    Objectives:
      - Increase running distance to 30 miles a week
      - Complete a half-marathon as practice""",
        messages=(
            ExampleTurn("{{user1}}", "I managed to run 30 miles this week"),
            ExampleTurn(
                "{{user2}}",
                "Impressive progress! How do you feel about the half-marathon next month?",
            ),
            ExampleTurn("{{user1}}", "I feel confident. The training is paying off."),
        ),
        outcome="""[
        {
          "id": "23456-78901-23456-78901",
          "objectives": [
            { "description": "Increase running distance to 30 miles a week", "completed": true },
            { "description": "Complete a half-marathon as practice", "completed": false }
          ]
        }
      ]""",
    ),
    EvaluatorExample(
        context="""Actors in the scene:
  {{user1}}: A student working on a final year project.
  {{user2}}: The project supervisor.

  Goals:
  - Name: Finish the final year project
    id: 34567-89012-34567-89012
    Status: IN_PROGRESS
    Objectives:
      - Submit the first draft of the thesis
      - Complete the project prototype""",
        messages=(
            ExampleTurn("{{user1}}", "I've submitted the first draft of my thesis."),
            ExampleTurn("{{user2}}", "Well done. How is the prototype coming along?"),
            ExampleTurn(
                "{{user1}}", "It's almost done. I just need to finalize the testing phase."
            ),
        ),
        outcome="""[
        {
          "id": "34567-89012-34567-89012",
          "objectives": [
            { "description": "Submit the first draft of the thesis", "completed": true },
            { "description": "Complete the project prototype", "completed": false }
          ]
        }
      ]""",
    ),
    EvaluatorExample(
        context="""Actors in the scene:
        {{user1}}: A project manager working on a software development project.
        {{user2}}: A software developer in the project team.

        Goals:
        - Name: Launch the new software version
          id: 45678-90123-45678-90123
          Status: IN_PROGRESS
          Objectives:
            - Complete the coding for the new features
            - Perform comprehensive testing of the software""",
        messages=(
            ExampleTurn("{{user1}}", "How's the progress on the new features?"),
            ExampleTurn(
                "{{user2}}",
                "We've encountered some unexpected challenges and are currently troubleshooting.",
            ),
            ExampleTurn("{{user1}}", "Let's move on and cancel the task."),
        ),
        outcome="""[
        {
          "id": "45678-90123-45678-90123",
          "status": "FAILED"
        }
      ]""",
    ),
)


def format_goals(goals: Sequence[Goal], state: State) -> str:
    """The goals as the template's examples show them, each objective in the reply's shape
    so the model can copy descriptions back exactly."""
    if not goals:
        return "Goals: none"
    lines = ["Goals:"]
    for goal in goals:
        lines.append(f"- Name: {goal.name}")
        lines.append(f'  id: "{goal.id}"')
        if goal.user_id:
            lines.append(f"  Owner: {state.name_of(goal.user_id)}")
        lines.append(f"  Status: {goal.status}")
        if goal.objectives:
            lines.append("  Objectives:")
            for objective in goal.objectives:
                shown = {"description": objective.description, "completed": objective.completed}
                lines.append(f"    - {json.dumps(shown, ensure_ascii=False)}")
    return "\n".join(lines)


def progress(goal: Goal) -> str:
    done = sum(o.completed for o in goal.objectives)
    return f"{done}/{len(goal.objectives)} objectives done" if goal.objectives else "no objectives"

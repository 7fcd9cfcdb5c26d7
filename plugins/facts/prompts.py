"""The fact extraction prompt: the seed's template, plus what the model needs to answer it.

elizaOS's template asks whether a claim is `already_known` or `in_bio` without ever showing the
known facts or anyone's description, and its examples never arrive (the template says
`{{evaluationExamples}}`, a key nothing fills). Here the known facts, the actors' descriptions
and the rendered examples are all in the prompt, and each claim names its subject.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.plugins import EvaluatorExample, ExampleTurn
from bot.prompts import format_example

TEMPLATE_NAME = "factsTemplate"

FACTS_TEMPLATE = """TASK: Extract Claims from the conversation as an array of claims in JSON format.

# START OF EXAMPLES
These are examples of the expected output of this task:
{{evaluationExamples}}
# END OF EXAMPLES

# INSTRUCTIONS

Extract any claims from the conversation that are not already present in the list of known facts below:
- Try not to include already-known facts. If you think a fact is already known, but you're not sure, respond with already_known: true.
- If the fact is already in the person's description, set in_bio to true
- If we've already extracted this fact, set already_known to true
- Set the claim type to 'status', 'fact' or 'opinion'
- For true facts about the world or the character that do not change, set the claim type to 'fact'
- For facts that are true but change over time, set the claim type to 'status'
- For non-facts, set the type to 'opinion'
- 'opinion' includes non-factual opinions and also includes the character's thoughts, feelings, judgments or recommendations
- Include any factual detail, including where the user lives, works, or goes to school, what they do for a living, their hobbies, and any other relevant information
- Set subject to the name of the person the claim is about, exactly as written in "Actors in the scene"
- Write each claim with the person's name, never "the user" or "I"

# Actors in the scene
{{actors}}

# Known facts about the actors
{{knownFacts}}

# Recent Messages
{{recentMessages}}

Response should be a JSON object array inside a JSON markdown block. Correct response format:
```json
[
  {"claim": string, "subject": string, "type": enum<fact|opinion|status>, "in_bio": boolean, "already_known": boolean },
  {"claim": string, "subject": string, "type": enum<fact|opinion|status>, "in_bio": boolean, "already_known": boolean },
  ...
]
```"""  # noqa: E501 - the prompt's lines are the seed's

# The seed's three examples. Their contexts and messages are unchanged; the outcomes gain the
# `subject` each claim is about, and proper ```json fences (the seed writes json```).
EXAMPLES: tuple[EvaluatorExample, ...] = (
    EvaluatorExample(
        context="""Actors in the scene:
{{user1}}: Programmer and moderator of the local story club.
{{user2}}: New member of the club. Likes to write and read.

Facts about the actors:
None""",
        messages=(
            ExampleTurn("{{user1}}", "So where are you from"),
            ExampleTurn("{{user2}}", "I'm from the city"),
            ExampleTurn("{{user1}}", "Which city?"),
            ExampleTurn("{{user2}}", "Oakland"),
            ExampleTurn("{{user1}}", "Oh, I've never been there, but I know it's in California"),
        ),
        outcome='{ "claim": "{{user2}} is from Oakland", "subject": "{{user2}}", '
        '"type": "fact", "in_bio": false, "already_known": false },',
    ),
    EvaluatorExample(
        context="""Actors in the scene:
{{user1}}: Athelete and cyclist. Worked out every day for a year to prepare for a marathon.
{{user2}}: Likes to go to the beach and shop.

Facts about the actors:
{{user1}} and {{user2}} are talking about the marathon
{{user1}} and {{user2}} have just started dating""",
        messages=(
            ExampleTurn("{{user1}}", "I finally completed the marathon this year!"),
            ExampleTurn("{{user2}}", "Wow! How long did it take?"),
            ExampleTurn("{{user1}}", "A little over three hours."),
            ExampleTurn("{{user1}}", "I'm so proud of myself."),
        ),
        outcome="""Claims:
```json
[
  { "claim": "Alex just completed a marathon in just under 4 hours.", "subject": "Alex", "type": "fact", "in_bio": false, "already_known": false },
  { "claim": "Alex worked out 2 hours a day at the gym for a year.", "subject": "Alex", "type": "fact", "in_bio": true, "already_known": false },
  { "claim": "Alex is really proud of himself.", "subject": "Alex", "type": "opinion", "in_bio": false, "already_known": false }
]
```""",  # noqa: E501
    ),
    EvaluatorExample(
        context="""Actors in the scene:
{{user1}}: Likes to play poker and go to the park. Friends with Eva.
{{user2}}: Also likes to play poker. Likes to write and read.

Facts about the actors:
Mike and Eva won a regional poker tournament about six months ago
Mike is married to Alex
Eva studied Philosophy before switching to Computer Science""",
        messages=(
            ExampleTurn(
                "{{user1}}", "Remember when we won the regional poker tournament last spring"
            ),
            ExampleTurn("{{user2}}", "That was one of the best days of my life"),
            ExampleTurn("{{user1}}", "It really put our poker club on the map"),
        ),
        outcome="""Claims:
```json
[
  { "claim": "Mike and Eva won the regional poker tournament last spring", "subject": "Mike", "type": "fact", "in_bio": false, "already_known": true },
  { "claim": "Winning the regional poker tournament put the poker club on the map", "subject": "Mike", "type": "opinion", "in_bio": false, "already_known": false }
]
```""",  # noqa: E501
    ),
)

# Names for each example's {{user1}}/{{user2}}, chosen to agree with the names its outcome
# already uses (example 2's outcome is about Alex, example 3's about Mike and Eva).
EXAMPLE_NAMES: tuple[Mapping[str, str], ...] = (
    {"user1": "Jordan", "user2": "Priya"},
    {"user1": "Alex", "user2": "Jamie"},
    {"user1": "Mike", "user2": "Eva"},
)


def render_examples(
    examples: Sequence[EvaluatorExample] = EXAMPLES,
    names: Sequence[Mapping[str, str]] = EXAMPLE_NAMES,
) -> str:
    blocks = []
    for index, example in enumerate(examples):
        filled = names[index] if index < len(names) else {"user1": "Alex", "user2": "Sam"}
        blocks.append(f"Example {index + 1}:\n{format_example(example, filled)}")
    return "\n\n".join(blocks)

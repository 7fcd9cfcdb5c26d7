"""The fact extraction prompt: the seed's task, plus what the model needs to answer it.

elizaOS's template asks whether a claim is `already_known` or `in_bio` without ever showing the
known facts or anyone's description, and its examples never arrive (the template says
`{{evaluationExamples}}`, a key nothing fills). Here the actors' descriptions, the known facts
that resemble what was said (each with a short id) and the examples are all in the prompt, and
each claim names its subject and whether it is new or updates, retracts or repeats a known
fact: reconciliation costs no second model call.

The examples are literal, valid JSON (a small model copies what it sees, `//` comments and
`"a"|"b"` unions included) and their people stay `{{user1}}`-style placeholders, as elizaOS
writes them: a real model copied the seed's "Priya" and "Alex" into claims about real users.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot import EvaluatorExample, ExampleTurn, format_example

TEMPLATE_NAME = "factsTemplate"

FACTS_TEMPLATE = """TASK: Extract Claims about the people in the conversation as JSON.

# START OF EXAMPLES
{{evaluationExamples}}
# END OF EXAMPLES

# INSTRUCTIONS
Extract what the Recent Messages say about the people in them, compared with the known facts:
- Write each claim with the person's name, never "the user" or "I".
- subject: the name of the person the claim is about, exactly as in "Actors in the scene". What someone says about a person not listed there (a partner, a pet, a race) is a claim about the speaker. The assistant is never the subject of what a user says.
- type: "fact" for facts about a person or the world, "status" for what is true now but changes, "opinion" for opinions, feelings and judgements.
- change: "new" if it is not known; "update" if it replaces a known fact (moved, new job, a new number), with fact set to that fact's id; "retract" if a known fact is no longer true, with its id; "repeat" if it says a known fact again, with its id.
- in_bio: true if the person's description already says it.

# Actors in the scene
{{actors}}

# Known facts
{{knownFacts}}

# Recent Messages
{{recentMessages}}

Answer with only a JSON object in a ```json block, "claims" listing one object per claim, as in the examples."""  # noqa: E501 - prompt lines read as sentences

EXAMPLES: tuple[EvaluatorExample, ...] = (
    EvaluatorExample(
        context="""Actors in the scene:
{{user1}}: Likes to bake.

Known facts:
f1: {{user1}} lives in Seattle
f2: {{user1}} works at a bakery
f3: {{user1}} has 2 kids""",
        messages=(
            ExampleTurn("{{user1}}", "We finally moved to Berlin, and I quit the bakery."),
            ExampleTurn("{{user1}}", "With 2 kids it was a lot of packing!"),
        ),
        outcome="""```json
{"claims": [
  {"claim": "{{user1}} lives in Berlin", "subject": "{{user1}}", "type": "fact", "change": "update", "fact": "f1", "in_bio": false},
  {"claim": "{{user1}} works at a bakery", "subject": "{{user1}}", "type": "fact", "change": "retract", "fact": "f2", "in_bio": false},
  {"claim": "{{user1}} has 2 kids", "subject": "{{user1}}", "type": "fact", "change": "repeat", "fact": "f3", "in_bio": false}
]}
```""",  # noqa: E501
    ),
    EvaluatorExample(
        context="""Actors in the scene:
{{user1}}: Likes poker.
{{user2}}: Likes to write and read.

Known facts:
None""",
        messages=(
            ExampleTurn("{{user2}}", "My partner Tom is a paramedic, and our dog Comet is 3."),
            ExampleTurn("{{user1}}", "Comet is adorable."),
        ),
        outcome="""```json
{"claims": [
  {"claim": "{{user2}}'s partner Tom is a paramedic", "subject": "{{user2}}", "type": "fact", "change": "new", "in_bio": false},
  {"claim": "{{user2}} has a dog named Comet", "subject": "{{user2}}", "type": "fact", "change": "new", "in_bio": false},
  {"claim": "{{user1}} thinks Comet is adorable", "subject": "{{user1}}", "type": "opinion", "change": "new", "in_bio": false}
]}
```""",  # noqa: E501
    ),
)


def render_examples(examples: Sequence[EvaluatorExample] = EXAMPLES) -> str:
    """The examples with their placeholders kept: no name in them can be a real user's."""
    blocks = []
    for index, example in enumerate(examples):
        blocks.append(f"Example {index + 1}:\n{format_example(example, {})}")
    return "\n\n".join(blocks)

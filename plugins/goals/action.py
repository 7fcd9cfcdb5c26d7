"""CREATE_GOAL: the model chose to start tracking a goal the user stated for themselves."""

from __future__ import annotations

import json
import logging
import re

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bot import (
    Action,
    Content,
    Context,
    ExampleTurn,
    JsonAnswer,
    ModelClass,
    ModelError,
    OfflineRequest,
    parse_json_object,
    utcnow,
)
from bot.offline import is_question, sentences

from .aims import states_an_aim
from .commands import add_goal, parse_goal_spec
from .guard import (
    NAMES_NOTHING,
    OBJECTIVE_NOT_IN_MESSAGE,
    check_draft,
    content_words,
    goal_it_refers_to,
    names_its_thing,
)
from .learned import same_aim
from .merge import normalise
from .store import Goal, GoalStore

log = logging.getLogger(__name__)

NAME = "CREATE_GOAL"
TEMPLATE_NAME = "createGoalTemplate"
MAX_NAME = 200
MAX_OBJECTIVES = 20
UNCLEAR_REPLY = 'I couldn\'t tell what the goal is. Could you say it as "My goal is to …"?'

# A worked example instead of `{"name": "<the goal>", ...}`: placeholders get copied.
CREATE_GOAL_TEMPLATE = """TASK: {{senderName}} stated a goal for themselves. Write it down as a goal to track.

# Conversation
{{recentMessages}}

# The message stating the goal
{{senderName}}: {{message}}

# INSTRUCTIONS
- name: the goal itself, short, as {{senderName}} would say it.
- objectives: the concrete steps {{senderName}} named in this message, in order; an empty \
list if none. Never steps of other goals.

# Example, from another conversation
Message: I want to learn Portuguese before my trip: finish the beginner course; have a \
ten-minute conversation
Answer: {"name": "Learn Portuguese before my trip", "objectives": ["Finish the beginner \
course", "Have a ten-minute conversation"]}

Answer with one JSON object and nothing else."""  # noqa: E501

ANSWER_FORMAT = JsonAnswer(
    "goal",
    {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "objectives": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "objectives"],
        "additionalProperties": False,
    },
)
# A short name and up to a handful of steps.
ANSWER_TOKENS = 200

# Ways people state a goal of their own; what follows is the goal. Plans ("I'm going to",
# "I'm planning to") and requests to the bot ("help me", "can you ...") are not goals: with
# the offline model, 12 of 57 turns of ordinary requests to an assistant (LongMemEval) were
# taken for goals ("Goal saved: Clean out the garage this weekend, but I need some advice").
_GOAL_PHRASES = re.compile(
    r"(?:\bmy\s+(?:new\s+)?goal\b[^.!?\n:]{0,30}?\bis\s+(?:to\s+)?"
    r"|\bi\s+want\s+to\s+|\bi'?d\s+like\s+to\s+|\bi\s+would\s+like\s+to\s+)"
    r"(?P<goal>[^.!?\n]+(?::[^\n]*)?)",
    re.IGNORECASE,
)
_GOAL_WORD = re.compile(r"\bgoals?\b", re.IGNORECASE)
# Words after "I want to" that ask for something other than a goal.
_NOT_GOALS = frozenset({"with", "out", "understand", "know", "remember", "find", "ask", "make"})


def _statements(text: str) -> list[str]:
    """The sentences of a message that are not questions: a goal asked about ("can you help
    me run a marathon?") is a request to the bot, not one the person set."""
    return [s for s in sentences(text) if not is_question(s)]


class GoalDraft(BaseModel):
    """The goal to create: from the model's answer (untrusted) or the message text."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    name: str
    objectives: list[str] = []

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip().rstrip(".!").strip()
        if not value:
            raise ValueError("empty goal name")
        return (value[0].upper() + value[1:])[:MAX_NAME]

    @field_validator("objectives", mode="before")
    @classmethod
    def _objectives(cls, value: object) -> object:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ValueError("objectives must be a list")
        seen: set[str] = set()
        kept = []
        for item in value:
            # {"description": ...} objects are what the goal evaluator's format looks like.
            text = item.get("description") if isinstance(item, dict) else item
            if not isinstance(text, str) or not normalise(text) or normalise(text) in seen:
                continue
            seen.add(normalise(text))
            text = text.strip()
            kept.append(text[0].upper() + text[1:])
        return kept[:MAX_OBJECTIVES]


def states_a_goal(text: str) -> bool:
    """Whether the message reads as stating a goal at all ("my goal is", "I want to", ...,
    or the same in another language: aims.py), outside a question."""
    return any(
        _states_in_english(sentence) or states_an_aim(sentence) for sentence in _statements(text)
    )


def states_a_goal_in_english(text: str) -> bool:
    """`states_a_goal` by the English phrases alone: the ones `draft_from_text` can read a
    goal from, and the form the "say it as 'My goal is to …'" question asks for."""
    return any(_states_in_english(sentence) for sentence in _statements(text))


def _states_in_english(sentence: str) -> bool:
    return _GOAL_PHRASES.search(sentence) is not None or _GOAL_WORD.search(sentence) is not None


def draft_from_text(text: str) -> GoalDraft | None:
    """The goal in "my goal is to X", "I want to X", "I'd like to X", said outside a
    question; X may list objectives after a colon, separated by semicolons."""
    for match in (m for sentence in _statements(text) for m in _GOAL_PHRASES.finditer(sentence)):
        phrase = match.group("goal").strip()
        first = phrase.split(maxsplit=1)[0].casefold() if phrase else ""
        if not phrase or first in _NOT_GOALS:
            continue
        spec = parse_goal_spec(phrase)
        if spec is None:
            continue
        name, objectives = spec
        try:
            return GoalDraft(name=name, objectives=objectives)
        except ValidationError:
            continue
    return None


async def _draft_from_model(ctx: Context) -> GoalDraft | None:
    values = {**ctx.state.values, "message": ctx.message.content.text}
    prompt = ctx.model.render(TEMPLATE_NAME, CREATE_GOAL_TEMPLATE, values)
    try:
        raw = await ctx.model.generate(
            prompt,
            model_class=ModelClass.SMALL,
            state=ctx.state,
            max_tokens=ANSWER_TOKENS,
            json_answer=ANSWER_FORMAT,
        )
    except ModelError as error:
        log.warning("CREATE_GOAL: model failed (%s); reading the message instead", error)
        return None
    answer = parse_json_object(raw)
    if answer is None:
        ctx.model.reject("unreadable answer", raw)
        log.info("CREATE_GOAL: no JSON object in the answer; reading the message instead")
        return None
    try:
        draft = GoalDraft.model_validate(answer)
    except ValidationError as error:
        ctx.model.reject("malformed answer", raw)
        log.warning(
            "CREATE_GOAL: malformed answer (%s); reading the message instead",
            error.errors()[0]["msg"],
        )
        return None
    template = ctx.model.template(TEMPLATE_NAME, CREATE_GOAL_TEMPLATE)
    checked = check_draft(draft.name, draft.objectives, ctx.message.content.text, template)
    if checked.reason is not None:
        ctx.model.reject(checked.reason, raw)
        log.warning("CREATE_GOAL: %s (%r); reading the message instead", checked.reason, draft.name)
        return None
    if checked.dropped:
        ctx.model.reject(OBJECTIVE_NOT_IN_MESSAGE, raw, count=checked.dropped)
        log.info("CREATE_GOAL: dropped %d objective(s) not in the message", checked.dropped)
    return draft.model_copy(update={"objectives": checked.objectives})


def offline_draft(request: OfflineRequest) -> str | None:
    """Without a language model, the goal is read from the message's own words."""
    if request.state is None:
        return None
    draft = draft_from_text(request.state.message.content.text)
    return "{}" if draft is None else json.dumps(draft.model_dump(), ensure_ascii=False)


async def validate(ctx: Context) -> bool:
    """Only a message that states a goal: a small model named CREATE_GOAL for most messages,
    and each time its drafting call was paid for nothing (issue 22)."""
    # English phrases only: without them there is nothing for the action to read the goal from
    # when the model's draft is unusable, and its question would ask for English; a goal
    # stated in another language is tracked from the facts reading (learned.py).
    return ctx.message.user_id != ctx.agent.id and states_a_goal_in_english(
        ctx.message.content.text
    )


async def handle(ctx: Context) -> Goal | None:
    message = ctx.message
    draft = await _draft_from_model(ctx) or draft_from_text(message.content.text)
    if draft is None:
        if states_a_goal_in_english(message.content.text):
            await ctx.callback(Content(text=UNCLEAR_REPLY))
        else:
            # The reply named CREATE_GOAL for a message stating no goal (a small model did
            # for nearly every message): asking what the goal is would only puzzle them.
            log.info("CREATE_GOAL: the message states no goal; nothing tracked")
        return None
    existing = await GoalStore.of(ctx.collections).in_room(message.room_id, only_in_progress=True)
    if not names_its_thing(draft.name):
        # "I want to finish it in under two hours": what "it" is was said before. Tracked as
        # it stands, the goal means nothing later; the person's own goal it fits, or asking.
        ctx.model.reject(NAMES_NOTHING, draft.name)
        mine = [goal for goal in existing if goal.user_id == message.user_id]
        meant = goal_it_refers_to(draft.name, mine)
        if meant is not None:
            await ctx.callback(Content(text=f"I'm already keeping track of that: {meant.name}."))
            return meant
        log.info("CREATE_GOAL: %r names no thing; asked what the goal is", draft.name)
        await ctx.callback(Content(text=UNCLEAR_REPLY))
        return None
    for goal in existing:
        # One goal per aim: "I want to run a marathon next year" after `/goal Run a
        # marathon: ...` is the marathon goal, said more precisely (its name follows).
        if goal.user_id == message.user_id and same_aim(goal.name, draft.name):
            if len(content_words(draft.name)) > len(content_words(goal.name)):
                goal = goal.model_copy(update={"name": draft.name, "updated_at": utcnow()})
                await GoalStore.of(ctx.collections).replace(goal)
            await ctx.callback(Content(text=f"I'm already keeping track of that: {goal.name}."))
            return goal
    goal = await add_goal(
        GoalStore.of(ctx.collections),
        world_id=message.world_id,
        room_id=message.room_id,
        name=draft.name,
        objectives=draft.objectives,
        owner_id=message.user_id,
    )
    steps = "".join(f"\n- {o.description}" for o in goal.objectives)
    await ctx.callback(Content(text=f"Goal saved: {goal.name}.{steps}".rstrip()))
    return goal


create_goal_action = Action(
    name=NAME,
    similes=("ADD_GOAL", "SET_GOAL", "NEW_GOAL", "TRACK_GOAL", "START_GOAL"),
    # No example phrase: a small model gave the description's own example back as its reply
    # ("Create_goal: I want to improve my communication skills").
    description="Only when the person asks you to follow a goal of theirs.",
    handler=handle,
    validate=validate,
    examples=(
        (
            ExampleTurn("{{user1}}", "My goal is to run a marathon this year"),
            ExampleTurn("{{agentName}}", "That's a big one! I'll keep track of it with you.", NAME),
        ),
        (
            ExampleTurn(
                "{{user1}}",
                "I want to learn Portuguese before my trip: finish the beginner course; "
                "have a ten-minute conversation",
            ),
            ExampleTurn("{{agentName}}", "Boa sorte! Noted, with both steps.", NAME),
        ),
        (
            ExampleTurn("{{user1}}", "Can you help me read twelve books this year?"),
            ExampleTurn("{{agentName}}", "Happily. One a month it is.", NAME),
        ),
    ),
    suppress_initial_message=False,
    offline=offline_draft,
)

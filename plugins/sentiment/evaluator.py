"""The SENTIMENT evaluator: scores the tone of each message a person writes.

By default with VADER (vaderSentiment: a maintained lexicon with rules for negation,
intensifiers, capitals and emoji), which needs no model call; `MNEMO_SENTIMENT_SCORER=model`
asks the language model instead, one call per message.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from bot import (
    Context,
    Evaluator,
    EvaluatorExample,
    ExampleTurn,
    JsonAnswer,
    ModelClass,
    ModelError,
    parse_json_object,
)

from . import offline
from .settings import SentimentSettings
from .store import COLLECTION, record_score

log = logging.getLogger(__name__)

NAME = "SENTIMENT"
TEMPLATE_NAME = "sentimentTemplate"  # a character's `templates` may override it by this name

# No example score: a real model answered the example's 0.6 for nearly every message. The
# scale is described by its points instead, and the answer's shape in words.
SENTIMENT_TEMPLATE = """TASK: Rate the emotional tone of {{senderName}}'s latest message.

# Conversation
{{recentMessages}}

# Latest message from {{senderName}}
{{latestMessage}}

Judge this message alone, not the conversation. The scale: -1.0 furious or devastated, \
-0.5 annoyed or sad, 0.0 neutral or plain facts, 0.5 pleased, 1.0 overjoyed; any number \
between fits too.
Answer with one JSON object and nothing else: "score" is the number, "label" is one of \
"positive", "neutral", "negative" or "mixed"."""

# The answer: the score and a label, so structured output can hold a model to it.
ANSWER_FORMAT = JsonAnswer(
    "sentiment",
    {
        "type": "object",
        "properties": {
            "score": {"type": "number"},
            "label": {"type": "string", "enum": ["positive", "neutral", "negative", "mixed"]},
        },
        "required": ["score", "label"],
        "additionalProperties": False,
    },
)
# Enough for {"score": -0.35, "label": "negative"} and the odd fence around it.
ANSWER_TOKENS = 40

Label = Literal["positive", "neutral", "negative", "mixed"]
_LABELS: frozenset[str] = frozenset(("positive", "neutral", "negative", "mixed"))


@dataclass(frozen=True)
class SentimentScore:
    score: float
    label: Label


class _Answer(BaseModel):
    """The model's answer as it may come: the score possibly a string, the label anything."""

    model_config = ConfigDict(extra="ignore")

    score: float
    label: object = None

    @field_validator("score", mode="before")
    @classmethod
    def _no_bool(cls, value: object) -> object:
        # pydantic would read `true` as 1.0, a confident "very positive" nobody said.
        if isinstance(value, bool):
            raise ValueError("a boolean is not a score")
        return value


def label_for(score: float) -> Label:
    if score >= 0.25:
        return "positive"
    if score <= -0.25:
        return "negative"
    return "neutral"


def parse_sentiment(raw: str) -> SentimentScore | None:
    """Read {"score", "label"} from the model's text; None when there is no usable score.

    Tolerant: fenced or embedded JSON, numeric strings, out-of-range scores (clamped), and
    a missing or unknown label (derived from the score)."""
    found = parse_json_object(raw)
    if found is None:
        return None
    try:
        answer = _Answer.model_validate(found)
    except ValidationError:
        return None
    if not math.isfinite(answer.score):
        return None
    score = max(-1.0, min(1.0, answer.score))
    label = answer.label.strip().lower() if isinstance(answer.label, str) else ""
    return SentimentScore(score, label if label in _LABELS else label_for(score))  # type: ignore[arg-type]


def _settings(ctx: Context) -> SentimentSettings:
    # Registered through discovery or the test harness, ctx.settings is always set; the
    # fallback keeps a hand-built Context working too.
    return ctx.settings if isinstance(ctx.settings, SentimentSettings) else SentimentSettings()


async def validate(ctx: Context) -> bool:
    """A person's message with some text. No idle flush reaches it (it declares no
    `idle_mark`): each message is scored once, when it arrives."""
    message = ctx.message
    if message.user_id == ctx.agent.id:
        return False
    return len(message.content.text.strip()) >= _settings(ctx).min_chars


def vader_score(analyzer: SentimentIntensityAnalyzer, text: str) -> SentimentScore:
    """VADER's compound score (already in [-1, 1]) with the label our scale gives it."""
    score = round(float(analyzer.polarity_scores(text)["compound"]), 3)
    return SentimentScore(score, label_for(score))


def _analyzer(ctx: Context) -> SentimentIntensityAnalyzer:
    # Loaded once by the plugin's setup (its lexicon takes a few tens of milliseconds); a
    # hand-built Context without that state loads its own.
    state = ctx.plugin_state
    return state if isinstance(state, SentimentIntensityAnalyzer) else SentimentIntensityAnalyzer()


async def handler(ctx: Context, found: bool) -> SentimentScore | None:
    """Score the latest message's tone and add it to the author's tally."""
    settings = _settings(ctx)
    if settings.scorer == "vader":
        result = vader_score(_analyzer(ctx), ctx.message.content.text)
    else:
        asked = await _ask_model(ctx, settings)
        if asked is None:
            return None
        result = asked
    await record_score(ctx.collections[COLLECTION], ctx.message, result.score, result.label)
    return result


async def _ask_model(ctx: Context, settings: SentimentSettings) -> SentimentScore | None:
    """The `model` scorer: the language model's score, None when it gave no usable one."""
    values = {
        **ctx.state.values,
        "senderName": ctx.state.name_of(ctx.message.user_id),
        "latestMessage": ctx.conversations.cut(ctx.message.content.text.strip()),
    }
    prompt = ctx.model.render(TEMPLATE_NAME, SENTIMENT_TEMPLATE, values)
    try:
        raw = await ctx.model.generate(
            prompt,
            model_class=ModelClass(settings.model_class),
            state=ctx.state,
            max_tokens=ANSWER_TOKENS,
            json_answer=ANSWER_FORMAT,
        )
    except ModelError as error:
        log.warning("sentiment: no answer for message %s: %s", ctx.message.id, error)
        return None
    result = parse_sentiment(raw)
    if result is None:
        ctx.model.reject("unreadable answer", raw)
        log.warning("sentiment: unreadable answer for message %s", ctx.message.id)
        return None
    return result


sentiment_evaluator = Evaluator(
    name=NAME,
    similes=("TONE", "MOOD", "TRACK_SENTIMENT"),
    description=(
        "Rates the emotional tone of the latest message (-1 negative to 1 positive) and keeps "
        "a running sentiment per person and room."
    ),
    handler=handler,
    validate=validate,
    # Also learn from group messages the bot only overheard (it did not reply to them).
    always_run=True,
    # VADER by default: the selection call is not asked about it (asking would cost a model
    # call, scoring costs none). With the `model` scorer it runs whenever it validates too.
    uses_model=False,
    offline=offline.answer,
    examples=(
        EvaluatorExample(
            context="A group chat; {{user1}} is happy about a result.",
            messages=(ExampleTurn("{{user1}}", "We won the match, I'm so happy!"),),
            outcome='{"score": 0.9, "label": "positive"}',
        ),
        EvaluatorExample(
            context="A group chat; {{user2}} is frustrated.",
            messages=(ExampleTurn("{{user2}}", "My train is late again, this is awful."),),
            outcome='{"score": -0.7, "label": "negative"}',
        ),
    ),
)

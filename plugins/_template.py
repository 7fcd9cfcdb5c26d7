"""Template evaluator: copy to plugins/my_evaluator.py, then rename and edit (docs/plugins.md).
It counts the questions each person asks, per world, in its own MongoDB collection."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.models import stable_id, utcnow
from bot.plugin_api import PluginContext
from bot.plugins import Context, Evaluator, EvaluatorExample, ExampleTurn, Plugin

COLLECTION = "question_counts"  # the plugin's own collection: pick a name nobody else uses


class QuestionSettings(BaseSettings):  # MNEMO_QUESTIONS_MIN_CHARS=10 in env or .env -> 10
    model_config = SettingsConfigDict(
        env_prefix="MNEMO_QUESTIONS_", env_file=".env", extra="ignore"
    )
    min_chars: int = 5


async def validate(ctx: Context) -> bool:  # cheap, no model call; False skips the handler
    # Not the bot's own words, nor an idle flush (it re-evaluates a message already counted).
    if ctx.message.user_id == ctx.runtime.agent_id or ctx.state.data.get("trigger") == "idle":
        return False
    text = ctx.message.content.text.strip()
    return "?" in text and len(text) >= ctx.settings.min_chars  # ctx.settings: QuestionSettings


async def handler(ctx: Context) -> None:
    m = ctx.message  # one document per person and world; $inc is atomic, so nothing is lost
    once = {"user_id": m.user_id, "world_id": m.world_id}  # $setOnInsert: only when created
    update = {"$inc": {"count": 1}, "$set": {"updated_at": utcnow()}, "$setOnInsert": once}
    key = {"_id": stable_id(COLLECTION, m.user_id, m.world_id)}
    await ctx.runtime.store.db[COLLECTION].update_one(key, update, upsert=True)


async def setup(ctx: PluginContext) -> None:  # once at start-up, before any message
    await ctx.knowledge.store.db[COLLECTION].create_index("world_id", name="world")


# The selection step shows the model this description and example to pick what runs.
asked = EvaluatorExample("{{user1}} asks.", [ExampleTurn("{{user1}}", "Where's the station?")], "1")
questions = Evaluator(
    name="COUNT_QUESTIONS", description="Counts the questions a person asks.", handler=handler,
    validate=validate, examples=[asked], always_run=True,  # also when the bot only overheard
)  # fmt: skip
plugin = Plugin("questions", evaluators=[questions], settings_model=QuestionSettings, setup=setup)

"""Template evaluator: copy to plugins/my_evaluator.py, then rename and edit (docs/plugins.md).
It counts each person's questions per world in its own collection; `/questions` shows them,
and /forgetme and /export reach them through its privacy hooks."""

from pydantic_settings import BaseSettings, SettingsConfigDict  # noqa: I001 (two short lines)

from bot import Command, CommandContext, Context, Evaluator, EvaluatorExample
from bot import ExampleTurn, Plugin, PluginContext, stable_id, utcnow


class QuestionSettings(BaseSettings):  # MNEMO_QUESTIONS_MIN_CHARS=10 in env or .env -> 10
    model_config = SettingsConfigDict(
        env_prefix="MNEMO_QUESTIONS_", env_file=".env", extra="ignore"
    )
    min_chars: int = 5


async def validate(ctx: Context[QuestionSettings]) -> bool:  # cheap, no model call; False skips
    # Not the bot's own words, nor an idle flush (it re-evaluates a message already counted).
    if ctx.message.user_id == ctx.agent.id or ctx.state.data.get("trigger") == "idle":
        return False
    text = ctx.message.content.text.strip()
    return "?" in text and len(text) >= ctx.settings.min_chars


async def handler(ctx: Context[QuestionSettings]) -> None:
    m = ctx.message  # one document per person and world; $inc is atomic, so nothing is lost
    once = {"user_id": m.user_id, "world_id": m.world_id}  # $setOnInsert: only when created
    update = {"$inc": {"count": 1}, "$set": {"updated_at": utcnow()}, "$setOnInsert": once}
    key = {"_id": stable_id("questions", m.user_id, m.world_id)}  # your own collection:
    await ctx.collections["counts"].update_one(key, update, upsert=True)  # plugin_questions_counts


async def setup(ctx: PluginContext) -> None:  # once at start-up, before any message
    await ctx.collections["counts"].create_index("world_id", name="world")


async def my_count(ctx: CommandContext) -> str:  # what `/questions` answers
    key = {"_id": stable_id("questions", ctx.account_id, ctx.world_id)}
    found = await ctx.collections["counts"].find_one(key)
    return f"You asked {found['count'] if found else 0} question(s) here."


# It keeps data (`stores`), so people must be able to delete it (/forgetme) and see it (/export).
async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    mine = {"user_id": person_id, "world_id": world_id}
    return (await ctx.collections["counts"].delete_many(mine)).deleted_count


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, int]:
    found = await ctx.collections["counts"].find_one({"user_id": person_id, "world_id": world_id})
    return {"questions": found["count"] if found else 0}


async def stats(ctx: PluginContext, world_id: str) -> list[str]:  # lines `/stats` shows
    askers = await ctx.collections["counts"].count_documents({"world_id": world_id})
    return [f"People who asked questions: {askers}"]


asked = EvaluatorExample("{{user1}} asks.", [ExampleTurn("{{user1}}", "Where's the station?")], "1")
questions = Evaluator(  # the model sees the description and example when it picks what runs
    name="COUNT_QUESTIONS", description="Counts the questions a person asks.", handler=handler,
    validate=validate, examples=[asked], always_run=True,  # also when the bot only overheard
)  # fmt: skip
plugin = Plugin("questions", evaluators=[questions], settings_model=QuestionSettings, setup=setup,
                commands=[Command("questions", "Your questions here", my_count)],
                stores=["counts"], forget=forget, export=export, stats=stats)  # fmt: skip

"""Template evaluator: copy to plugins/my_evaluator.py, then rename and edit (docs/plugins.md).
It notes each question a person asks in its own collection; `/questions` counts them,
and /forgetme and /export reach them through its privacy hooks."""

from pydantic_settings import BaseSettings, SettingsConfigDict  # noqa: I001 (two short lines)

from bot import Command, CommandContext, Context, Evaluator, EvaluatorExample
from bot import ExampleTurn, Plugin, PluginContext, epoch_millis


class QuestionSettings(BaseSettings):  # MNEMO_QUESTIONS_MIN_CHARS=10 in env or .env -> 10
    model_config = SettingsConfigDict(
        env_prefix="MNEMO_QUESTIONS_", env_file=".env", extra="ignore"
    )
    min_chars: int = 5


async def validate(ctx: Context[QuestionSettings]) -> bool:  # cheap, no model call; False skips
    if ctx.message.user_id == ctx.agent.id:  # not the bot's own words
        return False
    text = ctx.message.content.text.strip()
    return "?" in text and len(text) >= ctx.settings.min_chars


async def handler(ctx: Context[QuestionSettings], found: bool) -> None:  # found: what validate
    # A job may run again after a crash: one document per job (its id is stable across
    # retries), written whole, so a retry rewrites it instead of counting twice ($inc would).
    m = ctx.message
    asked = {"user_id": m.user_id, "world_id": m.world_id, "at_ms": epoch_millis(m.created_at)}
    key = {"_id": ctx.job_id or m.id}  # in your own collection: plugin_questions_asked
    await ctx.collections["asked"].update_one(key, {"$set": asked}, upsert=True)


async def setup(ctx: PluginContext) -> None:  # once at start-up, before any message
    await ctx.collections["asked"].create_index([("world_id", 1), ("user_id", 1)], name="who")


async def my_count(ctx: CommandContext) -> str:  # what `/questions` answers
    mine = {"user_id": ctx.account_id, "world_id": ctx.world_id}
    return f"You asked {await ctx.collections['asked'].count_documents(mine)} question(s) here."


# It keeps data (`stores`), so people must be able to delete it (/forgetme) and see it (/export).
async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    mine = {"user_id": person_id, "world_id": world_id}
    return (await ctx.collections["asked"].delete_many(mine)).deleted_count


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, int]:
    mine = {"user_id": person_id, "world_id": world_id}
    return {"questions": await ctx.collections["asked"].count_documents(mine)}


async def stats(ctx: PluginContext, world_id: str) -> list[str]:  # lines `/stats` shows
    asked = await ctx.collections["asked"].count_documents({"world_id": world_id})
    return [f"Questions asked here: {asked}"]


asked = EvaluatorExample("{{user1}} asks.", [ExampleTurn("{{user1}}", "Where's the station?")], "1")
questions = Evaluator(  # the model sees the description and example when it picks what runs
    name="COUNT_QUESTIONS", description="Counts the questions a person asks.", handler=handler,
    validate=validate, examples=[asked], always_run=True,  # also when the bot only overheard
)  # fmt: skip
# after_learning: the room's pending evaluations finish first, so the last question counts.
count = Command("questions", "Your questions here", my_count, after_learning=True)
plugin = Plugin("questions", evaluators=[questions], settings_model=QuestionSettings, setup=setup,
                commands=[count], stores=["asked"], forget=forget, export=export,
                stats=stats)  # fmt: skip

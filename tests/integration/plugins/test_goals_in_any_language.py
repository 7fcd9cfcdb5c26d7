"""A goal stated in another language is tracked from the facts reading, as an English one is:
the model labels notes "goal" (its guess), and the goals plugin tracks one only when the words
it rests on state an aim (plugins/goals/aims.py). Real MongoDB, Chroma and embedder; only the
model scripted, with the facts and goals plugins as they ship."""

from __future__ import annotations

from pathlib import Path

from bot.app.composition import App
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import FactsSettings
from plugins.facts import plugin as FACTS
from plugins.goals import GoalStore
from plugins.goals import plugin as GOALS
from tests.integration.plugins.test_facts_plugin import NEVER, answer, learn, note, say, scripted


def goals_of(app: App) -> GoalStore:
    return GoalStore.of(app.runtime.plugins.plugin_context(GOALS).collections)


async def read_with_goals(
    tmp_path: Path, mongo_uri: str, model_dir: Path, model: ScriptedModel, said: list[str]
) -> list[str]:
    settings = FactsSettings().model_copy(
        update={"conversation_length": NEVER, "merge_rules": False}
    )
    async with open_test_app(
        tmp_path,
        plugins=[FACTS, GOALS],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": settings},
    ) as app:
        chat = TestChat(app.runtime, name="Lucía")
        last = None
        for text in said:
            last = await say(chat, text)
        assert last is not None
        await learn(app, last)
        goals = await goals_of(app).in_room(chat.room.id, only_in_progress=True)
    return sorted(goal.name for goal in goals)


async def test_goals_stated_in_spanish_are_tracked_in_her_words_and_a_request_is_not(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    said = [
        "Mi objetivo este año es sacarme el C2 de alemán",
        "Y quiero aprender a hacer surf, que aquí ya no tengo excusa",
        "Quiero que me ayudes con un correo para el casero",
        "¿Quiero correr un maratón, es mala idea?",
    ]
    model = scripted(
        answer(
            m1=[note("Lucía quiere sacarse el C2 de alemán", said[0], "goal")],
            # Written in English: the goal is named in her own words.
            m2=[note("Lucía wants to learn to surf", "quiero aprender a hacer surf", "goal")],
            # The small model's guess: a request to the bot, and a question, filed as goals.
            m3=[note("Lucía quiere un correo para el casero", said[2], "goal")],
            m4=[note("Lucía quiere correr un maratón", "Quiero correr un maratón", "goal")],
        )
    )
    tracked = await read_with_goals(tmp_path, mongo_uri, model_dir, model, said)

    assert tracked == [
        "Lucía quiere sacarse el C2 de alemán",
        "Y quiero aprender a hacer surf, que aquí ya no tengo excusa",
    ]

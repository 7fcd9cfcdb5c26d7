"""The console's /forgetme confirmation: the person answers on the next line. "yes" (or "y")
forgets; anything else says plainly that nothing was forgotten, so nobody leaves believing
they were forgotten when they were not. Real MongoDB and Chroma, the console's own loop."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.adapters.console import NOTHING_FORGOTTEN, ConsoleChat
from bot.domain.records import world_id
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from tests.helpers.telegram_bot import REMEMBER


async def console_session(
    tmp_path: Path, model_dir: Path, mongo_uri: str, script: str
) -> tuple[str, int, int]:
    """What the console showed, and how many facts about the person there were before the
    script and after it."""
    model = ScriptedModel(lambda prompt, task, state: '{"text": "Noted."}')
    async with open_test_app(
        tmp_path,
        plugins=[REMEMBER],
        model=model,
        model_dir=model_dir,
        mongodb_uri=mongo_uri,
        evaluator_selection="all",
    ) as app:
        said = "I keep bees\nI live in Lisbon\n"
        await ConsoleChat(user_name="sam", stdin=io.StringIO(said), stdout=io.StringIO()).run(
            app.adapter_services
        )
        world = world_id("console", "sam")
        before = (await app.store.facts.page(world))[1]
        out = io.StringIO()
        await ConsoleChat(user_name="sam", stdin=io.StringIO(script), stdout=out).run(
            app.adapter_services
        )
        after = (await app.store.facts.page(world))[1]
    return out.getvalue(), before, after


@pytest.mark.parametrize("answer", ["yes", "y", "Yes.", "Y"])
async def test_yes_after_forgetme_forgets(
    tmp_path: Path, model_dir: Path, mongo_uri: str, answer: str
) -> None:
    shown, before, after = await console_session(
        tmp_path, model_dir, mongo_uri, f"/forgetme\n{answer}\n/me\n"
    )
    assert before == 2
    assert 'Type "yes" to confirm' in shown and "/forgetme yes" not in shown
    assert "Done: I forgot" in shown and after == 0
    assert "I haven't learned anything about you here yet." in shown
    assert "Noted." not in shown  # the answer was not taken as chat


@pytest.mark.parametrize("answer", ["no", "sure, whatever", "yes please forget"])
async def test_anything_else_says_plainly_that_nothing_was_forgotten(
    tmp_path: Path, model_dir: Path, mongo_uri: str, answer: str
) -> None:
    shown, before, after = await console_session(
        tmp_path, model_dir, mongo_uri, f"/forgetme\n{answer}\n/me\n"
    )
    assert NOTHING_FORGOTTEN in shown and "Done: I forgot" not in shown
    # Nothing forgotten; an answer other than "no" is then said to the bot, so nothing is lost.
    assert before == 2 and after == (2 if answer == "no" else 3)
    assert "I keep bees" in shown.split(NOTHING_FORGOTTEN)[1]  # /me still knows


async def test_a_command_after_forgetme_runs_after_saying_nothing_was_forgotten(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    shown, _, after = await console_session(tmp_path, model_dir, mongo_uri, "/forgetme\n/me\n")
    asked, listed = shown.split(NOTHING_FORGOTTEN)
    assert "It cannot be undone." in asked and "I keep bees" in listed and after == 2
    # Asking again with "yes" forgets, without a "nothing was forgotten" in between.
    shown, _, after = await console_session(
        tmp_path / "again", model_dir, mongo_uri, "/forgetme\n/forgetme yes\n"
    )
    assert NOTHING_FORGOTTEN not in shown and "Done: I forgot" in shown and after == 0

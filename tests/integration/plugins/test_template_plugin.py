"""plugins/_template.py works as shipped, and works once copied into a plugins folder."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from bot.app.composition import App
from bot.commands.command_set import Commands, Request, Scope, stats
from bot.llm.base import Task
from bot.plugin.loading import discover
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from tests.paths import REPO

TEMPLATE = REPO / "plugins" / "_template.py"


def load_template() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mnemo_plugin_template", TEMPLATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def template_model() -> ScriptedModel:
    return ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Good question.", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["COUNT_QUESTIONS"]'],
        }
    )


async def question_count(app: App, user_id: str) -> int:
    # The plugin's own collection: ctx.collections["asked"] of the plugin "questions".
    return await app.store.db["plugin_questions_asked"].count_documents({"user_id": user_id})


def test_the_docs_show_the_template_as_it_is() -> None:
    source = TEMPLATE.read_text(encoding="utf-8")
    body = source[source.index('"""', 3) + 3 :].lstrip("\n")
    docs = (TEMPLATE.parent.parent / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert f"```python\n{body}```" in docs


def test_the_template_uses_only_the_public_plugin_api() -> None:
    imports = re.findall(r"^(?:from|import) ([\w.]+)", TEMPLATE.read_text(), re.M)
    assert {name for name in imports if name.split(".")[0] == "bot"} == {"bot"}


async def test_the_template_counts_questions_people_ask(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    template = load_template()
    async with open_test_app(
        tmp_path,
        plugins=[template.plugin],
        model=template_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        sarah = TestChat(app.runtime, name="Sarah", chat="general", world="guild", kind="group")
        tom = TestChat(app.runtime, name="Tom", chat="general", world="guild", kind="group")
        await sarah.say("Mnemo, where is the station?")
        await sarah.say("Mnemo, I like trains.")  # not a question
        await sarah.say("Mnemo, what time does it open?")
        await tom.say("anyone seen my umbrella?")  # overheard: always_run counts it too
        await tom.say("ok?")  # shorter than min_chars
        await sarah.settle()

        assert await question_count(app, sarah.account.id) == 2
        assert await question_count(app, tom.account.id) == 1
        assert tom.replies == []
        # Its command, as every surface runs it.
        host = app.runtime.plugins
        command = host.find_command("questions")
        assert command is not None
        where = {"world_id": sarah.room.world_id, "room_id": sarah.room.id}
        mine = await host.run_command(command, account_id=sarah.account.id, **where)
        assert mine == "You asked 2 question(s) here."
        # Its line in /stats.
        shown = await stats(app.commands, Scope(sarah.room.world_id, sarah.room.id, "x"))
        assert "Questions asked here: 3" in shown.splitlines()
        # Its privacy hooks: Sarah's count is shown to her and then forgotten; Tom's stays.
        assert await host.export(sarah.account.id, sarah.room.world_id) == {
            "questions": {"questions": 2}
        }
        assert await host.forget(sarah.account.id, sarah.room.world_id) == {"questions": 2}
        assert await question_count(app, sarah.account.id) == 0
        assert await question_count(app, tom.account.id) == 1


async def test_the_count_includes_the_question_asked_just_before(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # `after_learning=True` (as docs/plugins.md shows): the room's pending evaluations finish
    # before `/questions` answers, so the question just asked is counted, not missed.
    template = load_template()
    async with open_test_app(
        tmp_path,
        plugins=[template.plugin],
        model=template_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await chat.say("where is the nearest station?")  # no settle(): learning still queued
        commands = Commands(app.commands, learn_wait=30)
        asked = Request(
            platform=chat.platform,
            account_id=chat.account.id,
            world_id=chat.room.world_id,
            room_id=chat.room.id,
            is_admin=False,
        )
        answer = await commands.run("questions", asked)
        assert answer.text == "You asked 1 question(s) here."


async def test_a_copy_in_the_plugins_folder_is_discovered_and_runs(
    tmp_path: Path, mongo_uri: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copy(TEMPLATE, folder / "_template.py")
    assert discover(folder, use_entry_points=False).plugins == []  # `_` files are skipped
    shutil.copy(TEMPLATE, folder / "my_evaluator.py")
    monkeypatch.setenv("MNEMO_QUESTIONS_MIN_CHARS", "20")
    registry = discover(folder, use_entry_points=False)
    assert [p.name for p in registry.plugins] == ["questions"]
    assert registry.settings["questions"].min_chars == 20

    async with open_test_app(
        tmp_path / "app",
        plugins=registry.plugins,
        model=template_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        await chat.say("where is it?")  # 12 characters: below the configured minimum
        await chat.say("where is the nearest station?")
        await chat.settle()
        assert await question_count(app, chat.account.id) == 1


async def test_a_job_run_again_after_a_crash_counts_its_question_once(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    template = load_template()
    async with open_test_app(
        tmp_path,
        plugins=[template.plugin],
        model=template_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chat = TestChat(app.runtime, name="Sarah")
        result = await chat.say("where is the station?")
        await chat.settle()
        assert result.job is not None
        job = await app.store.jobs.get(result.job.id)
        assert job is not None and job.ran == ["COUNT_QUESTIONS"]
        # The queue hands a job out again when its process died before recording it done:
        # the handler runs again with the same job id, and must not count the question twice.
        again = job.model_copy(update={"ran": []})
        assert await app.runtime.evaluator.run_job(again) == ["COUNT_QUESTIONS"]
        assert await question_count(app, chat.account.id) == 1

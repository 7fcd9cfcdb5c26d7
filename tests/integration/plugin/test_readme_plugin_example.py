"""The plugin example in the README runs as written: the test executes the README's code, the
plugin as the module it is saved as (`plugins.questions`), its test importing it from there.
(tests/e2e/test_readme_commands.py saves both files into a copy of the checkout and runs the
README's command.)"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from tests.paths import REPO

README = REPO / "README.md"


def readme_files() -> dict[str, str]:
    """The README's plugin and its test, by the path each block's first line names."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Write a plugin") : text.index("## Performance")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return {block.splitlines()[0].removeprefix("# ").strip(): block for block in blocks}


@pytest.fixture
def readme_plugin(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The README's plugin, imported as `plugins.questions` (the file it says to save)."""
    module = types.ModuleType("plugins.questions")
    code = readme_files()["plugins/questions.py"]
    exec(compile(code, str(README), "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "plugins.questions", module)
    return module


def test_the_readme_names_both_files() -> None:
    assert sorted(readme_files()) == ["plugins/questions.py", "tests/test_questions.py"]


async def test_the_readme_plugin_example_counts_questions(
    tmp_path: Path, mongo_uri: str, model_dir: Path, readme_plugin: types.ModuleType
) -> None:
    namespace: dict[str, Any] = {}
    code = readme_files()["tests/test_questions.py"]
    exec(compile(code, str(README), "exec"), namespace)
    await namespace["test_questions_are_counted"](tmp_path, mongo_uri, model_dir)


async def test_the_readme_plugin_counts_a_question_once_when_its_job_runs_again(
    tmp_path: Path, model_dir: Path, readme_plugin: types.ModuleType
) -> None:
    example = vars(readme_plugin)
    model = ScriptedModel(
        answers={"reply": ['{"text": "Sure."}'], "evaluator_selection": ['["COUNT_QUESTIONS"]']}
    )
    async with open_test_app(tmp_path, plugins=[example["plugin"]], model=model) as app:
        chat = TestChat(app.runtime)
        result = await chat.say("Where is the station?")
        await chat.settle()
        assert result.job is not None
        job = await app.store.jobs.get(result.job.id)
        assert job is not None and job.ran == ["COUNT_QUESTIONS"]
        # Handed out again, as after a crash before the job was recorded done.
        await app.runtime.evaluator.run_job(job.model_copy(update={"ran": []}))
        assert await app.store.db["plugin_questions_asked"].count_documents({}) == 1

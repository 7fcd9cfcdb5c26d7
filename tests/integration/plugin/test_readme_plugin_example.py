"""The plugin example in the README runs as written: the test executes the README's code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from tests.paths import REPO

README = REPO / "README.md"


def readme_example() -> dict[str, Any]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Write a plugin") : text.index("## Performance")]
    plugin_code, test_code = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict[str, Any] = {}
    prelude = (
        "from bot.testing.harness import TestChat, open_test_app\n"
        "from bot.testing.scripted import ScriptedModel\n"
    )
    exec(compile(prelude + plugin_code + test_code, str(README), "exec"), namespace)
    return namespace


async def test_the_readme_plugin_example_counts_questions(tmp_path: Path, model_dir: Path) -> None:
    example = readme_example()
    await example["test_questions_are_counted"](tmp_path, model_dir)


async def test_the_readme_plugin_counts_a_question_once_when_its_job_runs_again(
    tmp_path: Path, model_dir: Path
) -> None:
    example = readme_example()
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

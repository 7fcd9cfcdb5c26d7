"""The plugin example in the README runs as written: the test executes the README's code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"


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

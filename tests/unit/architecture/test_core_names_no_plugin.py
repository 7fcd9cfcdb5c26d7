"""The core names no built-in plugin: everything a plugin owns is declared by the plugin.

The names are read from the built-in plugins themselves (their plugin, evaluator, action,
provider and command names, their room marks and collections), so a new built-in plugin is
checked without editing this test. A core that dispatched on `GET_FACTS`, repeated the facts
mark or imported a plugin would fail here. Built-in means shipped: tracked by git in
`plugins/`, so a plugin of the operator's own dropped there (the README's "questions") is not
checked against the core.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from bot.domain.records import FactType
from bot.plugin.loading import discover
from tests.helpers.tracked_plugins import tracked_plugin_names
from tests.paths import REPO

CORE = REPO / "bot"
# Words that are also ordinary core vocabulary: facts (claims about people) are Mnemo's own
# memory (bot/memory/store.py, `/facts`), and "recall" is what retrieval does. The kinds of
# fact are the memory's too (`FactType`: a stated aim is a fact of type "goal", whichever
# plugin reads or tracks it). Goals as tracked, with their commands, provider and
# collections, are the goals plugin's alone.
COMMON_WORDS = {"facts", "recall", *get_args(FactType)}


def builtin_names() -> tuple[set[str], set[str]]:
    """(names matched exactly, plugin names matched in any case)."""
    registry = discover(REPO / "plugins", use_entry_points=False)
    shipped = tracked_plugin_names(REPO)
    plugins = [
        plugin
        for plugin in registry.plugins
        if shipped is None or Path(registry.sources[plugin.name]).stem in shipped
    ]
    assert {p.name for p in plugins} >= {"facts", "goals", "recall", "sentiment"}
    exact: set[str] = set()
    for plugin in plugins:
        exact |= {f"plugins.{plugin.name}", f"plugins/{plugin.name}", f"plugin_{plugin.name}_"}
        for part in (*plugin.evaluators, *plugin.actions, *plugin.providers, *plugin.commands):
            exact.add(part.name)
            exact |= set(getattr(part, "similes", ()))
        exact |= {e.idle_mark for e in plugin.evaluators if e.idle_mark}
        # A command as people type it: "/goal" is the plugin's even where "goal" is a word.
        exact |= {f"/{command.name}" for command in plugin.commands}
    for module in (REPO / "plugins").rglob("*.py"):
        top = Path(module.relative_to(REPO / "plugins").parts[0]).stem
        if shipped is not None and top not in shipped and not top.startswith("_"):
            continue  # an operator's own plugin
        # Room marks, old collection names and template names a plugin keeps as constants.
        text = module.read_text(encoding="utf-8")
        exact |= set(
            re.findall(r'^(?:MARK|LEGACY_COLLECTION|TEMPLATE_NAME)\s*=\s*"([^"]+)"', text, re.M)
        )
    anycase = {p.name for p in plugins}
    return exact - COMMON_WORDS, anycase - COMMON_WORDS


def _pattern(names: set[str], flags: int = 0) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w.])({alternatives})(?!\w)", flags)


def test_no_file_under_bot_names_a_builtin_plugin_or_its_data() -> None:
    exact, anycase = builtin_names()
    assert {"GET_FACTS", "UPDATE_GOAL", "CREATE_GOAL", "SENTIMENT", "relevantMessages"} <= exact
    assert {"facts_extracted_at", "goals_checked_at", "plugins.facts", "plugin_goals_"} <= exact
    assert "goals" in exact  # the goals plugin's provider, command and old collection
    assert "goal" in get_args(FactType) and "goal" not in exact  # a fact type: core vocabulary
    assert {"/goal", "/goals"} <= exact  # the plugin's commands, named as such
    assert {"factsTemplate", "goalsTemplate", "sentimentTemplate"} <= exact
    assert anycase == {"followups", "goals", "sentiment"}
    patterns = (_pattern(exact), _pattern(anycase, re.IGNORECASE))
    found = []
    for path in sorted(CORE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for pattern in patterns:
                for match in pattern.finditer(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)}")
    assert found == []

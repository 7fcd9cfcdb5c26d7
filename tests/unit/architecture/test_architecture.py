"""The shape of Mnemo, as contracts on its import graph (grimp, the library behind
import-linter; imports under `TYPE_CHECKING` count: they still tie two designs together).

- `bot/` is layered: a package imports only packages below it in `LAYERS` (or beside it on the
  same line), so the lower layers can be read, tested and replaced without the upper ones.
- No package imports another package's private module (a name starting with `_`).
- Plugins, the built-in ones included, import only the SDK: `bot`, `bot.offline`, `bot.testing`.
- No import cycles anywhere in `bot/`.

A module is as long as its one idea: there is no line limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

from tests.paths import REPO

# Top to bottom. A package may import any package on a lower line, and the utilities.
LAYERS: list[tuple[str, ...]] = [
    ("bot.testing",),
    ("bot.app",),
    ("bot.adapters",),
    ("bot.commands",),
    ("bot.ops",),
    ("bot.runtime",),
    ("bot.privacy",),
    ("bot.plugin",),
    ("bot.memory",),
    ("bot.queue", "bot.knowledge"),
    ("bot.storage",),
    ("bot.llm",),
    ("bot.config",),
    ("bot.domain", "bot.i18n"),
]
# Small modules with no Mnemo imports of their own, usable from every layer.
UTILITIES = {"bot.cancelling", "bot.faults"}
# The SDK (`bot/__init__.py`, `bot/offline.py`) re-exports from the layers; `python -m bot`
# starts the app.
ENTRY_POINTS = {"bot", "bot.__main__", "bot.offline"}
MAX_TOP_LEVEL_MODULES = 10


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("bot", cache_dir=None)


def _package_of(module: str) -> str | None:
    for line in LAYERS:
        for package in line:
            if module == package or module.startswith(package + "."):
                return package
    return None


def _rank(package: str) -> int:
    return next(i for i, line in enumerate(LAYERS) if package in line)


def test_every_module_of_bot_is_in_a_layer(graph: grimp.ImportGraph) -> None:
    lost = sorted(
        m for m in graph.modules if _package_of(m) is None and m not in UTILITIES | ENTRY_POINTS
    )
    assert not lost, f"modules in no layer (add their package to LAYERS): {lost}"


def test_layers_import_only_downwards(graph: grimp.ImportGraph) -> None:
    upward = []
    for importer in sorted(graph.modules):
        low = _package_of(importer)
        if low is None:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            high = _package_of(imported)
            if high is None or high == low:
                continue
            if _rank(high) <= _rank(low):
                upward.append(f"{importer} -> {imported}")
    assert not upward, "imports against the layers (see LAYERS):\n" + "\n".join(upward)


def test_utilities_import_nothing_of_mnemo(graph: grimp.ImportGraph) -> None:
    for utility in UTILITIES:
        assert not graph.find_modules_directly_imported_by(utility), utility


def test_no_package_imports_a_private_module_of_another(graph: grimp.ImportGraph) -> None:
    reaching = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            parts = imported.split(".")
            private = next((i for i, p in enumerate(parts) if p.startswith("_")), None)
            if private is None:
                continue
            owner = ".".join(parts[:private])
            if not importer.startswith(owner + "."):
                reaching.append(f"{importer} -> {imported}")
    assert not reaching, "\n".join(reaching)


def test_no_import_cycles_in_bot(graph: grimp.ImportGraph) -> None:
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert not cycles, "import cycles in bot/:\n" + "\n".join(cycles[:10])


# The runtime is built by the app (and the test harness); everything else is handed the parts
# it uses, named (the command layer: CommandServices; the adapters: AdapterServices), so no
# part reaches the rest through the runtime.
RUNTIME_DRIVERS = ("bot.app.", "bot.testing.")


def test_only_the_app_and_the_harness_import_the_runtime(graph: grimp.ImportGraph) -> None:
    importers = graph.find_modules_that_directly_import("bot.runtime.agent")
    reaching = sorted(m for m in importers if not m.startswith(RUNTIME_DRIVERS))
    assert not reaching, f"hand these the parts they use, not the runtime: {reaching}"


def test_few_modules_directly_under_bot() -> None:
    top = sorted(p.name for p in (REPO / "bot").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


# What a plugin may import of Mnemo: the SDK (`bot`), the offline answers' helpers and the
# test harness. Everything else is Mnemo's own and may change.
PUBLIC_MODULES = {"bot", "bot.offline", "bot.testing"}


def _imports_of(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_plugins_import_only_the_public_api() -> None:
    reaching = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sorted((REPO / "plugins").rglob("*.py"))
        for name in _imports_of(path)
        if name.startswith("bot.")
        and name.split(".")[:2] != ["bot", "testing"]
        and name not in PUBLIC_MODULES
    ]
    assert not reaching, "plugins import only the SDK (export what they need from `bot`):\n" + (
        "\n".join(reaching)
    )

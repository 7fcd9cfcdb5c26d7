"""The shape of `bot/`: no import cycles, and no module over 400 lines without saying why.

The import graph comes from grimp (the library behind import-linter), annotation-only
imports under `TYPE_CHECKING` included: they still tie two modules' designs together. A long
module states its reason in its docstring, on a line starting with `Over 400 lines:`.

Cycles and long modules known today are listed below with who is on them; a new one fails.
An entry is removed from its list once fixed (not enforced, so that the fix lands without
touching this file).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 400
REASON = re.compile(r"^Over 400 lines: \S.{20,}", re.MULTILINE)

# Each known cycle, as the set of modules it runs through, with who removes it.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# Long modules without a stated reason, with who splits them.
KNOWN_LONG: dict[str, str] = {}


def _cycles() -> dict[frozenset[str], tuple[str, ...]]:
    """Every group of modules that import each other (directly or not), with one cycle
    through the group as an example."""
    graph = grimp.build_graph("bot", cache_dir=None)
    examples: list[tuple[str, ...]] = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                examples.append((importer, *back[:-1]))
    # Cycles sharing a module are one group (the strongly connected component).
    groups: list[tuple[set[str], tuple[str, ...]]] = []
    for cycle in examples:
        members, example = set(cycle), cycle
        for group in [g for g in groups if g[0] & members]:
            groups.remove(group)
            members |= group[0]
            example = min(example, group[1], key=len)
        groups.append((members, example))
    return {frozenset(members): example for members, example in groups}


def _long_modules_without_reason() -> dict[str, int]:
    offenders = {}
    for path in sorted((REPO / "bot").rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if not REASON.search(docstring):
            offenders[path.relative_to(REPO).as_posix()] = lines
    return offenders


def test_no_new_import_cycles_in_bot() -> None:
    cycles = _cycles()
    new = [" -> ".join(example) for group, example in cycles.items() if group not in KNOWN_CYCLES]
    assert not new, "import cycles in bot/ (break them, do not list them):\n" + "\n".join(new)


def test_no_new_module_over_400_lines_without_a_reason() -> None:
    offenders = _long_modules_without_reason()
    new = {path: lines for path, lines in offenders.items() if path not in KNOWN_LONG}
    assert not new, (
        f"modules over {MAX_LINES} lines: split them, or say why at the top of the docstring "
        f"('Over 400 lines: ...'): {new}"
    )


def test_the_cycle_check_sees_an_annotation_only_cycle(tmp_path: Path) -> None:
    # The check is only as good as the graph: a cycle through `if TYPE_CHECKING:` counts.
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclic import a\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        graph = grimp.build_graph("cyclic", cache_dir=None)
    assert graph.find_shortest_chain(importer="cyclic.b", imported="cyclic.a") == (
        "cyclic.b",
        "cyclic.a",
    )

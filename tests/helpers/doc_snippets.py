"""The fenced blocks of a Markdown file, each found by the marker comment above it.

A block a test runs carries `<!-- snippet: NAME -->` on the line right above its opening
fence; one no test runs carries `<!-- not run: WHY -->` (an output sample, another tool's
command). Both are invisible where the Markdown is rendered. Tests look a block up by its
name, so moving or rewording the prose around it changes nothing, and a renamed or deleted
snippet fails the test that runs it, naming the file and the marker it looked for.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<language>[\w+-]*)[ \t]*$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>snippet|not run):\s*(?P<what>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it opens, its language, its text (dedented as a list item's
    block is), and the marker above it, if any."""

    doc: Path
    line: int  # of the first line inside the fence, counted from 1
    language: str
    text: str
    marker: str | None  # "snippet" or "not run"
    name: str | None  # the snippet's name, or why it is not run

    @property
    def where(self) -> str:
        return f"{self.doc.name}:{self.line}"


def fenced_blocks(doc: Path) -> list[Block]:
    """Every fenced block of `doc`, in order; raises on a fence left open."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        closing = re.compile(rf"^[ \t]*{opening['fence']}[ \t]*$")
        end = next((i for i in range(index + 1, len(lines)) if closing.match(lines[i])), None)
        if end is None:
            raise AssertionError(f"{doc.name}:{index + 1}: a fenced block is never closed")
        above = _MARKER.match(lines[index - 1]) if index > 0 else None
        body = "\n".join(lines[index + 1 : end])
        blocks.append(
            Block(
                doc=doc,
                line=index + 2,
                language=opening["language"],
                text=textwrap.dedent(body) + "\n",
                marker=above["kind"] if above else None,
                name=above["what"] if above else None,
            )
        )
        index = end + 1
    return blocks


def snippet(doc: Path, name: str) -> Block:
    """The block marked `<!-- snippet: NAME -->`; fails loudly when there is not exactly one."""
    found = [b for b in fenced_blocks(doc) if b.marker == "snippet" and b.name == name]
    if len(found) != 1:
        raise AssertionError(
            f"{doc}: expected one fenced block under `<!-- snippet: {name} -->`, "
            f"found {len(found)}: a test runs it as written, so keep the marker with the block"
        )
    return found[0]


def compiled(block: Block, *, inside: str | None = None, params: Sequence[str] = ()) -> Any:
    """The block's Python, compiled so that a traceback names the doc's own lines, and with
    none of this module's `from __future__` imports (the block runs as a reader's file would).

    With `inside`, the block is the body of `async def <inside>(<params>)`, ending in
    `return locals()`: a fragment of a hook (it uses `ctx`, awaits) runs as that hook would,
    and the test reads the names it bound."""
    if inside is None:
        tree = ast.parse(block.text, filename=str(block.doc))
        ast.increment_lineno(tree, block.line - 1)
        return compile(tree, str(block.doc), "exec", dont_inherit=True)
    body = textwrap.indent(block.text, "    ") + "    return locals()\n"
    source = f"async def {inside}({', '.join(params)}):\n{body}"
    tree = ast.parse(source, filename=str(block.doc))
    # The wrapper's own line sits just above the block's first line.
    ast.increment_lineno(tree, block.line - 2)
    return compile(tree, str(block.doc), "exec", dont_inherit=True)


def run_module(block: Block, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The block run as a module's code; what it defined."""
    names: dict[str, Any] = {"__name__": f"doc_snippet_{block.line}", **(namespace or {})}
    exec(compiled(block), names)
    return names


def last_value(block: Block, namespace: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The block run as a module's code, and the value of its last statement, which must be
    an expression (a schematic `Evaluator(...)`, an example's closing `Command(...)`)."""
    tree = ast.parse(block.text, filename=str(block.doc))
    ast.increment_lineno(tree, block.line - 1)
    *body, last = tree.body
    if not isinstance(last, ast.Expr):
        raise AssertionError(f"{block.where}: the block ends in no expression")
    names: dict[str, Any] = {"__name__": f"doc_snippet_{block.line}", **namespace}
    module = ast.Module(body=body, type_ignores=[])
    exec(compile(module, str(block.doc), "exec", dont_inherit=True), names)
    expression = ast.Expression(body=last.value)
    return eval(compile(expression, str(block.doc), "eval", dont_inherit=True), names), names


def as_hook(
    block: Block, name: str, params: Sequence[str], namespace: dict[str, Any]
) -> Callable[..., Any]:
    """The block as the body of `async def name(*params)`, which returns its local names."""
    names = dict(namespace)
    exec(compiled(block, inside=name, params=params), names)
    hook: Callable[..., Any] = names[name]
    return hook

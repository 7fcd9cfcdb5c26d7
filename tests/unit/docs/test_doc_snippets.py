"""Every fenced block of docs/*.md says whether a test runs it, and the blocks that need
nothing running are checked here: the settings a page names exist, the settings lines load
and mean what the page says, the commands name what exists.

A block a test runs carries `<!-- snippet: NAME -->` and some test looks it up by that name
(`snippet(doc, "NAME")`, tests/helpers/doc_snippets.py); one no test runs carries
`<!-- not run: WHY -->`. A new block without either fails here, so no snippet is added to the
docs without a decision about testing it."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import re
import shlex
import tomllib
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import BaseModel
from pydantic_settings import BaseSettings

from bot.config.base import BUILTIN_PLUGINS
from bot.config.settings import Settings, env_names, load_settings, setting_names
from bot.plugin.loading import discover
from bot.testing.pytest_plugin import MODEL_DIR_VARIABLE, MONGODB_URI_VARIABLE
from tests.helpers.doc_snippets import Block, fenced_blocks, snippet
from tests.paths import REPO, TESTS

DOCS = sorted((REPO / "docs").glob("*.md"))
PLATFORMS_DOC = REPO / "docs" / "platforms.md"
MODELS_DOC = REPO / "docs" / "models.md"
TESTING_DOC = REPO / "docs" / "testing.md"
ARCHITECTURE_DOC = REPO / "docs" / "architecture.md"
# Read by the test tools, not by Mnemo (bot/testing/pytest_plugin.py).
TEST_VARIABLES = {MODEL_DIR_VARIABLE, MONGODB_URI_VARIABLE}


def every_block() -> list[Block]:
    return [block for doc in DOCS for block in fenced_blocks(doc)]


def looked_up_snippets() -> set[str]:
    """The names the suite's tests pass to `snippet(doc, NAME)`."""
    names: set[str] = set()
    for source in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            function = node.func
            called = function.id if isinstance(function, ast.Name) else None
            called = function.attr if isinstance(function, ast.Attribute) else called
            name = node.args[1]
            if called == "snippet" and isinstance(name, ast.Constant):
                names.add(str(name.value))
    return names


def test_every_fenced_block_says_whether_a_test_runs_it() -> None:
    blocks = every_block()
    assert len(blocks) > 40  # the pages were read
    unmarked = [block.where for block in blocks if block.marker is None]
    assert unmarked == [], "mark each: <!-- snippet: NAME --> or <!-- not run: WHY -->"
    assert [block.where for block in blocks if not block.name] == []


def test_every_snippet_is_run_by_a_test_that_looks_it_up_by_its_name() -> None:
    named = Counter(block.name for block in every_block() if block.marker == "snippet")
    assert [name for name, count in named.items() if count > 1] == []  # names say which
    looked_up = looked_up_snippets()
    assert sorted(set(named) - looked_up) == [], "marked as run, and no test looks it up"
    assert sorted(looked_up - set(named)) == [], "looked up, and no page has it"


# ---------------------------------------------------------------------- settings named
def plugin_settings_models() -> list[type[BaseSettings]]:
    """The settings models of the built-in plugins and of the template the docs copy."""
    registry = discover(BUILTIN_PLUGINS, use_entry_points=False)
    template = BUILTIN_PLUGINS / "_template.py"
    spec = importlib.util.spec_from_file_location("mnemo_docs_template", template)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plugins = [*registry.plugins, module.plugin]
    return [p.settings_model for p in plugins if p.settings_model is not None]  # type: ignore[misc]


def test_every_mnemo_setting_the_docs_name_is_one_mnemo_reads() -> None:
    known = setting_names(plugin_settings_models()) | TEST_VARIABLES
    unknown: dict[str, list[str]] = {}
    for page in [*DOCS, REPO / "README.md", REPO / ".env.example"]:
        for name in set(re.findall(r"\bMNEMO_[A-Z0-9_]*", page.read_text(encoding="utf-8"))):
            # `MNEMO_SENTIMENT_` names a prefix: some setting must carry it.
            if name.endswith("_") and any(k.startswith(name) for k in known):
                continue
            if name not in known:
                unknown.setdefault(page.name, []).append(name)
    assert unknown == {}


# ---------------------------------------------------------------------- models.md's table
def field_of(name: str) -> tuple[type[BaseModel], str]:
    for group in dataclasses.fields(Settings):
        cls = group.type if isinstance(group.type, type) else None
        cls = cls or _group_class(group.name)
        if cls is None:
            continue
        for field in cls.model_fields:
            if name in env_names(cls, field):  # type: ignore[arg-type]
                return cls, field
    raise AssertionError(f"{name} is not a setting Mnemo reads")


def _group_class(group: str) -> type[BaseModel] | None:
    settings = load_settings(None)
    value = getattr(settings, group)
    return type(value) if isinstance(value, BaseModel) else None


def default_of(name: str) -> object:
    cls, field = field_of(name)
    info = cls.model_fields[field]
    return info.get_default(call_default_factory=True)


def shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_models_table_shows_each_setting_s_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO.parent)  # no .env
    text = MODELS_DOC.read_text(encoding="utf-8")
    table = text[text.index("| setting | meaning | default |") : text.index("`mnemo doctor`")]
    checked = 0
    for row in table.splitlines()[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        defaults = re.findall(r"`([^`]+)`", cells[-1])
        if cells[-1].startswith(("unset", "empty", "OpenAI's")):
            for name in names:
                assert not default_of(name), name  # nothing set: none, or the client's own
                checked += 1
            continue
        assert len(defaults) == len(names), row
        for name, default in zip(names, defaults, strict=True):
            assert shown(default_of(name)) == default, name
            checked += 1
    assert checked >= 18


# ---------------------------------------------------------------------- platforms.md
def loaded(block: Block, folder: Path) -> Settings:
    env_file = folder / ".env"
    env_file.write_text(block.text)
    return load_settings(env_file)


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A folder of its own, and none of this machine's Mnemo settings."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "MNEMO_", "DISCORD_", "TELEGRAM_")) and (
            name not in TEST_VARIABLES
        ):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_admin_ids_line_makes_those_people_admins_on_their_platforms(shell: Path) -> None:
    settings = loaded(snippet(PLATFORMS_DOC, "admin-ids"), shell).platforms
    assert settings.admin_ids_for("discord") == {"123456789012345678"}
    assert settings.admin_ids_for("telegram") == {"987654321"}


def test_the_run_both_env_file_configures_both_platforms_and_the_model(shell: Path) -> None:
    settings = loaded(snippet(PLATFORMS_DOC, "run-both-env"), shell)
    assert settings.platforms.discord_token is not None
    assert settings.platforms.telegram_token is not None
    assert settings.platforms.admin_ids_for("discord") == {"123456789012345678"}
    assert settings.model.openai_api_key is not None and not settings.model.offline


def test_the_discord_invite_url_asks_for_the_scopes_and_permissions_the_page_adds_up() -> None:
    url = urlsplit(snippet(PLATFORMS_DOC, "discord-invite").text.strip())
    query = parse_qs(url.query)
    assert (url.scheme, url.netloc, url.path) == ("https", "discord.com", "/oauth2/authorize")
    assert query["scope"] == ["bot applications.commands"]
    text = PLATFORMS_DOC.read_text(encoding="utf-8")
    [bits] = re.findall(r"value in the invite URL is the sum.*?:\s+([0-9 +]+?) =", text, re.S)
    total = sum(int(bit) for bit in bits.split("+"))
    assert query["permissions"] == [str(total)]


# ---------------------------------------------------------------------- testing.md
def test_the_test_commands_name_paths_and_markers_that_exist() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    markers = {m.split(":")[0] for m in pyproject["tool"]["pytest"]["ini_options"]["markers"]}
    commands = [
        shlex.split(line, comments=True)
        for line in snippet(TESTING_DOC, "test-commands").text.splitlines()
    ]
    assert len(commands) >= 4
    for words in commands:
        assert words[:4] == [".venv/bin/python", "-m", "pytest", "-q"], words
        rest = words[4:]
        if rest[:1] == ["-m"]:
            used = set(re.findall(r"\w+", rest[1])) - {"and", "or", "not"}
            assert used <= markers, rest[1]
        else:
            assert all((REPO / path).exists() for path in rest), rest


# ---------------------------------------------------------------------- architecture.md
def test_the_package_tree_names_files_and_folders_that_exist() -> None:
    """Each entry of the tree is a file or folder where the tree puts it, and each module its
    description names (`composition.py`) is in that folder."""
    missing: list[str] = []
    parents: list[tuple[int, Path]] = []
    for line in snippet(ARCHITECTURE_DOC, "package-tree").text.splitlines():
        entry = re.match(r"(?P<indent> *)(?P<name>[\w.]+/?)(?: {2,}(?P<text>.*))?$", line)
        if entry is None or (not entry["indent"] and line.startswith(" ")):
            # A description's continuation: it belongs to the entry above.
            text, where = line, parents[-1][1] if parents else REPO
        else:
            depth = len(entry["indent"])
            parents = [(d, p) for d, p in parents if d < depth]
            base = parents[-1][1] if parents else REPO
            path = base / entry["name"].rstrip("/")
            if not path.exists():
                missing.append(str(path.relative_to(REPO)))
            if entry["name"].endswith("/"):
                parents.append((depth, path))
            text, where = entry["text"] or "", path if path.is_dir() else path.parent
        for module in re.findall(r"\b[a-z_]+\.py\b", text):
            if not list(where.rglob(module)):
                missing.append(f"{where.relative_to(REPO)}/{module}")
    assert missing == []

"""docs/models.md's settings blocks mean what the page says: each block is read from the page
(by the `<!-- snippet: NAME -->` above it), its `NAME=value` lines written to a `.env` as a
reader pastes them, and the settings Mnemo reads from it hold those values. Then a running
Mnemo, pointed at a local OpenAI-compatible server in place of the block's endpoint, sends its
reply to the LARGE model the block names and a plugin's SMALL call to the SMALL one, with the
block's key, or with none where the block sets none.

The other programs the blocks start (ollama, llama.cpp's and vLLM's servers) are not installed
here and need model weights: each block's other lines must be one of those, so no line of
Mnemo's own is left unchecked."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from benchmarks.cli import build_parser
from benchmarks.memory import DEFAULT_DATA, load_conversations
from bot import Context, Evaluator, ModelClass, Plugin
from bot.config.settings import Settings, env_names, load_settings
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.openai_server import DEFAULT_REPLY, FakeOpenAIServer
from tests.helpers.doc_snippets import Block, snippet
from tests.paths import REPO

MODELS_DOC = REPO / "docs" / "models.md"
# The blocks that configure an endpoint, and the programs of other projects they start. Read
# when the module is collected: a block gone from the page is a collection error naming it.
SETTINGS_BLOCKS = [
    pytest.param(snippet(MODELS_DOC, "openai"), set(), id="openai"),
    pytest.param(snippet(MODELS_DOC, "compatible-provider"), set(), id="compatible-provider"),
    pytest.param(snippet(MODELS_DOC, "ollama"), {"ollama"}, id="ollama"),
    pytest.param(snippet(MODELS_DOC, "llama-cpp"), {"llama-server", "python"}, id="llama-cpp"),
    pytest.param(snippet(MODELS_DOC, "vllm"), {"vllm"}, id="vllm"),
]
_ASSIGNMENT = re.compile(r"(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class ShellLine:
    settings: dict[str, str]  # NAME=value words before the command (or alone)
    command: list[str]  # the program and its arguments; empty for settings alone


def shell_lines(block: Block) -> list[ShellLine]:
    """Each command line of a `sh` block, continuation lines joined, comments left out."""
    joined = block.text.replace("\\\n", " ")
    lines = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        settings: dict[str, str] = {}
        while words and (assignment := _ASSIGNMENT.fullmatch(words[0])):
            settings[assignment["name"]] = assignment["value"]
            words.pop(0)
        lines.append(ShellLine(settings, words))
    return lines


def block_settings(block: Block) -> tuple[dict[str, str], set[str]]:
    """The block's settings lines, and the programs its other lines run."""
    settings: dict[str, str] = {}
    programs: set[str] = set()
    for line in shell_lines(block):
        if line.command:
            programs.add(line.command[0])
        settings.update(line.settings)
    return settings, programs


def pasted_into_env_file(block: Block, base_url: str) -> str:
    """The block's settings lines as a reader pastes them into `.env` (their comments too),
    the endpoint's line pointing at `base_url` instead (added where the block means OpenAI's,
    which a test never reaches); its command lines are for another program's shell."""
    lines = []
    for line in block.text.splitlines():
        parsed = shell_lines(dataclasses.replace(block, text=line + "\n"))
        if not parsed or parsed[0].command:
            continue
        lines.append(
            f"OPENAI_BASE_URL={base_url}" if "OPENAI_BASE_URL" in parsed[0].settings else line
        )
    if not any(line.startswith("OPENAI_BASE_URL=") for line in lines):
        lines.append(f"OPENAI_BASE_URL={base_url}")
    return "\n".join(lines) + "\n"


def read_back(settings: Settings, name: str) -> object:
    """The value of the setting `name` as Mnemo holds it, whichever group reads it."""
    for group in dataclasses.fields(Settings):
        values = getattr(settings, group.name)
        if not isinstance(values, BaseModel):
            continue
        for field in type(values).model_fields:
            if name in env_names(type(values), field):  # type: ignore[arg-type]
                value = getattr(values, field)
                return value.get_secret_value() if isinstance(value, SecretStr) else value
    raise AssertionError(f"{name} is not a setting Mnemo reads")


def same(held: object, written: str) -> bool:
    if isinstance(held, bool):
        return held == (written.lower() in {"1", "true", "yes", "on"})
    if isinstance(held, int | float):
        return held == float(written)
    return held == written


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A shell with no model settings of this machine's, in a folder of its own."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "MNEMO_")) and not name.startswith("MNEMO_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def small_caller(asked: list[str]) -> Plugin:
    """A plugin whose evaluator makes one SMALL call, as a plugin's cheap judgement does."""

    async def handler(ctx: Context, found: object) -> None:
        asked.append(await ctx.model.generate("Is this a question?", model_class=ModelClass.SMALL))

    judge = Evaluator("JUDGE", "Judges a message.", handler=handler, always_run=True)
    return Plugin("judge", evaluators=[judge])


@pytest.mark.parametrize(("block", "other_programs"), SETTINGS_BLOCKS)
async def test_a_settings_block_points_mnemo_at_its_endpoint_and_models(
    block: Block, other_programs: set[str], clean_environment: Path, mongo_uri: str, model_dir: Path
) -> None:
    written, programs = block_settings(block)
    assert programs == other_programs, "a line of the block is neither a setting nor known"
    assert "MNEMO_LARGE_MODEL" in written and "MNEMO_SMALL_MODEL" in written
    async with FakeOpenAIServer() as server:
        # The endpoint the block names is where the reader's server listens; ours is here.
        pasted = {**written, "OPENAI_BASE_URL": server.base_url}
        env_file = clean_environment / ".env"
        env_file.write_text(pasted_into_env_file(block, server.base_url))
        loaded = load_settings(env_file)
        for key, value in pasted.items():
            assert same(read_back(loaded, key), value), f"{key}={value} read as something else"
        settings = dataclasses.replace(
            test_settings(clean_environment / "data", mongodb_uri=mongo_uri, model_dir=model_dir),
            model=loaded.model,
        )
        asked: list[str] = []
        async with open_test_app(
            clean_environment / "data", plugins=[small_caller(asked)], settings=settings
        ) as app:
            assert not app.offline
            chat = TestChat(app.runtime)
            await chat.say("Hi, I'm Sarah.")
            await chat.settle()
    assert chat.replies == [DEFAULT_REPLY]
    assert asked == [DEFAULT_REPLY]
    models = [request.json["model"] for request in server.chat_requests]
    assert models == [pasted["MNEMO_LARGE_MODEL"], pasted["MNEMO_SMALL_MODEL"]]
    keys = {request.headers.get("authorization") for request in server.chat_requests}
    if "OPENAI_API_KEY" in pasted:
        assert keys == {f"Bearer {pasted['OPENAI_API_KEY']}"}
    else:
        assert len(keys) == 1  # no key is needed: the calls went without the reader's


def test_checking_a_model_runs_the_memory_benchmark_on_the_conversations_it_names(
    clean_environment: Path,
) -> None:
    """The block's environment loads as Mnemo's settings, and its command line is the
    benchmark's: `mnemo bench memory` takes the options, and every conversation it names is
    in the benchmark's data (`--only` refuses a name that is not)."""
    [line] = shell_lines(snippet(MODELS_DOC, "checking-a-model"))
    nice, *niced = line.command
    assert nice == "nice" and niced[:2] == ["-n", "10"]
    program, bench, *arguments = niced[2:]
    assert (program, bench) == ("mnemo", "bench")
    env_file = clean_environment / ".env"
    env_file.write_text("".join(f"{key}={value}\n" for key, value in line.settings.items()))
    loaded = load_settings(env_file)
    for key, value in line.settings.items():
        assert same(read_back(loaded, key), value), key
    args = build_parser().parse_args(arguments)
    assert args.part == "memory"
    known = {conversation.name for conversation in load_conversations(DEFAULT_DATA)}
    assert set(args.memory_only.split(",")) <= known

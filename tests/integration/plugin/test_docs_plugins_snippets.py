"""docs/plugins.md's code runs as written: each fenced block is read from the page (by the
`<!-- snippet: NAME -->` above it), run as a plugin author would use it (a part built and
loaded through the real registry into a real app, a hook's fragment run as that hook, the
test example run against the page's own template), and checked to do what the page says.

A schematic block (the contract, Evaluator, Provider, Action) binds its free names to small
working stand-ins; everything it spells out (keywords, defaults, calls) is the page's."""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
import tomllib
import types
import typing
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic_settings import BaseSettings, SettingsConfigDict

import bot
from bot import (
    Action,
    Command,
    Content,
    Context,
    Evaluator,
    ModelClass,
    ModelError,
    Plugin,
    Provider,
    Task,
    TaskContext,
)
from bot.commands.command_set import Commands
from bot.domain.records import Room
from bot.plugin.loading import discover
from bot.testing.harness import TestChat, open_test_app, test_settings
from bot.testing.scripted import ScriptedModel
from plugins.sentiment.settings import SentimentSettings
from tests.helpers.doc_snippets import Block, as_hook, compiled, last_value, run_module, snippet
from tests.helpers.world_choice import allowing, ask
from tests.paths import REPO

PLUGINS_DOC = REPO / "docs" / "plugins.md"
REPLY = json.dumps({"text": "Noted.", "action": "NONE"})
# The public API as a plugin module sees it after `from bot import ...` of every name.
BOT = {name: getattr(bot, name) for name in bot.__all__}


def call_of(code: Block, callee: str) -> ast.Call:
    """The one call of `callee` at the top of the block."""
    calls = [
        node
        for node in ast.walk(ast.parse(code.text))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == callee
    ]
    assert calls, f"{code.where}: no {callee}(...) call"
    return calls[0]


def shown_defaults(code: Block, part: type) -> dict[str, object]:
    """The keywords the block shows with a plain value (True, False, None, an empty tuple)
    for a field that has a default: the page presents those as the defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(part)}
    shown: dict[str, object] = {}
    for keyword in call_of(code, part.__name__).keywords:
        if keyword.arg is None or defaults.get(keyword.arg) is dataclasses.MISSING:
            continue
        try:
            value = ast.literal_eval(keyword.value)
        except ValueError:
            continue  # a name: the stand-in for a hook of the reader's
        if value is None or isinstance(value, bool) or value == ():
            shown[keyword.arg] = value
    return shown


def evaluate(code: Block, namespace: dict[str, Any]) -> Any:
    """The block's closing expression (a schematic `Part(...)`), with the API's names and the
    stand-ins bound."""
    value, _ = last_value(code, {**BOT, **namespace})
    return value


def chat_model(answers: dict[str, list[str | BaseException]] | None = None) -> ScriptedModel:
    """Replies scripted; `answers` for the other tasks a test calls."""
    return ScriptedModel(answers={"reply": [REPLY], **(answers or {})})


async def _found(ctx: Context) -> bool:
    return True


# ---------------------------------------------------------------------- the contract
def test_the_contract_names_every_part_a_plugin_has_and_builds_one(tmp_path: Path) -> None:
    contract = snippet(PLUGINS_DOC, "plugin-contract")
    keywords = {k.arg for k in call_of(contract, "Plugin").keywords}
    assert keywords == {f.name for f in dataclasses.fields(Plugin)}

    async def hook(*args: object) -> None:
        return None

    stand_ins: dict[str, object] = {
        name: hook for name in ("setup", "teardown", "forget", "export", "stats")
    }
    stand_ins |= {"about": hook, "learned": hook, "run": hook, "f": lambda request: None}
    # The plugin's folder, with the character file the page names (the archivist's persona).
    (tmp_path / "pirate.json").write_bytes((REPO / "characters" / "archivist.json").read_bytes())
    stand_ins |= {"MySettings": SentimentSettings, "HERE": tmp_path}
    # As written, with only its own import: it builds a Plugin (its lists hold `...`).
    built, names = last_value(contract, stand_ins)
    assert "Plugin" in names and "load_character" in names and "Task" in names
    assert isinstance(built, Plugin) and built.name == "questions"
    assert [c.name for c in built.characters] == ["Archivist"]
    assert [t.name for t in built.tasks] == ["nudge"]


# ---------------------------------------------------------------------- Evaluator
async def test_the_evaluator_block_is_an_evaluator_that_runs_after_a_message(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    code = snippet(PLUGINS_DOC, "evaluator")
    seen: list[tuple[str, object]] = []

    async def handler(ctx: Context, found: object) -> None:
        seen.append((ctx.message.content.text, found))

    evaluator = evaluate(
        code,
        {
            "handler": handler,
            "validate": _found,
            "context": "{{user1}} asks.",
            "user": "{{user1}}",
            "text": "Where's the station?",
            "outcome": "1",
            "answer": lambda request: None,
        },
    )
    assert isinstance(evaluator, Evaluator) and evaluator.name == "COUNT_QUESTIONS"
    defaults = {f.name: f.default for f in dataclasses.fields(Evaluator)}
    shown = shown_defaults(code, Evaluator)
    assert set(shown) >= {"always_run", "idle_mark", "reads_edits", "uses_model"}
    assert shown == {name: defaults[name] for name in shown}
    plugin = Plugin("questions", evaluators=[evaluator])
    async with open_test_app(
        tmp_path, plugins=[plugin], model=chat_model(), mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime)
        await chat.say("Where is the station?")
        await chat.settle()
    # A lone candidate is named without asking the model; its handler gets what validate found.
    assert seen == [("Where is the station?", True)]


# ---------------------------------------------------------------------- Provider
async def test_the_provider_block_puts_its_text_into_the_reply_s_state(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async def get(ctx: Context) -> str:
        return "It is sunny in Lisbon."

    provider = evaluate(snippet(PLUGINS_DOC, "provider"), {"get": get})
    assert isinstance(provider, Provider)
    model = chat_model()
    async with open_test_app(
        tmp_path,
        plugins=[Plugin("weather", providers=[provider])],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        await TestChat(app.runtime).say("How is the weather?")
    [reply] = model.calls_for("reply")
    assert reply.state is not None and reply.state.values["weather"] == "It is sunny in Lisbon."
    assert "It is sunny in Lisbon." in f"{reply.system}\n{reply.prompt}"


# ---------------------------------------------------------------------- Action
async def test_the_action_block_runs_when_the_reply_names_it(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    code = snippet(PLUGINS_DOC, "action")
    ran: list[str] = []

    async def handler(ctx: Context) -> None:
        ran.append(ctx.message.content.text)
        await ctx.callback(Content(text="I will remind you."))

    action = evaluate(code, {"handler": handler, "validate": _found})
    assert isinstance(action, Action) and action.name == "REMIND_ME"
    defaults = {f.name: f.default for f in dataclasses.fields(Action)}
    shown = shown_defaults(code, Action)
    assert set(shown) == {"similes", "examples", "suppress_initial_message", "offline"}
    assert shown == {name: defaults[name] for name in shown}
    model = chat_model({"reply": [json.dumps({"text": "Sure.", "action": "REMIND_ME"})]})
    async with open_test_app(
        tmp_path,
        plugins=[Plugin("reminders", actions=[action])],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chat = TestChat(app.runtime)
        await chat.say("Remind me to call mum")
    assert ran == ["Remind me to call mum"]
    assert chat.replies == ["Sure.", "I will remind you."]


# ---------------------------------------------------------------------- Command
async def test_the_command_block_answers_admins_and_refuses_others(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    code = snippet(PLUGINS_DOC, "command")
    command = evaluate(code, {})
    assert isinstance(command, Command) and command.admin_only and command.after_learning

    async def forget(ctx: object, person_id: str, world_id: str) -> int:
        return 0

    async def export(ctx: object, person_id: str, world_id: str) -> dict[str, Any]:
        return {}

    plugin = Plugin(
        "sentiment", commands=[command], stores=["scores"], forget=forget, export=export
    )
    async with open_test_app(
        tmp_path, plugins=[plugin], model=chat_model(), mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, world="guild", chat="general", kind="group")
        scores = app.store.db["plugin_sentiment_scores"]
        await scores.insert_many(
            [
                {"_id": "a", "world_id": chat.room.world_id},
                {"_id": "b", "world_id": chat.room.world_id},
                {"_id": "c", "world_id": "elsewhere"},
            ]
        )
        host = app.runtime.plugins
        found = host.find_command("sentiment")
        assert found is command
        where = {"account_id": chat.account.id, "world_id": chat.room.world_id}
        where["room_id"] = chat.room.id
        admin = await host.run_command(found, is_admin=True, **where)
        member = await host.run_command(found, is_admin=False, **where)
    assert admin == "2 people scored here."
    assert member != admin and "admin" in member.lower()


# ---------------------------------------------------------------------- Settings
def test_the_settings_block_reads_what_its_comments_say(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code = snippet(PLUGINS_DOC, "settings")
    monkeypatch.chdir(tmp_path)  # no .env of the checkout's
    names = run_module(
        code,
        {
            "BaseSettings": BaseSettings,
            "SettingsConfigDict": SettingsConfigDict,
            "Literal": Literal,
        },
    )
    shown = names["SentimentSettings"]
    # Its defaults are the sentiment plugin's own, under the same prefix.
    assert shown.model_config["env_prefix"] == SentimentSettings.model_config["env_prefix"]
    for field, info in shown.model_fields.items():
        assert SentimentSettings.model_fields[field].default == info.default, field
    # Each `# NAME=value` comment, set in the environment, gives that value.
    settings = _commented_settings(code)
    assert set(settings) == {"MNEMO_SENTIMENT_MODEL_CLASS", "MNEMO_SENTIMENT_MIN_CHARS"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    read = shown()
    assert read.model_class == "large" and read.min_chars == 10
    assert SentimentSettings().model_class == "large" and SentimentSettings().min_chars == 10


def _commented_settings(code: Block) -> dict[str, str]:
    pairs = {}
    for line in code.text.splitlines():
        _, hash_, comment = line.partition("#")
        name, equals, value = comment.strip().partition("=")
        if hash_ and equals and name.startswith("MNEMO_"):
            pairs[name] = value
    return pairs


# ---------------------------------------------------------------------- Timed tasks
def _task_plugin(name: str, run: Callable[[TaskContext], Awaitable[Any]]) -> Plugin:
    return Plugin(name, tasks=[Task(name, 3600, run)])


async def test_rooms_send_sends_into_the_room_and_says_why_not(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    code = snippet(PLUGINS_DOC, "rooms-send")
    fragment = as_hook(code, "send_one", ["ctx", "room_id", "person_id"], BOT)
    # The comment under the call lists what it returns: the API's own Delivery values.
    listed = code.text.splitlines()[-1].lstrip("# ").split(" | ")
    assert {value.strip('"') for value in listed} == set(typing.get_args(bot.Delivery))
    deliveries: list[str] = []
    target: dict[str, str] = {}

    async def run(ctx: TaskContext) -> None:
        done = await fragment(ctx, target["room"], target["person"])
        deliveries.append(done["delivery"])

    shown: dict[str, list[str]] = {}

    def sender(room: Room) -> Callable[[Content], Awaitable[None]]:
        async def send(content: Content) -> None:
            shown.setdefault(room.id, []).append(content.text)

        return send

    async with open_test_app(
        tmp_path,
        plugins=[_task_plugin("exam", run)],
        model=chat_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chat = TestChat(app.runtime)
        await chat.say("My exam is on Friday")
        target.update(room=chat.room.id, person=chat.account.id)
        await app.runtime.plugins.run_tasks()  # no platform connected in this process
        app.runtime.plugins.rooms.connect("test", sender)
        await app.runtime.plugins.run_tasks()
        target["room"] = "test:no-such-room"
        await app.runtime.plugins.run_tasks()
        stored = await app.store.memories.recent(chat.room.id, 10)
    assert deliveries == ["not_connected", "sent", "no_room"]
    assert shown == {chat.room.id: ["How did the exam go?"]}
    assert "How did the exam go?" in [m.content.text for m in stored]


async def test_a_world_voice_speaks_as_the_world_s_character_with_its_model(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    fragment = as_hook(
        snippet(PLUGINS_DOC, "world-voice"),
        "speak",
        ["ctx", "world_id"],
        {**BOT, "MY_TEMPLATE": "Greet the room as {{agentName}}."},
    )
    spoken: list[dict[str, Any]] = []
    world: dict[str, str] = {}

    async def run(ctx: TaskContext) -> None:
        spoken.append(await fragment(ctx, world["id"]))

    model = chat_model({"task:greet": ["Greetings, readers."], "model_check": ["OK"]})
    settings = allowing(
        test_settings(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir), "gpt-x"
    )
    async with open_test_app(
        tmp_path, plugins=[_task_plugin("greet", run)], model=model, settings=settings
    ) as app:
        chat = TestChat(app.runtime, world="guild", chat="general", kind="group")
        world["id"] = chat.room.world_id
        commands = Commands(app.commands)
        assert (await commands.run("character", ask(chat, "archivist"))).text.endswith("Archivist.")
        chosen = await commands.run("model", ask(chat, "large gpt-x"))
        assert chosen.text.startswith("Here the large model is now gpt-x")
        await app.runtime.plugins.run_tasks()
    [done] = spoken
    assert done["voice"].world_id == chat.room.world_id
    assert done["voice"].agent.name == "Archivist"
    assert done["prompt"] == "Greet the room as Archivist."
    assert done["text"] == "Greetings, readers."
    [call] = model.calls_for("task:greet")
    assert call.model_class == ModelClass.LARGE and call.model_name == "gpt-x"


# ---------------------------------------------------------------------- Proposing facts
async def test_a_proposed_claim_is_stored_as_a_fact_about_its_speaker(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    code = snippet(PLUGINS_DOC, "claims")
    fragment = as_hook(code, "propose", ["ctx", "message"], BOT)
    outcomes: list[dict[str, Any]] = []

    async def handler(ctx: Context, found: object) -> None:
        outcomes.append(await fragment(ctx, ctx.message))

    evaluator = Evaluator("HOME_CITY", "Where people live.", handler=handler, always_run=True)
    async with open_test_app(
        tmp_path,
        plugins=[Plugin("homes", evaluators=[evaluator])],
        model=chat_model(),
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        sofia = TestChat(app.runtime, name="Sofía")
        await sofia.say("vivo en Málaga desde marzo")
        await sofia.settle()
        facts = await app.store.facts.about([sofia.account.id], sofia.room.world_id)
    [outcome] = outcomes
    learned = outcome["learned"]
    # The comment's three fields are what the proposal says.
    assert [fact.text for fact in learned.stored] == ["Sofía lives in Málaga"]
    assert learned.closed == [] and not learned.rejected
    assert [fact.text for fact in facts] == ["Sofía lives in Málaga"]


# ---------------------------------------------------------------------- Calling the model
async def test_calling_the_model_reads_an_answer_counts_an_unreadable_one_and_survives_a_failure(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    code = snippet(PLUGINS_DOC, "calling-the-model")
    namespace = {**BOT, "SENTIMENT_TEMPLATE": "Score the tone of: {{text}}"}
    fragment = as_hook(code, "score", ["ctx", "values"], namespace)
    outcomes: list[dict[str, Any] | None] = []

    async def handler(ctx: Context, found: object) -> None:
        outcomes.append(await fragment(ctx, {"text": ctx.message.content.text}))

    evaluator = Evaluator("SENTIMENT", "The tone of a message.", handler=handler, always_run=True)
    model = chat_model({"evaluator:SENTIMENT": ['{"score": 0.5,}', "no idea", ModelError("down")]})
    async with open_test_app(
        tmp_path,
        plugins=[Plugin("tone", evaluators=[evaluator])],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        chat = TestChat(app.runtime)
        for text in ("I love this", "Hmm", "Whatever"):
            await chat.say(text)
            await chat.settle()
        rejects = app.ledger.rejects("evaluator:SENTIMENT")
    first, second, third = outcomes
    assert first is not None and first["answer"] == {"score": 0.5}  # trailing comma repaired
    assert second is not None and second["answer"] is None
    assert third is None  # the model was down: returned, nothing raised
    assert rejects == {"unreadable answer": 1}
    calls = model.calls_for("evaluator:SENTIMENT")
    assert [call.prompt for call in calls] == [
        "Score the tone of: I love this",
        "Score the tone of: Hmm",
        "Score the tone of: Whatever",
    ]
    assert {call.model_class for call in calls} == {ModelClass.SMALL}


# ---------------------------------------------------------------------- Offline answers
async def test_an_offline_answer_answers_its_evaluator_without_a_model(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    names = run_module(snippet(PLUGINS_DOC, "offline-answer"))
    answers: list[str] = []

    async def handler(ctx: Context, found: object) -> None:
        prompt = f"Score: {ctx.message.content.text}"
        answers.append(await ctx.model.generate(prompt, state=ctx.state))

    evaluator = Evaluator(
        "MOOD", "The tone.", handler=handler, always_run=True, offline=names["answer"]
    )
    # No model given and no key set: the offline model answers, from the plugins' answers.
    async with open_test_app(
        tmp_path,
        plugins=[Plugin("mood", evaluators=[evaluator])],
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
    ) as app:
        assert app.offline
        chat = TestChat(app.runtime)
        for text in ("I love it", "It rained"):
            await chat.say(text)
            await chat.settle()
    assert [json.loads(answer) for answer in answers] == [{"score": 0.5}, {"score": 0.0}]


# ---------------------------------------------------------------------- The test example
async def test_the_testing_example_passes_against_the_page_s_template(
    tmp_path: Path, mongo_uri: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page says to copy plugins/_template.py to plugins/my_evaluator.py: its copy of the
    template, imported as that module, and its test run on it."""
    module = types.ModuleType("plugins.my_evaluator")
    exec(compiled(snippet(PLUGINS_DOC, "template")), module.__dict__)
    monkeypatch.setitem(sys.modules, "plugins.my_evaluator", module)
    names = run_module(snippet(PLUGINS_DOC, "test"))
    await names["test_questions_are_counted"](tmp_path, mongo_uri, model_dir)


# ---------------------------------------------------------------------- Entry points
@pytest.mark.parametrize("form", ["module", "object"])
def test_an_installed_package_s_entry_point_loads_its_plugin(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's `pyproject.toml` lines, as pip writes them into the installed package's
    metadata: the module form, and the `module:object` form its comment offers."""
    code = snippet(PLUGINS_DOC, "entry-points")
    text = code.text if form == "module" else _uncommented(code.text)
    [(name, target)] = tomllib.loads(text)["project"]["entry-points"]["mnemo.plugins"].items()
    package = tmp_path / "site"
    (package / "mnemo_weather").mkdir(parents=True)
    (package / "mnemo_weather" / "__init__.py").write_text("from .core import plugin\n")
    (package / "mnemo_weather" / "core.py").write_text(
        'from bot import Plugin\n\nplugin = Plugin("weather", description="The weather.")\n'
    )
    info = package / "mnemo_weather-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mnemo-weather\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[mnemo.plugins]\n{name} = {target}\n")
    monkeypatch.syspath_prepend(str(package))
    for loaded in [m for m in sys.modules if m.startswith("mnemo_weather")]:
        monkeypatch.delitem(sys.modules, loaded)
    registry = discover(tmp_path / "no-folder")
    assert [plugin.name for plugin in registry.plugins] == ["weather"]
    assert registry.sources["weather"] == f"entry point weather = {target}"
    assert registry.loaded_from() == "weather (installed package)"
    # MNEMO_DISABLED_PLUGINS applies to these too.
    assert discover(tmp_path / "no-folder", disabled=["weather"]).plugins == []


def _uncommented(text: str) -> str:
    """The alternative the block offers in a comment, in place of the line above it."""
    lines = text.splitlines()
    [alternative] = [i for i, line in enumerate(lines) if line.startswith("# weather =")]
    lines[alternative - 1] = lines[alternative].removeprefix("# ")
    del lines[alternative]
    return "\n".join(lines) + "\n"

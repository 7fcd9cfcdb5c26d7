"""A character and model per world (issue 21.3): an admin's `/character` and `/model` change
what the bot is and which models it calls in their server or group only; the choice is kept
in MongoDB (a restart and a backup keep it) and shown in `/stats` and `/help`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bot import Character, Evaluator, Plugin
from bot.app.prompt_texts import grounding_for
from bot.commands.command_set import Commands
from bot.commands.world_choice import NO_MODEL_CHOICES
from bot.domain.characters import CharacterCatalog, InstalledCharacter, load_character
from bot.knowledge.messages import MessageIndex
from bot.llm.base import ModelClass, Task
from bot.memory.store import Knowledge
from bot.ops.backup import backup, restore
from bot.plugin.checks import PluginError
from bot.plugin.loading import Registry
from bot.runtime.worlds import WorldChoices
from bot.storage.mongo import MongoStore
from bot.testing.harness import DEFAULT_CHARACTER, TestChat, open_test_app, test_settings
from bot.testing.openai_server import FakeOpenAIServer, status
from bot.testing.scripted import ScriptedModel
from tests.helpers.processes import mnemo
from tests.helpers.world_choice import HELLO, allowing, ask, with_endpoint
from tests.paths import REPO

ARCHIVIST = load_character(REPO / "characters" / "archivist.json")
MNEMO = load_character(DEFAULT_CHARACTER)


def systems(model: ScriptedModel) -> list[str]:
    return [call.system or "" for call in model.calls_for(Task.REPLY)]


async def test_a_character_chosen_in_one_server_speaks_there_and_not_in_another(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [HELLO] * 10})
    async with open_test_app(tmp_path, model=model) as app:
        commands = Commands(app.commands, learn_wait=5)
        here = TestChat(app.runtime, chat="general-a", world="server-a", kind="group")
        there = TestChat(app.runtime, chat="general-b", world="server-b", kind="group")
        answer = await commands.run("character", ask(here, "archivist"))
        assert answer.text == "Here I am now Archivist."

        # Called by the chosen character's name in its server; the other server's bot is
        # still Mnemo, and answers to Mnemo's name, not to Archivist's.
        assert (await here.say("Archivist, what did I tell you yesterday?")).responded
        assert not (await there.say("Archivist, what did I tell you yesterday?")).responded
        assert (await there.say("Mnemo, what did I tell you yesterday?")).responded
        assert not (await here.say("Mnemo, are you there?")).responded

    archivist_system, mnemo_system = systems(model)
    assert ARCHIVIST.system and ARCHIVIST.system in archivist_system
    assert MNEMO.name in mnemo_system and ARCHIVIST.system not in mnemo_system
    first, second = model.calls_for(Task.REPLY)
    assert first.state is not None and first.state.agent_name == "Archivist"
    assert first.system is not None and second.system is not None
    assert "last message as Archivist," in first.system and "as Mnemo," in second.system


async def test_only_admins_choose_and_unknown_names_get_the_list(
    tmp_path: Path, model_dir: Path
) -> None:
    model = ScriptedModel(answers={Task.REPLY: [HELLO] * 3})
    async with open_test_app(tmp_path, model=model) as app:
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        refused = await commands.run("character", ask(chat, "archivist", is_admin=False))
        refused_model = await commands.run("model", ask(chat, "large gpt-x", is_admin=False))
        unknown = await commands.run("character", ask(chat, "Gandalf"))
        current = await commands.run("character", ask(chat))
        await chat.say("hello")
        member_help = commands.help(is_admin=False)
        admin_help = commands.help(is_admin=True)

    assert refused.text == "Sorry, /character is only for admins."
    assert refused_model.text == "Sorry, /model is only for admins."
    assert unknown.text.startswith("I have no character called “Gandalf”.")
    assert "Installed: Mnemo (default), Archivist." in unknown.text
    assert current.text.startswith("Here I am Mnemo (mnemo).")
    assert ARCHIVIST.system not in systems(model)[0]  # nothing changed
    assert "/character [name] - Admins: the character I speak as here" in admin_help
    assert "/model [small|large] [name|default] - Admins: the models I use here" in admin_help
    assert "/character" not in member_help and "/model" not in member_help


def models_asked(server: FakeOpenAIServer) -> list[str]:
    """The model each chat request named, in order; a name's check (one token) marked."""
    return [
        str(request.json.get("model")) + (" (check)" if request.json.get("max_tokens") == 1 else "")
        for request in server.chat_requests
    ]


async def test_a_world_s_large_model_names_its_replies_and_the_other_world_keeps_the_default(
    tmp_path: Path, model_dir: Path
) -> None:
    def respond(request: dict[str, Any]) -> str:
        return HELLO

    async with FakeOpenAIServer(responder=respond) as server:
        settings = with_endpoint(test_settings(tmp_path), server.base_url)
        async with open_test_app(tmp_path, settings=settings) as app:
            commands = Commands(app.commands, learn_wait=5)
            here = TestChat(app.runtime, chat="dm-a", world="server-a")
            there = TestChat(app.runtime, chat="dm-b", world="server-b")
            chosen = await commands.run("model", ask(here, "large gpt-x"))
            await here.say("I started a new job today")
            await there.say("I adopted a cat today")
            # The endpoint does not serve this one: refused, and nothing changes.
            server.enqueue(status(404, message="The model `no-such-model` does not exist"))
            refused = await commands.run("model", ask(here, "large no-such-model"))
            bad = await commands.run("model", ask(here, "large two words"))
            await here.say("it went well")
            shown = await commands.run("model", ask(here))
            stats = await commands.run("stats", ask(here))
            back = await commands.run("model", ask(here, "large default"))
            await here.say("the commute is long")

    assert chosen.text == "Here the large model is now gpt-x."
    assert models_asked(server) == [
        "gpt-x (check)",
        "gpt-x",  # the reply in server A
        "fake-large",  # the reply in server B
        "no-such-model (check)",
        "gpt-x",  # server A's choice did not change
        "fake-large",  # back to the default
    ]
    assert refused.text.startswith("The model endpoint did not answer with no-such-model")
    assert refused.text.endswith("Nothing changed.")
    assert bad.text.startswith("Usage: /model small|large")
    assert shown.text.startswith(
        "Models here: small: fake-small (the default), large: gpt-x (chosen here)."
    )
    assert "Character: Mnemo (mnemo). Models here: small: fake-small (the default), " in stats.text
    assert "large: gpt-x (chosen here)" in stats.text
    assert back.text == "Here the large model is the bot's setting again (fake-large)."


async def test_a_plugin_s_model_calls_and_agent_follow_the_world_s_choice(
    tmp_path: Path, model_dir: Path
) -> None:
    seen: list[str] = []

    async def always(ctx: Any) -> bool:
        return True

    async def summarise(ctx: Any, found: Any) -> None:
        await ctx.model.generate("summarise", model_class=ModelClass.SMALL)
        seen.append(ctx.agent.name)

    async def nothing(ctx: Any, found: Any) -> None:
        return None

    # Two evaluators that call the model: the SMALL selection call picks between them.
    plugin = Plugin(
        name="notes",
        description="notes",
        evaluators=[
            Evaluator(
                name="NOTE",
                description="takes notes",
                validate=always,
                handler=summarise,
                always_run=True,
            ),
            Evaluator(
                name="TALLY",
                description="counts",
                validate=always,
                handler=nothing,
                always_run=True,
            ),
        ],
    )
    picks = json.dumps({"evaluators": ["NOTE"]})
    model = ScriptedModel(
        answers={
            Task.REPLY: [HELLO] * 4,
            "evaluator:NOTE": ["noted"] * 2,
            Task.EVALUATOR_SELECTION: [picks] * 2,
        }
    )
    settings = allowing(test_settings(tmp_path))
    async with open_test_app(tmp_path, model=model, plugins=[plugin], settings=settings) as app:
        commands = Commands(app.commands, learn_wait=5)
        here = TestChat(app.runtime, chat="dm-a", world="server-a")
        there = TestChat(app.runtime, chat="dm-b", world="server-b")
        await commands.run("character", ask(here, "archivist"))
        offline = await commands.run("model", ask(here, "small tiny-x"))
        await here.say("I started a new job today")
        await here.settle()
        await there.say("I adopted a cat today")
        await there.settle()

    assert offline.text.startswith("Here the small model is now tiny-x (I run on the offline")
    calls = model.calls_for("evaluator:NOTE")
    assert [(c.model_class, c.model_name) for c in calls] == [
        (ModelClass.SMALL, "tiny-x"),
        (ModelClass.SMALL, None),
    ]
    assert seen == ["Archivist", "Mnemo"]
    selections = model.calls_for(Task.EVALUATOR_SELECTION)
    assert [c.model_name for c in selections] == ["tiny-x", None]
    assert "and Archivist." in selections[0].prompt and "and Mnemo." in selections[1].prompt


async def test_privacy_names_the_character_chosen_in_the_server(
    tmp_path: Path, model_dir: Path
) -> None:
    async with open_test_app(tmp_path) as app:
        commands = Commands(app.commands, learn_wait=5)
        here = TestChat(app.runtime, chat="general-a", world="server-a", kind="group")
        there = TestChat(app.runtime, chat="general-b", world="server-b", kind="group")
        await commands.run("character", ask(here, "archivist"))
        privacy_here = await commands.run("privacy", ask(here, is_admin=False))
        privacy_there = await commands.run("privacy", ask(there, is_admin=False))

    assert privacy_here.text.startswith("Privacy: what Archivist keeps and how you control it.")
    assert "Mnemo" not in privacy_here.text
    assert privacy_there.text.startswith("Privacy: what Mnemo keeps and how you control it.")


async def test_the_choice_survives_a_restart(tmp_path: Path, model_dir: Path) -> None:
    settings = allowing(test_settings(tmp_path))
    async with open_test_app(tmp_path, keep_database=True, settings=settings) as app:
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        await commands.run("character", ask(chat, "archivist"))
        await commands.run("model", ask(chat, "large gpt-x"))

    model = ScriptedModel(answers={Task.REPLY: [HELLO] * 2})
    async with open_test_app(tmp_path, model=model, settings=settings) as app:
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        await chat.say("hello again")
        shown = await commands.run("character", ask(chat))
        back = await commands.run("character", ask(chat, "default"))
        await chat.say("and now?")

    kept, after_default = model.calls_for(Task.REPLY)
    assert ARCHIVIST.system and ARCHIVIST.system in (kept.system or "")
    assert kept.model_name == "gpt-x"
    assert shown.text.startswith("Here I am Archivist (archivist).")
    assert back.text == "Here I am Mnemo again (the default)."
    assert ARCHIVIST.system not in (after_default.system or "")
    assert after_default.model_name == "gpt-x"  # the model is a choice of its own


async def test_a_backup_and_restore_keep_each_world_s_choice(
    tmp_path: Path, model_dir: Path, mongo_uri: str, knowledge: Knowledge
) -> None:
    folder = tmp_path / "backup"
    source = allowing(test_settings(tmp_path / "source", mongodb_uri=mongo_uri))
    async with open_test_app(tmp_path / "source", settings=source) as app:
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        await commands.run("character", ask(chat, "archivist"))
        await commands.run("model", ask(chat, "small tiny-x"))
        await backup(app.store, folder, bundled=False)

    # Into another deployment's empty database, then a bot opened on it.
    await restore(
        knowledge.store, knowledge, MessageIndex(knowledge.vectors, knowledge.embedder), folder
    )
    settings = allowing(test_settings(tmp_path / "restored", mongodb_uri=mongo_uri))
    storage = settings.storage.model_copy(update={"mongodb_database": knowledge.store.db.name})
    model = ScriptedModel(answers={Task.REPLY: [HELLO]})
    async with open_test_app(
        tmp_path / "restored",
        model=model,
        settings=dataclasses.replace(settings, storage=storage),
        keep_database=True,
    ) as app:
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        await chat.say("hello again")
        stats = await commands.run("stats", ask(chat))

    (call,) = model.calls_for(Task.REPLY)
    assert ARCHIVIST.system and ARCHIVIST.system in (call.system or "")
    assert "Character: Archivist (archivist)." in stats.text
    assert "small: tiny-x (chosen here)" in stats.text


def test_every_installed_character_is_the_bot_s_own_text_never_a_fact() -> None:
    grounding = grounding_for(MNEMO, Registry(), "agent", others=[ARCHIVIST])
    # A world may speak as the Archivist: its description put on a person is refused, and a
    # claim about "Archivist" is about the bot.
    assert grounding.echoes("Sarah prefers facts to flattery, dates to adjectives, and more")
    assert grounding.about_assistant("Archivist is a librarian")
    alone = grounding_for(MNEMO, Registry(), "agent")
    assert not alone.echoes("Sarah prefers facts to flattery, dates to adjectives, and more")
    assert not alone.about_assistant("Archivist is a librarian")


async def test_a_choice_made_through_one_process_holds_in_another_from_the_next_message(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    first = test_settings(tmp_path / "one", mongodb_uri=mongo_uri)
    second = test_settings(tmp_path / "two", mongodb_uri=mongo_uri)
    same = second.storage.model_copy(update={"mongodb_database": first.storage.mongodb_database})
    model = ScriptedModel(answers={Task.REPLY: [HELLO] * 2})
    async with (
        open_test_app(tmp_path / "one", settings=first) as one,
        open_test_app(
            tmp_path / "two",
            model=model,
            settings=dataclasses.replace(second, storage=same),
            keep_database=True,
        ) as two,
    ):
        chat = TestChat(two.runtime, world="server-a")
        await chat.say("hello")  # process two has now read server A's (default) choice
        commands = Commands(one.commands, learn_wait=5)
        await commands.run("character", ask(TestChat(one.runtime, world="server-a"), "archivist"))
        await chat.say("hello again")

    before, after = systems(model)
    assert ARCHIVIST.system and ARCHIVIST.system not in before
    assert ARCHIVIST.system in after


async def test_paths_without_their_own_read_see_another_process_s_change_within_the_ttl(
    store: MongoStore,
) -> None:
    now = [0.0]
    catalog = CharacterCatalog(
        InstalledCharacter("mnemo", MNEMO, "settings"),
        (InstalledCharacter("archivist", ARCHIVIST, "characters/archivist.json"),),
    )
    here = WorldChoices(
        store.worlds, catalog, model_choices=["gpt-x"], ttl=30.0, clock=lambda: now[0]
    )
    elsewhere = WorldChoices(store.worlds, catalog)
    assert (await here.of("world-a")).character.name == "Mnemo"
    await elsewhere.change("world-a", character="archivist", large_model="gpt-x")
    now[0] = 29.0
    assert (await here.of("world-a")).character.name == "Mnemo"  # kept: no round trip
    now[0] = 30.0
    chosen = await here.of("world-a")
    assert (chosen.character.name, chosen.large_model) == ("Archivist", "gpt-x")
    # A character no longer installed: the default speaks, and /character says why.
    await elsewhere.change("world-a", character="gone")
    now[0] = 61.0
    gone = await here.of("world-a")
    assert (gone.character.name, gone.missing_character) == ("Mnemo", "gone")
    stored = await store.worlds.get("world-a")
    assert stored is not None and stored.version == 2 and stored.updated_ms > 0


async def test_a_plugin_s_character_can_be_chosen(tmp_path: Path, model_dir: Path) -> None:
    pirate = Character(name="Captain Hook", system="You are Captain Hook, a polite pirate.")
    model = ScriptedModel(answers={Task.REPLY: [HELLO]})
    plugin = Plugin(name="pirates", description="a pirate persona", characters=[pirate])
    async with open_test_app(tmp_path, model=model, plugins=[plugin]) as app:
        commands = Commands(app.commands, learn_wait=5)
        chat = TestChat(app.runtime, world="server-a")
        listed = await commands.run("character", ask(chat))
        chosen = await commands.run("character", ask(chat, "Captain Hook"))
        await chat.say("ahoy")

    assert "Installed: Mnemo (default), Archivist, Captain Hook (captain-hook)." in listed.text
    assert chosen.text == "Here I am now Captain Hook (captain-hook)."
    assert "You are Captain Hook, a polite pirate." in (systems(model)[0])


async def test_a_plugin_s_characters_must_be_characters(tmp_path: Path) -> None:
    bad = Plugin(name="pirates", characters=[{"name": "Hook"}])  # type: ignore[list-item]
    with pytest.raises(PluginError, match="characters must be Character objects"):
        Registry().add(bad, "test")


def test_the_console_speaks_as_the_character_chosen_for_it(tmp_path: Path, model_dir: Path) -> None:
    script = "hello\n/character archivist\nhello again\n/stats\n/quit\n"
    session = mnemo(["chat"], script, tmp_path, model_dir)
    assert session.returncode == 0, session.stderr
    before, after = session.stdout.split("Here I am now Archivist.")
    assert "Mnemo: " in before and "Archivist: " not in before
    assert "Archivist: " in after and "Mnemo: " not in after
    assert "Character: Archivist (archivist). Models here:" in after


# What /model lists when MNEMO_MODEL_CHOICES=gpt-x,tiny-x.
MAY_CHOOSE = "Models you may choose: gpt-x, tiny-x."


def test_on_the_console_model_chooses_only_among_the_operator_s_names(
    tmp_path: Path, model_dir: Path
) -> None:
    script = "/model large o1-pro\n/model large GPT-X\n/model\n/quit\n"
    first = mnemo(["chat"], script, tmp_path, model_dir, MNEMO_MODEL_CHOICES="gpt-x,tiny-x")
    assert first.returncode == 0, first.stderr
    refused = f"“o1-pro” is not one of the models allowed here. {MAY_CHOOSE} Nothing changed."
    assert refused in first.stdout
    assert "Here the large model is now gpt-x (I run on the offline model now" in first.stdout
    assert "large: gpt-x (chosen here)" in first.stdout

    # The operator empties the list: the kept choice is shown, and not used.
    again = mnemo(["chat"], "/model\n/model large tiny-x\n/quit\n", tmp_path, model_dir)
    assert again.returncode == 0, again.stderr
    assert "large: the default (“gpt-x”, chosen here, is not allowed now)" in again.stdout
    assert f"{NO_MODEL_CHOICES} Nothing changed." in again.stdout

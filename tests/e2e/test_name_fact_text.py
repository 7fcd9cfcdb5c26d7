"""The fact that gives a person's name reads as a name, on every surface (issue 23's last
review): the console's person is "User" until they give a name, and the name they gave was
stored as "User's name is Ana", shown so by /me, /facts and /export. A placeholder is no
name: the fact says "Their name is Ana", whether the offline rules or a model wrote it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bot.llm.base import Task
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.facts import FactsSettings, plugin
from tests.helpers.processes import mnemo


def test_the_console_shows_the_told_name_as_a_name_in_me_facts_and_export(
    tmp_path: Path, model_dir: Path
) -> None:
    done = mnemo(
        ["chat"],
        "Hi, my name is Ana and I live in Lisbon.\n/me\n/facts\n/export\n",
        tmp_path,
        model_dir,
    )
    assert done.returncode == 0, done.stderr
    me = done.stdout.split("What I know about you here", 1)[1].split("Facts (", 1)[0]
    assert re.search(r"• `[0-9a-f]{8}` Their name is Ana", me), me
    assert "`" in done.stdout and "Their name is Ana — about Ana" in done.stdout
    assert "User's name" not in done.stdout
    written = re.search(r"Written to (\S+\.json)", done.stdout)
    assert written is not None, done.stdout
    exported = Path(written.group(1)).read_text(encoding="utf-8")
    assert "Their name is Ana" in exported and "User's name" not in exported
    assert json.loads(exported)


async def test_a_models_name_claim_about_the_placeholder_is_stored_as_a_name(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    # What a model shown the console's "User" answers to "Hi, my name is Ana".
    said = '{"m1": [{"fact": "User\'s name is Ana", "quote": "my name is Ana", "about": "name"}]}'
    model = ScriptedModel(
        answers={
            Task.REPLY: ['{"text": "Hi Ana!", "action": "NONE"}'],
            Task.EVALUATOR_SELECTION: ['["GET_FACTS"]'],
            "evaluator:GET_FACTS": [said],
        }
    )
    settings = FactsSettings().model_copy(
        update={"conversation_length": 10_000, "merge_rules": False}
    )
    async with open_test_app(
        tmp_path,
        plugins=[plugin],
        model=model,
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        plugin_settings={"facts": settings},
    ) as app:
        chat = TestChat(app.runtime, name="User")
        message = chat.message("Hi, my name is Ana")
        await chat.send(message)
        await chat.settle()
        assert await chat.runtime.flush_room(message, timeout=60)
        facts, _ = await app.store.facts.page(chat.room.world_id, limit=100)
        account = (await app.store.accounts.get_many([chat.account.id]))[chat.account.id]

    assert [f.text for f in facts] == ["Their name is Ana"]
    assert account.told_name_in(chat.room.world_id) == "Ana"

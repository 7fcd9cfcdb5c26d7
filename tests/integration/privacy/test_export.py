"""/export on the console: the file holds everything stored about the person in that world —
every message, reply, fact (with its history), goal and plugin record that /forgetme then
removes — and is readable by this machine account only. (Telegram and Discord deliver the same
answer privately: tests/integration/adapters/test_telegram.py,
tests/integration/adapters/test_discord.py.)"""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path
from typing import Any

from bot.adapters.console import ConsoleChat
from bot.app.composition import App
from bot.testing.harness import open_test_app
from plugins.facts import plugin as facts
from plugins.goals import plugin as goals
from plugins.recall import plugin as recall
from plugins.sentiment import plugin as sentiment

SAID = (
    "Hi, my name is Priya and I live in Reykjavik.\n"
    "I work as a glassblower and I have a dog named Wobbleton.\n"
    "I want to learn the theremin: buy a theremin; practise daily\n"
    "/me\n"  # learns what was said so far
    "I moved to Oslo.\n"
)


def read(path: Path) -> tuple[dict[str, Any], int]:
    """The exported file and its permission bits."""
    return json.loads(path.read_text(encoding="utf-8")), stat.S_IMODE(path.stat().st_mode)


async def documents(app: App) -> dict[tuple[str, str], dict[str, Any]]:
    """Every document of every collection, by (collection, id)."""
    found = {}
    for name in await app.store.db.list_collection_names():
        async for document in app.store.db[name].find({}):
            found[(name, str(document["_id"]))] = document
    return found


async def test_export_writes_everything_forgetme_would_remove_to_a_private_file(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    exports = tmp_path / "exports"
    async with open_test_app(
        tmp_path,
        plugins=[facts, goals, sentiment, recall],
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        first = io.StringIO()
        await ConsoleChat(
            user_name="p4711", stdin=io.StringIO(SAID + "/export\n"), stdout=first,
            exports_dir=exports,
        ).run(app.adapter_services)  # fmt: skip
        before = await documents(app)
        # Read now: /forgetme deletes the export files written for her.
        [path] = re.findall(r"Written to (\S+\.json)", first.getvalue())
        exported, mode = read(Path(path))
        second = io.StringIO()
        await ConsoleChat(
            user_name="p4711", stdin=io.StringIO("/forgetme\n/forgetme yes\n/me\n"),
            stdout=second, exports_dir=exports,
        ).run(app.adapter_services)  # fmt: skip
        after = await documents(app)

    assert Path(path).parent == exports.resolve()
    assert list(exports.glob("*.json")) == []  # forgotten with the rest
    assert mode == 0o600
    assert "Everything I keep about you here (4 messages" in first.getvalue()
    # The history: Reykjavik held until she moved to Oslo.
    moves = {f["text"]: f["valid_until"] for f in exported["facts"] if "lives in" in f["text"]}
    assert moves == {
        "Priya lives in Reykjavik": moves["Priya lives in Reykjavik"],
        "Priya lives in Oslo": None,
    }
    assert moves["Priya lives in Reykjavik"] is not None
    assert exported["account"]["told_name"] == "Priya"
    [goal] = exported["plugins"]["goals"]["goals"]
    assert goal["name"] == "Learn the theremin"
    assert exported["plugins"]["sentiment"]["sentiment"][0]["messages"] == 4

    # Everything /forgetme removed was in the file: messages, replies, facts (by id), goals.
    removed = {key: doc for key, doc in before.items() if key not in after}
    text = json.dumps(exported)
    for (collection, key), document in removed.items():
        if collection in ("memories", "facts", "accounts"):
            assert key in text, f"{collection} {key} was stored but not exported"
        if collection == "plugin_goals_goals":
            assert document["name"] in text
    assert {c for c, _ in removed} >= {"memories", "facts", "plugin_goals_goals", "accounts"}
    assert "Done: I forgot" in second.getvalue()
    assert "I haven't learned anything about you here yet." in second.getvalue()

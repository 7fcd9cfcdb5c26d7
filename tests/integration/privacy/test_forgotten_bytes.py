"""/forgetme leaves no byte of what was forgotten in the data folder while the bot runs: not in
the bundled database's file (SQLite keeps a deleted row's bytes in its page, or in a free
page), not in its write-ahead log, not in Chroma's files nor in any other file. Issue 30: the
words stayed readable in the bundled database's free pages and WAL until the bot stopped."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from bot.commands.command_set import Commands, Request
from bot.config.settings import Settings
from bot.domain.records import utcnow
from bot.privacy.retention import Retention, delete_expired
from bot.testing.harness import TestChat, open_test_app, test_settings
from plugins.facts import plugin as facts

# What only Priya said, in words found nowhere else: none may be left in any file.
PRIYA_SAID = [
    "Hi Mnemo, my name is Priya and I live in Reykjavik.",
    "Mnemo, I work as a glassblower and I have a dog named Wobbleton.",
    "Between us: my grandmother's recipe hides a spoonful of quetzalberry jam.",
]
HERS = [b"reykjavik", b"glassblower", b"wobbleton", b"quetzalberry"]
TOMS = [b"lisbon", b"beekeeper"]


def files_holding(folder: Path, words: list[bytes]) -> dict[str, list[str]]:
    """Each word's files under `folder` (their bytes, lower-cased), by word."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes().lower()
        for word in words:
            if word in data:
                found.setdefault(word.decode(), []).append(str(path.relative_to(folder)))
    return found


def bundled(data_dir: Path, model_dir: Path) -> Settings:
    """Test settings on the bundled server, its files in `data_dir` (whatever the run's
    database)."""
    settings = test_settings(data_dir, model_dir=model_dir, evaluator_selection="all")
    return dataclasses.replace(
        settings, storage=settings.storage.model_copy(update={"mongodb_uri": None})
    )


async def test_after_forgetme_no_file_of_the_data_folder_holds_the_forgotten_words(
    tmp_path: Path, model_dir: Path
) -> None:
    settings = bundled(tmp_path, model_dir)
    async with open_test_app(tmp_path, plugins=[facts], settings=settings) as app:
        assert app.mongo_server is not None
        priya = TestChat(app.runtime, name="priya", chat="general", world="guild", kind="group")
        tom = TestChat(app.runtime, name="tom", chat="general", world="guild", kind="group")
        for text in PRIYA_SAID:
            await priya.say(text)
        await tom.say("Mnemo, I live in Lisbon and I work as a beekeeper.")
        commands = Commands(app.commands, learn_wait=30)
        assert await commands.learned(priya.room.id)
        # The WAL's pages written into the database file, as the server does every 1,000
        # pages: her words are in both before she asks.
        await app.store.db.command("wal_checkpoint")
        database = f"{app.store.db.name}.db"  # the server's file of this database
        before = files_holding(tmp_path, HERS + TOMS)
        where = {"platform": "test", "account_id": priya.account.id, "is_admin": False}
        group = {"world_id": priya.room.world_id, "room_id": priya.room.id}
        done = (await commands.run("forgetme", Request(**where, **group, args="yes"))).text
        # Read while the bot still runs: stopping it checkpoints the WAL away on its own.
        after = files_holding(tmp_path, HERS + TOMS)

    assert done.startswith("Done: I forgot "), done
    assert set(before) == {w.decode() for w in HERS + TOMS}, before
    assert all(f"mongo/{database}" in before[w.decode()] for w in HERS), before
    left = {word: files for word, files in after.items() if word.encode() in HERS}
    assert left == {}, f"forgotten words still in the data folder: {left}"
    assert {w.decode() for w in TOMS} <= set(after)  # Tom's words stay


async def test_messages_past_retention_leave_no_byte_in_the_data_folder(
    tmp_path: Path, model_dir: Path
) -> None:
    """The same for what MNEMO_RETENTION_DAYS deletes: "kept 90 days" means gone after."""
    async with open_test_app(tmp_path, settings=bundled(tmp_path, model_dir)) as app:
        chat = TestChat(app.runtime)
        await chat.say("The quetzalberry harvest starts with the first frost.")
        await chat.settle()
        await app.store.db.command("wal_checkpoint")
        before = files_holding(tmp_path, [b"quetzalberry"])
        deleted = await delete_expired(
            app.store,
            app.knowledge.vectors,
            Retention(1),
            now=utcnow() + timedelta(days=2),  # a day past the retention of one
            database_files=app.commands.database_files,
        )
        after = files_holding(tmp_path, [b"quetzalberry"])

    assert before and deleted == 2  # the message and the reply to it
    assert after == {}, after

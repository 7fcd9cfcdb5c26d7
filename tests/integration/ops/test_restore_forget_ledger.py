"""`mnemo restore` from a backup older than a forgetting, as an operator runs it (each command
starting the bundled server itself). Into the data folder that did the forgetting, its forget
ledger leaves the person out. Into a fresh data folder (the disaster case: the old folder is
gone) nothing can know of the forgetting: the person is back, and the restore says so plainly.
A copy of the ledger kept apart (`--forget-ledger FILE`) leaves them out there too. Issue 30."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from bot.app.cli import EXIT_CONFIG, main
from bot.commands.command_set import Commands
from bot.ops.backup import backup
from bot.privacy.ledger import LEDGER_FILE, forgotten_hash
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.mongo import MongoStore
from bot.testing.harness import TestChat, open_test_app, test_settings

JANE_SAID = "I'm Jane and I live in Reykjavik."


async def jane_forgotten_after_a_backup(data: Path, model_dir: Path, folder: Path) -> str:
    """A bot on the bundled server in `data` where Jane and Tom talk; a backup to `folder`;
    then Jane asks to be forgotten. Returns her ledger hash."""
    settings = test_settings(data, model_dir=model_dir)
    storage = settings.storage.model_copy(update={"mongodb_uri": None, "mongodb_database": "mnemo"})
    settings = dataclasses.replace(settings, storage=storage)
    async with open_test_app(data, settings=settings, keep_database=True) as app:
        jane = TestChat(app.runtime, name="Jane")
        tom = TestChat(app.runtime, name="Tom", chat="tom-dm")
        await jane.say(JANE_SAID)
        await tom.say("I'm Tom and I live in Oslo.")
        await backup(app.store, folder, bundled=False)  # before she asked
        await Commands(app.commands).forgetting.person(jane.account.id, jane.room.world_id)
        return forgotten_hash(jane.account.id, jane.room.world_id)


async def texts_in(data: Path) -> list[str]:
    """The messages a restored data folder holds."""
    async with EmbeddedMongo(data) as server:
        store = MongoStore.from_uri(server.uri, "mnemo")
        try:
            return [doc["content"]["text"] async for doc in store.db["memories"].find({})]
        finally:
            await store.close()


def test_a_restore_says_plainly_who_comes_back_and_a_ledger_kept_apart_leaves_them_out(
    tmp_path: Path,
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    old, folder = tmp_path / "old", tmp_path / "backup"
    digest = asyncio.run(jane_forgotten_after_a_backup(old, model_dir, folder))
    kept_apart = tmp_path / "offsite" / LEDGER_FILE
    kept_apart.parent.mkdir()
    kept_apart.write_bytes((old / LEDGER_FILE).read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MNEMO_EMBEDDING_MODEL_DIR", str(model_dir))

    # Into a fresh data folder with nothing else: she is back, and the output says so.
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path / "fresh"))
    assert main(["restore", str(folder)]) == 0
    fresh = capsys.readouterr().out
    assert "0 forgotten person(s) left out" in fresh
    assert "forget ledger: 0 in the backup" in fresh
    assert "warning:" in fresh and "after the backup was made is in the restored data" in fresh
    assert "--forget-ledger FILE" in fresh
    assert JANE_SAID in asyncio.run(texts_in(tmp_path / "fresh"))

    # A file given that is no ledger is refused before anything is loaded.
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path / "other"))
    assert main(["restore", str(folder), "--forget-ledger", str(folder / "manifest.json")]) == (
        EXIT_CONFIG
    )
    assert "holds no forget-ledger line" in capsys.readouterr().err
    assert not (tmp_path / "other" / "mongo").exists()

    # Into another fresh folder with the copy kept apart: she stays forgotten.
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path / "rebuilt"))
    assert main(["restore", str(folder), "--forget-ledger", str(kept_apart)]) == 0
    rebuilt = capsys.readouterr().out
    assert "1 forgotten person(s) left out" in rebuilt
    assert f"1 in {kept_apart}" in rebuilt and "warning:" not in rebuilt
    texts = asyncio.run(texts_in(tmp_path / "rebuilt"))
    assert JANE_SAID not in texts and any("Oslo" in text for text in texts)
    # The new data folder's own ledger knows her now, for the next restore into it.
    lines = (tmp_path / "rebuilt" / LEDGER_FILE).read_text().splitlines()
    assert [json.loads(line)["hash"] for line in lines] == [digest]

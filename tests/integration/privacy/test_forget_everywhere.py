"""Forgetting reaches every file the bot writes and every backup (issue 19, finding 4).

After /forgetme the audit still found the bot's replies quoting the person in
`sent_replies.jsonl`, their set-aside journal lines in a 0644 `journal.jsonl.unreadable`, and
a backup taken earlier brought them back on restore. Real MongoDB (nx-27017), Chroma and the
offline model; the forgetting is the one /forgetme runs (Commands' `forgetting`).
"""

from __future__ import annotations

import io
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.adapters.console import ConsoleChat
from bot.commands.command_set import Commands
from bot.domain.records import Fact
from bot.knowledge.embeddings import CachedEmbedder
from bot.knowledge.messages import MessageIndex
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.vectors import VectorIndex
from bot.memory.store import Knowledge
from bot.ops.backup import backup, restore
from bot.privacy.ledger import LEDGER_FILE
from bot.runtime.intake.journal import JournalEntry, JournalRecord
from bot.runtime.intake.sent_replies import SENT_REPLIES_FILE
from bot.storage.mongo import MongoStore
from bot.testing.harness import TestChat, open_test_app


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def read_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


@pytest.fixture
async def empty_target(
    mongo_uri: str, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> AsyncIterator[Knowledge]:
    """A restore's target: an empty database and an empty Chroma."""
    store = MongoStore.from_uri(mongo_uri, f"mnemo_restore_{uuid.uuid4().hex[:10]}")
    vectors = VectorIndex.persistent(tmp_path / "restored-chroma")
    try:
        yield Knowledge(store, vectors, CachedEmbedder(onnx_embedder))
    finally:
        await vectors.close()
        await store.client.drop_database(store.db.name)
        await store.close()


async def test_forgetme_rewrites_the_sent_reply_record_and_the_set_aside_journal(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with open_test_app(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir) as app:
        jane = TestChat(app.runtime, name="Jane")
        tom = TestChat(app.runtime, name="Tom", chat="tom-dm")
        await jane.say("Hi, I'm Jane Secretname-Doe.")
        await tom.say("Hi, I'm Tom.")
        sent = tmp_path / SENT_REPLIES_FILE
        assert b"Hi Jane" in sent.read_bytes()  # the reply quotes her, settled or not

        # What the outage journal set aside for the operator: one of hers it could not take
        # in, one of Tom's, and a damaged line of hers.
        journal = app.runtime.intake.outage.journal
        for chat, text in ((jane, "Jane Secretname-Doe, in the journal"), (tom, "Tom's")):
            entry = JournalEntry(memory=chat.message(text), account=chat.account, room=chat.room)
            journal.set_aside(JournalRecord(seq=1, journaled_ms=1, entry=entry))
        unreadable = journal.path.with_name(journal.path.name + ".unreadable")
        journal.path.write_bytes(
            f'{{"broken": "{jane.account.id} {jane.room.world_id} Secretname"\n'.encode()
        )
        type(journal)(journal.path, max_bytes=journal.max_bytes)  # a start-up sets it aside
        assert mode(unreadable) == 0o600
        failed = journal.path.with_name(journal.path.name + ".failed")
        assert b"Secretname" in failed.read_bytes() + unreadable.read_bytes()

        await Commands(app.commands).forgetting.person(jane.account.id, jane.room.world_id)

        assert b"Hi Jane" not in read_bytes(sent)
        assert b"Secretname" not in read_bytes(failed) + read_bytes(unreadable)
        assert b"Tom's" in failed.read_bytes()  # others' records stay
        assert mode(tmp_path / LEDGER_FILE) == 0o600


async def test_a_restored_backup_does_not_bring_back_a_forgotten_person(
    tmp_path: Path, model_dir: Path, mongo_uri: str, empty_target: Knowledge
) -> None:
    folder = tmp_path / "backup"
    async with open_test_app(tmp_path / "data", mongodb_uri=mongo_uri, model_dir=model_dir) as app:
        jane = TestChat(app.runtime, name="Jane")
        tom = TestChat(app.runtime, name="Tom", chat="tom-dm")
        await jane.say("I'm Jane and I live in Reykjavik.")
        await tom.say("I'm Tom and I live in Oslo.")
        for chat, text in ((jane, "Jane lives in Reykjavik"), (tom, "Tom lives in Oslo")):
            fact = Fact(
                subject_id=chat.account.id,
                world_id=chat.room.world_id,
                room_id=chat.room.id,
                agent_id=app.runtime.agent_id,
                text=text,
            )
            await app.knowledge.add_facts([fact], near_duplicate_distance=0.1)
        await backup(app.store, folder, bundled=False)  # before she asked
        await Commands(app.commands).forgetting.person(jane.account.id, jane.room.world_id)

    result = await restore(
        empty_target.store,
        empty_target,
        MessageIndex(empty_target.vectors, empty_target.embedder),
        folder,
        data_dir=tmp_path / "data",
    )
    assert result.forgotten == 1
    db = empty_target.store.db
    texts = [doc["content"]["text"] async for doc in db["memories"].find({})]
    assert not any("Reykjavik" in text for text in texts)
    assert len(texts) == 2  # Tom's message and the reply to him; the reply to her went too
    assert any("Oslo" in text for text in texts)
    facts = [doc["text"] async for doc in db["facts"].find({})]
    assert facts == ["Tom lives in Oslo"]
    found = await empty_target.search_facts(
        "where does she live", subject_ids=[jane.account.id], world_id=jane.room.world_id
    )
    assert found == []
    # The restored database carries the ledger on, into its own backups.
    assert await db["forget_ledger"].count_documents({}) == 1


async def test_forgetme_on_the_console_deletes_its_export_files(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    exports = tmp_path / "exports"
    async with open_test_app(tmp_path, mongodb_uri=mongo_uri, model_dir=model_dir) as app:
        out = io.StringIO()
        await ConsoleChat(
            user_name="jd4711",
            stdin=io.StringIO("I live in Reykjavik.\n/export\n/forgetme yes\n"),
            stdout=out,
            exports_dir=exports,
        ).run(app.adapter_services)
    assert "Written to" in out.getvalue()
    assert list(exports.glob("*.json")) == []

"""The `mnemo backup` and `mnemo restore` commands: open only the storage (no plugins, model
or evaluation workers, which would write while a backup reads), run, print one summary line."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bot.config.settings import Settings
from bot.knowledge.embedder_factory import make_embedder
from bot.knowledge.messages import MessageIndex
from bot.knowledge.vectors import VectorIndex
from bot.memory.store import Knowledge
from bot.ops.backup import backup, read_manifest, restore
from bot.privacy.ledger import LEDGER_FILE, LedgerApplied, read_ledger_file
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.mongo import MongoStore


@dataclass(frozen=True)
class Storage:
    store: MongoStore
    vectors: VectorIndex
    bundled: bool


@asynccontextmanager
async def open_storage(settings: Settings) -> AsyncIterator[Storage]:
    """MongoDB and Chroma only, as `open_app` opens them, without plugins, model or workers:
    a backup must not start evaluations that write while it reads."""
    data_dir = settings.storage.data_dir
    async with AsyncExitStack() as stack:
        bundled = settings.storage.mongodb_uri is None
        if bundled:
            data_dir.mkdir(parents=True, exist_ok=True)
            server = await stack.enter_async_context(EmbeddedMongo(data_dir))
            uri = server.uri
        else:
            uri = settings.storage.mongodb_uri.get_secret_value()  # type: ignore[union-attr]
        store = MongoStore.from_uri(uri, settings.storage.mongodb_database)
        stack.push_async_callback(store.close)
        await store.ping()
        if settings.storage.chroma_host:
            vectors = VectorIndex.remote(settings.storage.chroma_host, settings.storage.chroma_port)
        else:
            vectors = VectorIndex.persistent(str(data_dir / "chroma"))
        stack.push_async_callback(vectors.close)
        yield Storage(store, vectors, bundled)


async def backup_command(settings: Settings, folder: Path) -> None:
    async with open_storage(settings) as storage:
        result = await backup(storage.store, folder, bundled=storage.bundled)
    manifest = result.manifest
    documents = sum(entry.documents for entry in manifest.collections.values())
    print(
        f"backed up {documents} documents in {len(manifest.collections)} collections "
        f"(schema version {manifest.schema_version}, consistency: {manifest.consistency}) "
        f"to {folder}"
    )


async def restore_command(
    settings: Settings, folder: Path, forget_ledgers: Sequence[Path] = ()
) -> None:
    """`mnemo restore DIR [--forget-ledger FILE]...`: one summary line, then what the forget
    ledger knew, and plainly when it cannot have known everything."""
    read_manifest(folder)  # a bad backup is refused before any server starts
    for path in forget_ledgers:
        read_ledger_file(path)  # and so is a ledger file that is none
    data_dir = settings.storage.data_dir
    async with open_storage(settings) as storage:
        embedder = make_embedder(settings.embedding, settings.model, None)
        knowledge = Knowledge(storage.store, storage.vectors, embedder)
        messages = MessageIndex(storage.vectors, embedder)
        result = await restore(
            storage.store,
            knowledge,
            messages,
            folder,
            data_dir=data_dir,
            ledger_files=forget_ledgers,
        )
    print(
        f"restored {result.documents} documents from {folder}; vectors rebuilt for "
        f"{result.facts_indexed} facts and {result.messages_indexed} messages; "
        f"{result.forgotten} forgotten person(s) left out (forget ledger)"
    )
    if result.ledger is not None:
        print(ledger_report(result.ledger, data_dir / LEDGER_FILE))


def ledger_report(applied: LedgerApplied, own_file: Path) -> str:
    """Where the forgettings a restore knew came from; and, when neither the data folder nor
    a file given held a ledger, that anyone forgotten after the backup was made is back."""
    sources = [f"{applied.in_backup} in the backup"]
    if applied.in_data_folder is not None:
        sources.append(f"{applied.in_data_folder} in {own_file}")
    sources += [f"{count} in {path}" for path, count in applied.in_files.items()]
    report = f"forget ledger: {', '.join(sources)}"
    if applied.in_data_folder is None and not applied.in_files:
        report += (
            f"\nwarning: {own_file} did not exist and no --forget-ledger was given, so only "
            "the forgettings made before this backup are applied: anyone who used /forgetme "
            "(or was forgotten by an admin) after the backup was made is in the restored data "
            "again. If you kept a copy of the old data folder's forget_ledger.jsonl, restore "
            "again into an empty database with --forget-ledger FILE."
        )
    return report

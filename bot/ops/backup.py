"""`mnemo backup DIR` and `mnemo restore DIR`: every collection (plugin collections included)
as MongoDB Extended JSON lines, with a manifest of counts, checksums and indexes.

Consistency: against a replica set (or sharded cluster) every collection is read in one
snapshot session, so the dump is one moment of the whole database even while the bot runs
(snapshot reads keep MongoDB's history for 5 minutes by default: a longer dump fails and says
so). With the bundled server the backup starts the server itself, which it cannot do while a
bot holds the data folder, so nothing else writes during the dump. A standalone MongoDB has no
snapshots: the manifest says `none` and the command warns to stop the bot first.

The manifest is written last, so a folder without one is an interrupted backup; restore checks
every file against the manifest before it writes anything, loads only into an empty database,
runs the schema migrations, and rebuilds the Chroma vectors from the restored documents.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from bson import json_util
from pydantic import BaseModel, ValidationError
from pymongo import IndexModel
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError
from tqdm import tqdm

from bot.domain.records import Memory
from bot.knowledge.messages import MessageIndex
from bot.memory.store import Knowledge
from bot.ops.migrations import LOCK_ID, META_COLLECTION, latest_version, migrate, schema_version
from bot.privacy.ledger import ForgetLedger, LedgerApplied
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

FORMAT: Final = "mnemo-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
INSERT_BATCH = 1000
INDEX_BATCH = 256
# Extended JSON that keeps every BSON type exactly (dates, int64, binary).
_JSON = json_util.CANONICAL_JSON_OPTIONS
# Index options carried over besides the keys and the name.
_INDEX_OPTIONS = ("unique", "sparse", "expireAfterSeconds", "partialFilterExpression")

Consistency = Literal["snapshot", "exclusive", "none"]
# Called with (what, total) once per step; returns the bar the step advances.
Progress = Callable[[str, int], "tqdm[Any]"]


class BackupError(RuntimeError):
    """A backup or restore that cannot go on; the message is one line for the operator."""


class CollectionEntry(BaseModel):
    file: str
    documents: int
    sha256: str
    indexes: list[dict[str, Any]] = []


class Manifest(BaseModel):
    """What `backup` wrote; read back from disk, so validated as untrusted input."""

    format: Literal["mnemo-backup"]
    format_version: int
    created_at: str
    database: str
    schema_version: int
    consistency: Consistency
    collections: dict[str, CollectionEntry]


def progress_bars(what: str, total: int) -> tqdm[Any]:
    """A progress bar on stderr when it is a terminal; silent in logs, pipes and tests."""
    return tqdm(total=total, desc=what, unit="doc", disable=None, leave=False)


@dataclass(frozen=True)
class BackupResult:
    manifest: Manifest
    folder: Path


@dataclass(frozen=True)
class RestoreResult:
    documents: int
    facts_indexed: int
    messages_indexed: int
    migrated: list[int]
    # What the forget ledger knew and where from; `forgotten`: the (person, world) pairs of
    # the backup forgotten again because it names them.
    ledger: LedgerApplied | None = None

    @property
    def forgotten(self) -> int:
        return 0 if self.ledger is None else self.ledger.forgotten


# ---------------------------------------------------------------------------------- backup
async def backup(
    store: MongoStore, folder: Path, *, bundled: bool, progress: Progress = progress_bars
) -> BackupResult:
    """Dump every collection of the store's database into `folder` (new or empty)."""
    _empty_folder(folder)
    db = store.db
    consistency: Consistency = "exclusive" if bundled else await _snapshot_support(store)
    if consistency == "none":
        log.warning(
            "MongoDB is standalone (no snapshot reads): stop the bot while backing up, "
            "or the dump may mix moments"
        )
    session = store.client.start_session(snapshot=True) if consistency == "snapshot" else None
    try:
        names = sorted(await db.list_collection_names(session=session))
        entries = {}
        for name in names:
            entries[name] = await _dump_collection(db, name, folder, session, progress)
        version = await schema_version(db)
    except PyMongoError as error:
        raise BackupError(
            f"backup failed while reading MongoDB ({error}); nothing is usable in {folder}"
        ) from None
    finally:
        if session is not None:
            await session.end_session()
    manifest = Manifest(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        database=db.name,
        schema_version=version,
        consistency=consistency,
        collections=entries,
    )
    # Last, and atomically: a folder without a manifest is an interrupted backup.
    partial = folder / (MANIFEST + ".partial")
    partial.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    os.replace(partial, folder / MANIFEST)
    return BackupResult(manifest, folder)


def _empty_folder(folder: Path) -> None:
    # Never over an older backup: a half-replaced backup is worse than none.
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BackupError(f"backup folder {folder} is not empty: choose a new one")
    folder.mkdir(parents=True, exist_ok=True)
    # Owner-only: a backup holds everything people said (`mnemo` also runs with umask 077).
    folder.chmod(0o700)


async def _snapshot_support(store: MongoStore) -> Consistency:
    hello = await store.client.admin.command("hello")
    # Snapshot reads exist on replica sets and behind mongos, not on a standalone server.
    return "snapshot" if hello.get("setName") or hello.get("msg") == "isdbgrid" else "none"


async def _dump_collection(
    db: AsyncDatabase,
    name: str,
    folder: Path,
    session: AsyncClientSession | None,
    progress: Progress,
) -> CollectionEntry:
    collection = db[name]
    query = {"_id": {"$ne": LOCK_ID}} if name == META_COLLECTION else {}
    total = await collection.count_documents(query, session=session)
    file = f"{name}.jsonl"
    digest = hashlib.sha256()
    written = 0
    with (folder / file).open("wb") as out, progress(f"backup {name}", total) as bar:
        async for document in collection.find(query, session=session).sort("_id", 1):
            line = (json_util.dumps(document, json_options=_JSON) + "\n").encode("utf-8")
            out.write(line)
            digest.update(line)
            written += 1
            bar.update(1)
    indexes = [
        _index_spec(index)
        async for index in await collection.list_indexes(session=session)
        if index.get("name") != "_id_"
    ]
    return CollectionEntry(file=file, documents=written, sha256=digest.hexdigest(), indexes=indexes)


def _index_spec(index: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"key": list(dict(index["key"]).items()), "name": index["name"]}
    spec.update({option: index[option] for option in _INDEX_OPTIONS if option in index})
    # Through Extended JSON and back: what the manifest (plain JSON) can hold.
    plain: dict[str, Any] = json.loads(json_util.dumps(spec, json_options=_JSON))
    return plain


# ---------------------------------------------------------------------------------- restore
def read_manifest(folder: Path) -> Manifest:
    """The backup's manifest, with every file checked against it; raises BackupError."""
    path = folder / MANIFEST
    if not path.is_file():
        raise BackupError(f"{folder} has no {MANIFEST}: not a Mnemo backup, or an interrupted one")
    try:
        manifest = Manifest.model_validate_json(path.read_bytes())
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "manifest"
        raise BackupError(f"{path}: {where}: {problem['msg']}") from None
    if manifest.format_version > FORMAT_VERSION:
        raise BackupError(
            f"{path}: backup format {manifest.format_version} is newer than this Mnemo's "
            f"({FORMAT_VERSION}); restore it with the Mnemo that made it or a newer one"
        )
    for name, entry in manifest.collections.items():
        file = folder / entry.file
        if Path(entry.file).name != entry.file or not file.is_file():
            raise BackupError(f"backup file {entry.file} for collection {name} is missing")
        if _sha256(file) != entry.sha256:
            raise BackupError(f"backup file {entry.file} does not match its checksum: damaged")
    return manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


async def restore(
    store: MongoStore,
    knowledge: Knowledge,
    messages: MessageIndex,
    folder: Path,
    *,
    progress: Progress = progress_bars,
    data_dir: Path | None = None,
    ledger_files: Sequence[Path] = (),
) -> RestoreResult:
    """Load a backup into an empty database, migrate it, forget again whoever the forget
    ledger names (the backup's, `data_dir`'s and `ledger_files`': forgettings after the
    backup was made), and rebuild its vectors."""
    manifest = read_manifest(folder)
    ledger = ForgetLedger(store.db, data_dir, tuple(ledger_files))
    ledger.file_hashes()  # a ledger file that is none is refused before anything is loaded
    if manifest.schema_version > latest_version():
        raise BackupError(
            f"the backup's schema version {manifest.schema_version} is newer than this Mnemo's "
            f"({latest_version()}): restore it with the Mnemo that made it or a newer one"
        )
    db = store.db
    occupied = [
        name
        for name in sorted(await db.list_collection_names())
        if await db[name].count_documents({}, limit=1)
    ]
    if occupied:
        raise BackupError(
            f"database {db.name} is not empty ({', '.join(occupied[:5])}"
            f"{', ...' if len(occupied) > 5 else ''}): restore only into an empty database"
        )
    loaded = 0
    for name, entry in sorted(manifest.collections.items()):
        loaded += await _load_collection(db, name, folder / entry.file, entry, progress)
    await store.ensure_indexes()
    migrated = await migrate(db)
    # Before any vector is built: nothing of a forgotten person reaches Chroma again.
    applied = await ledger.apply()
    facts = await _rebuild_fact_vectors(store, knowledge, progress)
    indexed = await _rebuild_message_vectors(store, messages, progress)
    return RestoreResult(loaded, facts, indexed, migrated, applied)


async def _load_collection(
    db: AsyncDatabase, name: str, file: Path, entry: CollectionEntry, progress: Progress
) -> int:
    collection = db[name]
    loaded = 0
    with progress(f"restore {name}", entry.documents) as bar:
        for batch in _batches(_documents(file), INSERT_BATCH):
            if name == "facts":
                # This Chroma holds none of them yet: mark every fact for re-indexing.
                for document in batch:
                    document["indexed_at"] = None
            await collection.insert_many(batch, ordered=True)
            loaded += len(batch)
            bar.update(len(batch))
    for spec in entry.indexes:
        index = json_util.loads(json.dumps(spec), json_options=_JSON)
        options = {key: index[key] for key in _INDEX_OPTIONS if key in index}
        try:
            await collection.create_indexes(
                [IndexModel([tuple(pair) for pair in index["key"]], name=index["name"], **options)]
            )
        except PyMongoError as error:
            # An index the code creates itself at start-up may exist under another name.
            log.warning("index %s on %s not restored: %s", index["name"], name, error)
    if loaded != entry.documents:
        raise BackupError(f"{file.name}: {loaded} documents, the manifest says {entry.documents}")
    return loaded


def _documents(file: Path) -> Iterator[dict[str, Any]]:
    with file.open("r", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                yield json_util.loads(line, json_options=_JSON)
            except ValueError:
                raise BackupError(f"{file.name} line {number} is not Extended JSON") from None


def _batches(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _rebuild_fact_vectors(store: MongoStore, knowledge: Knowledge, progress: Progress) -> int:
    total = await store.db["facts"].count_documents({"indexed_at": None})
    with progress("vectors facts", total) as bar:
        done = await knowledge.reindex_missing(batch=INDEX_BATCH, progress=bar.update)
    return done


async def _rebuild_message_vectors(
    store: MongoStore, messages: MessageIndex, progress: Progress
) -> int:
    """What people said is indexed for recall (the bot's own replies are not, as at run time)."""
    memories = store.db["memories"]
    total = await memories.count_documents({})
    indexed = 0
    with progress("vectors messages", total) as bar:
        batch: list[Memory] = []
        async for document in memories.find({}).sort("_id", 1):
            memory = Memory.model_validate({**document, "id": document["_id"]})
            if memory.user_id != memory.agent_id and memory.content.text.strip():
                batch.append(memory)
            bar.update(1)
            if len(batch) == INDEX_BATCH:
                indexed += await _index_messages(messages, batch)
                batch = []
        indexed += await _index_messages(messages, batch)
    return indexed


async def _index_messages(messages: MessageIndex, batch: list[Memory]) -> int:
    # Concurrent calls share one embedding batch and one Chroma write (MessageIndex batches them).
    await asyncio.gather(*(messages.index_message(memory) for memory in batch))
    return len(batch)

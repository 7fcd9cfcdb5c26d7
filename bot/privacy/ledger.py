"""The forget ledger: who asked to be forgotten, where, as one-way hashes, so that restoring a
backup never brings them back.

A backup made before someone's /forgetme still holds everything about them. Each forgetting
therefore records `sha256("mnemo-forgotten:<world id>:<person id>")` (no name, no id in the
clear) in three places: the `forget_ledger` collection (so every later backup carries it), and
`forget_ledger.jsonl` in the data folder (owner-only; it outlives the database a restore
replaces, so an older backup restored still meets the newer forgettings). `mnemo restore`
merges both, then forgets again every (person, world) of the restored data whose hash is in
the ledger, before any vector is rebuilt.

What no ledger names comes back: a backup restored into a fresh data folder (the disaster
case: the old folder, and its file, are gone) knows only the forgettings made before the
backup. So the file is worth keeping apart from the data folder (it is a few bytes a
forgetting), and `mnemo restore --forget-ledger FILE` reads such a copy (`extra_files`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import epoch_millis, utcnow

log = logging.getLogger(__name__)

COLLECTION = "forget_ledger"
LEDGER_FILE = "forget_ledger.jsonl"
# Plugins' collections (`plugin_<name>_...`, bot/plugin/services.py) of a restored database are
# swept by `user_id` and `world_id`, as the shipped plugins key what they keep.
PLUGIN_PREFIX = "plugin_"
_HASH = re.compile(r"[0-9a-f]{64}")


def forgotten_hash(person_id: str, world_id: str) -> str:
    """One-way: tells whether a given person and world were forgotten, never who was."""
    return hashlib.sha256(f"mnemo-forgotten:{world_id}:{person_id}".encode()).hexdigest()


class LedgerFileError(ValueError):
    """A file given as a forget ledger that is none (unreadable, or no ledger line in it)."""


@dataclass(frozen=True)
class LedgerApplied:
    """What a restore's ledger knew, where from, and how many it forgot again."""

    forgotten: int  # (person, world) pairs of the restored data forgotten again
    in_backup: int  # forgettings the restored database's own ledger holds
    in_data_folder: int | None  # the data folder's file (None: it has none)
    in_files: dict[str, int]  # each file given (--forget-ledger), by its path


@dataclass(frozen=True)
class ForgetLedger:
    """The ledger of one deployment: its database and (if any) its data folder's file, plus
    copies kept elsewhere (`extra_files`, read only)."""

    db: AsyncDatabase
    data_dir: Path | None = None
    extra_files: tuple[Path, ...] = ()

    @property
    def path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / LEDGER_FILE

    async def record(self, person_id: str, world_id: str) -> None:
        """Note one forgetting, in the database and in the data folder's file."""
        digest = forgotten_hash(person_id, world_id)
        await self.db[COLLECTION].update_one(
            {"_id": digest}, {"$set": {"forgotten_ms": epoch_millis(utcnow())}}, upsert=True
        )
        if self.path is not None:
            _append(self.path, digest)

    def file_hashes(self) -> set[str]:
        """The data folder's file and every extra file, read (an extra one that is no ledger
        raises `LedgerFileError`)."""
        found = _hashes_in(self.path) if self.path is not None and self.path.exists() else set()
        for extra in self.extra_files:
            found |= read_ledger_file(extra)
        return found

    async def hashes(self) -> set[str]:
        """Every forgetting known: the database's ledger and the files'."""
        stored = {str(doc["_id"]) async for doc in self.db[COLLECTION].find({}, {"_id": 1})}
        return stored | self.file_hashes()

    async def apply(self) -> LedgerApplied:
        """After a restore: merge the files into the database's ledger (and the data folder's
        file, so it knows them too), then delete what the restored data holds about every
        person forgotten in a world (their messages and the replies to them, facts about
        them, jobs, the name they told there, and plugin records keyed by person and
        world)."""
        db = self.db
        stored = {str(doc["_id"]) async for doc in db[COLLECTION].find({}, {"_id": 1})}
        own = self.path is not None and self.path.exists()
        in_folder = _hashes_in(self.path) if own and self.path is not None else set()
        in_files = {str(extra): read_ledger_file(extra) for extra in self.extra_files}
        known = stored | in_folder | set().union(*in_files.values())
        for digest in sorted(known - stored):  # forgotten after the backup was made
            await db[COLLECTION].insert_one({"_id": digest, "forgotten_ms": epoch_millis(utcnow())})
        if self.path is not None and self.path.parent.is_dir():
            for digest in sorted(known - in_folder):
                _append(self.path, digest)
        forgotten = await self._forget_known(known) if known else 0
        return LedgerApplied(
            forgotten=forgotten,
            in_backup=len(stored),
            in_data_folder=len(in_folder) if own else None,
            in_files={path: len(found) for path, found in in_files.items()},
        )

    async def _forget_known(self, known: set[str]) -> int:
        """Delete what the database holds of every (person, world) in `known`; how many."""
        db = self.db
        pairs: set[tuple[str, str]] = set()
        agents: set[str] = set()
        async for doc in db["memories"].find({}, {"user_id": 1, "world_id": 1, "agent_id": 1}):
            pairs.add((str(doc.get("user_id")), str(doc.get("world_id"))))
            agents.add(str(doc.get("agent_id")))
        async for doc in db["facts"].find({}, {"subject_id": 1, "world_id": 1}):
            pairs.add((str(doc.get("subject_id")), str(doc.get("world_id"))))
        matched = sorted(
            (person, world)
            for person, world in pairs
            if person not in agents and forgotten_hash(person, world) in known
        )
        others = [
            name for name in await db.list_collection_names() if name.startswith(PLUGIN_PREFIX)
        ]
        for person, world in matched:
            await _forget_documents(db, person, world, others)
        if matched:
            log.info("restore: forgot %d person(s) the forget ledger names again", len(matched))
        return len(matched)


async def _forget_documents(db: AsyncDatabase, person: str, world: str, others: list[str]) -> None:
    said = [
        str(doc["_id"])
        async for doc in db["memories"].find({"user_id": person, "world_id": world}, {"_id": 1})
    ]
    replies = (
        [
            str(doc["_id"])
            async for doc in db["memories"].find(
                {"world_id": world, "content.in_reply_to": {"$in": said}}, {"_id": 1}
            )
        ]
        if said
        else []
    )
    gone = said + replies
    if gone:
        await db["memories"].delete_many({"_id": {"$in": gone}})
        await db["evaluations"].delete_many({"message_id": {"$in": gone}})
    await db["evaluations"].delete_many({"message.user_id": person, "message.world_id": world})
    await db["facts"].delete_many({"subject_id": person, "world_id": world})
    await db["accounts"].update_one({"_id": person}, {"$set": {f"told_names.{world}": None}})
    for name in others:
        await db[name].delete_many({"user_id": person, "world_id": world})


def read_ledger_file(path: Path) -> set[str]:
    """The hashes of a forget ledger file kept apart (`mnemo restore --forget-ledger`);
    `LedgerFileError` when it cannot be read or holds no ledger line (the wrong file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not text"
        raise LedgerFileError(f"cannot read the forget ledger {path}: {reason}") from None
    found = _hashes_in_text(text)
    if text.strip() and not found:
        raise LedgerFileError(
            f"{path} holds no forget-ledger line ({LEDGER_FILE} lines read "
            '{"hash": "<64 hex digits>"}): is it the right file?'
        )
    return found


def _hashes_in(path: Path) -> set[str]:
    return _hashes_in_text(path.read_text(encoding="utf-8"))


def _hashes_in_text(text: str) -> set[str]:
    found: set[str] = set()
    for line in text.splitlines():
        try:
            digest = json.loads(line)["hash"]
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line: the database copy still has it
        if isinstance(digest, str) and _HASH.fullmatch(digest):
            found.add(digest)
    return found


def _append(path: Path, digest: str) -> None:
    line = (json.dumps({"hash": digest}) + "\n").encode("utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

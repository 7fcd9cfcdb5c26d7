"""The database's schema version, and the migrations that bring an older database up to it.

Every start-up calls `migrate()`: one read when the database is current. Otherwise the process
takes a lock in MongoDB (a lease of bot/storage/leases.py, kept in mnemo_meta where earlier
releases kept it: with an expiry, renewed while it works, so a process killed mid-migration does
not block the others forever), re-reads the version (another process may
have finished meanwhile), runs each missing migration in order and records the version after
each one, so a crash resumes where it stopped. Other processes starting at the same moment wait
for the lock holder instead of migrating twice.

Times are integer milliseconds: nx-27017 compares dates only to the second.

Adding a migration: append `Migration(N + 1, "what it changes", apply)` to `MIGRATIONS`, where
`apply(db)` is safe to run again on a database it already changed (a crash between the change
and the version record replays it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from bot.domain.records import now_ms
from bot.storage.leases import Leases

log = logging.getLogger(__name__)

META_COLLECTION = "mnemo_meta"
SCHEMA_ID = "schema"
LOCK_ID = "migration_lock"
# A lock not renewed for this long belongs to a dead process and may be taken over.
LOCK_TTL_MS = 60_000
RENEW_EVERY_SECONDS = LOCK_TTL_MS / 1000 / 4
WAIT_POLL_SECONDS = 0.2


class MigrationError(RuntimeError):
    """The database cannot be brought to this Mnemo's schema; the message is one line."""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[AsyncDatabase], Awaitable[None]]


async def _baseline(db: AsyncDatabase) -> None:
    """Version 1 is the layout releases before schema versions wrote: nothing to change,
    only the version to record. Later migrations start from it."""


async def _told_names_per_world(db: AsyncDatabase) -> None:
    """An account's one `told_name` (shown in every world) becomes `told_names` by world: kept
    in each world where a fact about the person states it (where it was told), dropped where
    none does. A name nobody can place in a world is dropped: better to use the platform's
    name than to carry a name into a world it was never told in."""
    accounts = db["accounts"]
    async for account in accounts.find({}, {"told_name": 1}):
        name = account.get("told_name")
        if not name:
            continue
        wanted = str(name).casefold()
        worlds = sorted(
            {
                str(fact["world_id"])
                async for fact in db["facts"].find(
                    {"subject_id": account["_id"]}, {"world_id": 1, "text": 1}
                )
                if wanted in str(fact.get("text", "")).casefold() and fact.get("world_id")
            }
        )
        update: dict[str, object] = {f"told_names.{world}": name for world in worlds}
        update["told_name"] = None  # last: a crash before it repeats the same $set
        await accounts.update_one({"_id": account["_id"]}, {"$set": update})


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "schema version recorded (the layout of earlier releases)", _baseline),
    Migration(2, "a told name belongs to the world it was told in", _told_names_per_world),
)


def latest_version(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return max((m.version for m in migrations), default=0)


async def schema_version(db: AsyncDatabase) -> int:
    """The recorded version; 0 for a database written before versions were recorded."""
    document = await db[META_COLLECTION].find_one({"_id": SCHEMA_ID})
    return int(document["version"]) if document else 0


async def migrate(
    db: AsyncDatabase,
    migrations: Sequence[Migration] = MIGRATIONS,
    *,
    wait_seconds: float = 600.0,
) -> list[int]:
    """Bring `db` to the latest version; returns the versions this call applied."""
    ordered = sorted(migrations, key=lambda m: m.version)
    latest = latest_version(ordered)
    version = await schema_version(db)
    if version > latest:
        raise MigrationError(
            f"the database's schema version {version} is newer than this Mnemo's ({latest}): "
            "upgrade Mnemo, or restore a backup made by this version"
        )
    if version == latest:
        return []
    applied: list[int] = []
    async with _lock(db, wait_seconds) as still_held:
        version = await schema_version(db)  # another process may have migrated meanwhile
        for migration in ordered:
            if migration.version <= version:
                continue
            if not still_held():
                raise MigrationError("lost the migration lock (renewals failed); start again")
            log.info(
                "migrating the database to version %d: %s", migration.version, migration.description
            )
            await migration.apply(db)
            await db[META_COLLECTION].update_one(
                {"_id": SCHEMA_ID},
                {"$set": {"version": migration.version, "migrated_ms": now_ms()}},
                upsert=True,
            )
            applied.append(migration.version)
    return applied


@contextlib.asynccontextmanager
async def _lock(db: AsyncDatabase, wait_seconds: float) -> AsyncIterator[Callable[[], bool]]:
    """Hold the migration lock; yields a function telling whether it is still ours."""
    meta = db[META_COLLECTION]
    lock = Leases(db, collection=META_COLLECTION)
    owner = str(uuid.uuid4())
    deadline = time.monotonic() + wait_seconds
    while not await _try_take(lock, meta, owner):
        if time.monotonic() > deadline:
            raise MigrationError(
                f"another process has held the migration lock for over {wait_seconds:.0f} s; "
                f"if none is running, delete the {LOCK_ID!r} document in {META_COLLECTION}"
            )
        await asyncio.sleep(WAIT_POLL_SECONDS)
    held = True

    async def renew() -> None:
        nonlocal held
        while True:
            await asyncio.sleep(RENEW_EVERY_SECONDS)
            held = not await lock.renew({LOCK_ID}, owner, LOCK_TTL_MS)

    renewer = asyncio.create_task(renew(), name="migration-lock")
    try:
        yield lambda: held
    finally:
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await renewer
        await lock.release(LOCK_ID, owner)


async def _try_take(lock: Leases, meta: AsyncCollection, owner: str) -> bool:
    """Take the lock if it is free or its holder stopped renewing it (died)."""
    now = now_ms()
    # Read first only to tell a take-over (worth a warning) from a free lock.
    holder = await meta.find_one({"_id": LOCK_ID}, {"expires_ms": 1})
    if not await lock.take(LOCK_ID, owner, LOCK_TTL_MS, now=now):
        return False
    if holder is not None and int(holder.get("expires_ms", 0)) <= now:
        log.warning("took over the migration lock of a process that stopped renewing it")
    return True

"""Writes to several collections in as few round trips as the server allows.

A message's settling (the message and its replies, the job's release) touches two
collections. MongoDB 8.0's client-level `bulkWrite` (PyMongo's `AsyncMongoClient.bulk_write`)
sends them as one command. Elsewhere consecutive inserts into one collection go as one
`insert` command and every other write as its own, in the same order, with the same error
semantics. Either way the writes are not a transaction: ordered, a failed write stops the
ones after it.

Whether the server is 8.0 is asked once (`buildInfo`), not read from the wire version: the
bundled nx-27017 server advertises 8.0's wire version and accepts `bulkWrite`, but reports
7.0 and runs the command outside its database's lock, so under load a write is lost
(`mnemo bench scale` lost evaluation jobs that way).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pymongo import AsyncMongoClient, InsertOne, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    BulkWriteError,
    ClientBulkWriteException,
    DuplicateKeyError,
    InvalidOperation,
)

log = logging.getLogger(__name__)

DUPLICATE_KEY = 11000


@dataclass(frozen=True)
class Insert:
    collection: str
    document: Mapping[str, Any]


@dataclass(frozen=True)
class Update:
    collection: str
    filter: Mapping[str, Any]
    update: Mapping[str, Any]
    upsert: bool = False


Write = Insert | Update


@dataclass
class BatchWriteError(Exception):
    """Writes of a batch that failed: their index in the batch -> the server's error code.
    Ordered, the writes after the first failure were not attempted."""

    failed: dict[int, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"batch writes failed: {self.failed}"

    def only_duplicates(self) -> bool:
        return all(code == DUPLICATE_KEY for code in self.failed.values())


class Batches:
    """Runs batches of writes against one database on the client it belongs to."""

    def __init__(
        self, client: AsyncMongoClient, db: AsyncDatabase, *, client_bulk: bool | None = None
    ) -> None:
        self._client = client
        self._db = db
        # Whether the server takes a client-level bulkWrite; None until it has said so.
        self._client_bulk = client_bulk
        self._asking: asyncio.Lock = asyncio.Lock()

    async def write(self, writes: Sequence[Write], *, ordered: bool = True) -> None:
        """Apply the writes; raises BatchWriteError naming the ones that failed."""
        if not writes:
            return
        if self._client_bulk is None:
            await self._ask_server()
        if self._client_bulk:
            try:
                await self._client.bulk_write(
                    [self._model(w) for w in writes], ordered=ordered, verbose_results=False
                )
                return
            except ClientBulkWriteException as error:
                # The server's error documents ({idx, code, errmsg}): pymongo annotates its
                # `write_errors` as WriteError exceptions, but returns these documents.
                documents: list[Mapping[str, Any]] = error.details.get("writeErrors") or []
                failed = {int(d["idx"]): int(d.get("code", 0)) for d in documents}
                if error.error is not None or not failed:
                    raise
                raise BatchWriteError(failed) from None
            except InvalidOperation:
                # Refused by the client before anything was sent (a server downgraded since).
                self._client_bulk = False
        await self._by_collection(writes, ordered=ordered)

    async def _ask_server(self) -> None:
        async with self._asking:
            if self._client_bulk is not None:
                return
            info = await self._client.admin.command("buildInfo")
            major = int(str(info.get("version", "0")).split(".")[0] or 0)
            self._client_bulk = major >= 8
            if not self._client_bulk:
                log.info("MongoDB %s: batched writes go one command per collection", major)

    async def _by_collection(self, writes: Sequence[Write], *, ordered: bool) -> None:
        """One `insert` per run of inserts into one collection, one command per update."""
        failed: dict[int, int] = {}
        index = 0
        while index < len(writes):
            write = writes[index]
            collection = self._db[write.collection]
            if isinstance(write, Insert):
                run = [index]
                while (
                    run[-1] + 1 < len(writes)
                    and isinstance(writes[run[-1] + 1], Insert)
                    and writes[run[-1] + 1].collection == write.collection
                ):
                    run.append(run[-1] + 1)
                documents = [dict(writes[i].document) for i in run]  # type: ignore[union-attr]
                try:
                    await collection.insert_many(documents, ordered=ordered)
                except BulkWriteError as error:
                    for problem in error.details.get("writeErrors", []):
                        failed[run[int(problem["index"])]] = int(problem.get("code", 0))
                    if failed and not all(c == DUPLICATE_KEY for c in failed.values()):
                        raise BatchWriteError(failed) from None
                index = run[-1] + 1
            else:
                try:
                    await collection.update_one(
                        dict(write.filter), dict(write.update), upsert=write.upsert
                    )
                except DuplicateKeyError:
                    failed[index] = DUPLICATE_KEY
                index += 1
            if failed and ordered:
                break
        if failed:
            raise BatchWriteError(failed)

    def _model(self, write: Write) -> InsertOne[Any] | UpdateOne:
        namespace = f"{self._db.name}.{write.collection}"
        if isinstance(write, Insert):
            return InsertOne(dict(write.document), namespace=namespace)
        return UpdateOne(
            dict(write.filter), dict(write.update), upsert=write.upsert, namespace=namespace
        )

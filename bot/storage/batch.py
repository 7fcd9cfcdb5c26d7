"""Writes to several collections in one round trip.

A message's intake (its evaluation job, the message, the room's count) and its settling (the
replies, the job's release) touch three collections each. MongoDB 8.0's client-level
`bulkWrite` (PyMongo's `AsyncMongoClient.bulk_write`, which the bundled nx-27017 server
speaks too) sends them as one command. An older server refuses it before anything is sent;
the writes then go one command each, in the same order, with the same error semantics.
Either way the writes are not a transaction: ordered, a failed write stops the ones after it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pymongo import AsyncMongoClient, InsertOne, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ClientBulkWriteException, DuplicateKeyError, InvalidOperation

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

    async def write(self, writes: Sequence[Write], *, ordered: bool = True) -> None:
        """Apply the writes; raises BatchWriteError naming the ones that failed."""
        if not writes:
            return
        if self._client_bulk is not False:
            try:
                await self._client.bulk_write(
                    [self._model(w) for w in writes], ordered=ordered, verbose_results=False
                )
                self._client_bulk = True
                return
            except ClientBulkWriteException as error:
                failed = {int(e["idx"]): int(e.get("code", 0)) for e in error.write_errors or []}
                if error.error is not None or not failed:
                    raise
                raise BatchWriteError(failed) from None
            except InvalidOperation:
                # Refused by the client before anything was sent: the server is older than 8.0.
                log.info("MongoDB is older than 8.0: batched writes go one command each")
                self._client_bulk = False
        await self._one_by_one(writes, ordered=ordered)

    async def _one_by_one(self, writes: Sequence[Write], *, ordered: bool) -> None:
        failed: dict[int, int] = {}
        for index, write in enumerate(writes):
            collection = self._db[write.collection]
            try:
                if isinstance(write, Insert):
                    await collection.insert_one(dict(write.document))
                else:
                    await collection.update_one(
                        dict(write.filter), dict(write.update), upsert=write.upsert
                    )
            except DuplicateKeyError:
                failed[index] = DUPLICATE_KEY
                if ordered:
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

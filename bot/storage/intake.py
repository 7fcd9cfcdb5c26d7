"""A message's own writes, in as few round trips as the server allows.

Opening writes the message's evaluation job, holding a copy of the message: one insert, and
the message is durable (a crash from here on loses nothing; a redelivered message stops at
the job). Settling stores the message and its replies and releases the job: the replies are
counted first (one `findAndModify`, which says the position the job carries), then the
message, the replies and the release go as one batch (bot/storage/batch.py): one command
on MongoDB 8.0, two elsewhere (the inserts, the release). A crash between sending a reply
and settling does not send it again: the reply was recorded in the data folder as soon as its
send returned (bot/runtime/intake/sent_replies.py) and recovery stores it from there (the reply's
id keeps it stored once). MongoDB unreachable while
settling: the error reaches the outage journal (bot/runtime/intake/intake.py), which keeps the
message and the replies sent and stores them on replay.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.domain.records import EvaluationJob, Memory
from bot.storage.batch import Batches, BatchWriteError, Write
from bot.storage.jobs import JobStore
from bot.storage.memories import Memories
from bot.storage.mongo import MongoStore


class IntakeWrites:
    def __init__(self, store: MongoStore) -> None:
        self._store = store
        self._batches = Batches(store.client, store.db)

    async def settle(
        self,
        job: EvaluationJob,
        unsaved: Sequence[Memory],
        *,
        did_respond: bool,
        position: int | None,
    ) -> int | None:
        """Store `unsaved` (the message, when it is not stored yet, and the replies) and
        release the job; returns the position the job carries: the room's count once they
        are stored. `position` is that count when nothing is left to store (None: unknown,
        the message was stored by an earlier attempt)."""
        if unsaved:
            position = await self._store.memories.add_to_count(
                job.room_id, len(unsaved), unwritten=len(unsaved)
            )
        writes: list[Write] = [Memories.insert_write(memory) for memory in unsaved]
        writes.append(JobStore.release_write(job.id, did_respond=did_respond, position=position))
        try:
            # Unordered: a reply stored by an earlier attempt must not keep the job back.
            await self._batches.write(writes, ordered=False)
        except BatchWriteError as error:
            if not error.only_duplicates():
                raise
        return position

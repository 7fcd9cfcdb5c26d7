"""A person edits a message: what Mnemo keeps of it, and learned from it, follows the new words.

Telegram (`edited_message`) and Discord (a message update) say a message now reads otherwise.
The stored message takes the new words, and an edit job goes on the room's evaluation queue
(`trigger="edit"`), in the room's order after whatever may still be learning from the old
words: it withdraws every fact those words were the evidence of (from MongoDB and Chroma, as
`/forget` deletes one), and the evaluators that read edits (`Evaluator.reads_edits`: the
facts reading) read the message again, so "I live in Lisbon" edited to "I live in Porto"
leaves Porto and no Lisbon. Nothing is answered again: the reply was to what was said then.

An edit of a message Mnemo never kept (said before it came, by someone who opted out, or
forgotten) changes nothing, nor does one that leaves the words as they were (Discord updates a
message when a link preview is added). An edit lost to a crash between the two writes leaves
the new words stored and the old facts in place: the next edit reads it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from bot.domain.records import Memory, new_id
from bot.plugin.services import ConsentCheck
from bot.queue.worker import EvaluationQueue
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# What became of an edit: "relearning" (stored, its edit job queued), or why nothing was done.
EditOutcome = Literal["relearning", "unchanged", "unknown", "not_allowed"]


@dataclass(frozen=True)
class MessageEdits:
    store: MongoStore
    evaluations: EvaluationQueue
    # (person, room, world) -> may the person be learned about there (consent, learning on).
    may_learn: ConsentCheck

    async def edited(self, memory: Memory) -> EditOutcome:
        """The message `memory` as its author edited it (an adapter's `to_memory` of the
        edited message: its id and its new words are what count)."""
        stored = await self.store.memories.get(memory.id)
        if stored is None or stored.user_id != memory.user_id or stored.world_id != memory.world_id:
            return "unknown"
        text = memory.content.text
        if stored.content.text == text:
            return "unchanged"
        if not await self.may_learn(memory.user_id, memory.room_id, memory.world_id):
            return "not_allowed"
        await self.store.memories.set_text(memory.id, text)
        # A key of its own: the same message edited back and forth is read every time (a
        # redelivered edit finds its words stored already, above, and queues nothing).
        await self.evaluations.enqueue(stored, did_respond=False, trigger="edit", key=new_id())
        log.info("message %s was edited; learning from its new words", memory.id)
        return "relearning"

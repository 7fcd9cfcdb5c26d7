"""Forgetting a person in one world: everything Mnemo and its plugins keep about them there.

What goes, in this order:

1. their evaluation jobs that have not started (a job would learn again what is being
   forgotten, and an intake job holds a copy of the message text), then the running ones of
   their rooms are waited for;
2. the facts about them, current and closed (the history), and the facts' vectors;
3. their messages and the bot's replies to them (a reply quotes them: "Nice to meet you,
   Sarah") with their vectors, and every job left for those messages;
4. what each plugin keeps, through its `forget` hook;
5. their account record once nothing refers to it any more (no message and no fact about them
   in any world), otherwise the name they told the bot in this world;
   and the direct-message rooms of the world left empty (Telegram names a DM after a person);
6. the data folder's files that quote them: the record of sent replies (rewritten at once),
   the outage journal's set-aside lines; the console's /export files (`forget_exports`, run
   by the console, which knows its folder); and a one-way hash of (person, world) goes into
   the forget ledger (bot/privacy/ledger.py), so a restored backup forgets them again;
7. with the bundled server, its database file rewritten and its write-ahead log emptied
   (`DatabaseFiles.scrub`, bot/storage/bundled/scrub.py): SQLite keeps a deleted row's bytes
   in its pages and the log until then, readable in the data folder while the bot runs (one
   fact forgotten and the retention job's deletions are scrubbed the same way).

Other people's messages and facts, and the same person's data in other worlds, stay. A step
that fails raises: a half-done forgetting must never be reported as done.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bot.knowledge.messages import MessageIndex
from bot.privacy.ledger import ForgetLedger

if TYPE_CHECKING:
    from bot.memory.store import Knowledge
    from bot.plugin.host import PluginHost
    from bot.queue.worker import EvaluationQueue
    from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)


# The data folder's files that can hold a person's words, as forgetting sees them (the intake
# owns them: bot/runtime/intake/, a layer above this one).
class SentReplyRecord(Protocol):
    def forget_messages(self, message_ids: set[str]) -> None: ...


class SetAsideJournal(Protocol):
    def forget_set_aside(self, user_id: str, world_id: str) -> int: ...


# The database's own files, which may keep deleted bytes (the bundled server's SQLite file).
class DatabaseFiles(Protocol):
    async def scrub(self) -> None: ...


# Jobs that have not started yet: deleted before waiting for the running ones.
NOT_STARTED = ["pending", "retrying"]


def _keep_caches(ids: Sequence[str]) -> None:
    """No profile cache to update."""


@dataclass(frozen=True)
class Forgotten:
    """What forgetting a person in a world removed."""

    facts: int = 0
    messages: int = 0
    replies: int = 0
    jobs: int = 0
    # Plugin name -> how many records its `forget` hook removed.
    plugins: Mapping[str, int] = field(default_factory=dict)
    # The account record went too: nothing else referred to it.
    account: bool = False

    def describe(self, *, about: str = "you", whose: str = "your") -> str:
        """What went, for the person: "2 facts about you, 3 of your messages and ..."."""
        parts = [
            f"{self.facts} fact{'s' * (self.facts != 1)} about {about}",
            f"{self.messages} of {whose} messages",
            f"{self.replies} of my replies to them",
        ]
        kept = [f"{name}: {count}" for name, count in self.plugins.items() if count]
        if kept:
            parts.append("what my plugins kept (" + ", ".join(kept) + ")")
        return ", ".join(parts[:-1]) + " and " + parts[-1]


class Forgetting:
    """Forgets people. Built from the runtime's parts (see `bot.commands.command_set`)."""

    def __init__(
        self,
        *,
        store: MongoStore,
        knowledge: Knowledge,
        messages: MessageIndex,
        plugins: PluginHost,
        evaluations: EvaluationQueue,
        agent_id: str,
        forget_profiles: Callable[[Sequence[str]], None] = _keep_caches,
        wait_for_learning: float = 30.0,
        sent_replies: SentReplyRecord | None = None,
        journal: SetAsideJournal | None = None,
        ledger: ForgetLedger | None = None,
        database_files: DatabaseFiles | None = None,
    ) -> None:
        self._store = store
        self._knowledge = knowledge
        self._messages = messages
        self._plugins = plugins
        self._evaluations = evaluations
        self._agent_id = agent_id
        # Profiles (accounts, rooms) the runtime remembers having written: a deleted one must
        # be written again when its owner comes back.
        self._forget_profiles = forget_profiles
        self._wait = wait_for_learning
        # The files of the data folder that can quote the person, and the forget ledger.
        self._sent_replies = sent_replies
        self._journal = journal
        self._ledger = ledger
        self._database_files = database_files

    async def person(self, person_id: str, world_id: str) -> Forgotten:
        """Forget everything about `person_id` in `world_id`."""
        store = self._store
        said = await store.memories.rooms_of_messages_by(user_id=person_id, world_id=world_id)
        messages = list(said)
        jobs = await store.jobs.delete_for_messages(
            messages, user_id=person_id, world_id=world_id, statuses=NOT_STARTED
        )
        for room_id in sorted(set(said.values())):
            # Running evaluations finish first, or they could learn again what goes now.
            if not await self._evaluations.join(room_id, self._wait):
                log.warning("forgetting: evaluations of room %s still running", room_id)
        # Looked up after the wait: a reply stored meanwhile goes too.
        replies = await store.memories.reply_ids(
            messages, agent_id=self._agent_id, world_id=world_id
        )
        fact_ids = await store.facts.delete_about(subject_id=person_id, world_id=world_id)
        gone = await store.memories.delete_ids(messages + replies)
        jobs += await store.jobs.delete_for_messages(
            messages + replies, user_id=person_id, world_id=world_id, statuses=None
        )
        await self._messages.forget(
            message_ids=messages + replies, user_id=person_id, world_id=world_id
        )
        await self._knowledge.forget_vectors(
            fact_ids=fact_ids, user_id=person_id, world_id=world_id
        )
        plugins = await self._plugins.forget(person_id, world_id)
        account = await self._forget_account(person_id, world_id)
        rooms = await store.rooms.delete_empty_dms(world_id)
        await self._forget_files(person_id, world_id, messages + replies)
        self._forget_profiles([person_id, *rooms])
        log.info(
            "forgot a person in a world: %d facts, %d messages and replies, %d jobs, %s",
            len(fact_ids),
            gone,
            jobs,
            dict(plugins),
        )
        return Forgotten(
            facts=len(fact_ids),
            messages=len(messages),
            replies=len(replies),
            jobs=jobs,
            plugins=plugins,
            account=account,
        )

    async def _forget_files(self, person_id: str, world_id: str, message_ids: list[str]) -> None:
        """The data folder's files that quote the person, and the ledger a restore reads."""
        if self._sent_replies is not None:
            await asyncio.to_thread(self._sent_replies.forget_messages, set(message_ids))
        if self._journal is not None:
            await asyncio.to_thread(self._journal.forget_set_aside, person_id, world_id)
        if self._ledger is not None:
            await self._ledger.record(person_id, world_id)
        if self._database_files is not None:
            await self._database_files.scrub()

    async def _forget_account(self, person_id: str, world_id: str) -> bool:
        """Delete the account once nothing refers to it; else drop the name they told the
        bot in this world (names told elsewhere stay). True when it was deleted."""
        store = self._store
        if not await store.memories.count_by(person_id) and not await store.facts.count_about(
            person_id
        ):
            return await store.accounts.delete(person_id)
        await store.accounts.forget_told_name(person_id, world_id)
        return False


def forget_exports(folder: Path, person_id: str, world_id: str) -> int:
    """Delete the /export files written to `folder` for a person in a world (the console
    writes them to disk; Telegram and Discord send them and keep none). Returns how many."""
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (
            isinstance(data, dict)
            and data.get("person_id") == person_id
            and data.get("world_id") == world_id
        ):
            path.unlink(missing_ok=True)
            removed += 1
    return removed

"""What the command layer uses, named: the stores and services a command reads or changes,
handed in instead of the whole runtime (which would let any command reach anything)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from bot.domain.records import Account, Room
from bot.knowledge.messages import MessageIndex
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel
from bot.llm.caps import DailySpend
from bot.memory.store import Knowledge
from bot.plugin.host import PluginHost
from bot.privacy.forgetting import DatabaseFiles
from bot.privacy.policy import PrivacyPolicy
from bot.queue.worker import EvaluationQueue
from bot.runtime.intake.outage import Outage
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.languages import Languages
from bot.runtime.profiles import KnownProfiles
from bot.runtime.worlds import WorldChoices
from bot.storage.mongo import MongoStore

# Keeps the profiles a surface saw (whoever calls a command), skipped during an outage.
NoteProfiles = Callable[[Iterable[Account], Room | None], Awaitable[None]]


@dataclass(frozen=True)
class CommandServices:
    agent_id: str
    store: MongoStore
    knowledge: Knowledge  # facts: /forget, /facts history
    messages: MessageIndex  # forgetting a person's message vectors
    plugins: PluginHost  # plugins' commands, /stats lines, forget and export hooks
    privacy: PrivacyPolicy  # consent commands, retention (/stats)
    evaluations: EvaluationQueue  # "wait for learning", "finish evaluations before forgetting"
    ledger: UsageLedger  # model spend (/stats)
    profiles: KnownProfiles  # forgetting a person forgets their remembered profile too
    sent_replies: SentReplies  # forgetting reaches the data folder's record of sent replies
    outage: Outage | None  # commands wait for the database and the journal's replay
    note_profiles: NoteProfiles
    worlds: WorldChoices  # each world's character and model names (/character, /model, /stats)
    languages: Languages  # the language of every answer (/language, the person's, the operator's)
    model: LanguageModel  # /model checks a name with the endpoint before keeping it
    # The bundled server's files, scrubbed of what a forgetting deleted (None: MONGODB_URI).
    database_files: DatabaseFiles | None = None
    caps: DailySpend | None = None  # the daily spending caps, when set (/stats)

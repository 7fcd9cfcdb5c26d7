"""AgentRuntime: one message in, a reply out, and learning afterwards.

The runtime builds the parts and hands each what it uses: `StateComposer`
(bot/runtime/composing.py: the state and prompt templates), `Replier` (bot/runtime/replying.py:
the reply path), `Intake` (bot/runtime/intake/intake.py: the one way in for a message - consent,
the job, the reply, the release - with the outage journal and start-up recovery around it),
`EvaluationRunner` (bot/runtime/evaluation_runner.py: the elizaOS evaluation flow) and the
durable queue that runs it (bot/queue/worker.py). `handle()` is the intake's entry point.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from bot.domain.characters import Character
from bot.domain.records import Account, Memory, Room
from bot.domain.state import State
from bot.faults import FaultHook
from bot.i18n import SOURCE_LANGUAGE
from bot.knowledge.messages import MessageIndex
from bot.knowledge.prefetch import Background
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel
from bot.llm.caps import DailySpend
from bot.memory.store import Knowledge
from bot.plugin.api import Agent
from bot.plugin.host import PluginHost
from bot.plugin.loading import Registry
from bot.privacy.consent import ConsentStore
from bot.privacy.policy import PrivacyPolicy
from bot.queue.worker import EvaluationQueue, RetryPolicy
from bot.runtime.composing import StateComposer
from bot.runtime.editing import MessageEdits
from bot.runtime.evaluation_runner import EvaluationRunner
from bot.runtime.events import NO_EVENTS, RuntimeEvents
from bot.runtime.intake.intake import Intake
from bot.runtime.intake.missed import MissedRooms
from bot.runtime.intake.outage import Outage
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.languages import Languages
from bot.runtime.profiles import KnownProfiles
from bot.runtime.ratelimit import ReplyLimit
from bot.runtime.replying import EMPTY_REPLY, MODEL_FAILED_REPLY, RATE_LIMITED_REPLY, Replier
from bot.runtime.types import HandleResult, InLane, RuntimeOptions, Send, SenderFor, Typing
from bot.runtime.types import no_typing as _no_typing
from bot.runtime.worlds import WorldChoices
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# Adapters, tests and benchmarks import these from the runtime (they live with its parts).
__all__ = [
    "EMPTY_REPLY",
    "MODEL_FAILED_REPLY",
    "RATE_LIMITED_REPLY",
    "AgentRuntime",
    "HandleResult",
    "RuntimeOptions",
    "Send",
    "SenderFor",
    "Typing",
]


class AgentRuntime:
    def __init__(
        self,
        *,
        agent_id: str,
        character: Character,
        store: MongoStore,
        knowledge: Knowledge,
        messages: MessageIndex,
        model: LanguageModel,
        registry: Registry,
        ledger: UsageLedger,
        options: RuntimeOptions | None = None,
        rate_limiter: ReplyLimit | None = None,
        events: RuntimeEvents = NO_EVENTS,
        retry: RetryPolicy | None = None,
        faults: FaultHook | None = None,
        privacy: PrivacyPolicy | None = None,
        outage: Outage | None = None,
        lease_seconds: float = 30.0,
        owner: str | None = None,
        sent_replies: SentReplies | None = None,
        worlds: WorldChoices | None = None,
        caps: DailySpend | None = None,
        missed: MissedRooms | None = None,
        languages: Languages | None = None,
    ) -> None:
        """`caps`: the daily spending caps, when the operator set any; `model` is then the
        `CappedModel` that enforces them (bot/llm/caps.py)."""
        self.agent_id = agent_id
        self.character = character
        self.store = store
        self.knowledge = knowledge
        self.messages = messages
        self.model = model
        self.registry = registry
        self.ledger = ledger
        self.caps = caps
        self._options = options or RuntimeOptions()
        self.rate_limiter = rate_limiter
        self.events = events
        self._faults = faults or FaultHook()
        # Whose messages may be kept (consent), for how long, and the /privacy text.
        self.privacy = privacy or PrivacyPolicy(consent=ConsentStore(store.db))
        self.plugins = PluginHost(
            registry,
            store=store,
            knowledge=knowledge,
            model=model,
            agent=Agent(
                id=agent_id,
                name=character.name,
                names=tuple(character.names),
                bio=" ".join(character.bio).strip(),
            ),
            templates=character.templates,
            max_message_chars=self.options.max_message_chars,
            ledger=ledger,
        )
        # Plugins speaking later about a person (a follow-up) obey the same consent as learning.
        self.plugins.rooms.require_consent(self._may_learn_about)
        self.composer = StateComposer(
            agent_id=agent_id,
            character=character,
            store=store,
            knowledge=knowledge,
            registry=registry,
            plugins=self.plugins,
            options=self._options,
            worlds=worlds,  # each world's character and model names (/character, /model)
        )
        # Plugins' tasks speak in a world as its chosen character, with its model names.
        self.plugins.use_world_choices(self.composer.worlds.of)
        self.replier = Replier(
            agent_id=agent_id,
            store=store,
            model=model,
            registry=registry,
            plugins=self.plugins,
            ledger=ledger,
            composer=self.composer,
            options=self._options,
            rate_limiter=rate_limiter,
            events=events,
            faults=self._faults,
            sent_replies=sent_replies,  # replies sent and not settled yet (a data-folder file)
            caps=caps,  # a room over a daily cap is told once a day
            # The language of the bot's own lines (/language, the person's, MNEMO_LANGUAGE).
            languages=languages or Languages(store.worlds, SOURCE_LANGUAGE),
        )
        self.languages = self.replier.languages
        self.sent_replies = self.replier.sent_replies
        self.evaluator = EvaluationRunner(
            agent_id=agent_id,
            store=store,
            jobs=store.jobs,
            messages=messages,
            model=model,
            registry=registry,
            plugins=self.plugins,
            ledger=ledger,
            composer=self.composer,
            options=self._options,
            faults=self._faults,
            caps=caps,  # learning that needs the model waits out a daily cap
        )
        # The durable queue runs each job through the runner (it calls nothing else back).
        self.evaluations = EvaluationQueue(
            store,
            self.evaluator.run_job,
            retry=retry,
            faults=self._faults,
            lease_seconds=lease_seconds,
            owner=owner,
        )
        # A person's edit of a message they sent: stored, and learned from again.
        self.edits = MessageEdits(store, self.evaluations, self._may_learn_about)
        self.profiles = KnownProfiles(store)
        # The one way in for a message, with the outage journal and start-up recovery.
        self.intake = Intake(
            agent_id=agent_id,
            store=store,
            queue=self.evaluations,
            composer=self.composer,
            replier=self.replier,
            privacy=self.privacy,
            profiles=self.profiles,
            should_respond=self.should_respond,
            sent_replies=self.sent_replies,
            background=Background(messages),
            options=self._options,
            outage=outage,
            events=events,
            faults=self._faults,
            missed=missed,  # rooms owed a line about messages missed while restarting
            languages=self.languages,
        )

    @property
    def options(self) -> RuntimeOptions:
        return self._options

    @options.setter
    def options(self, options: RuntimeOptions) -> None:
        """Options are replaced whole (they are frozen); the collaborators follow."""
        self._options = options
        self.composer.options = options
        self.replier.options = options
        self.evaluator.options = options
        self.intake.options = options

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Set the plugins up (each keeps what its setup returns), then resume evaluations."""
        await self.plugins.setup()
        # Read first: the intake's recovery takes those messages over (see bot/queue/blame.py).
        busy = await self.evaluations.taking_messages_in()
        await self.intake.start()  # the journal an earlier run left, then what a crash left
        await self.evaluations.recover(busy=busy)

    async def stop(self) -> None:
        self.intake.stop()
        await self.evaluations.stop()
        await self.plugins.teardown()

    # ------------------------------------------------------------------ handle
    async def handle(
        self,
        memory: Memory,
        send: Send,
        *,
        typing: Typing = _no_typing,
        account: Account | None = None,
        room: Room | None = None,
    ) -> HandleResult:
        """Process one incoming message (bot/runtime/intake/intake.py). Safe to call twice with
        the same message: a crash at any step loses nothing."""
        return await self.intake.handle(memory, send, typing=typing, account=account, room=room)

    async def _may_learn_about(self, person_id: str, room_id: str, world_id: str) -> bool:
        refusal = await self.privacy.consent.check(
            user_id=person_id, room_id=room_id, world_id=world_id
        )
        return refusal is None

    async def answer_unanswered(
        self, platform: str, sender_for: SenderFor, in_lane: InLane | None = None
    ) -> int:
        """Answer the messages of `platform` a crash left unanswered (the intake's recovery),
        in their rooms' lanes; adapters call this as they connect. Returns how many were
        answered."""
        return await self.intake.answer_unanswered(platform, sender_for, in_lane)

    async def note_profiles(
        self, accounts: Iterable[Account] = (), room: Room | None = None
    ) -> None:
        """Keep the profiles an adapter saw outside a message's intake: the people a message
        mentions (so prompts and /facts can name them) and whoever calls a command. Adapters
        call this instead of writing accounts and rooms themselves; only changes are written."""
        await self.intake.note_profiles(accounts, room)

    def should_respond(self, memory: Memory, room: Room | None) -> bool:
        """DMs always; in groups only when mentioned, replied to, or called by name."""
        if memory.user_id == self.agent_id:
            return False
        if room is None or room.kind == "dm":
            return True
        if memory.mentions_agent or memory.replies_to_agent:
            return True
        text = memory.content.text.casefold()
        # The world's character's names (`/character`), as read at this message's intake.
        names = self.composer.names_in(memory.world_id)
        return any(_names_in(name.casefold(), text) for name in names)

    # ------------------------------------------------------------------ state and learning
    async def compose_state(
        self,
        memory: Memory,
        *,
        data: dict[str, Any] | None = None,
        providers: bool = True,
        room: Room | None = None,
    ) -> State:
        return await self.composer.compose_state(memory, data=data, providers=providers, room=room)

    # ------------------------------------------------------------- learning now (console, tests)
    async def flush_room(self, memory: Memory, timeout: float | None = None) -> bool:
        """Learn now from a room's unlearned messages (as the idle flush would) and wait."""
        return await self.evaluations.flush_room(memory, timeout)


def _names_in(name: str, text: str) -> bool:
    """Whole-word match of the bot's name, so "Mnemo" is found in "hey mnemo," not in "mnemonic"."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None

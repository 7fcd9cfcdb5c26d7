"""AgentRuntime: one message in, a reply out, and learning afterwards.

`handle()` stores the message, decides whether to answer, composes state through providers,
asks the model for a reply, runs an action the reply names, sends and stores the reply, then
enqueues an evaluation job; it also finishes what a crash left between intake and release.
The runtime owns intake and recovery and hands the rest to small collaborators it builds:
`StateComposer` (bot/runtime/composing.py: the state and prompt templates), `Replier`
(bot/runtime/replying.py: the reply path), `EvaluationRunner`
(bot/runtime/evaluation_runner.py: the elizaOS evaluation flow, run by the durable queue),
`KeptIntake` (bot/runtime/intake/journaled.py: the journal while MongoDB is away) and
`IntakeRecovery` (bot/runtime/intake/recovery.py: at start-up).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from bot.domain.characters import Character
from bot.domain.records import Account, Content, EvaluationJob, Memory, Room, reply_id, utcnow
from bot.domain.state import State
from bot.faults import FaultHook
from bot.knowledge.prefetch import Background
from bot.knowledge.store import Knowledge
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel
from bot.plugin.api import Agent
from bot.plugin.host import PluginHost
from bot.plugin.loading import Registry
from bot.privacy.consent import COLLECTION as CONSENT
from bot.privacy.consent import ConsentStore
from bot.privacy.policy import PrivacyPolicy
from bot.queue.worker import EvaluationQueue, RetryPolicy
from bot.runtime.composing import StateComposer
from bot.runtime.evaluation_runner import EvaluationRunner
from bot.runtime.events import NO_EVENTS, RuntimeEvents
from bot.runtime.intake.journaled import KeptIntake
from bot.runtime.intake.outage import Outage
from bot.runtime.intake.recovery import IntakeRecovery
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.profiles import KnownProfiles
from bot.runtime.ratelimit import ReplyLimit
from bot.runtime.replying import EMPTY_REPLY, MODEL_FAILED_REPLY, RATE_LIMITED_REPLY, Replier
from bot.runtime.types import HandleResult, RuntimeOptions, Send, SenderFor, Typing
from bot.runtime.types import no_typing as _no_typing
from bot.runtime.worlds import WorldChoices
from bot.storage.intake import IntakeWrites
from bot.storage.mongo import MongoStore
from bot.storage.window_reads import Read, Window

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
    ) -> None:
        self.agent_id = agent_id
        self.character = character
        self.store = store
        self.knowledge = knowledge
        self.model = model
        self.registry = registry
        self.ledger = ledger
        self._options = options or RuntimeOptions()
        self.rate_limiter = rate_limiter
        self.events = events
        self._faults = faults or FaultHook()
        # Whose messages may be kept (consent), for how long, and the /privacy text.
        self.privacy = privacy or PrivacyPolicy(consent=ConsentStore(store.db))
        # The queue calls back into the runtime, which hands the job to the runner below.
        self.evaluations = EvaluationQueue(
            store,
            self._run_job,
            retry=retry,
            faults=self._faults,
            lease_seconds=lease_seconds,
            owner=owner,
        )
        # Messages between intake and release in this process (a redelivery meanwhile waits).
        self._in_intake: set[str] = set()
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
        )
        self.sent_replies = self.replier.sent_replies
        self.evaluator = EvaluationRunner(
            agent_id=agent_id,
            store=store,
            jobs=self.evaluations.jobs,
            knowledge=knowledge,
            model=model,
            registry=registry,
            plugins=self.plugins,
            ledger=ledger,
            composer=self.composer,
            options=self._options,
            faults=self._faults,
        )
        self.profiles = KnownProfiles(store)
        self.kept = KeptIntake(self, outage)  # MongoDB unreachable: a journal (kept_intake.py)
        self.intake = IntakeWrites(store)
        self._background = Background(knowledge)
        self.recovery = IntakeRecovery(self, self._background.spawn)  # a crash left in intake

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

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Set the plugins up (each keeps what its setup returns), then resume evaluations."""
        await self.plugins.setup()
        await self.kept.start()  # messages an earlier run journaled go in first, in order
        await self.recovery.recover()
        await self.evaluations.recover()

    async def stop(self) -> None:
        self.recovery.stop()
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
        """Process one incoming message. Safe to call twice with the same message.

        Intake order, so that a crash at any step loses nothing: (0) consent is checked; (1) the
        message's evaluation job is written, holding a copy of the message; (2) the reply is
        sent; (3) the message and its replies are stored with the job's release to the
        evaluation worker, recording whether a reply was sent. A job still in intake is finished by
        `start()` / `answer_unanswered()`, or by the platform redelivering the message.
        """

        async def intake(result: HandleResult) -> HandleResult:
            arrived = time.perf_counter()
            # One read: consent, the room's recent messages, their people and facts, the room.
            where = dict(user_id=memory.user_id, room_id=memory.room_id, world_id=memory.world_id)
            consent = {CONSENT: Read.by_ids(CONSENT, self.privacy.consent.ids(**where))}
            window = await self.composer.reply_window(memory, with_room=room is None, extra=consent)
            here = room or window.room
            # Consent first, before anything of the message is kept (the job holds a copy, the
            # prefetch caches its text). Not kept: the notice when due, a reply when addressed
            # (as anyone gets; neither stored, no action), no evaluation.
            admission = await self.privacy.admit(memory, consent=window.extra[CONSENT])
            if not admission.learn:
                if admission.notice is not None:
                    await send(Content(text=admission.notice))
                if self.should_respond(memory, here) and not admission.repeat:
                    await self.replier.answer(
                        memory, send, typing, result, here, keep=False, window=window
                    )
                return result
            self._background.prefetch_embedding(memory)
            await self.profiles.note([] if account is None else [account], room)
            if account is not None:  # read before the sender's profile was written
                window.written_since(account)
            job, created = self.kept.opened(memory) or await self.evaluations.open_intake(memory)
            if not created and (job.status != "intake" or memory.id in self._in_intake):
                log.debug("message %s already handled", memory.id)
                return result
            self._faults.reached("handle:job-written")
            fresh = window if created else None  # new: stored with its replies, below
            return await self._take_in(job, memory, send, typing, here, arrived, result, fresh)

        return await self.kept.handle(memory, account, room, send, intake)

    async def _take_in(
        self,
        job: EvaluationJob,
        memory: Memory,
        send: Send | None,
        typing: Typing,
        room: Room | None,
        arrived: float | None = None,
        result: HandleResult | None = None,
        fresh: Window | None = None,
    ) -> HandleResult:
        """Steps 2-4 of `handle()`, filling `result`; also finishes a job a crash left in intake.
        `send` None: no way to reach the room (yet), so the message is only learned from.
        `fresh`: the job was written just now, so the message is new: it is stored with its
        replies and the job's release (bot/storage/intake.py); otherwise it is stored here.
        It is the room's window read at intake, which the reply then composes from."""
        self._in_intake.add(memory.id)
        result = result or HandleResult(stored=False)
        result.job = job
        try:
            if fresh is not None:
                result.stored = result.message_unstored = True
            else:
                position = await self.store.memories.insert(memory)
                result.stored, result.position = position is not None, position or 0
            self._faults.reached("handle:message-stored")
            # Replies a killed process sent and never settled: stored now, not sent again.
            recorded = self.sent_replies.replies_for(memory.id)
            result.unstored = [entry.reply for entry in recorded if entry.store]
            result.responded = bool(recorded)
            if not result.stored and not recorded:
                # Stored by an earlier attempt that died before releasing the job (or, before
                # jobs were written first, a message whose job was never written).
                answered = await self.answered(memory)
                if send is None or answered or not self.young(memory):
                    log.info("message %s: stored earlier, now queued to learn from", memory.id)
                    await self.evaluations.release(job, did_respond=answered, position=None)
                    return result
                log.info("message %s: stored earlier but never answered; answering", memory.id)
            if result.stored:
                self.events.message_received()
            room = room or await self.store.rooms.get(memory.room_id)
            if send is not None and not recorded and self.should_respond(memory, room):
                await self.replier.answer(
                    memory, send, typing, result, room, arrived=arrived, window=fresh
                )
            # What is not stored yet (the message, the replies) goes with the job's release.
            unstored = [memory] * result.message_unstored + result.unstored
            settled = await self.intake.settle(
                job, unstored, did_respond=result.responded, position=result.position or None
            )
            result.message_unstored, result.unstored, result.position = False, [], settled or 0
            self.sent_replies.forget(memory.id)
            self.evaluations.wake(job.room_id)
            self._faults.reached("handle:released")
            return result
        finally:
            self._in_intake.discard(memory.id)

    def young(self, memory: Memory) -> bool:
        """Still worth answering after a crash: a late reply to an old message only confuses."""
        return utcnow() - memory.created_at <= timedelta(seconds=self.options.answer_window)

    async def answered(self, memory: Memory) -> bool:
        """Whether the reply to this message was sent (recorded when sent, stored when settled)."""
        if self.sent_replies.replies_for(memory.id):
            return True
        return await self.store.memories.get(reply_id(memory.id, self.agent_id, 0)) is not None

    async def _may_learn_about(self, person_id: str, room_id: str, world_id: str) -> bool:
        refusal = await self.privacy.consent.check(
            user_id=person_id, room_id=room_id, world_id=world_id
        )
        return refusal is None

    async def answer_unanswered(self, platform: str, sender_for: SenderFor) -> int:
        """Answer the messages of `platform` a crash left unanswered
        (bot/runtime/intake/recovery.py); adapters call this once connected. Returns how many
        were answered."""
        return await self.recovery.answer_unanswered(platform, sender_for)

    async def note_profiles(
        self, accounts: Iterable[Account] = (), room: Room | None = None
    ) -> None:
        """Keep the profiles an adapter saw outside a message's intake: the people a message
        mentions (so prompts and /facts can name them) and whoever calls a command. Adapters
        call this instead of writing accounts and rooms themselves; only changes are written."""
        await self.kept.note_profiles(accounts, room)

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

    async def _run_job(self, job: EvaluationJob) -> list[str]:
        return await self.evaluator.run_job(job)

    # ------------------------------------------------------------------ helpers for commands
    async def flush_room(self, memory: Memory, timeout: float | None = None) -> bool:
        """Learn now from a room's unlearned messages (as the idle flush would) and wait."""
        await self.evaluations.enqueue(memory, did_respond=True, trigger="idle")
        return await self.evaluations.join(memory.room_id, timeout)


def _names_in(name: str, text: str) -> bool:
    """Whole-word match of the bot's name, so "Mnemo" is found in "hey mnemo," not in "mnemonic"."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None

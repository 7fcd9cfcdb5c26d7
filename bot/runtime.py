"""AgentRuntime: one message in, a reply out, and learning afterwards.

`handle()` stores the message, decides whether to answer, composes state through providers,
asks the model for a reply, runs an action the reply names, sends and stores the reply, then
enqueues an evaluation job. `evaluate()` follows the elizaOS flow (seeds/003) exactly: an
evaluator's handler runs only if (1) it has a handler, (2) the bot responded or it is
`always_run`, (3) its `validate()` is true, and (4) the selection step names it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from bot.characters import Character
from bot.evaluation import EvaluationFailed, EvaluationQueue, RetryPolicy
from bot.faults import FaultHook
from bot.llm.base import LanguageModel, ModelClass, ModelError, Task
from bot.llm.parsing import ReplyDraft, cap_reply, parse_reply, read_evaluator_selection
from bot.llm.usage import UsageLedger
from bot.models import Account, Content, EvaluationJob, Memory, Room, reply_id, utcnow
from bot.ops.events import NO_EVENTS, RuntimeEvents
from bot.plugin_api import Action, Agent, Context, Evaluator, Provided, Provider
from bot.plugin_host import PluginHost
from bot.plugins import Registry
from bot.prompts import (
    BUILTIN_TEMPLATES,
    character_values,
    format_actions,
    format_evaluators,
    names_json,
    render,
    reply_answer,
    selection_answer,
)
from bot.ratelimit import RateLimiter
from bot.state import State
from bot.storage.knowledge import Knowledge
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# Adapters pass how to reach the room: send a message, and show "typing…" while thinking.
Send = Callable[[Content], Awaitable[None]]
Typing = Callable[[], AbstractAsyncContextManager[Any]]
# How an adapter reaches a room it did not just hear from (to answer after a crash).
SenderFor = Callable[[Room, Memory], Send]

SELECTION_CONTEXT_MESSAGES = 4
SEEN_PROFILES = 10_000
MODEL_FAILED_REPLY = "Sorry, I can't think straight right now. Please try again in a moment."
RATE_LIMITED_REPLY = "I'm getting a lot of messages from you; give me a minute to catch up."
# Sent when the model's answer holds no words to send (empty, or only JSON syntax).
EMPTY_REPLY = "Sorry, I lost my train of thought. Could you say that again?"
# The selection answer is a few names: its token budget is a few per candidate.
SELECTION_MAX_TOKENS = 100
# Tokens allowed per reply character of the cap (a token is ~4 characters of English; the
# margin covers the JSON around the text and other languages).
REPLY_TOKENS_PER_CHAR = 0.4


@dataclass(frozen=True)
class RuntimeOptions:
    evaluator_selection: Literal["llm", "all"] = "llm"
    evaluator_timeout: float = 120.0
    recent_messages: int = 12
    max_message_chars: int = 4000
    # Longer replies are cut at a sentence end before they are split, sent and stored.
    max_reply_chars: int = 4000
    # After a crash, a message stored but not answered is answered if younger than this (s).
    answer_window: float = 300.0


@dataclass
class HandleResult:
    stored: bool
    responded: bool = False
    replies: list[Memory] = field(default_factory=list)
    action: str | None = None
    job: EvaluationJob | None = None
    # The room's message count once this message and its replies are stored (elizaOS
    # evaluates after storing the reply, and its cadence counts both).
    position: int = 0


def _no_typing() -> AbstractAsyncContextManager[Any]:
    return nullcontext()


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
        rate_limiter: RateLimiter | None = None,
        events: RuntimeEvents = NO_EVENTS,
        retry: RetryPolicy | None = None,
        faults: FaultHook | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.character = character
        self.store = store
        self.knowledge = knowledge
        self.model = model
        self.registry = registry
        self.ledger = ledger
        self.options = options or RuntimeOptions()
        self.rate_limiter = rate_limiter
        self.events = events
        self._faults = faults or FaultHook()
        self.evaluations = EvaluationQueue(store, self._run_job, retry=retry, faults=self._faults)
        # Messages between intake and release in this process (a redelivery meanwhile waits).
        self._in_intake: set[str] = set()
        # Jobs a crash left in intake whose message is young enough to answer, by job id.
        self._orphans: dict[str, tuple[EvaluationJob, Memory]] = {}
        self._timers: list[asyncio.TimerHandle] = []
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
        self._seen: OrderedDict[str, Account | Room] = OrderedDict()
        self._prefetches: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Set the plugins up (each keeps what its setup returns), then resume evaluations."""
        await self.plugins.setup()
        await self._recover_intake()
        await self.evaluations.recover()

    async def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        await self.evaluations.stop()
        await self.plugins.teardown()

    def template(self, name: str, default: str | None = None) -> str:
        return self.character.template(name, default or BUILTIN_TEMPLATES[name])

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

        Intake order, so that a crash at any step loses nothing: (1) the message's evaluation
        job is written, holding a copy of the message; (2) the message is stored; (3) the
        reply is sent and stored; (4) the job is released to the evaluation worker, recording
        whether a reply was sent. A job still in intake after a crash is finished by
        `start()` / `answer_unanswered()`, or by the platform redelivering the message.
        """
        arrived = time.perf_counter()
        self._prefetch_embedding(memory)
        if account is not None and self._seen.get(account.id) != account:
            await self.store.accounts.upsert(account)
            self._remember(account.id, account)
        if room is not None and self._seen.get(room.id) != room:
            await self.store.rooms.upsert(room)
            self._remember(room.id, room)
        job, created = await self.evaluations.open_intake(memory)
        if not created and (job.status != "intake" or memory.id in self._in_intake):
            log.debug("message %s already handled", memory.id)
            return HandleResult(stored=False)
        self._faults.reached("handle:job-written")
        return await self._take_in(job, memory, send, typing, room, arrived)

    async def _take_in(
        self,
        job: EvaluationJob,
        memory: Memory,
        send: Send | None,
        typing: Typing,
        room: Room | None,
        arrived: float | None = None,
    ) -> HandleResult:
        """Steps 2-4 of `handle()`; also finishes a job a crash left in intake. `send` None:
        no way to reach the room (yet), so the message is only learned from."""
        self._in_intake.add(memory.id)
        try:
            position = await self.store.memories.insert(memory)
            self._faults.reached("handle:message-stored")
            result = HandleResult(stored=position is not None, position=position or 0, job=job)
            if position is None:
                # Stored by an earlier attempt that died before releasing the job (or, before
                # jobs were written first, a message whose job was never written).
                answered = await self.answered(memory)
                if send is None or answered or not self.young(memory):
                    log.info("message %s: stored earlier, now queued to learn from", memory.id)
                    await self.evaluations.release(job, did_respond=answered, position=None)
                    return result
                log.info("message %s: stored earlier but never answered; answering", memory.id)
            if position is not None:
                self.events.message_received()
            room = room or await self.store.rooms.get(memory.room_id)
            if send is not None and self.should_respond(memory, room):
                if self.rate_limiter is not None and not self.rate_limiter.allow(memory.user_id):
                    await send(Content(text=RATE_LIMITED_REPLY))
                else:
                    async with typing():
                        await self._respond(memory, send, result, room)
                    if result.replies and arrived is not None:
                        self.events.replied(len(result.replies), time.perf_counter() - arrived)
            await self.evaluations.release(
                job, did_respond=result.responded, position=result.position or None
            )
            self._faults.reached("handle:released")
            return result
        finally:
            self._in_intake.discard(memory.id)

    def young(self, memory: Memory) -> bool:
        """Still worth answering after a crash: a late reply to an old message only confuses."""
        return utcnow() - memory.created_at <= timedelta(seconds=self.options.answer_window)

    async def answered(self, memory: Memory) -> bool:
        """Whether the reply to this message was sent (a reply is stored right after sending)."""
        return await self.store.memories.get(reply_id(memory.id, self.agent_id, 0)) is not None

    async def _recover_intake(self) -> None:
        """At start-up: messages a crash left between intake and release. Old ones are only
        learned from now; young ones wait for their platform's adapter to call
        `answer_unanswered()`, and are learned from unanswered once too old to answer."""
        waiting = 0
        for job in await self.evaluations.jobs.in_intake():
            memory = job.message or await self.store.memories.get(job.message_id)
            if memory is None:
                await self.evaluations.release(job, did_respond=False, position=None)
                continue
            if self.young(memory) and not await self.answered(memory):
                self._orphans[job.id] = (job, memory)
                waiting += 1
                continue
            await self._take_in(job, memory, None, _no_typing, None)
        if waiting:
            log.info("%d message(s) interrupted before their reply: answering them", waiting)
            loop = asyncio.get_running_loop()
            self._timers.append(
                loop.call_later(
                    self.options.answer_window, lambda: self._spawn(self._give_up_answering())
                )
            )

    async def answer_unanswered(self, platform: str, sender_for: SenderFor) -> int:
        """Answer the messages of `platform` a crash left unanswered (adapters call this once
        connected, with how to reply to a message in a room); returns how many were answered."""
        answered = 0
        for job_id, (job, memory) in list(self._orphans.items()):
            room = await self.store.rooms.get(memory.room_id)
            if room is None or room.platform != platform:
                continue
            del self._orphans[job_id]
            send = sender_for(room, memory)
            result = await self._take_in(job, memory, send, _no_typing, room)
            answered += result.responded
        return answered

    async def _give_up_answering(self) -> None:
        for job_id, (job, memory) in list(self._orphans.items()):
            del self._orphans[job_id]
            await self._take_in(job, memory, None, _no_typing, None)

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._prefetches.add(task)
        task.add_done_callback(self._prefetches.discard)

    def _prefetch_embedding(self, memory: Memory) -> None:
        """Start embedding the message now, in the embedder's thread, so it overlaps the
        database round trips; the providers and the indexing then share the cached result."""
        if not memory.content.text.strip():
            return
        task = asyncio.create_task(self.knowledge.embedder.embed([memory.content.text]))
        self._prefetches.add(task)
        task.add_done_callback(self._prefetch_done)

    def _prefetch_done(self, task: asyncio.Task[Any]) -> None:
        self._prefetches.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Whoever needs the vector embeds again and handles the error where it matters.
            log.debug("embedding prefetch failed: %s", task.exception())

    def _remember(self, key: str, value: Account | Room) -> None:
        """Profiles already written need no write per message; bounded like an LRU."""
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > SEEN_PROFILES:
            self._seen.popitem(last=False)

    async def note_profiles(
        self, accounts: Iterable[Account] = (), room: Room | None = None
    ) -> None:
        """Keep the profiles an adapter saw outside a message's intake: the people a message
        mentions (so prompts and /facts can name them) and whoever calls a command. Adapters
        call this instead of writing accounts and rooms themselves; only changes are written."""
        for account in accounts:
            if self._seen.get(account.id) != account:
                await self.store.accounts.upsert(account)
                self._remember(account.id, account)
        if room is not None and self._seen.get(room.id) != room:
            await self.store.rooms.upsert(room)
            self._remember(room.id, room)

    def should_respond(self, memory: Memory, room: Room | None) -> bool:
        """DMs always; in groups only when mentioned, replied to, or called by name."""
        if memory.user_id == self.agent_id:
            return False
        if room is None or room.kind == "dm":
            return True
        if memory.mentions_agent or memory.replies_to_agent:
            return True
        text = memory.content.text.casefold()
        return any(_names_in(name.casefold(), text) for name in self.character.names)

    async def _respond(
        self, memory: Memory, send: Send, result: HandleResult, room: Room | None
    ) -> None:
        state = await self.compose_state(memory, room=room)
        system = render(self.template("systemTemplate"), state.values)
        prompt = render(self.template("messageHandlerTemplate"), state.values)
        try:
            raw = await self.model.generate_text(
                prompt,
                model_class=ModelClass.LARGE,
                task=Task.REPLY,
                state=state,
                system=system,
                max_tokens=int(self.options.max_reply_chars * REPLY_TOKENS_PER_CHAR),
                json_answer=reply_answer([a.name for a in self.registry.actions]),
            )
        except ModelError as error:
            log.warning("reply failed for message %s: %s", memory.id, error)
            await send(Content(text=MODEL_FAILED_REPLY))
            return
        draft = self._read_reply(raw, memory)
        replies: list[Memory] = []
        sent = False

        async def say(content: Content, *, store: bool = True) -> None:
            nonlocal sent
            if not content.text.strip():
                return
            await send(content)
            sent = True
            if not store:
                return
            reply = Memory(
                id=reply_id(memory.id, self.agent_id, len(replies)),
                user_id=self.agent_id,
                agent_id=self.agent_id,
                room_id=memory.room_id,
                world_id=memory.world_id,
                content=content.model_copy(update={"in_reply_to": memory.id}),
                # Strictly after the message, even when the platform's clock runs ahead of ours.
                created_at=max(
                    utcnow(), memory.created_at + timedelta(milliseconds=1 + len(replies))
                ),
            )
            position = await self.store.memories.insert(reply)
            result.position = max(result.position, position or 0)
            replies.append(reply)

        action = await self._chosen_action(draft, memory, state, say)
        if action is None or not action.suppress_initial_message:
            if draft.text:
                # Words recovered from an unreadable answer are sent, never stored as the
                # bot's: stored, they return in later prompts and the model copies them.
                await say(Content(text=draft.text, action=draft.action), store=draft.readable)
            elif action is None:
                await say(Content(text=EMPTY_REPLY), store=False)
        if action is not None:
            context = self._context(action, memory, state, say)
            try:
                await action.handler(context)
            except Exception:
                log.exception("action %s failed", action.name)
                await say(Content(text=f"Sorry, I couldn't finish that ({action.name})."))
            result.action = action.name
        result.replies = replies
        result.responded = sent

    def _read_reply(self, raw: str, memory: Memory) -> ReplyDraft:
        """The model's reply as words to send: no JSON syntax, at most the reply cap; what
        could not be read is counted and logged once."""
        draft = parse_reply(raw)
        if not draft.text:
            self.ledger.record_reject(Task.REPLY, "empty reply", raw)
            log.warning("the reply to message %s was empty; sent a short fallback", memory.id)
        elif not draft.readable:
            self.ledger.record_reject(Task.REPLY, "unreadable reply", raw)
            log.warning(
                "the reply to message %s was not readable JSON; sent its words, not stored",
                memory.id,
            )
        text = cap_reply(draft.text, self.options.max_reply_chars)
        if text != draft.text:
            log.info(
                "the reply to message %s was cut from %d to %d characters",
                memory.id,
                len(draft.text),
                len(text),
            )
        return ReplyDraft(text, draft.action, readable=draft.readable)

    async def _chosen_action(
        self, draft: ReplyDraft, memory: Memory, state: State, say: Send
    ) -> Action | None:
        action = self.registry.find_action(draft.action)
        if action is None:
            if draft.action:
                log.info("model named unknown action %r; ignoring it", draft.action)
            return None
        context = self._context(action, memory, state, say)
        try:
            return action if await action.validate(context) else None
        except Exception:
            log.exception("action %s validate failed", action.name)
            return None

    # ------------------------------------------------------------------ state
    async def compose_state(
        self,
        memory: Memory,
        *,
        data: dict[str, Any] | None = None,
        providers: bool = True,
        room: Room | None = None,
    ) -> State:
        # The conversation up to and including this message, never what came after it: an
        # evaluation that runs late (a slow model, a busy room) reads what was said then.
        through = memory.created_at + timedelta(milliseconds=1)
        window = self.store.memories.recent(
            memory.room_id, self.options.recent_messages, before=through
        )
        if room is None:
            recent, room = await asyncio.gather(window, self.store.rooms.get(memory.room_id))
        else:
            recent = await window
        if not any(m.id == memory.id for m in recent):
            recent = [*recent, memory][-self.options.recent_messages :]
        people = {m.user_id for m in recent} | {memory.user_id} | set(memory.mentions)
        actors = await self.store.accounts.get_many(sorted(people - {self.agent_id}))
        state = State(
            message=memory,
            agent_id=self.agent_id,
            agent_name=self.character.name,
            sender=actors.get(memory.user_id),
            room=room,
            recent_messages=recent,
            actors=actors,
            data=dict(data or {}),
        )
        state.data.setdefault("actions", [a.name for a in self.registry.actions])
        state.values.update(character_values(self.character))
        state.values.update(
            senderName=state.name_of(memory.user_id),
            recentMessages=self.format_messages(state, recent),
            actors=", ".join(a.name for a in actors.values()),
            actions=format_actions(self.registry.actions),
            actionNames=", ".join(a.name for a in self.registry.actions),
            currentTime=utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        )
        if providers:
            sections = await self._run_providers(memory, state)
            state.values["providers"] = "\n\n".join(s for s in sections if s)
        return state

    async def display_names(self, state: State, ids: set[str]) -> dict[str, str]:
        """Names for account ids: from the state's actors, else looked up."""
        return await self.plugins.conversations.display_names(state, ids)

    async def _run_providers(self, memory: Memory, state: State) -> list[str]:
        """Run the providers concurrently, then merge what they returned into the state in
        registration order (providers never write into the shared state themselves)."""

        async def one(provider: Provider) -> Provided:
            context = self._context(provider, memory, state)
            try:
                output = await provider.get(context)
            except Exception:
                log.exception("provider %s failed", provider.name)
                return Provided()
            return output if isinstance(output, Provided) else Provided(text=output or "")

        providers = self.registry.providers
        outputs = await asyncio.gather(*(one(p) for p in providers))
        for provider, output in zip(providers, outputs, strict=True):
            state.values[provider.name] = output.text
            if output.data is not None:
                state.provided[provider.name] = output.data
        return [output.text for output in outputs]

    def format_messages(self, state: State, messages: list[Memory]) -> str:
        return self.plugins.conversations.format(state, messages)

    # ------------------------------------------------------------------ evaluation
    async def _run_job(self, job: EvaluationJob) -> list[str]:
        """One attempt at a job. What an earlier attempt finished is not done again: the
        selection is reused and evaluators that completed are skipped; one interrupted midway
        runs again with the same `ctx.job_id`, its idempotency key."""
        message = await self.store.memories.get(job.message_id)
        if message is None:
            log.info("evaluation %s: message was forgotten; nothing to learn", job.id)
            return []
        if message.user_id != self.agent_id and job.trigger == "message":
            await self.knowledge.index_message(message)
        # Evaluators build their own prompts (elizaOS's compose their own state too), so the
        # providers' retrieval, paid once for the reply, is not paid again here.
        state = await self.compose_state(
            message, data={"trigger": job.trigger, "position": job.position}, providers=False
        )
        validated = await self._validated(message, state, job.did_respond, None, job.id)
        candidates = [evaluator for evaluator, _ in validated]
        if job.selected is None:
            chosen = await self._select(candidates, state) if candidates else []
            await self.evaluations.jobs.record_selection(job.id, [e.name for e in chosen])
        else:
            chosen = [e for e in candidates if e.name in job.selected]
        found = {id(evaluator): finding for evaluator, finding in validated}
        ran = list(job.ran)
        failures: list[str] = []
        for evaluator in chosen:  # one after another, in registration order
            if evaluator.name in ran:
                continue
            context = self._context(evaluator, message, state, None, job.id)
            problem = await self._run_handler(evaluator, context, found[id(evaluator)])
            if problem is not None:
                failures.append(f"{evaluator.name}: {problem}")
                continue
            ran.append(evaluator.name)
            await self.evaluations.jobs.record_ran(job.id, ran)
            self._faults.reached("evaluation:handler-ran")
        if failures:
            raise EvaluationFailed("; ".join(failures))
        return ran

    async def evaluate(
        self,
        message: Memory,
        state: State,
        *,
        did_respond: bool,
        callback: Send | None = None,
        job_id: str | None = None,
    ) -> list[str]:
        """Run the evaluators that pass all four conditions; returns the names that ran.
        A failed selection raises EvaluationFailed; a failed handler is logged and skipped."""
        validated = await self._validated(message, state, did_respond, callback, job_id)
        if not validated:
            return []
        # By identity: evaluators are frozen dataclasses holding lists, so not hashable.
        found = {id(evaluator): finding for evaluator, finding in validated}
        chosen = await self._select([evaluator for evaluator, _ in validated], state)
        ran = []
        for evaluator in chosen:  # one after another, in registration order
            context = self._context(evaluator, message, state, callback, job_id)
            if await self._run_handler(evaluator, context, found[id(evaluator)]) is None:
                ran.append(evaluator.name)
        return ran

    async def _run_handler(self, evaluator: Evaluator, context: Context, found: Any) -> str | None:
        """Run one evaluator's handler; None when it completed, else why it did not."""
        if evaluator.handler is None:
            return "no handler"
        try:
            await asyncio.wait_for(
                _call_handler(evaluator, context, found), self.options.evaluator_timeout
            )
        except TimeoutError:
            log.error(
                "evaluator %s timed out after %ss", evaluator.name, self.options.evaluator_timeout
            )
            return f"timed out after {self.options.evaluator_timeout:g}s"
        except Exception as error:
            log.exception("evaluator %s failed", evaluator.name)
            return f"{type(error).__name__}: {error}"
        return None

    def _context(
        self,
        part: Evaluator | Provider | Action,
        message: Memory,
        state: State,
        callback: Send | None = None,
        job_id: str | None = None,
    ) -> Context:
        return self.plugins.context(part, message, state, callback=callback, job_id=job_id)

    async def _validated(
        self,
        message: Memory,
        state: State,
        did_respond: bool,
        callback: Send | None,
        job_id: str | None,
    ) -> list[tuple[Evaluator, Any]]:
        """The evaluators passing conditions 1-3, each with what its validate found."""

        async def check(evaluator: Evaluator) -> tuple[Evaluator, Any] | None:
            if evaluator.handler is None:  # condition 1
                return None
            if not did_respond and not evaluator.always_run:  # condition 2
                return None
            context = self._context(evaluator, message, state, callback, job_id)
            try:  # condition 3
                found = await asyncio.wait_for(
                    evaluator.validate(context), self.options.evaluator_timeout
                )
            except Exception:
                log.exception("evaluator %s validate failed", evaluator.name)
                return None
            return (evaluator, found) if found else None

        checked = await asyncio.gather(*(check(e) for e in self.registry.evaluators))
        return [pair for pair in checked if pair is not None]

    async def _select(self, candidates: list[Evaluator], state: State) -> list[Evaluator]:
        """Condition 4: which validated evaluators run. `all` mode skips the model call."""
        if self.options.evaluator_selection == "all":
            return candidates
        state.data["evaluator_names"] = [e.name for e in candidates]
        values = {
            **state.values,
            # Deciding relevance needs the latest turns, not the whole window.
            "recentMessages": self.format_messages(
                state, state.recent_messages[-SELECTION_CONTEXT_MESSAGES:]
            ),
            "evaluators": format_evaluators(candidates),
            "evaluatorNames": ", ".join(e.name for e in candidates),
            "evaluatorNamesJson": names_json([e.name for e in candidates]),
        }
        prompt = render(self.template("evaluationTemplate"), values)
        names = [e.name for e in candidates]
        try:
            raw = await self.model.generate_text(
                prompt,
                model_class=ModelClass.SMALL,
                task=Task.EVALUATOR_SELECTION,
                state=state,
                max_tokens=SELECTION_MAX_TOKENS,
                json_answer=selection_answer(names),
            )
        except ModelError as error:
            # Not "nothing to run": the job is retried, never counted as a run.
            raise EvaluationFailed(f"evaluator selection failed: {error}") from error
        selection = read_evaluator_selection(raw, [(e.name, e.similes) for e in candidates])
        if selection.named_nothing_known:
            self.ledger.record_reject(Task.EVALUATOR_SELECTION, "named nothing known", raw)
            log.warning(
                "evaluator selection named only unknown evaluators %s; none ran",
                selection.unknown[:5],
            )
        elif not selection.parsed and not selection.names:
            self.ledger.record_reject(Task.EVALUATOR_SELECTION, "unreadable", raw)
            log.warning("evaluator selection answer was not readable; none ran")
        return [e for e in candidates if e.name in selection.names]

    # ------------------------------------------------------------------ helpers for commands
    async def flush_room(self, memory: Memory, timeout: float | None = None) -> bool:
        """Learn now from a room's unlearned messages (as the idle flush would) and wait."""
        await self.evaluations.enqueue(memory, did_respond=True, trigger="idle")
        return await self.evaluations.join(memory.room_id, timeout)


def _call_handler(evaluator: Evaluator, context: Context, found: Any) -> Awaitable[Any]:
    """`handler(ctx, found)` for a handler taking what validate found (python-telegram-bot's
    check_update -> handle_update(check_result)), else `handler(ctx)`."""
    assert evaluator.handler is not None
    if _takes_finding(evaluator.handler):
        return evaluator.handler(context, found)
    return evaluator.handler(context)


def _takes_finding(handler: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _names_in(name: str, text: str) -> bool:
    """Whole-word match of the bot's name, so "Mnemo" is found in "hey mnemo," not in "mnemonic"."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None

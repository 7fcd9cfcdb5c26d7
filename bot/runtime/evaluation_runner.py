"""EvaluationRunner: learning from one message after the reply, the elizaOS flow (seeds/003).

An evaluator's handler runs only if (1) it has a handler, (2) the bot responded or it is
`always_run`, (3) its `validate()` is true, and (4) the selection step names it; an idle
job (the idle flush, /learn) goes only to evaluators that declare an `idle_mark`. `run_job`
is one attempt at a durable job from the evaluation queue: what an earlier attempt finished
(the selection, completed handlers) is recorded on the job and not done again. An edit job
(a person changed a message's words: bot/runtime/editing.py) first withdraws the facts the
old words were the evidence of, then goes only to evaluators that declare `reads_edits`.

The selection step asks the model (`llm`) only when its answer can change what runs: when
validation left at least two candidates whose handlers call the model. A lone such candidate
is named without asking (its handler's own model call judges the message anyway, and the
selection call would cost as much as that call), and so is an evaluator that makes no model
call (`uses_model=False`: asking would cost more than running it). Issue 22.

A world or person at a daily spending cap (bot/llm/caps.py) is learned from only by the
evaluators that make no model call; the job then finishes. Nothing is half-written (no
handler that needs the model starts) and nothing is lost: the messages stay stored, and an
evaluator that keeps a mark of what it read reads them at its next run after the cap resets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

from bot.domain.records import EvaluationJob, Memory
from bot.domain.state import State
from bot.faults import FaultHook
from bot.knowledge.messages import MessageIndex
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel, ModelClass, ModelError, ModelRequest, Task
from bot.llm.caps import DailySpend
from bot.llm.parsing import read_evaluator_selection
from bot.plugin.api import Context, Evaluator
from bot.plugin.host import PluginHost
from bot.plugin.loading import Registry
from bot.queue.worker import EvaluationFailed
from bot.runtime.composing import StateComposer
from bot.runtime.handler_deadline import SafePointModel, SafePoints, run_with_deadline
from bot.runtime.prompts import format_evaluators, names_json, render, selection_answer
from bot.runtime.types import RuntimeOptions
from bot.storage.jobs import JobStore
from bot.storage.mongo import MongoStore
from bot.storage.window_reads import Window

log = logging.getLogger(__name__)

SELECTION_CONTEXT_MESSAGES = 4
# The selection answer is a few names: its token budget is a few per candidate.
SELECTION_MAX_TOKENS = 100


class EvaluationRunner:
    def __init__(
        self,
        *,
        agent_id: str,
        store: MongoStore,
        jobs: JobStore,
        messages: MessageIndex,
        model: LanguageModel,
        registry: Registry,
        plugins: PluginHost,
        ledger: UsageLedger,
        composer: StateComposer,
        options: RuntimeOptions,
        faults: FaultHook,
        caps: DailySpend | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.store = store
        self.jobs = jobs
        self.messages = messages
        self.model = model
        self.registry = registry
        self.plugins = plugins
        self.ledger = ledger
        self.composer = composer
        # Replaced by the runtime when its options change.
        self.options = options
        self._faults = faults
        self.caps = caps

    async def run_job(self, job: EvaluationJob) -> list[str]:
        """One attempt at a job. What an earlier attempt finished is not done again: the
        selection is reused and evaluators that completed are skipped; one interrupted midway
        runs again with the same `ctx.job_id`, its idempotency key."""
        message, window = await self._message_and_window(job)
        if message is None:
            log.info("evaluation %s: message was forgotten; nothing to learn", job.id)
            return []
        if window is None:
            return await self._run(job, message, None)
        with self.plugins.conversations.marks_known(job.room_id, window.marks):
            return await self._run(job, message, window)

    async def _run(self, job: EvaluationJob, message: Memory, window: Window | None) -> list[str]:
        if message.user_id != self.agent_id and job.trigger in ("message", "edit"):
            await self.messages.index_message(message)  # an edit's new words replace the old
        if job.trigger == "edit":
            # In the room's order, so whatever an earlier job learned from the old words goes
            # too; only what was learned before this job: a retry keeps what it relearned.
            withdrawn = await self.composer.knowledge.withdraw_message(
                message.id, world_id=message.world_id, learned_before=job.created_at
            )
            if withdrawn:
                log.info("evaluation %s: withdrew %d facts of an edit", job.id, len(withdrawn))
        # Evaluators build their own prompts (elizaOS's compose their own state too), so the
        # providers' retrieval, paid once for the reply, is not paid again here.
        state = await self.composer.compose_state(
            message,
            data={"trigger": job.trigger, "position": job.position},
            providers=False,
            window=window,
        )
        validated = await self._validated(job, message, state)
        candidates = await self._within_caps(job, message, [e for e, _ in validated])
        if job.selected is None:
            chosen = await self._select(candidates, state) if candidates else []
            await self.jobs.record_selection(job.id, [e.name for e in chosen])
        else:
            chosen = [e for e in candidates if e.name in job.selected]
        found = {id(evaluator): finding for evaluator, finding in validated}
        ran = list(job.ran)
        failures: list[str] = []
        to_run = [e for e in chosen if e.name not in ran]
        for number, evaluator in enumerate(to_run, 1):  # one after another, in order
            context = self._context(evaluator, job, message, state)
            problem = await self._run_handler(evaluator, context, found[id(evaluator)])
            if problem is not None:
                failures.append(f"{evaluator.name}: {problem}")
                continue
            ran.append(evaluator.name)
            # After the last one the queue's `finish` records them all, in the same write.
            if number < len(to_run) or failures:
                await self.jobs.record_ran(job.id, ran)
            self._faults.reached("evaluation:handler-ran")
        if failures:
            raise EvaluationFailed("; ".join(failures))
        return ran

    async def _within_caps(
        self, job: EvaluationJob, message: Memory, candidates: list[Evaluator]
    ) -> list[Evaluator]:
        """The candidates that may run under the daily caps: all, or, past one, those that
        make no model call (the others would only be refused: see the module's doc)."""
        if self.caps is None or not any(e.uses_model for e in candidates):
            return candidates
        over = await self.caps.over(message.world_id, message.user_id)
        if over is None:
            return candidates
        skipped = [e.name for e in candidates if e.uses_model]
        log.info("evaluation %s: %s; not run: %s", job.id, over, ", ".join(skipped))
        return [e for e in candidates if not e.uses_model]

    async def _message_and_window(self, job: EvaluationJob) -> tuple[Memory | None, Window | None]:
        """The job's message, and the room's window up to it when that found it: one read
        when the job knows its message's time (its message is in the window unless it was
        forgotten), else the message by id and the window composed later."""
        if job.message_ms is None:
            return await self.store.memories.get(job.message_id), None
        window = await self.composer.window_through(
            job.room_id, job.message_ms, people=job.people, with_room=True
        )
        message = next((m for m in window.messages if m.id == job.message_id), None)
        if message is None:
            # Forgotten, or stored from a copy with another time (a platform that redelivered
            # it differently): looked up by id, and the window read again around it.
            return await self.store.memories.get(job.message_id), None
        return message, window

    async def _run_handler(self, evaluator: Evaluator, context: Context, found: Any) -> str | None:
        """Run one evaluator's handler; None when it completed, else why it did not. Past
        its time limit it is stopped only at a safe point (see bot.runtime.handler_deadline)."""
        if evaluator.handler is None:
            return "no handler"

        def start(points: SafePoints) -> Awaitable[Any]:
            # The handler's model calls mark where its time limit may stop it.
            model = replace(context.model, model=SafePointModel(context.model.model, points))
            return _call_handler(evaluator, replace(context, model=model), found)

        outcome = await run_with_deadline(
            start, self.options.evaluator_timeout, name=evaluator.name
        )
        return None if outcome.completed else outcome.problem

    def _context(
        self, evaluator: Evaluator, job: EvaluationJob, message: Memory, state: State
    ) -> Context:
        return self.plugins.context(evaluator, message, state, job_id=job.id, trigger=job.trigger)

    async def _validated(
        self, job: EvaluationJob, message: Memory, state: State
    ) -> list[tuple[Evaluator, Any]]:
        """The evaluators passing conditions 1-3, each with what its validate found."""

        async def check(evaluator: Evaluator) -> tuple[Evaluator, Any] | None:
            if evaluator.handler is None:  # condition 1
                return None
            if not job.did_respond and not evaluator.always_run:  # condition 2
                return None
            # An idle flush re-reads a quiet room: only evaluators keeping a mark of what
            # they have read there have anything to catch up on.
            if job.trigger == "idle" and evaluator.idle_mark is None:
                return None
            if job.trigger == "edit" and not evaluator.reads_edits:
                return None
            context = self._context(evaluator, job, message, state)
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
        """Condition 4: which validated evaluators run. `all` mode names them all; `llm`
        asks the model to choose among those that call the model, when there is a choice."""
        if self.options.evaluator_selection == "all":
            return candidates
        choice = [e for e in candidates if e.uses_model]
        if len(choice) < 2:
            # Nothing for a selection call to decide that is worth its price.
            return candidates
        named = {e.name for e in await self._ask_model(choice, state)}
        return [e for e in candidates if not e.uses_model or e.name in named]

    async def _ask_model(self, candidates: list[Evaluator], state: State) -> list[Evaluator]:
        """The selection call: the candidates the model names (by name or simile)."""
        state.data["evaluator_names"] = [e.name for e in candidates]
        values = {
            **state.values,
            # Deciding relevance needs the latest turns, not the whole window.
            "recentMessages": self.composer.format_messages(
                state, state.recent_messages[-SELECTION_CONTEXT_MESSAGES:]
            ),
            "evaluators": format_evaluators(candidates),
            "evaluatorNames": ", ".join(e.name for e in candidates),
            "evaluatorNamesJson": names_json([e.name for e in candidates]),
        }
        prompt = render(self.composer.template("evaluationTemplate", state=state), values)
        names = [e.name for e in candidates]
        try:
            raw = await self.model.generate(
                ModelRequest(
                    prompt,
                    model_class=ModelClass.SMALL,
                    task=Task.EVALUATOR_SELECTION,
                    state=state,
                    max_tokens=SELECTION_MAX_TOKENS,
                    json_answer=selection_answer(names),
                    model_name=self.composer.model_name(state, ModelClass.SMALL),  # the world's
                )
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


def _call_handler(evaluator: Evaluator, context: Context, found: Any) -> Awaitable[Any]:
    """`handler(ctx, found)`: what validate found (python-telegram-bot's check_update ->
    handle_update(check_result)); the plugin checks made sure it takes both."""
    assert evaluator.handler is not None
    return evaluator.handler(context, found)

"""Replier: the reply to one message, from the composed state to the stored replies.

It asks the LARGE model for a reply, reads the answer tolerantly (a model's syntax is never
shown to a person), runs the action the reply names if it validates, sends the words (split
by the adapter) and stores the replies as the bot's messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from datetime import timedelta

from cachetools import LRUCache

from bot.domain.records import Content, Memory, Room, reply_id, utcnow
from bot.domain.state import State
from bot.faults import FaultHook
from bot.i18n import N_, SOURCE_LANGUAGE, Texts
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel, ModelClass, ModelError, ModelRequest, Task
from bot.llm.caps import DailySpend, OverCap
from bot.llm.model_queue import one_turn
from bot.llm.parsing import ReplyDraft, cap_reply, parse_reply, partial_reply_text
from bot.llm.reply_checks import REPEATED, ReplyCheck, note_for
from bot.llm.streaming import stream_text
from bot.plugin.api import Action
from bot.plugin.host import PluginHost
from bot.plugin.loading import Registry
from bot.plugin.offline_model import acknowledgement, asks
from bot.runtime.composing import StateComposer
from bot.runtime.events import NO_EVENTS, RuntimeEvents
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.languages import Languages
from bot.runtime.prompts import action_choice, format_actions
from bot.runtime.ratelimit import Admission, ReplyLimit
from bot.runtime.reply_prompt import ReplyPrompt, reply_prompt
from bot.runtime.types import (
    HandleResult,
    ReplyStream,
    RuntimeOptions,
    Send,
    StreamingSend,
    Typing,
)
from bot.storage.mongo import MongoStore
from bot.storage.window_reads import Window

log = logging.getLogger(__name__)

# The bot's own lines, in English: each is sent in the person's language (bot/i18n), looked
# up only when it is sent (`Replier._texts`).
RATE_LIMITED_REPLY = N_("I'm getting a lot of messages from you; give me a minute to catch up.")
MODEL_FAILED_REPLY = N_("Sorry, I can't think straight right now. Please try again in a moment.")
# Sent when the model's answer holds no words to send (empty, or only JSON syntax).
EMPTY_REPLY = N_("Sorry, I lost my train of thought. Could you say that again?")
# Sent instead of a reply that showed the machinery twice (an action name, the prompt's text,
# the person's own words) or repeated its own earlier reply, to a question; a statement is
# acknowledged (`fallback_for`): it was understood, kept and will be learned from, so asking
# the person to say it again would only have them repeat themselves. Never stored, so it
# never feeds a later prompt.
FALLBACK_REPLY = N_("Sorry, I lost my train of thought. Could you say that again?")
REPLACED_BY_FALLBACK = "replaced by the fallback"
# A sentence the bot had already said here, dropped from a reply that was sent without it.
SAID_BEFORE = "sentence said before dropped"
# Rooms whose last fallback is remembered (a few bytes each; past it, the oldest is dropped).
FALLBACK_ROOMS_KEPT = 10_000
# Shown in place of a streamed reply that was stopped, while the model is asked again.
RETHINKING = "…"
# A streamed reply's words so far are checked (and shown) at most this often.
STREAM_CHECK_SECONDS = 0.2
# Tokens allowed per reply character of the cap (a token is ~4 characters of English; the
# margin covers the JSON around the text and other languages).
REPLY_TOKENS_PER_CHAR = 0.4
# A streamed answer is read no further than its reply's cap needs. Its text is looked at again
# every this many characters of answer past the cap (the partial JSON is parsed whole each time).
CAP_LOOK_EVERY = 512
# Answer characters allowed per character of the cap whatever the text shows: JSON's escapes
# (a "\u00e9" is six characters for one) and the syntax around the text fit; an answer that
# grows past it without its text growing (garbage, a brace that never closes) is stopped too.
ANSWER_CHARS_PER_REPLY_CHAR = 6


@dataclass
class _Screen:
    """A reply being shown as it is written, and whether anything of it is on screen."""

    stream: ReplyStream
    shown: str = ""


class Replier:
    def __init__(
        self,
        *,
        agent_id: str,
        store: MongoStore,
        model: LanguageModel,
        registry: Registry,
        plugins: PluginHost,
        ledger: UsageLedger,
        composer: StateComposer,
        options: RuntimeOptions,
        rate_limiter: ReplyLimit | None = None,
        events: RuntimeEvents = NO_EVENTS,
        faults: FaultHook | None = None,
        sent_replies: SentReplies | None = None,
        caps: DailySpend | None = None,
        languages: Languages | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.store = store
        self.model = model
        self.registry = registry
        self.plugins = plugins
        self.ledger = ledger
        self.composer = composer
        # Replaced by the runtime when its options change.
        self.options = options
        self.rate_limiter = rate_limiter
        self.events = events
        self._faults = faults or FaultHook()
        self.sent_replies = SentReplies(None) if sent_replies is None else sent_replies
        # Who has been told today that a daily cap was reached (`model` refuses the calls).
        self.caps = caps
        # Which language the bot's own lines are sent in (the world's, the person's, the
        # operator's).
        self.languages = languages or Languages(store.worlds, SOURCE_LANGUAGE)
        # The last fallback sent in each room (the most recently used rooms only).
        self._fallbacks: LRUCache[str, str] = LRUCache(maxsize=FALLBACK_ROOMS_KEPT)

    async def answer(
        self,
        memory: Memory,
        send: Send,
        typing: Typing,
        result: HandleResult,
        room: Room | None,
        *,
        arrived: float | None = None,
        keep: bool = True,
        window: Window | None = None,
    ) -> None:
        """Reply while showing "typing…", unless the author is over the rate limit (then no
        model call, and a polite line once a window); `arrived` (perf_counter) times the
        reply. `window`: the room's window, when the caller read it already."""
        if self.rate_limiter is not None:
            admission = await self.rate_limiter.admit(memory.user_id)
            if admission is Admission.TELL:
                texts = await self._texts(memory)
                await send(Content(text=texts.gettext(RATE_LIMITED_REPLY)))
            if admission is not Admission.ALLOWED:
                return
        async with typing():
            await self.respond(memory, send, result, room, keep=keep, window=window)
        if result.replies and arrived is not None:
            self.events.replied(len(result.replies), time.perf_counter() - arrived)

    async def respond(
        self,
        memory: Memory,
        send: Send,
        result: HandleResult,
        room: Room | None,
        *,
        keep: bool = True,
        window: Window | None = None,
    ) -> None:
        """`keep` False (a message the bot may not keep, bot/privacy): no reply is stored (it
        may quote the message) and no action runs (actions may keep what they were given)."""
        state = await self.composer.compose_state(memory, room=room, window=window, for_reply=True)
        offered = await self._offer_actions(memory, state) if keep else []
        character = self.composer.character_of(state)
        asked = reply_prompt(
            state,
            system_template=self.composer.template("systemTemplate", state=state),
            own_template=character.templates.get("messageHandlerTemplate") or None,
            offered=offered,
            message_text=lambda m: self.plugins.conversations.words(m, attachments=True),
        )
        check = ReplyCheck(
            action_names=self._action_names(),
            # What the prompt holds besides what people said and what is known about them:
            # the character, the instructions and the worked exchange, which a reply must
            # never repeat. The person's name is theirs, not the prompt's: a reply may greet
            # them by it.
            standing_text=asked.standing_text,
            person_lines=[
                m.content.text for m in state.recent_messages if m.user_id == memory.user_id
            ]
            + [memory.content.text],
            own_lines=[m.content.text for m in state.recent_messages if m.user_id == self.agent_id],
            speaker_names=[
                state.name_of(user_id)
                for user_id in {memory.user_id, self.agent_id}
                | {m.user_id for m in state.recent_messages}
            ],
            markup=state.markup,
        )
        # Shown as it is written where the adapter can edit a message (or print as it comes).
        screen = (
            _Screen(send.open_stream())
            if self.options.stream_replies and isinstance(send, StreamingSend)
            else None
        )
        try:
            # Asked again at once if need be: the model's slot is the reply's until then.
            with one_turn():
                draft, problems = await self._draft(asked, state, memory, check, screen)
                if problems and REPEATED not in problems:
                    self._reject_reply(problems, draft.text, memory, again=True)
                    if screen is not None and screen.shown:
                        # Not left on screen while the model is asked again.
                        await screen.stream.update(RETHINKING)
                        screen.shown = RETHINKING
                    # Asked once more, told briefly what was wrong (the same prompt, which a
                    # local server finds cached); the action is the one the structured field
                    # names, never one spelled out in the text.
                    again = asked.noted(note_for(problems))
                    draft, problems = await self._draft(again, state, memory, check, screen)
            if problems:
                # Wrong twice, or a repeat of its own earlier reply, which is not asked again:
                # a 0.5B model asked again wrote the same reply 18 times in 19, and with its
                # earlier replies hidden, invented things nobody said ("her pet dog's
                # training"); a model going round in circles gets no second call.
                self._reject_reply(problems, draft.text, memory, again=False)
                # Neither its words nor its choice of action are the model's to act on:
                # a small model named an action with nearly every such reply.
                draft = ReplyDraft(await self._fallback(memory), None, readable=False)
            elif (trimmed := check.without_said_sentences(draft.text)) != draft.text:
                # Counted with the rejects: what the model wrote is not all what was sent.
                self.ledger.record_reject(Task.REPLY, SAID_BEFORE, draft.text)
                draft = replace(draft, text=trimmed)
        except OverCap as over:
            # No request was sent: the room hears it once a day, then nothing until tomorrow.
            log.info("no reply to message %s: %s", memory.id, over)
            told = self.caps is None or await self.caps.first_notice(over, memory.room_id)
            line = (await self._texts(memory)).gettext(over.reply) if told else ""
            if screen is not None and screen.shown:
                await (screen.stream.finish(line) if told else screen.stream.cancel())
            elif told:
                await send(Content(text=line))
            return
        except ModelError as error:
            log.warning("reply failed for message %s: %s", memory.id, error)
            failed = (await self._texts(memory)).gettext(MODEL_FAILED_REPLY)
            if screen is not None and screen.shown:
                await screen.stream.finish(failed)  # what was shown is replaced
            else:
                await send(Content(text=failed))
            return
        replies: list[Memory] = []
        sent = False

        async def say(content: Content, *, store: bool = True, on_screen: bool = False) -> None:
            """Send a reply and record it; `on_screen`: the reply being shown, settled on
            its final text (the message edited, the parts past the limit sent)."""
            nonlocal sent
            if not content.text.strip():
                return
            if on_screen and screen is not None:
                await screen.stream.finish(content.text)
            else:
                await send(content)
            sent = result.responded = True  # known even if storing it fails later
            if not keep:
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
            # Recorded before anything yields to the event loop: a kill from here on does not
            # answer the message again after the restart (bot/runtime/intake/sent_replies.py).
            self.sent_replies.record(memory.id, reply, store=store)
            self._faults.reached("handle:reply-sent")
            if not store:
                return
            replies.append(reply)  # a later part never reuses this id
            # Stored with the message and the job's release, or before an action runs, below.
            result.unstored.append(reply)

        action = self._chosen_action(draft, offered)
        if action is None or not action.suppress_initial_message:
            if draft.text:
                # Words recovered from an unreadable answer are sent, never stored as the
                # bot's: stored, they return in later prompts and the model copies them.
                await say(
                    Content(text=draft.text, action=draft.action),
                    store=draft.readable,
                    on_screen=True,
                )
            elif action is None:
                empty = (await self._texts(memory)).gettext(EMPTY_REPLY)
                await say(Content(text=empty), store=False, on_screen=True)
            elif screen is not None and screen.shown:
                await screen.stream.cancel()
        elif screen is not None and screen.shown:
            # The action answers instead of the words: what was shown of them is taken back.
            await screen.stream.cancel()
        if action is not None:
            # The message and what was sent so far are stored before the action, which may
            # take a while: a crash during it must not send those replies again.
            await self._store_unstored(memory, result)
            context = self.plugins.context(action, memory, state, callback=say)
            try:
                await action.handler(context)
            except Exception:
                log.exception("action %s failed", action.name)
                texts = await self._texts(memory)
                line = texts.gettext("Sorry, I couldn't finish that ({action}).")
                await say(Content(text=line.format(action=action.name)))
            result.action = action.name
        result.replies = replies
        result.responded = sent

    async def _store_unstored(self, memory: Memory, result: HandleResult) -> None:
        """Store the message (when new) and the replies sent so far, one by one, each left
        in `result` until it is stored (MongoDB gone midway: the rest goes to the journal)."""
        if result.message_unstored:
            position = await self.store.memories.insert(memory)
            result.message_unstored = False
            result.position = max(result.position, position or 0)
        while result.unstored:
            position = await self.store.memories.insert(result.unstored[0])
            result.unstored.pop(0)
            result.position = max(result.position, position or 0)

    async def _draft(
        self,
        asked: ReplyPrompt,
        state: State,
        memory: Memory,
        check: ReplyCheck,
        screen: _Screen | None,
    ) -> tuple[ReplyDraft, list[str]]:
        """The model's reply and what is wrong with it (empty: it may be shown).

        The answer is read as the model writes it (unless MNEMO_STREAM_REPLIES=false): a
        reply that fails a check no more words can pass is stopped there (the model's request
        closed) and returned with its problems, to be asked again, whether or not anyone
        watches it grow. With a `screen`, it is also shown as it is written, but only what
        passes the checks so far: words that fail a check more words might pass are held
        back. Reading stops once the text is past the reply's cap (`_past_cap`): a model
        that ignores `max_tokens` is not read to its end."""
        request = ModelRequest(
            asked.prompt,
            model_class=ModelClass.LARGE,
            task=Task.REPLY,
            state=state,
            system=asked.system,
            history=asked.history,
            examples=asked.examples,
            max_tokens=int(self.options.max_reply_chars * REPLY_TOKENS_PER_CHAR),
            json_answer=asked.json_answer,
            # Only the reply to the message that carried them (the adapter's loader; the same
            # bytes when asked again): evaluations read the stored message, which has none.
            images=() if memory.images is None else await memory.images(),
            model_name=self.composer.model_name(state, ModelClass.LARGE),  # the world's
        )
        if not self.options.stream_replies:
            draft = self._read_reply(await self.model.generate(request), memory)
            return draft, check.problems(draft.text) if draft.text else []
        # Read as it is written even when nothing is shown (a console piped, an adapter that
        # cannot edit): a reply that fails for good stops the request there, instead of the
        # person waiting for the model to write to its end a reply that is then refused.
        answer = ""
        checked = 0.0
        last_checked = ""
        cap = self.options.max_reply_chars
        next_look = cap  # the text cannot be longer than the answer holding it
        async with aclosing(stream_text(self.model, request)) as pieces:
            async for piece in pieces:
                # What came before this piece is shown now, so an answer that comes whole
                # (a model that does not stream) is read whole: sent once, checked once.
                answer, before = answer + piece, answer
                if len(answer) >= next_look:
                    if _past_cap(answer, cap):
                        # A model that ignores max_tokens (a runaway stream of 375,561
                        # characters was read to its end): what is past the cap is never
                        # sent, so the request is closed here and the reply cut below.
                        log.info(
                            "the reply to message %s was stopped at %d characters, past its cap",
                            memory.id,
                            len(answer),
                        )
                        break
                    next_look = len(answer) + CAP_LOOK_EVERY
                if not before:
                    # Counted from the first words: a reply written within the first
                    # interval is sent once, whole, with no edits.
                    checked = time.perf_counter()
                    continue
                # The checks compare word runs with the whole prompt: run a few times a
                # second, not for every token (the adapters edit less often than that).
                if time.perf_counter() - checked < STREAM_CHECK_SECONDS:
                    continue
                partial = partial_reply_text(before)
                if partial is None:
                    continue
                # Whole words only (the last one may still grow), within the reply's cap.
                visible = _whole_words(partial)[: self.options.max_reply_chars]
                if not visible or visible == last_checked:
                    continue
                checked, last_checked = time.perf_counter(), visible
                settled = check.settled_problems(visible)
                if settled:
                    return ReplyDraft(visible, None, readable=False), settled
                if screen is None or check.problems(visible):
                    continue
                await screen.stream.update(visible)
                screen.shown = visible
        draft = self._read_reply(answer, memory)
        return draft, check.problems(draft.text) if draft.text else []

    def _action_names(self) -> list[str]:
        return [name for a in self.registry.actions for name in (a.name, *a.similes)]

    def _reject_reply(self, problems: list[str], text: str, memory: Memory, *, again: bool) -> None:
        """Count a reply that showed the machinery, by reason; and, the second time, that the
        fallback was sent in its place (`/stats`, the metrics and the memory bench show both)."""
        for problem in problems:
            self.ledger.record_reject(Task.REPLY, f"reply with {problem}", text)
        if again:
            log.info("the reply to message %s showed %s; asked again", memory.id, problems)
        else:
            self.ledger.record_reject(Task.REPLY, REPLACED_BY_FALLBACK, text)
            log.warning("the reply to message %s showed %s; sent the fallback", memory.id, problems)

    async def _fallback(self, memory: Memory) -> str:
        """`fallback_for` the message, in other words than the room's last fallback (never
        stored, so the room's last one is kept here), in the person's language."""
        room = memory.room_id
        fallback = fallback_for(memory, self._fallbacks.get(room))
        self._fallbacks[room] = fallback  # in English: the same choice whatever the language
        return (await self._texts(memory)).gettext(fallback)

    async def _texts(self, memory: Memory) -> Texts:
        """The catalog the bot's own lines to the message's author are looked up in."""
        return await self.languages.texts(memory.world_id, memory.locale)

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

    async def _offer_actions(self, memory: Memory, state: State) -> list[Action]:
        """The actions whose `validate` holds for this message, as elizaOS composes a reply's
        state: only those are offered to the model (listed in the prompt, the only names its
        structured answer may hold), and only those can run. Offered every action on every
        message, a 0.5B model wrote the one action's purpose into most of its replies ("I'll
        create ..."), for messages it could not apply to."""

        async def valid(action: Action) -> bool:
            try:
                return bool(await action.validate(self.plugins.context(action, memory, state)))
            except Exception:
                log.exception("action %s validate failed", action.name)
                return False

        actions = self.registry.actions
        verdicts = await asyncio.gather(*(valid(action) for action in actions))
        offered = [action for action, ok in zip(actions, verdicts, strict=True) if ok]
        state.data["actions"] = [action.name for action in offered]
        state.values.update(
            actions=format_actions(offered),
            actionNames=", ".join(action.name for action in offered),
            actionChoice=action_choice(offered),
        )
        return offered

    def _chosen_action(self, draft: ReplyDraft, offered: Sequence[Action]) -> Action | None:
        """The offered action the reply names, if any (an unknown or unoffered name is
        ignored: the model's choice is a suggestion, the validation is ours)."""
        action = self.registry.find_action(draft.action)
        if action is None or action not in offered:
            if draft.action:
                log.info("model named action %r, not offered for this message", draft.action)
            return None
        return action


def fallback_for(memory: Memory, just_said: str | None = None) -> str:
    """What is sent when the model's reply could not be shown: the question asked again, or
    the statement acknowledged (bot/plugin/offline_model.py's acknowledgements), with another
    acknowledgement than the one `just_said` in the room."""
    text = memory.content.text
    return FALLBACK_REPLY if asks(text) or not text.strip() else acknowledgement(text, just_said)


def _past_cap(answer: str, cap: int) -> bool:
    """Whether a reply answer still being written holds more text than the reply's `cap`
    (the rest would be cut), or is so long that it never will show it."""
    if len(answer) > cap * ANSWER_CHARS_PER_REPLY_CHAR:
        return True
    text = partial_reply_text(answer)
    return text is not None and len(text) > cap


def _whole_words(text: str) -> str:
    """`text` up to its last whitespace: a word at the end may not be finished."""
    stripped = text.lstrip()
    cut = max(stripped.rfind(" "), stripped.rfind("\n"), stripped.rfind("\t"))
    return stripped[:cut].rstrip() if cut > 0 else ""

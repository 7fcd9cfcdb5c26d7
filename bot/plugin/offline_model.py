"""The offline model: deterministic answers instead of a language model, from plugins.

Chosen when neither an API key nor a base URL is set, so the whole pipeline (reply, evaluator
selection, every evaluator) runs with no network. It is a dispatcher, like pydantic-ai's
FunctionModel: plugins register an answer function per task (an evaluator's `offline`, an
action's, or `Plugin.offline_answers`), each reading the structured `State` the prompt was
composed from rather than the prompt, and answering with the JSON shapes a model would. The
core answers only what is its own: evaluator selection, and small talk for the reply when no
plugin's reply answer speaks. A task nobody answers gets "[]" with a warning naming it, once.
Token counts are recorded as 0: nothing is sent anywhere, and word counts would pass for
tokens in cost reports.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.i18n import N_
from bot.llm.base import OFFLINE_MODEL_NAME, ModelClass, ModelRequest, Task
from bot.plugin.api import OfflineAnswer, OfflineRequest

if TYPE_CHECKING:
    from bot.domain.state import State
    from bot.llm.accounting import UsageLedger

log = logging.getLogger(__name__)

MAX_REPLY_CHARS = 400
NO_ANSWER = "[]"

_GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|heya|hiya|yo|howdy|greetings|hola|good\s+(?:morning|afternoon|evening))\b",
    re.I,
)
_HOW_ARE_YOU = re.compile(r"\bhow\s+(?:are|r)\s+(?:you|u)\b|\bhow's\s+it\s+going\b", re.I)
_THANKS = re.compile(r"\b(?:thanks|thank\s+you|thx|ty|cheers)\b", re.I)
_FAREWELL = re.compile(r"\b(?:bye|goodbye|good\s+night|see\s+you|see\s+ya|later)\b\W*$", re.I)
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:what|who|where|when|why|how|which|can|could|would|will|is|are|do|does"
    r"|did|should|explain|tell\s+me)\b",
    re.I,
)
# What the bot says to a statement when it has nothing more to say: offline, and when a
# model's reply could not be shown (bot/runtime/replying.py, which sends them in the person's
# language; marked for the catalogs only: the offline model answers in English).
ACKNOWLEDGEMENTS = (
    N_("Got it."),
    N_("I hear you."),
    N_("Noted."),
    N_("Tell me more!"),
    N_("Okay, I'm listening."),
)


def normalise(text: str) -> str:
    """Typographic apostrophes made plain and whitespace collapsed, for pattern matching."""
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").split())


def cap(text: str, limit: int = MAX_REPLY_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def reply_json(text: str, action: str | None = None) -> str:
    """A reply in the shape the reply template asks a model for."""
    return json.dumps({"text": cap(text), "action": action or "NONE"}, ensure_ascii=False)


def asks(text: str) -> bool:
    """Whether the message reads as a question (a question mark, or a question word first)."""
    return _QUESTION.search(normalise(text)) is not None


def acknowledgement(text: str, just_said: str | None = None) -> str:
    """A short acknowledgement of a statement, the same one for the same text; never the one
    `just_said` (three "Okay, I'm listening." in a row read as a bot that is stuck)."""
    choice = _stable_choice(ACKNOWLEDGEMENTS, normalise(text))
    if choice == just_said:
        return ACKNOWLEDGEMENTS[(ACKNOWLEDGEMENTS.index(choice) + 1) % len(ACKNOWLEDGEMENTS)]
    return choice


def greets(text: str) -> bool:
    return _GREETING.search(text) is not None


def small_talk(text: str, name: str | None) -> str | None:
    """Greetings, "how are you", thanks and goodbyes; None for anything else."""
    greeting = f"Hi {name}!" if name else "Hi there!"
    if _GREETING.search(text):
        if _HOW_ARE_YOU.search(text):
            return f"{greeting} I'm doing well, thanks for asking."
        return f"{greeting} Good to see you."
    if _HOW_ARE_YOU.search(text):
        return "I'm doing well, thanks for asking. How about you?"
    if _THANKS.search(text):
        return "You're welcome!"
    if _FAREWELL.search(text):
        return f"Bye {name}, talk soon!" if name else "Bye, talk soon!"
    return None


def _stable_choice(options: tuple[str, ...], key: str) -> str:
    # crc32, not hash(): str hashes are salted per process and replies must be reproducible.
    return options[zlib.crc32(key.encode("utf-8")) % len(options)]


class OfflineModel:
    """Answers each task with the first registered answer that speaks (see the module doc)."""

    name = OFFLINE_MODEL_NAME

    def __init__(
        self,
        ledger: UsageLedger,
        answers: Mapping[str, Sequence[OfflineAnswer]] | None = None,
    ) -> None:
        self._ledger = ledger
        self._answers: dict[str, list[OfflineAnswer]] = {
            task: list(found) for task, found in (answers or {}).items()
        }
        self._unanswered: set[str] = set()

    def register(self, task: str, answer: OfflineAnswer) -> None:
        """Answer `task` with `answer` (after the answers already registered for it)."""
        self._answers.setdefault(task, []).append(answer)

    async def generate(self, request: ModelRequest) -> str:
        task = request.task
        answer = self.answer(
            task, request.state, prompt=request.prompt, model_class=request.model_class
        )
        self._ledger.record(task, 0, 0)
        log.debug("offline model task=%s answer_chars=%d", task, len(answer))
        return answer

    async def close(self) -> None:
        return None

    def answer(
        self,
        task: str,
        state: State | None,
        *,
        prompt: str = "",
        model_class: ModelClass = ModelClass.LARGE,
    ) -> str:
        """The answer for a task, from the state alone (synchronous: it is pure computation)."""
        request = OfflineRequest(
            task=str(task), prompt=prompt, state=state, model_class=model_class
        )
        for answer in self._answers.get(request.task, ()):
            try:
                found = answer(request)
            except Exception:
                # A plugin's bug must not take the reply down with it: the next answer speaks.
                log.exception("offline answer for task %s failed", request.task)
                continue
            if found is not None:
                return found
        if request.task == Task.REPLY:
            return self._reply(state)
        if request.task == Task.EVALUATOR_SELECTION:
            names = state.data.get("evaluator_names") or [] if state is not None else []
            return json.dumps([n for n in names if isinstance(n, str)])
        if request.task not in self._unanswered:
            self._unanswered.add(request.task)
            # Registered answers that all passed (returned None) are not missing ones: say
            # which, or the author looks for a registration that is there.
            why = (
                "every offline answer registered for it returned None"
                if self._answers.get(request.task)
                else "no plugin registered an offline answer for it"
            )
            log.warning(
                "offline model: task %s: %s; answering %s (register one with the "
                "evaluator's `offline=`; a None passes to the next)",
                request.task,
                why,
                NO_ANSWER,
            )
        return NO_ANSWER

    # -- reply -----------------------------------------------------------------------------

    def _reply(self, state: State | None) -> str:
        if state is None:
            return reply_json("I'm running offline, so I can only keep simple notes for now.")
        text = normalise(state.message.content.text)
        name = _sender_name(state)
        if _NAME_QUESTION.search(text):
            return reply_json(f"You're {name}." if name else "I don't know your name yet.")
        talk = small_talk(text, name)
        if talk is not None:
            return reply_json(talk)
        if asks(text):
            return reply_json(
                "I'm running offline right now, so I can't really answer that, "
                "but I'm keeping track of what you tell me."
            )
        return reply_json(acknowledgement(text, _last_said(state)))


def _last_said(state: State) -> str | None:
    """The bot's last line in the conversation, if any."""
    own = [m for m in state.recent_messages if m.user_id == state.agent_id]
    return own[-1].content.text if own else None


_NAME_QUESTION = re.compile(
    r"\bwhat(?:'s|\s+is)\s+my\s+name\b|\bdo\s+you\s+know\s+my\s+name\b", re.I
)


def _sender_name(state: State) -> str | None:
    user_id = state.message.user_id
    if state.sender is not None and state.sender.id == user_id:
        return state.sender.name
    account = state.actors.get(user_id)
    return account.name if account else None

"""The reply's request: what the model is shown to write the bot's next line, and in what shape.

A reply is asked for as the next turn of a chat, the shape every chat model is trained on:
the character, what is known and the task in the system message, the conversation as the
turns it was (the people's lines as user turns, the bot's as its own), the message answered
as the last user turn, and the answer in plain text, as every chat bot streams it. Only when
an action is offered is the answer one JSON object (the text and the action's name).

Measured live with Qwen2.5-Coder-0.5B (docs/performance.md, "Replies"): shown the
conversation as one transcript in one user message and asked for JSON, it went on writing
the transcript as the person ("Dan: hey! im Dan ...") or refused ("I'm sorry, I can't help
with that."); as chat turns, each person's turn labelled with their name, and one worked
exchange, it answered the message in most replies.

A character that brings its own `messageHandlerTemplate` (elizaOS's one prompt) is asked
the way that template says: one user message, the JSON answer it describes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from bot.domain.records import Memory
from bot.domain.state import State
from bot.llm.base import Example, JsonAnswer, Turn
from bot.llm.reply_checks import refuses
from bot.plugin.api import Action
from bot.plugin.services import one_message
from bot.runtime.prompts import render, reply_answer

# Words of the task that say a request is a reply's (the live recorder and tests find the
# reply requests among the others by them).
REPLY_TASK_MARK = "Reply to their last message"

# The task, after the character's standing text in the system message. Short: every word here
# is one a small model may copy into its reply (the checks refuse a reply that does).
CHAT_REPLY_TEMPLATE = """{{providers}}

You are chatting with {{senderName}}. Reply to their last message as {{agentName}}, \
talking to {{senderName}}, in one or two short sentences of your own.
{{actions}}{{answerFormat}}"""

# Said only when an action is offered: then the answer carries its name beside the text.
JSON_ANSWER_FORMAT = (
    'Answer with one JSON object: "text" is the reply; "action" is {{actionChoice}}.'
)

# One worked exchange, sent as an earlier turn: a 0.5B model answers in the shape of a turn
# it "gave" far better than in the shape described (asked without it, it spoke as the person:
# "I live in Leeds and work as a nurse" back to the nurse from Leeds). Its words are part of
# the standing text, so a reply that copies them is refused.
EXAMPLE_SPEAKER = "Sam"
WORKED_EXCHANGE = Example(
    prompt=f"{EXAMPLE_SPEAKER}: just got back from the gym, so tired",
    answer="Well done for going anyway! Was it a big session?",
)


@dataclass(frozen=True)
class ReplyPrompt:
    """One reply's request parts, and the text it holds besides what people said (the
    character, the task, the worked exchange), which the reply must never repeat."""

    system: str
    prompt: str
    history: tuple[Turn, ...]
    examples: tuple[Example, ...]
    json_answer: JsonAnswer | None
    standing_text: tuple[str, ...]

    def noted(self, note: str) -> ReplyPrompt:
        """The same request asked again with a short note of what was wrong: after the
        task (the same system text before it, which a local server finds cached), or after
        a character's own prompt. Never in the person's turn, which is theirs."""
        if self.history or self.examples:
            return replace(self, system=f"{self.system}\nNote: {note}")
        return replace(self, prompt=f"{self.prompt}\n\nNote: {note}")


def reply_prompt(
    state: State,
    *,
    system_template: str,
    own_template: str | None,
    offered: Sequence[Action],
    message_text: Callable[[Memory], str],
) -> ReplyPrompt:
    """The request for the reply to `state.message`. `own_template`: the character's own
    `messageHandlerTemplate`, if it has one (then asked as it says); `message_text` shows one
    message's words as prompts show them (cut, with what it carried), without its speaker."""
    system = render(system_template, state.values)
    if own_template is not None:
        prompt = render(own_template, state.values)
        blank = {**state.values, "providers": "", "recentMessages": "", "senderName": ""}
        return ReplyPrompt(
            system=system,
            prompt=prompt,
            history=(),
            examples=(),
            json_answer=reply_answer([a.name for a in offered]),
            standing_text=(system, render(own_template, blank)),
        )
    answer_format = render(JSON_ANSWER_FORMAT, state.values) if offered else ""
    values = {**state.values, "answerFormat": answer_format}
    task = render(CHAT_REPLY_TEMPLATE, values).strip()
    blank_task = render(CHAT_REPLY_TEMPLATE, {**values, "providers": "", "senderName": ""})
    turns = conversation_turns(state, message_text)
    return ReplyPrompt(
        system=f"{system}\n\n{task}",
        prompt=turns[-1].text,
        history=tuple(turns[:-1]),
        examples=(WORKED_EXCHANGE,),
        json_answer=reply_answer([a.name for a in offered]) if offered else None,
        standing_text=(
            system,
            blank_task.strip(),
            WORKED_EXCHANGE.prompt,
            WORKED_EXCHANGE.answer,
        ),
    )


def conversation_turns(state: State, message_text: Callable[[Memory], str]) -> list[Turn]:
    """The conversation up to the message answered, as chat turns: each person's line
    labelled with their name ("Dan: ..."), the bot's as its own, a run of lines by one side
    joined into one turn; the message answered last. The bot's refusals (stored by an older
    Mnemo) are left out: shown again as its own turns, a model copies them."""
    turns: list[Turn] = []
    messages = [m for m in state.recent_messages if m.id != state.message.id]
    for message in [*messages, state.message]:
        by_model = message.user_id == state.agent_id
        text = message_text(message)
        if by_model and (not text.strip() or refuses(text)):
            continue
        if not by_model:
            text = one_message(state.name_of(message.user_id), text)
        if turns and turns[-1].by_model == by_model:
            turns[-1] = Turn(f"{turns[-1].text}\n{text}", by_model)
        else:
            turns.append(Turn(text, by_model))
    return turns

"""Does a reply show the machinery? The checks a reply's words must pass before a person sees
them, shared by the Replier (which asks once more, then sends a fallback) and
`mnemo bench memory` (which counts what was shown).

A small model copies what it is given: an action's name into the text ("Create_goal: I want
to ..."), the character's description, the prompt's instructions ("I'm curious about people
more than about topics; asks one good question rather than five.") or a provider's format
("0/3 objectives done [ ] Run 15 km"), the person's own line ("My wife Lena is a violinist."
back to the man who said it), or its own earlier reply. Each is
a reason; the first three have a short note the model is given when it is asked again (a
repeat is not asked again: bot/runtime/replying.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

ACTION_NAME = "action name"
PROMPT_TEXT = "prompt text"
PARROTING = "parroting"
REPEATED = "its own earlier reply"
REFUSAL = "refusal"
AS_THE_PERSON = "the person's voice"

# What the model is told when it is asked again: short, and no text of its own answer (a
# small model would copy that too).
NOTES = {
    ACTION_NAME: 'Your text named an action. Put the action only in the "action" field.',
    PROMPT_TEXT: "Your text copied the instructions or the character description. "
    "Write new words of your own.",
    PARROTING: "Your text repeated what the person said. Answer them instead.",
    REFUSAL: "Your text refused to answer. This is an ordinary chat: reply to what they said.",
    AS_THE_PERSON: "Your text spoke as the person, about their own life. Talk to them.",
}

# A run of this many words shared with the prompt's standing text is a copy, not a reply.
PROMPT_RUN_WORDS = 6
# A shorter run is a copy when it is most of a short reply ("First days are a lot.").
SHORT_RUN_WORDS = 4
SHORT_RUN_SHARE = 0.7
# The person's line is parroted when a run of at least this many of its words comes back and
# is nearly all of the line and most of the reply; or when a longer run is nearly all of the
# line, whatever else the reply says. Shorter lines ("hi", "thanks!") may be echoed by anyone, and
# a reply that restates a line in its own words ("You moved to Helsinki last week?") or
# acknowledges a part of it ("Working at the bakery on Main Street — got it." for "I work at
# the bakery on Main Street.", the offline model) passes.
PARROT_MIN_WORDS = 4
PARROT_LINE_SHARE = 0.8
PARROT_REPLY_SHARE = 0.6
PARROT_LONG_RUN = 6
PARROT_LONG_SHARE = 0.8
# Eight of the person's words in a row, in their voice ("I", "my"), are a copy whatever their
# share: the live model wrote "I live in Tallinn and I work as a violinist ..." back to the
# man who said the first part. An acknowledgement drops the voice ("Working as ... — got it").
PARROT_COPY_RUN = 8
_FIRST_PERSON = frozenset({"i", "i'm", "im", "my", "me", "we", "our", "us", "i've", "i'd"})
# The bot's own earlier reply, nearly word for word (a run of this many words that is this
# share of the reply): set phrases ("That sounds lovely, tell me more!") may well come twice.
REPEAT_MIN_WORDS = 8
REPEAT_SHARE = 0.8
# A run this long of one of its earlier messages is the bot going round in circles whatever
# else the reply says: a 0.5B model opened reply after reply with the same 20 words ("I'm
# excited about starting a new job at the children's hospital in Lisbon. The half marathon
# ..."). Set phrases and the names of things people track are shorter. No more words take
# it away, so a reply read as it is written is stopped there.
REPEAT_COPY_RUN = 12

# A refusal of an ordinary message ("I'm sorry, I can't help with that.", "I cannot assist
# with that request"): a small model's answer to a greeting 10 times in 19. Only as the
# reply's opening: further on, "I can't help noticing ..." is a reply.
_REFUSAL = re.compile(
    r"""^\W*(?:(?:i'?m|i\s+am)\s+(?:so\s+|really\s+)?sorry|sorry|i\s+apologi[sz]e|unfortunately)?
    [\s,.!]*(?:but\s+)?(?:as\s+an?\s+(?:ai|language\s+model|assistant)[^,.]*,\s*)?
    i(?:\s+am|'m|\s*)\s*(?:can(?:no|')?t|cannot|not\s+able\s+to|unable\s+to|won'?t\s+be\s+able\s+to)
    \s+(?:(?:help|assist|support)(?:\s+you)?(?:\s+(?:with|on|there|here)\b|\s+(?:that|this|it)\b|\s*[.!]|\s*$)
    |provide|do\s+that|comply|fulfil|answer\s+that|respond\s+to\s+that|continue)""",
    re.I | re.X,
)
# The same refusal in the languages of the development sets: the model refuses in the
# person's language too ("Desculpe pela confusão, mas não posso ajudar com isso." to a
# Brazilian's goal, live). An apology, then "cannot" and "help" within the sentence; or the
# reply opening with "cannot help". Models refuse in a handful of stock phrasings, so a
# short table per language holds; a language missing here is a refusal let through.
_SORRY = (
    r"lo\s+siento|disculpa|perd[oó]n|desculpe?|sinto\s+muito|lamento|"
    r"(?:je\s+suis\s+)?d[ée]sol[ée]e?|es\s+tut\s+mir\s+leid|entschuldigung|leider|"
    r"mi\s+dispiace|purtroppo|scusa"
)
_CANNOT = (
    r"no\s+puedo|n[ãa]o\s+(?:posso|consigo)|je\s+ne\s+(?:peux|suis\s+pas\s+en\s+mesure)|"
    r"non\s+posso"
)
_HELP = r"ayudar|asistir|ajudar|auxiliar|aider|helfen|aiutar|assister"
_REFUSAL_ELSEWHERE = re.compile(
    rf"^\W*(?:(?:{_SORRY})[^.!?]{{0,40}}?)?"
    rf"(?:(?:{_CANNOT})\b[^.!?]{{0,30}}?(?:{_HELP})"
    r"|ich\s+kann\b[^.!?]{0,30}?nicht\s+(?:\w+\s+)?helfen)",
    re.I,
)
# A sentence of a reply the bot has said before here, word for word, is dropped from the
# reply when it is at least this long: "Got it!" and "Thanks!" may well come twice.
SAID_SENTENCE_MIN_WORDS = 4
# Where one sentence ends and the next begins: after its end mark(s) and the space.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")

# The person's life in the bot's mouth: a run of their words led by "I"/"my" ("I live in
# Leeds and work as a nurse" to the nurse from Leeds who said it; "I'm a nurse at the
# LGI"). This many words, the lead included: at three, "I have a feeling Miso rules you
# all" to "I have a cat called Miso" was refused, and a streamed reply stopped at its third
# word.
AS_THE_PERSON_RUN = 4
_FIRST_PERSON_LEADS = frozenset({"i", "im", "my", "ive", "id", "ill", "me", "mine"})

_WORD = re.compile(r"[\w']+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-case words, apostrophes kept (so "I'm" is one word, as a person reads it)."""
    return [w.strip("'") for w in _WORD.findall(text.casefold()) if w.strip("'")]


def longest_shared_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest run of words that `a` and `b` share, in order."""
    return len(shared_run(a, b))


def shared_run(a: Sequence[str], b: Sequence[str]) -> Sequence[str]:
    """The longest run of words that `a` and `b` share, in order (the first found)."""
    if not a or not b:
        return ()
    best, end = 0, 0
    previous = [0] * (len(b) + 1)
    for i, word in enumerate(a, 1):
        current = [0] * (len(b) + 1)
        for j, other in enumerate(b, 1):
            if word == other:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, end = current[j], i
        previous = current
    return a[end - best : end]


@dataclass(frozen=True)
class ReplyCheck:
    """What a reply must not contain, for one reply: the actions' names, the prompt's
    standing text (character, instructions, action descriptions) and the person's lines (the
    one answered and their earlier ones in the conversation: a small model gives either back)."""

    action_names: Sequence[str]
    standing_text: Sequence[str]
    person_lines: Sequence[str]
    # The bot's own earlier messages here: "Let's have a solar power plant at the secondary
    # school." came back as the reply to twelve different lines.
    own_lines: Sequence[str] = ()
    # The names the conversation is written with ("Dmitri: ...", "Mnemo: ..."): a reply
    # that starts with one copies the transcript's format, speaking as someone.
    speaker_names: Sequence[str] = ()
    # The providers' own format in the prompt (`Provided.markup`: "0/3 objectives done",
    # "[ ]"): any of it in a reply is the prompt's text, however short.
    markup: Sequence[str] = ()

    def problems(self, reply: str) -> list[str]:
        """The reasons this reply must not be shown; empty when it may be."""
        found = []
        if _names_an_action(reply, self.action_names):
            found.append(ACTION_NAME)
        if (
            _copies(reply, self._standing_words)
            or _speaks_as(reply, self.speaker_names)
            or _shows_markup(reply, self._markup_folded)
        ):
            found.append(PROMPT_TEXT)
        if any(_parrots(reply, line) for line in self.person_lines):
            found.append(PARROTING)
        elif _speaks_as_them(reply, self._person_words):
            found.append(AS_THE_PERSON)
        if _repeats(reply, self._own_words):
            found.append(REPEATED)
        if refuses(reply):
            found.append(REFUSAL)
        return found

    def without_said_sentences(self, reply: str) -> str:
        """The reply without its sentences the bot has already said here, word for word
        (the rest kept as written); the reply as it was if nothing else is left. Live, a
        0.5B model closed 24 of its 36 answers to a 30-message script with "What do you
        like to do in Lisbon?", too short a run to be refused as a repeat, and a bot asking
        the same question every time is one people stop talking to."""
        said = {
            key
            for line in self.own_lines
            for sentence in _SENTENCE_END.split(line)
            if len(key := tuple(words(sentence))) >= SAID_SENTENCE_MIN_WORDS
        }
        if not said:
            return reply
        kept = [
            sentence
            for sentence in _SENTENCE_END.split(reply.strip())
            if tuple(words(sentence)) not in said
        ]
        if not any(words(sentence) for sentence in kept):
            return reply
        return " ".join(sentence for sentence in kept if sentence)

    def settled_problems(self, partial: str) -> list[str]:
        """The problems of a reply still being written that no more words can take away:
        an action's name, a long run of the prompt's words or any of a provider's markup, a
        speaker's label, a copy of the person's words that is nearly all of their line or long
        and in their voice, a long run of one of the bot's own earlier messages.
        (The checks that weigh a share of the reply, `problems`, may pass once it is longer;
        a streamed reply failing only those is held back, not stopped.)"""
        found = []
        if _names_an_action(partial, self.action_names):
            found.append(ACTION_NAME)
        said = words(partial)
        if (
            _speaks_as(partial, self.speaker_names)
            or _shows_markup(partial, self._markup_folded)
            or any(
                longest_shared_run(said, text) >= PROMPT_RUN_WORDS for text in self._standing_words
            )
        ):
            found.append(PROMPT_TEXT)
        if any(_copies_a_line(partial, line) for line in self.person_lines):
            found.append(PARROTING)
        elif _speaks_as_them(partial, self._person_words):
            found.append(AS_THE_PERSON)
        if any(longest_shared_run(said, line) >= REPEAT_COPY_RUN for line in self._own_words):
            found.append(REPEATED)
        if refuses(partial):
            found.append(REFUSAL)
        return found

    # The standing text and the bot's lines as words, and the markup case-folded, made once:
    # a streamed reply is checked against them every few words.
    @cached_property
    def _standing_words(self) -> list[list[str]]:
        return [words(text) for text in self.standing_text]

    @cached_property
    def _person_words(self) -> list[list[str]]:
        return [_unapostrophed(line) for line in self.person_lines]

    @cached_property
    def _own_words(self) -> list[list[str]]:
        return [words(line) for line in self.own_lines]

    @cached_property
    def _markup_folded(self) -> list[str]:
        return [folded for mark in self.markup if (folded := mark.strip().casefold())]


def refuses(reply: str) -> bool:
    """Whether a reply opens by refusing to answer (an ordinary message, in a chat)."""
    return _REFUSAL.search(reply) is not None or _REFUSAL_ELSEWHERE.search(reply) is not None


def _unapostrophed(text: str) -> list[str]:
    """Words with their apostrophes dropped: "I'm" and "im" are one word to this check."""
    return [w.replace("'", "") for w in words(text)]


def _speaks_as_them(reply: str, person_words: Sequence[Sequence[str]]) -> bool:
    """Whether the reply says, as its own ("I ...", "my ..."), a run of the person's words:
    the lead and the words after it, or the words right after the lead. What follows "you
    said" is their words given back as theirs, not the bot speaking as them."""
    quoted = _QUOTED.search(reply)
    said = _unapostrophed(reply if quoted is None else reply[: quoted.start()])
    for index, word in enumerate(said):
        if word not in _FIRST_PERSON_LEADS:
            continue
        for theirs in person_words:
            with_lead = _prefix_found(said[index:], theirs)
            after_lead = _prefix_found(said[index + 1 :], theirs)
            if max(with_lead, after_lead + 1 if after_lead else 0) >= AS_THE_PERSON_RUN:
                return True
    return False


def _prefix_found(said: Sequence[str], theirs: Sequence[str]) -> int:
    """How many of `said`'s first words appear, in a row, somewhere in `theirs`."""
    best = 0
    for start, word in enumerate(theirs):
        if not said or word != said[0]:
            continue
        length = 0
        while (
            length < len(said)
            and start + length < len(theirs)
            and theirs[start + length] == said[length]
        ):
            length += 1
        best = max(best, length)
    return best


def note_for(problems: Iterable[str]) -> str:
    return " ".join(NOTES[p] for p in problems if p in NOTES)


def _names_an_action(reply: str, names: Sequence[str]) -> bool:
    """An action's name as written in the prompt (SOME_ACTION, Some_action), or with a space
    when it is shouted or labels the text ("SOME ACTION", "Some action: ..."); "NONE" alone.
    Ordinary words ("let's do some action") are not names."""
    for name in {*names, "NONE"}:
        parts = [re.escape(p) for p in name.split("_") if p]
        if not parts:
            continue
        joined = r"[_\-]".join(parts)
        if re.search(rf"(?<![\w]){joined}(?![\w])", reply, re.I) and (
            "_" in name or re.search(rf"(?<![\w]){joined}(?![\w])", reply)
        ):
            return True
        if len(parts) > 1:
            spaced = r"\s+".join(parts)
            if re.search(rf"(?<![\w]){spaced}(?![\w])", reply) or re.search(
                rf"(?<![\w]){spaced}\s*:", reply, re.I
            ):
                return True
    return False


def _copies(reply: str, standing_words: Sequence[Sequence[str]]) -> bool:
    said = words(reply)
    if not said:
        return False
    for text in standing_words:
        run = longest_shared_run(said, text)
        if run >= PROMPT_RUN_WORDS:
            return True
        if run >= SHORT_RUN_WORDS and run >= SHORT_RUN_SHARE * len(said):
            return True
    return False


def _shows_markup(reply: str, folded_markup: Sequence[str]) -> bool:
    folded = reply.casefold()
    return any(mark in folded for mark in folded_markup)


def _speaks_as(reply: str, names: Sequence[str]) -> bool:
    head = reply.lstrip().split(":", 1)[0].strip().casefold()
    return ":" in reply[:60] and any(head == name.strip().casefold() for name in names if name)


def _repeats(reply: str, own_words: Sequence[Sequence[str]]) -> bool:
    said = words(reply)
    if len(said) < REPEAT_MIN_WORDS:
        return False
    for line in own_words:
        run = longest_shared_run(said, line)
        if run >= REPEAT_COPY_RUN or (run >= REPEAT_MIN_WORDS and run >= REPEAT_SHARE * len(said)):
            return True
    return False


# A reply that gives the line back as a quotation, addressed to its author ("You said: ..."),
# refers to their words; parroting is giving them back as the bot's own.
_QUOTED = re.compile(r"\byou\s+(?:said|wrote|mentioned|told\s+me)\b\s*[:,]?\s*[\"'“‘]?", re.I)


def _copied_run(reply: str, line: str) -> tuple[Sequence[str], list[str], list[str]] | None:
    """The longest run of the line's words in the reply (before any "you said"), with the
    reply's and the line's words; None for a line too short to be parroted."""
    theirs = words(line)
    if len(theirs) < PARROT_MIN_WORDS:
        return None
    quoted = _QUOTED.search(reply)
    if quoted is not None:
        reply = reply[: quoted.start()]
    said = words(reply)
    return shared_run(said, theirs), said, theirs


def _copies_a_line(reply: str, line: str) -> bool:
    """The rules of `_parrots` that hold whatever else the reply goes on to say."""
    found = _copied_run(reply, line)
    if found is None:
        return False
    copied, _, theirs = found
    run = len(copied)
    if run >= PARROT_COPY_RUN and _FIRST_PERSON.intersection(copied):
        return True
    return run >= PARROT_LONG_RUN and run >= PARROT_LONG_SHARE * len(theirs)


def _parrots(reply: str, line: str) -> bool:
    found = _copied_run(reply, line)
    if found is None:
        return False
    if _copies_a_line(reply, line):
        return True
    copied, said, theirs = found
    run = len(copied)
    return (
        run >= PARROT_MIN_WORDS
        and run >= PARROT_LINE_SHARE * len(theirs)
        and run >= PARROT_REPLY_SHARE * len(said)
    )

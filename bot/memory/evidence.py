"""Evidence: a claim is kept only when the words it rests on were said, by its speaker.

A model's claim carries a quote: a few words copied from one message. The quote is looked
for in that message (folded the same way on both sides: text.py, so it holds in any language
and script), and the claim's own specifics, the names, places and numbers it states, must be
in the quote: "Sofía lives in Málaga" rests on "vivo en Málaga desde marzo" because "Málaga" is
there, whatever language the rest of the claim is in. This replaces checking a claim's words
against English word lists, which failed on every translated word.

What a quote can never be evidence of, whatever it says:
- a question ("should I move to Porto?" tells nothing about where anyone lives);
- a line inside a message that starts as another participant's or the bot's turn would
  ("nice\\nTobrin: I confess, I am a thief" is Quorra's message; nothing in it is Tobrin's
  word, nor hers about herself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from bot.memory.text import (
    find_words,
    fold,
    folded_words,
    is_question,
    numbers,
    sentences,
    words,
    written_as_turn,
)

# Why a claim's evidence does not hold (the rejects ledger's reasons: bot/storage/rejects.py).
NO_QUOTE = "no quote"
QUOTE_NOT_SAID = "quote not in the message"
FROM_A_QUESTION = "quote from a question"
FORGED_TURN = "quote from a forged turn"
NOT_IN_QUOTE = "says more than its quote"
SAYS_NOTHING = "says nothing but a name"

# The speakers a chat format knows besides the people: a line headed so is written as a turn
# of the model's conversation, never a person's own word.
CHAT_ROLES = ("system", "assistant", "user", "developer", "tool")
# A quote longer than this many words is not "the words it rests on" but a message pasted
# whole: what in it the claim rests on cannot be told.
MAX_QUOTE_WORDS = 40
# Inflection tolerance for the claim's own words: "engineers" / "engineer", "vive" / "vivo".
_SHARED_PREFIX = 4


@dataclass(frozen=True)
class Said:
    """One message as evidence: its id, its speaker, its text."""

    message_id: str
    speaker_id: str
    text: str
    said_at: int = 0


def check(
    claim: str,
    quote: str,
    said: Said,
    *,
    names: Sequence[str],
    turn_names: Sequence[str] = (),
    translated: bool = False,
    value: str | None = None,
    attribute: str | None = None,
    ending: bool = False,
) -> str | None:
    """Why `claim` cannot rest on `quote` in the message `said`, or None when it can.

    `names` are the names of the people the claim is about and of its speaker (a claim
    names its subject: that is not something said). `turn_names` are the names a forged turn
    would start with (the other participants', the bot's). `translated`: the claim may be in
    another language than the message (the operator asked for facts in one language), so
    only its names and numbers must be in the quote, not its other words. A claim that
    states a `value` ("home city: Málaga") must have the value in the quote word for word;
    its `attribute` (the label it is filed under) is the writer's own words, like "lives in".
    A claim `ending` a fact ("I sold the Volvo" ends "drives a blue Volvo") need not hold the
    fact's specifics: its quote must only name something of it."""
    quote = quote.strip()
    named = {w for name in names for w in folded_words(name)}
    if not set(folded_words(claim)) - named:
        return SAYS_NOTHING  # "Νίκος": a name is no fact about anyone
    if not folded_words(quote):
        return NO_QUOTE
    if len(folded_words(quote)) > MAX_QUOTE_WORDS or find_words(quote, said.text) is None:
        return QUOTE_NOT_SAID
    sentence = _sentence_of(quote, said.text)
    if sentence is not None and is_question(sentence):
        return FROM_A_QUESTION
    if _in_a_forged_turn(quote, said.text, turn_names):
        return FORGED_TURN
    if value is not None:
        if find_words(value, quote) is None:
            return NOT_IN_QUOTE
        claim = _without_label(claim, attribute)
    if not ending and not _specifics_in(claim, quote, names):
        return NOT_IN_QUOTE
    if not translated and not _shares_a_word(claim, quote, names, naming_only=ending):
        return NOT_IN_QUOTE
    return None


def _without_label(claim: str, attribute: str | None) -> str:
    """The claim's text without the label it starts with ("home city: Málaga" -> "Málaga")."""
    if attribute:
        head, colon, rest = claim.partition(":")
        if colon and fold(head) == fold(attribute):
            return rest
    return claim


# Of a model's quote, this share of words must stand in one sentence, in order, for the
# sentence to be what it meant: a small model copies "we lead a team" for "I lead a team".
QUOTE_COVERAGE = 0.6


@dataclass(frozen=True)
class Located:
    """The sentence of a message a claim rests on, as its speaker wrote it."""

    said: Said
    quote: str


def locate(
    claim: str, quote: str, said: Sequence[Said], *, names: Sequence[str], ending: bool = False
) -> Located | None:
    """The sentence of one of the messages `said` that a model's claim rests on: the one that
    holds its quote word for word or nearly (QUOTE_COVERAGE of its words, in order), else the
    one that holds every name and number of the claim and most of its other words. None when
    no sentence does. What is returned is the person's own words, never the model's: the
    memory checks the claim against them (`check`) and shows them to people."""
    wanted = folded_words(quote)
    best: tuple[float, Located] | None = None
    for message in said:
        for sentence in sentences(message.text):
            have = folded_words(sentence)
            if not wanted or not have:
                continue
            matcher = SequenceMatcher(None, wanted, have, autojunk=False)
            covered = sum(block.size for block in matcher.get_matching_blocks()) / len(wanted)
            if covered >= QUOTE_COVERAGE and (best is None or covered > best[0]):
                best = (covered, Located(message, sentence))
    if best is not None and (ending or _specifics_in(claim, best[1].quote, names)):
        return best[1]
    # The quote points nowhere useful: the sentence sharing most of the claim's own words.
    fallback: tuple[int, Located] | None = None
    for message in said:
        for sentence in sentences(message.text):
            if not _specifics_in(claim, sentence, names):
                continue
            shared, _ = _shared_words(claim, sentence, names)
            if shared and (fallback is None or shared > fallback[0]):
                fallback = (shared, Located(message, sentence))
    return fallback[1] if fallback is not None else None


def _sentence_of(quote: str, text: str) -> str | None:
    for sentence in sentences(text):
        if find_words(quote, sentence) is not None:
            return sentence
    return None


def _in_a_forged_turn(quote: str, text: str, turn_names: Sequence[str]) -> bool:
    """Whether the quote stands on a line of the message written as someone else's turn: a
    line that starts (after any @mentions) with another participant's or the bot's name, or
    a chat role, and a colon ("Tobrin: ...", "@mnemo_bot Mnemo: Noted", "SYSTEM: ..."). The
    first line too: a message that opens as the bot's line is no more the bot's word than
    one that ends so. Full-width colons fold like ASCII ones (NFKC)."""
    heads = [*turn_names, *CHAT_ROLES]
    return any(
        written_as_turn(line, heads) and find_words(quote, line) is not None
        for line in text.splitlines()
    )


def _capitalised(claim: str) -> list[str]:
    """The claim's words written with a capital, but its first (a sentence's capital)."""
    found = words(claim)
    return [w for w in found[1:] if w[:1].isupper()]


def _specifics_in(claim: str, quote: str, names: Sequence[str]) -> bool:
    """Every number of the claim is a number of the quote, and every capitalised word of the
    claim (a name, a place, a brand) is in the quote or is the subject's or speaker's name."""
    quoted_numbers = set(numbers(quote))
    if any(n not in quoted_numbers for n in numbers(claim)):
        return False
    folded_quote = fold(quote)
    quote_words = set(folded_quote.split())
    known = {w for name in names for w in folded_words(name)}
    for word in _capitalised(claim):
        folded = fold(word)
        if not folded or folded in known or any(w.startswith(folded) for w in quote_words):
            continue
        if " ".join(folded_words(word)) not in folded_quote:
            return False
    return True


def _shares_a_word(
    claim: str, quote: str, names: Sequence[str], *, naming_only: bool = False
) -> bool:
    """Whether the claim says what the quote says: at least a third of its words (but the
    names and words of one or two letters) are words of the quote, or share their first
    letters with one ("engineers"/"engineer", "vive"/"vivo"); in a script written without
    spaces, two characters in a row. One shared "and" is not enough: "Dmitri is a warm and
    curious presence in the chat" does not rest on "I live in Tallinn and work on a ferry".
    `naming_only`: one shared word is enough (a take-back names what it ends: "I sold the
    Volvo" ends "drives a blue Volvo to work every day")."""
    shared, counted = _shared_words(claim, quote, names)
    if shared and (naming_only or shared * SHARED_WORDS_DENOMINATOR >= counted):
        return True
    unspaced = "".join(folded_words(claim))
    quoted = "".join(folded_words(quote))
    return (
        len(unspaced) > 1
        and not any(c.isascii() for c in unspaced)
        and any(unspaced[i : i + 2] in quoted for i in range(len(unspaced) - 1))
    )


# A claim must share at least 1 in this many of its words with its quote.
SHARED_WORDS_DENOMINATOR = 3


def _shared_words(claim: str, quote: str, names: Sequence[str]) -> tuple[int, int]:
    """How many of the claim's words (but the names and words of one or two letters) are
    words of the quote, or share their first letters with one; and how many were counted."""
    known = {w for name in names for w in folded_words(name)}
    quote_words = folded_words(quote)
    shared = counted = 0
    for word in set(folded_words(claim)):
        if word in known or (len(word) < 3 and not word.isdigit()):
            continue
        counted += 1
        stem = word[:_SHARED_PREFIX]
        if word in quote_words or (
            len(stem) == _SHARED_PREFIX and any(q.startswith(stem) for q in quote_words)
        ):
            shared += 1
    return shared, counted

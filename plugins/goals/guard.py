"""Is a goal the model drafted the person's own?

A small real model, asked to write down the goal in "My sister Anjali lives in Toronto",
answered "Run a Leeds half marathon", an earlier goal, or the prompt's own example ("Learn
Portuguese before my trip"). Tracked, such a goal is invented. So a draft is checked against
the message it came from: its name must share a content word with the message, and it must
not copy the template's example unless the person said those words. Objectives sharing no
content word with the message are dropped (the prompt asks for the steps named in it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import bm25s

from .merge import normalise
from .store import Goal

# Why a draft (or part of it) was not used: counted per reason by the model handle's `reject`.
NOT_IN_MESSAGE = "goal shares no word with the message"
COPIED_EXAMPLE = "goal copies the template's example"
NAMES_NOTHING = "goal names no thing ('finish it')"
OBJECTIVE_NOT_IN_MESSAGE = "objective shares no word with the message"

# A shorter word this long or longer matches a longer one it starts ("run" and "running",
# "marathon" and "marathons"): the draft rephrases the message, it rarely quotes it.
_MIN_PREFIX = 3


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words without stop words ("I want to run" -> {"want", "run"})."""
    [tokens] = bm25s.tokenize(
        [text], lower=True, stopwords="en_plus", return_ids=False, show_progress=False
    )
    return frozenset(tokens)


def _same_word(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    return short == long or (len(short) >= _MIN_PREFIX and long.startswith(short))


def shares_a_word(text: str, words: Iterable[str]) -> bool:
    """Whether `text` has a content word among `words` (or one either starts)."""
    said = list(words)
    return any(_same_word(mine, theirs) for mine in content_words(text) for theirs in said)


def example_texts(template: str) -> frozenset[str]:
    """The names and objectives of the goals a template shows as examples (its JSON
    objects with a "name"), normalised; a character's own template has its own."""
    decoder = json.JSONDecoder()
    found: set[str] = set()
    start = template.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(template, start)
        except ValueError:
            end = start + 1
        else:
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                texts = [value["name"], *value.get("objectives", [])]
                found.update(normalise(t) for t in texts if isinstance(t, str) and t.strip())
        start = template.find("{", end)
    return frozenset(found)


@dataclass(frozen=True)
class Checked:
    """A draft's verdict: `reason` why it is not the person's goal (None: it is), and the
    objectives kept with how many were dropped."""

    reason: str | None
    objectives: list[str]
    dropped: int = 0


# A goal's thing, named only by a word that points back ("I want to finish it in under two
# hours", of a race named earlier): tracked alone, "Finish it in under two hours" is a goal
# nobody can read later. "That", "this", "these" and "those" point back only when no word, or
# one of _AFTER_A_POINTER, follows ("finish that by Friday"; "finish that book" names it).
_POINTERS = frozenset(("it", "them"))
_DEMONSTRATIVES = frozenset(("that", "this", "these", "those"))
_AFTER_A_POINTER = frozenset(
    """in on at by before after under within for with to from until till soon today tonight
    tomorrow again already now first next this and or but""".split()  # noqa: SIM905
)


def names_its_thing(name: str) -> bool:
    """Whether a goal's name says what it is about: not when the word after its verb only
    points back at something said before ("Finish it ...", "Do that", "Get those done")."""
    words = [word.strip(".,;:!?") for word in normalise(name).split()]
    if len(words) < 2:
        return True
    pointer, after = words[1], words[2] if len(words) > 2 else None
    if pointer in _POINTERS:
        return False
    return not (pointer in _DEMONSTRATIVES and (after is None or after in _AFTER_A_POINTER))


def goal_it_refers_to(name: str, goals: Sequence[Goal]) -> Goal | None:
    """The goal in progress a goal naming no thing most likely means: the one sharing a
    content word with it, by its name or an objective ("Finish it in under two hours" and
    "Run the Lisbon half marathon in under two hours"), when exactly one does."""
    said = content_words(name) - _PROGRESS_WORDS
    about = [
        goal
        for goal in goals
        if any(
            shares_a_word(text, said)
            for text in (goal.name, *(o.description for o in goal.objectives))
        )
    ]
    return about[0] if len(about) == 1 else None


def check_draft(name: str, objectives: Sequence[str], message: str, template: str) -> Checked:
    """Judge a drafted goal against the message it was drafted from and the template's
    examples."""
    said = content_words(message)
    examples = example_texts(template)

    def copied(text: str) -> bool:
        # The example's words are fine when the person used them all.
        if normalise(text) not in examples:
            return False
        return not all(any(_same_word(w, s) for s in said) for w in content_words(text))

    if any(copied(text) for text in (name, *objectives)):
        return Checked(COPIED_EXAMPLE, [])
    if not shares_a_word(name, said):
        return Checked(NOT_IN_MESSAGE, [])
    kept = [objective for objective in objectives if shares_a_word(objective, said)]
    return Checked(None, kept, len(objectives) - len(kept))


# Words that report an end (or a step done): with one word of a goal's they are enough
# ("finally done with the thesis", "I gave up on the marathon").
_PROGRESS_WORDS = frozenset(
    """done finish finished completed complete managed nailed passed gave given quit
    abandoned stopped dropped cancel cancelled""".split()  # noqa: SIM905 (a word list)
)
# Words that give a goal up even without naming it ("Let's move on and cancel the task", the
# seed's example): rare, and a goal wrongly left in progress is worse than one call.
_GIVING_UP = frozenset(("cancel", "cancelled", "canceled", "abandon", "abandoned", "quit"))
# Words a message must share with an objective (or the goal's name) to be about it: one word
# alone ("October", "run") is too common to pay a model call for.
_SHARED_WORDS = 2


def _about(said: frozenset[str], text: str, *, words_enough: bool = True) -> bool:
    """Whether the message may report progress on `text` (an objective, or a goal's name):
    two of its words (`words_enough`), or one with a word like "finished"."""
    words = content_words(text)
    shared = [word for word in words if any(_same_word(word, s) for s in said)]
    # An objective of one content word ("Read") needs that one word.
    if words_enough and shared and len(shared) >= min(_SHARED_WORDS, len(words)):
        return True
    # "Finished" shares "finish" with an objective, but says nothing of which one.
    topical = [word for word in shared if word not in _PROGRESS_WORDS]
    return bool(topical) and not said.isdisjoint(_PROGRESS_WORDS)


def plausible_progress(message: str, goals: Sequence[Goal]) -> list[Goal]:
    """The goals a message may report progress on: it shares two words with one of the
    goal's open objectives, or one and a word like "finished"; the goal's name counts the
    same way when no objective is open, else only with such a word (people name their goal
    when they talk about it: "the half marathon training keeps me sane" is no progress).
    A cheap lexical test, no model: the goal check's model call is paid only for these."""
    said = content_words(message)
    if not said:
        return []
    if not said.isdisjoint(_GIVING_UP):
        return list(goals)
    found = []
    for goal in goals:
        steps = [o.description for o in goal.objectives if not o.completed]
        if any(_about(said, step) for step in steps) or _about(
            said, goal.name, words_enough=not steps
        ):
            found.append(goal)
    return found

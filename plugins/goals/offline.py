"""The goals plugin's offline answers: goal progress and new goals read from plain words.

Registered with the offline model (used when no language model is configured): UPDATE_GOAL
answers with the updates a model would give, from the goals and messages in the state, by
matching key words of objectives against what people say they finished ("I finished ...",
"I've submitted ...") or gave up ("cancel it"); the reply names CREATE_GOAL when someone
states a goal ("my goal is to ...", "I want to ...").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from bot import OfflineRequest, State
from bot.offline import normalise, reply_json

from .action import draft_from_text
from .store import Goal

# The provider files the goals it found here (state.provided), and so does UPDATE_GOAL.
PROVIDED = "goals"
ACTION = "CREATE_GOAL"
MAX_PHRASE_WORDS = 6
_PHRASE = r"(?P<x>[^.,!?;:\n]+)"


def _words(text: str) -> frozenset[str]:
    """A word list written as prose: easier to read and extend than a list of literals."""
    return frozenset(text.split())


_PHRASE_STOP = re.compile(
    r"\s+(?:and\s+i|and\s+my|but|because|since|so|which|where|who|though|although|now"
    r"|right\s+now|these\s+days|at\s+the\s+moment|currently|too|as\s+well|as\s+an?|actually"
    r"|originally|anyway|though|lol|haha)\b.*$",
    re.I | re.S,
)

_COMPLETION = re.compile(
    r"\b(?:i|we)(?:'ve|'m|\s+have|\s+am|\s+just|\s+finally|\s+already|\s+also)*\s+"
    r"(?:finished|completed|did|done|submitted|ran|read|wrote|written|made|prepared|sent|took"
    r"|taken|passed|reached|hit|achieved|managed\s+to)\b",
    re.I,
)
_FAILURE = re.compile(
    r"\b(?:give\s+up\s+on|giving\s+up\s+on|gave\s+up\s+on|given\s+up\s+on|cancel|cancelling"
    r"|canceling|abandon|abandoning|quit|quitting)\b",
    re.I,
)
_FAILURE_GENERIC = re.compile(
    r"\b(?:cancel|give\s+up\s+on|gave\s+up\s+on|abandon|quit)\s+"
    r"(?:it|that|this|the\s+(?:task|goal|plan|project)|my\s+goal)\b",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b", re.I)
_IRREGULAR = {
    "ran": "run",
    "did": "do",
    "done": "do",
    "wrote": "write",
    "written": "write",
    "made": "make",
    "took": "take",
    "taken": "take",
    "went": "go",
    "got": "get",
    "sent": "send",
    "read": "read",
    "reading": "read",
}
_STOPWORDS = _words("""
    the a an of to my your our their his her for and or in on at with by up this that these those
    just finally already also some all it its is are was were be been i we you me have has had
    ve m s d ll re end about from into out over than then there what which who will would can
    could should did do does very really yes
    """)


def _stem(word: str) -> str:
    """A crude stemmer: enough to match "submitted" with "Submit", "chapters" with "chapter"."""
    word = word.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word


# Verbs that say "progress" without saying on what: they never count as a shared key word.
_GENERIC_STEMS = frozenset(
    _stem(w)
    for w in _words("finish complete completed do make take get start achieve manage reach hit")
)


def _key_words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower().replace("'", ""))
    keys = {_stem(w) for w in words if w not in _STOPWORDS and (len(w) >= 3 or w.isdigit())}
    return keys - _GENERIC_STEMS


def _phrase(raw: str) -> str:
    """A captured phrase trimmed to its first clause and a few words."""
    phrase = _PHRASE_STOP.sub("", raw.strip())
    words = phrase.split()[:MAX_PHRASE_WORDS]
    return " ".join(words).strip(" \"'")


def known_goals(state: State) -> list[Goal]:
    found = state.provided.get(PROVIDED)
    return list(found) if isinstance(found, Sequence) else []


def reply(request: OfflineRequest) -> str | None:
    """A stated goal: offer to track it (CREATE_GOAL) when that action is available."""
    state = request.state
    if state is None:
        return None
    draft = draft_from_text(normalise(state.message.content.text))
    if draft is None:
        return None
    wanted = _phrase(draft.name).rstrip(".!")
    if not wanted:
        return None
    actions = {str(a).upper() for a in state.data.get("actions") or []}
    if ACTION in actions:
        return reply_json(f"Let's make that a goal: {wanted}. I'll help you keep track.", ACTION)
    return reply_json(f"That sounds like a good plan: {wanted}. Good luck!")


def update(request: OfflineRequest) -> str | None:
    """UPDATE_GOAL offline: progress and failures of the in-progress goals in the state."""
    if request.state is None:
        return "[]"
    return json.dumps(_goal_updates(request.state), ensure_ascii=False)


def _goal_updates(state: State) -> list[dict[str, Any]]:
    messages = state.people_messages()
    in_progress = [g for g in known_goals(state) if g.status == "IN_PROGRESS"]
    updates: list[dict[str, Any]] = []
    for goal in in_progress:
        own = [m for m in messages if goal.user_id is None or m.user_id == goal.user_id]
        texts = [normalise(m.content.text) for m in own]
        if _failed(goal, texts, only_goal=len(in_progress) == 1):
            updates.append({"id": goal.id, "status": "FAILED"})
            continue
        found = _progress(goal, texts)
        if found is not None:
            updates.append(found)
    return updates


def _failed(goal: Goal, texts: Iterable[str], *, only_goal: bool) -> bool:
    goal_keys = _key_words(goal.name)
    for text in texts:
        for clause in _clauses(text):
            if not _FAILURE.search(clause) or _negated_failure(clause):
                continue
            if goal_keys & _key_words(clause):
                return True
            if only_goal and _FAILURE_GENERIC.search(clause):
                return True
    return False


def _progress(goal: Goal, texts: list[str]) -> dict[str, Any] | None:
    completions = [
        _key_words(clause)
        for text in texts
        for clause in _clauses(text)
        if _COMPLETION.search(clause) and not _NEGATION.search(clause)
    ]
    if not completions:
        return None

    def matches(description: str) -> bool:
        keys = _key_words(description)
        if not keys:
            return False
        needed = min(2, len(keys))
        return any(len(keys & said) >= needed for said in completions)

    if not goal.objectives:
        return {"id": goal.id, "status": "DONE"} if matches(goal.name) else None
    objectives = [
        {
            "description": o.description,
            "completed": o.completed or matches(o.description),
        }
        for o in goal.objectives
    ]
    if all(
        o["completed"] == old.completed for o, old in zip(objectives, goal.objectives, strict=True)
    ):
        return None
    update: dict[str, Any] = {"id": goal.id, "objectives": objectives}
    if all(o["completed"] for o in objectives):
        update["status"] = "DONE"
    return update


def _clauses(text: str) -> Iterator[str]:
    """Sentences and but-clauses: "I finished X but not Y" completes X."""
    for sentence in re.split(r"(?<=[.!?;])\s+|\s+but\s+", text):
        if sentence.strip():
            yield sentence


def _negated_failure(clause: str) -> bool:
    return bool(
        re.search(
            r"\b(?:not|never|won't|don't|didn't)\s+(?:\w+\s+)?(?:give|cancel|quit|abandon)",
            clause,
            re.I,
        )
    )

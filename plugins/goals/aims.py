"""How people state an aim of their own, beyond English: "mi objetivo es …", "mein Ziel …",
"je veux …", "今年の目標は…".

A goal is tracked only when the words it rests on state one (a small model labels requests
to the bot "goal" too), and the English phrases of `action.py` told nothing in the other
languages people write in: on the development set's 16 goals stated in Spanish, German,
French, Portuguese, Italian, Russian and Japanese, one was tracked. These are each language's
ordinary ways to say "my goal is" and "I want to", not phrases taken from any one message:
a possessive with the word for a goal, or the first person of "want". Wanting someone else to
act ("quiero que me ayudes", "ich will, dass du …") is a request, not an aim of one's own, so
a "want" followed by that language's "that" is none.

Phrases are compared folded (`find_words`: case, accents, punctuation; scripts written
without spaces as folded text), so "Mon objectif :" and "mon objectif" are one phrase.
"""

from __future__ import annotations

from bot.offline import find_words

# "my goal", "my aim", "my target": the possessive and the noun, as each language says them.
GOAL_NOUNS: tuple[str, ...] = (
    # Spanish, Portuguese
    "mi objetivo", "mi meta", "mi propósito", "meu objetivo", "minha meta", "meu propósito",
    # French, Italian
    "mon objectif", "mon but", "il mio obiettivo", "mio obiettivo", "la mia meta",
    # German, Dutch
    "mein ziel", "mijn doel",
    # Russian, Ukrainian, Polish
    "моя цель", "моя мета", "mój cel",
    # Greek, Turkish
    "στόχος μου", "hedefim", "amacım",
    # Japanese, Chinese, Korean
    "目標は", "目標を", "我的目标", "我的目標", "목표는",
)  # fmt: skip

# The first person of "want" (to do something).
WANT_VERBS: tuple[str, ...] = (
    "quiero", "quero", "je veux", "j'aimerais", "voglio", "vorrei", "ich will", "ich möchte",
    "ik wil", "хочу", "chcę", "θέλω", "したい", "하고 싶",
)  # fmt: skip

# What turns "want" into wanting someone else to act.
_THAT = frozenset({"que", "che", "dass", "dat", "чтобы", "żeby", "να μου"})


def states_an_aim(sentence: str) -> bool:
    """Whether a sentence (not a question: the caller's check) states an aim of the speaker's
    own in one of the languages above."""
    if any(find_words(noun, sentence) is not None for noun in GOAL_NOUNS):
        return True
    return any(_wants_to(verb, sentence) for verb in WANT_VERBS)


def _wants_to(verb: str, sentence: str) -> bool:
    if find_words(verb, sentence) is None:
        return False
    return not any(find_words(f"{verb} {that}", sentence) is not None for that in _THAT)

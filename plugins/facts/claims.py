"""Name facts: the fact that someone's name is what they told, as the facts plugin writes it.

"Call me Sam" is learned as "sam_1's name is Sam" (or "Their name is Sam" when the account
shows no name), and the told name is shown for them in that world from then on.
"""

from __future__ import annotations

import re

# State data: short id shown to the offline model ("f1") -> the known fact's id.
FACT_REFS = "fact_refs"

# A fact that gives its subject's name: "root's name is Priya", "Sam goes by Sammy".
_NAME_FACT = re.compile(
    r"^(?:.+?'s|their|his|her)\s+name\s+is\s+(?P<name>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)\.?$"
    r"|^[\w .-]+\s+goes\s+by\s+(?P<alias>[A-Z][\w'-]*)\.?$",
    re.IGNORECASE,
)


def told_name(fact_text: str) -> str | None:
    """The name a name fact gives its subject, or None for any other fact."""
    found = _NAME_FACT.match(fact_text.strip())
    if found is None:
        return None
    name = found["name"] or found["alias"]
    return name if name[:1].isupper() else None


def name_fact_text(owner: str | None, told: str) -> str:
    """The text of the fact that someone's name is `told`: "sam_1's name is Sam" by the name
    their account shows, or "Their name is Ana" when it shows none (the console's person is
    "User" until they give a name, and "User's name is Ana" reads as if the bot had two
    people in mind, on /me, /facts and in exports alike)."""
    if owner is None or not owner.strip() or _is_the_speaker(owner):
        return f"Their name is {told}"
    return f"{owner}'s name is {told}"


def _is_the_speaker(name: str) -> bool:
    return " ".join(name.casefold().split()) in _THE_SPEAKER


# A name fact's owner ("User's name is Ana"): what a model or a rule put before the name.
_NAME_OWNER = re.compile(r"^\s*(?P<owner>.+?)'s\s+name\s+is\s+", re.IGNORECASE)


def named_naturally(fact_text: str) -> str:
    """A name fact as `name_fact_text` writes it: a model shown the console's "User" answers
    "User's name is Ana"; other facts are returned as they are."""
    told = told_name(fact_text)
    found = _NAME_OWNER.match(fact_text)
    if told is None or found is None or not _is_the_speaker(found["owner"]):
        return fact_text
    return name_fact_text(None, told)


# A claim's subject that means "whoever said it".
_THE_SPEAKER = frozenset({"user", "the user", "i", "me", "myself", "speaker", "the speaker"})

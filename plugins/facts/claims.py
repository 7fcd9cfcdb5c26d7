"""Reading the model's claims, and deciding whom each claim is about.

The model's answer is untrusted input: every item is validated on its own, so one malformed
claim is logged and dropped while the rest are kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bot import Account, FactType, Memory, parse_json_array

log = logging.getLogger(__name__)

# State data: short id shown in the extraction prompt ("f1") -> the known fact's id.
FACT_REFS = "fact_refs"

# What a claim does to what is known: adds to it, replaces a known fact, ends one, or says
# one again (mem0's ADD / UPDATE / DELETE / NONE).
Change = Literal["new", "update", "retract", "repeat"]
_CHANGES = frozenset(("new", "update", "retract", "repeat"))


class Claim(BaseModel):
    """One item of the model's answer."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    claim: str
    type: FactType
    subject: str | None = None
    # Not in the seed's shape; the offline model, which knows who spoke, adds it. Trusted only
    # when it names someone in the conversation.
    subject_id: str | None = None
    in_bio: bool = False
    already_known: bool = False
    change: Change = "new"
    # The short id ("f2") of the known fact an update, retraction or repeat is about.
    fact: str | None = None

    @field_validator("claim")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value:
            raise ValueError("empty claim")
        return value

    @field_validator("type", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("change", mode="before")
    @classmethod
    def _known_change(cls, value: object) -> object:
        # A word the prompt did not offer ("add", "same") says nothing usable: treat the
        # claim as new, and dedup catches it if it is known after all.
        if isinstance(value, str) and value.strip().lower() in _CHANGES:
            return value.strip().lower()
        return "new"

    @field_validator("fact", mode="before")
    @classmethod
    def _short_id(cls, value: object) -> object:
        # "f2", "[f2]", 2 and "F2" all name the second known fact.
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None
        text = str(value).strip().strip("[]()").strip().lower()
        return f"f{text}" if text.isdigit() else text or None

    @field_validator("subject", "subject_id", mode="before")
    @classmethod
    def _name_or_none(cls, value: object) -> object:
        # A model sometimes answers a list of names or null; only a plain name is usable.
        return value if isinstance(value, str) else None


def claim_items(raw: str) -> list[Any] | None:
    """The answer's claims, unvalidated: `{"claims": [...]}` (what the prompt and the
    structured output ask for), or a bare array, a lone claim or a run of claims (what
    models answered before, and may still answer without structured output); None when
    the answer holds no JSON at all."""
    items = parse_json_array(raw)
    if items is None:
        return None
    if len(items) == 1 and isinstance(items[0], dict) and "claim" not in items[0]:
        # The wrapper; its key in any case ("Claims"), a lone key of another name too.
        wrapper = {str(k).strip().casefold(): v for k, v in items[0].items()}
        listed = wrapper.get("claims")
        if listed is None and len(wrapper) == 1:
            listed = next(iter(wrapper.values()))
        if isinstance(listed, list):
            return listed
    return items


@dataclass(frozen=True)
class ParsedClaims:
    """The valid claims of an answer, and how many of its items were not claims."""

    claims: list[Claim]
    malformed: int = 0


def parse_claims(raw: str) -> ParsedClaims | None:
    """The valid claims in the answer; None when the answer holds no claims' JSON at all."""
    items = claim_items(raw)
    if items is None:
        log.warning("fact extraction answer holds no JSON: %.200r", raw)
        return None
    claims = []
    for index, item in enumerate(items):
        try:
            claims.append(Claim.model_validate(item))
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "item"
            log.warning("skipping claim %d (%s: %s): %.200r", index, where, problem["msg"], item)
    return ParsedClaims(claims, len(items) - len(claims))


def keep(claim: Claim, keep_types: Iterable[str]) -> bool:
    """New information of a kept type; what the model already knew is not stored again.
    An update of a known fact is kept as a fact or a status (a model calls a move either)."""
    if claim.change in ("retract", "repeat") or claim.already_known or claim.in_bio:
        return False
    kept = set(keep_types)
    if claim.change == "update" and claim.type == "status":
        return True
    return claim.type in kept


def _norm(name: str) -> str:
    return " ".join(name.casefold().lstrip("@").split())


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


_LEADING_NAME = re.compile(r"^\W*([\w@][\w.\-']*)")


@dataclass(frozen=True)
class People:
    """Who can be a claim's subject: the conversation's actors and the agent."""

    agent_id: str
    agent_names: tuple[str, ...]
    actors: Mapping[str, Account]
    # The speaker of the latest user message: whom an unclear claim is most likely about.
    fallback_id: str
    # The users' messages the claims were read from, to find who said a claim.
    messages: Sequence[Memory] = ()

    @cached_property
    def _lookup(self) -> dict[str, str | None]:
        # Full names and usernames first; a first name counts only when it is unambiguous.
        exact: dict[str, str] = {}
        first: dict[str, set[str]] = {}
        for account in self.actors.values():
            for name in (account.name, account.username):
                if name and _norm(name):
                    exact.setdefault(_norm(name), account.id)
            words = _norm(account.name).split()
            if len(words) > 1:
                first.setdefault(words[0], set()).add(account.id)
        for name in self.agent_names:
            if name and _norm(name):
                exact.setdefault(_norm(name), self.agent_id)
        table: dict[str, str | None] = dict(exact)
        for word, ids in first.items():
            if word not in table:
                table[word] = next(iter(ids)) if len(ids) == 1 else None
        return table

    def match(self, name: str | None) -> str | None:
        if not name or not _norm(name):
            return None
        return self._lookup.get(_norm(name))

    def subject_of(self, claim: Claim) -> str | None:
        """The account a claim is about: its named subject, else a name the claim starts
        with ("Sam lives in Lisbon"), else whoever said it (a partner, a pet or a race that
        is not in the conversation is the speaker's fact). Never the agent: None when the
        claim is about the assistant itself (see `attribute`)."""
        found = self.match(claim.subject)
        if found is None and claim.subject_id in self.actors:
            found = claim.subject_id
        if found is None:
            leading = _LEADING_NAME.match(claim.claim)
            found = self.match(leading.group(1)) if leading else None
        if found == self.agent_id:
            return None
        if found is None:
            if claim.subject:
                log.info("claim subject %r is not a person in the conversation", claim.subject)
            return self.said_by(claim).user_id if self.messages else self.fallback_id
        return found

    def attribute(self, claim: Claim) -> tuple[str, str] | None:
        """(subject id, claim text), or None for a claim not to keep.

        The assistant is never the subject of what a user says. A claim filed under it is
        either about it ("Mnemo is named after Mnemosyne", from "is your name from ...?"),
        dropped, or the speaker's own news misfiled (a real model wrote "Mnemo has a rescue
        greyhound" for "we have a rescue greyhound"), given back to the speaker."""
        subject = self.subject_of(claim)
        if subject is not None:
            return subject, claim.claim
        if not self.messages:
            return None
        source = self.said_by(claim)
        words = set(re.findall(r"[\w']+", source.content.text.casefold()))
        if words & _SECOND_PERSON or not words & _FIRST_PERSON:
            return None
        speaker = self.actors[source.user_id].name if source.user_id in self.actors else None
        if speaker is None:
            return None
        text = claim.claim
        for name in sorted(self.agent_names, key=len, reverse=True):
            if name and text.casefold().startswith(name.casefold()):
                text = speaker + text[len(name) :]
                break
        return source.user_id, text

    def said_by(self, claim: Claim, speaker: str | None = None) -> Memory:
        """The user message a claim most likely came from (of `speaker`'s, if they said
        anything): the one sharing the most words with it (the latest on a tie), else the
        latest."""
        messages = [m for m in self.messages if m.user_id == speaker] or list(self.messages)
        words = _content_words(claim.claim)
        best, best_overlap = messages[-1], 0
        for message in messages:
            overlap = len(words & _content_words(message.content.text))
            if overlap >= best_overlap and overlap > 0:
                best, best_overlap = message, overlap
        return best


_FIRST_PERSON = frozenset({"i", "i'm", "i've", "my", "me", "we", "we're", "our", "us"})
_SECOND_PERSON = frozenset({"you", "your", "you're", "yours"})
# Words too common to tell which message a claim came from.
_SMALL_WORDS = frozenset(
    "a an the and or but is are was were be been has have had of to in on at for with by my "  # noqa: SIM905
    "our your their his her its i we you they he she it that this as from now".split()
)


def _content_words(text: str) -> set[str]:
    words = {w.strip("'") for w in re.findall(r"[\w']+", text.casefold())}
    return {w for w in words if w and w not in _SMALL_WORDS}


def describe_account(account: Account) -> str:
    """One line for "Actors in the scene": the name and whatever the platform told us."""
    label = account.name
    if account.username and _norm(account.username) != _norm(account.name):
        label += f" (@{account.username.lstrip('@')})"
    details = _details_text(account.details)
    return f"{label}: {details}" if details else f"{label}: (no description)"


# Account details that describe the person; others (avatars, ids) only cost prompt tokens.
_DESCRIPTIVE = ("bio", "description", "about", "title", "pronouns", "roles", "status")


def _details_text(details: Mapping[str, Any]) -> str:
    chosen = {k: v for k, v in details.items() if k.casefold() in _DESCRIPTIVE}
    parts = []
    for key, value in chosen.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, list | tuple):
            value = ", ".join(str(v) for v in value)
        parts.append(f"{key.replace('_', ' ')}: {value}")
    return "; ".join(parts)

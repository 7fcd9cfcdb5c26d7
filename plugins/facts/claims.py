"""Reading the model's claims, and deciding whom each claim is about.

The model's answer is untrusted input: every item is validated on its own, so one malformed
claim is logged and dropped while the rest are kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bot.llm.parsing import parse_json_array
from bot.models import Account, FactType

log = logging.getLogger(__name__)


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

    @field_validator("subject", "subject_id", mode="before")
    @classmethod
    def _name_or_none(cls, value: object) -> object:
        # A model sometimes answers a list of names or null; only a plain name is usable.
        return value if isinstance(value, str) else None


def parse_claims(raw: str) -> list[Claim] | None:
    """The valid claims in the answer; None when the answer holds no JSON array at all."""
    items = parse_json_array(raw)
    if items is None:
        log.warning("fact extraction answer is not a JSON array: %.200r", raw)
        return None
    claims = []
    for index, item in enumerate(items):
        try:
            claims.append(Claim.model_validate(item))
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "item"
            log.warning("skipping claim %d (%s: %s): %.200r", index, where, problem["msg"], item)
    return claims


def keep(claim: Claim, keep_types: Iterable[str]) -> bool:
    """New information of a kept type; what the model already knew is not stored again."""
    return claim.type in set(keep_types) and not claim.already_known and not claim.in_bio


def _norm(name: str) -> str:
    return " ".join(name.casefold().lstrip("@").split())


_LEADING_NAME = re.compile(r"^\W*([\w@][\w.\-']*)")


@dataclass(frozen=True)
class People:
    """Who can be a claim's subject: the conversation's actors and the agent."""

    agent_id: str
    agent_names: tuple[str, ...]
    actors: Mapping[str, Account]
    # The speaker of the latest user message: whom an unclear claim is most likely about.
    fallback_id: str

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

    def subject_of(self, claim: Claim) -> str:
        """The account a claim is about: its named subject, else a name the claim starts
        with ("Sam lives in Lisbon"), else the latest speaker. Never the agent by default."""
        found = self.match(claim.subject)
        if found is None and claim.subject_id in {*self.actors, self.agent_id}:
            found = claim.subject_id
        if found is None:
            leading = _LEADING_NAME.match(claim.claim)
            found = self.match(leading.group(1)) if leading else None
        if found is None:
            if claim.subject:
                log.info("claim subject %r is not in the conversation", claim.subject)
            return self.fallback_id
        return found


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

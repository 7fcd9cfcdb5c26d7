"""Reading the model's claims, and deciding whom each claim is about.

The model's answer is untrusted input: every item is validated on its own, so one malformed
claim is logged and dropped while the rest are kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bot import Account, FactType, Memory, is_common_word, parse_json_array

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


# Why a claim of the answer is not a new fact (counted in the rejects ledger).
NOT_KEPT_TYPE = "type not kept"
IN_BIO = "already in the description"


def not_kept(claim: Claim, keep_types: Iterable[str]) -> str | None:
    """Why a claim is not new information to store, or None to store it. What the model
    already knew is not stored again (and not counted: it is not a rejection); a type the
    deployment chose not to keep is counted."""
    if claim.change in ("retract", "repeat") or claim.already_known:
        return "known"
    if claim.in_bio:
        return IN_BIO
    if claim.change == "update" and claim.type == "status":
        return None  # a model calls a move either a fact or a status
    return None if claim.type in set(keep_types) else NOT_KEPT_TYPE


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


_LEADING_NAME = re.compile(r"^\W*([\w@][\w.\-']*)")


# A claim's subject that means "whoever said it".
_THE_SPEAKER = frozenset({"user", "the user", "i", "me", "myself", "speaker", "the speaker"})
# Why a claim was not filed under anyone (the rejects ledger's reasons).
NOT_A_PARTICIPANT = "about someone not here"
ABOUT_THE_ASSISTANT = "about the assistant"


@dataclass(frozen=True)
class Attribution:
    """Whom a claim is about, who said it, and its text; or why it is filed under no one."""

    subject_id: str | None
    said_by: str | None
    text: str
    rejected: str | None = None
    # The message the claim most likely came from (its speaker's).
    source: Memory | None = None


@dataclass(frozen=True)
class People:
    """Who can be a claim's subject: the conversation's actors, the world's other
    participants, and the agent."""

    agent_id: str
    agent_names: tuple[str, ...]
    actors: Mapping[str, Account]
    # The speaker of the latest user message: whom an unclear claim is most likely about.
    fallback_id: str
    # The users' messages the claims were read from, to find who said a claim.
    messages: Sequence[Memory] = ()
    # The world's participants who are not in the window ("Tobrin is a convicted thief",
    # said of someone who spoke yesterday, is Tobrin's fact, not the speaker's).
    others: Mapping[str, Account] = field(default_factory=dict)

    @cached_property
    def _lookup(self) -> dict[str, str | None]:
        # Full names and usernames first; a first name counts only when it is unambiguous.
        exact: dict[str, str] = {}
        first: dict[str, set[str]] = {}
        for account in [*self.actors.values(), *self.others.values()]:
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

    def named(self, claim: Claim) -> tuple[str | None, bool]:
        """(the person the claim names as its subject, whether it names anyone at all): its
        subject field, the offline model's subject id, else a name the claim starts with
        ("Sam lives in Lisbon")."""
        if claim.subject_id in self.actors:
            return claim.subject_id, True
        subject = (
            claim.subject if claim.subject and _norm(claim.subject) not in _THE_SPEAKER else None
        )
        found = self.match(subject)
        if found is not None:
            return found, True
        leading = _LEADING_NAME.match(claim.claim)
        word = leading.group(1) if leading else None
        by_word = self.match(word)
        if by_word is not None:
            return by_word, True
        # A capitalised subject or first word that is nobody here names someone else.
        names_someone = bool(subject) or bool(
            word and word[:1].isupper() and not is_common_word(word)
        )
        return None, names_someone

    def attribute(self, claim: Claim) -> Attribution:
        """Whom the claim is about and who said it.

        A claim naming a participant of this world is theirs, whoever said it (with the
        speaker recorded). A claim about the assistant is dropped: never re-filed under the
        person talking to it. A claim about someone who is not a participant is the
        speaker's only when the speaker owns it ("my sister is a nurse", "Dan's partner
        Lea"); otherwise it is dropped."""
        subject, names_someone = self.named(claim)
        if subject == self.agent_id:
            return Attribution(None, None, claim.claim, ABOUT_THE_ASSISTANT)
        source = self.said_by(claim, subject) if self.messages else None
        speaker = source.user_id if source is not None else self.fallback_id
        if subject is not None:
            return Attribution(subject, speaker, claim.claim, source=source)
        if names_someone and not self._owned(claim, source):
            if claim.subject:
                log.info("claim subject %r is not a person in the conversation", claim.subject)
            return Attribution(None, speaker, claim.claim, NOT_A_PARTICIPANT, source)
        return Attribution(speaker, speaker, claim.claim, source=source)

    def _owned(self, claim: Claim, source: Memory | None) -> bool:
        """Whether the speaker of `source` owns what the claim says of someone not here:
        the claim says it is theirs ("Dan's partner Lea"), or the sentence that names that
        someone says "my ..." or "our ..." ("My sister Mia is a nurse"; not "Ragnar is a
        pirate, they say" after it)."""
        if source is None:
            return False
        speaker = self.actors.get(source.user_id)
        if speaker is not None and re.search(
            rf"\b{re.escape(speaker.name)}'s\b", claim.claim, re.IGNORECASE
        ):
            return True
        leading = _LEADING_NAME.match(claim.claim)
        names = {_norm(n) for n in (claim.subject, leading.group(1) if leading else None) if n}
        for sentence in re.split(r"[.!?;\n]+", source.content.text):
            words = set(re.findall(r"[\w']+", sentence.casefold()))
            named = any(set(name.split()) <= words for name in names)
            if named and words & _POSSESSIVE:
                return True
        return False

    def said_by(self, claim: Claim, subject: str | None = None) -> Memory:
        """The user message a claim most likely came from: the one sharing the most content
        words with it; on a tie the subject's own (they speak of themselves most), else the
        latest."""
        messages = list(self.messages)
        words = _content_words(claim.claim)
        best, best_key = messages[-1] if messages else None, (0, False)
        for message in messages:
            overlap = len(words & _content_words(message.content.text))
            key = (overlap, message.user_id == subject)
            if overlap > 0 and key >= best_key:
                best, best_key = message, key
        if best is None:
            raise ValueError("no messages to attribute a claim to")
        return best


_POSSESSIVE = frozenset({"my", "our", "mine", "ours"})
_SMALL_WORDS = frozenset(
    "a an the and or but is are was were be been has have had of to in on at for with by my "  # noqa: SIM905
    "our your their his her its i we you they he she it that this as from now".split()
)


def _content_words(text: str) -> set[str]:
    words = {w.strip("'").removesuffix("'s") for w in re.findall(r"[\w']+", text.casefold())}
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

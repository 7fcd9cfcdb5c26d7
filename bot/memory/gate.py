"""The gate every fact passes on its way into MongoDB: grounded, or counted and dropped.

`Knowledge.add_facts` and `retract_facts` ask it, so whichever plugin writes a fact through
`ctx.knowledge` gets the same rule (grounding.py): the claim's speaker said it. It reads what
the rule needs (the source messages not at hand, the names of the people involved) and keeps
the rejects ledger (rejects.py) by world and reason.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from pymongo.errors import PyMongoError

from bot.domain.records import Account, Fact, Memory
from bot.memory.evidence import QUOTE_NOT_SAID, Said, check
from bot.memory.grounding import (
    ABOUT_ASSISTANT,
    NOT_SAID,
    RETRACTION_UNSUPPORTED,
    SAID_BY_ASSISTANT,
    Grounding,
    same_kind,
)
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)


class FactGate:
    """Grounding applied with what the store knows, and the rejects ledger kept."""

    def __init__(
        self, store: MongoStore, grounding: Grounding, *, translated: bool = False
    ) -> None:
        self._store = store
        self._grounding = grounding
        # Facts are written in one language the operator chose, whatever was said
        # (MNEMO_FACTS_LANGUAGE): only their names and numbers must be in the quote.
        self.translated = translated

    async def count(self, rejected: Sequence[tuple[str, str]]) -> None:
        """Add (world, reason) pairs to the rejects ledger (bot/storage/rejects.py). The
        ledger is a count, not the truth: a failed write is logged, never raised."""
        by_world: dict[str, Counter[str]] = {}
        for world_id, reason in rejected:
            by_world.setdefault(world_id, Counter())[reason] += 1
        for world_id, counts in by_world.items():
            log.info("world %s: claims not stored: %s", world_id, dict(counts))
            try:
                await self._store.rejects.add(world_id, counts)
            except PyMongoError:
                log.warning("rejects ledger not written for world %s", world_id, exc_info=True)

    async def verdicts(
        self,
        facts: Sequence[Fact],
        said: Sequence[Memory],
        *,
        given: bool = False,
        people: Mapping[str, Account] | None = None,
        ending: bool = False,
    ) -> dict[str, str]:
        """Why each fact that must not be stored must not (by fact id). What is not at hand
        (`said`: messages, `people`: accounts) is read: the source messages and the people."""
        messages = {m.id: m for m in said}
        wanted = set() if given else {i for f in facts for i in f.source_message_ids}
        wanted -= set(messages)
        if wanted:
            messages.update({m.id: m for m in await self._store.memories.get_many(sorted(wanted))})
        accounts = dict(people or {})
        wanted_people = {f.subject_id for f in facts} | {f.said_by for f in facts if f.said_by}
        if wanted_people - set(accounts):
            accounts.update(
                await self._store.accounts.get_many(sorted(wanted_people - set(accounts)))
            )
        agent_id = self._grounding.agent_id
        verdicts: dict[str, str] = {}
        for fact in facts:
            speaker = fact.said_by or fact.subject_id
            verdict: str | None
            if agent_id and fact.subject_id in (fact.agent_id, agent_id):
                verdict = ABOUT_ASSISTANT
            elif speaker in (fact.agent_id, agent_id):
                verdict = SAID_BY_ASSISTANT
            elif fact.evidence is not None and not given:
                verdict = self._evidence_verdict(fact, speaker, messages, accounts, ending)
            else:
                sources = [messages[i] for i in fact.source_message_ids if i in messages]
                own = [m for m in sources if m.user_id == speaker]
                if speaker != fact.subject_id:
                    # Said of someone else: only what names them, @mentions them or replies
                    # to them is about them ("Sam is a nurse" is not in "Sarah is a nurse").
                    subject_names = _names(accounts, fact.subject_id)
                    own = [m for m in own if _about(m, fact.subject_id, subject_names, messages)]
                lines = [m.content.text for m in own]
                verdict = None
                if fact.source_message_ids and not lines and not given:
                    told = any(m.user_id in (fact.agent_id, agent_id) for m in sources)
                    verdict = SAID_BY_ASSISTANT if told else NOT_SAID
                if verdict is None:
                    verdict = self._grounding.judge(
                        fact.text,
                        subject_is_speaker=speaker == fact.subject_id,
                        names=_names(accounts, fact.subject_id, speaker, text=fact.text),
                        said=lines if fact.source_message_ids and not given else None,
                        others=[
                            name
                            for person in accounts
                            if person not in (fact.subject_id, speaker)
                            for name in _names(accounts, person)
                        ],
                    )
            if verdict is not None:
                verdicts[fact.id] = verdict
        return verdicts

    def _evidence_verdict(
        self,
        fact: Fact,
        speaker: str,
        messages: Mapping[str, Memory],
        accounts: Mapping[str, Account],
        ending: bool = False,
    ) -> str | None:
        """Why a fact that carries its evidence must not be stored: its quote is not in its
        speaker's message, or comes from a question or a forged turn, or the fact says more
        than it (evidence.py); or it is about no one in particular, the assistant, the prompt
        or an identifier (grounding.py). Said of someone else, the message must be about them."""
        assert fact.evidence is not None
        message = messages.get(fact.evidence.message_id)
        if message is None:
            return QUOTE_NOT_SAID
        if message.user_id != speaker:
            told = message.user_id in (fact.agent_id, self._grounding.agent_id)
            return SAID_BY_ASSISTANT if told else QUOTE_NOT_SAID
        if speaker != fact.subject_id and not _about(
            message, fact.subject_id, _names(accounts, fact.subject_id), messages
        ):
            return NOT_SAID
        others = [
            name
            for person in accounts
            if person not in (fact.subject_id, speaker)
            for name in _names(accounts, person)
        ]
        said = Said(message.id, message.user_id, message.content.text)
        turn_people = [*others, *_names(accounts, fact.subject_id, speaker)]
        verdict = check(
            fact.text,
            fact.evidence.quote,
            said,
            names=_names(accounts, fact.subject_id, speaker, text=fact.text),
            turn_names=[*others, *self._grounding.agent_names],
            translated=self.translated,
            value=fact.value,
            attribute=fact.attribute,
            ending=ending,
        )
        return verdict or self._grounding.unfit(fact.text, names=turn_people)

    async def retractable(
        self, claims: Mapping[str, Fact], *, world_id: str, said: Sequence[Memory]
    ) -> list[str]:
        """The facts (of `claims`' keys) their claims may close: the claim is about the
        fact's subject and of its kind, and its speaker (the subject, never the assistant)
        said something of the fact ("horse", "Initech") with words of change ("sold",
        "quit", "no longer"). The others are counted as unsupported retractions."""
        known = {f.id: f for f in await self._store.facts.get_many(list(claims))}
        messages = {m.id: m for m in said}
        wanted = {i for c in claims.values() for i in c.source_message_ids} - set(messages)
        if wanted:
            messages.update({m.id: m for m in await self._store.memories.get_many(sorted(wanted))})
        accounts = await self._store.accounts.get_many(
            sorted({c.subject_id for c in claims.values()})
        )
        allowed, refused = [], []
        for fact_id, claim in claims.items():
            old = known.get(fact_id)
            lines = [
                messages[i].content.text
                for i in claim.source_message_ids
                if i in messages and messages[i].user_id == claim.subject_id
            ]
            if (
                old is None
                or old.world_id != world_id
                or old.subject_id != claim.subject_id
                or claim.said_by not in (None, claim.subject_id)
                or claim.subject_id == self._grounding.agent_id
                or not same_kind(old.text, claim.text)
                or not self._grounding.says_it_changed_of(
                    old.text, names=_names(accounts, old.subject_id), said=lines
                )
            ):
                refused.append((world_id, RETRACTION_UNSUPPORTED))
            else:
                allowed.append(fact_id)
        await self.count(refused)
        return allowed


def _about(
    message: Memory, person: str, names: Sequence[str], messages: Mapping[str, Memory]
) -> bool:
    """Whether a message is about `person`: names them, @mentions them, or replies to them."""
    if person in message.mentions:
        return True
    replied = messages.get(message.content.in_reply_to or "")
    if replied is not None and replied.user_id == person:
        return True
    said = set(re.findall(r"[\w'-]+", message.content.text.casefold().replace("'s", "")))
    return any(set(name.casefold().lstrip("@").split()) <= said for name in names if name)


def _names(accounts: Mapping[str, Account], *ids: str, text: str = "") -> list[str]:
    """Every name these people go by (a claim names its subject; that is not content). For a
    person with no account (a fact given by a tool), the name the claim starts with."""
    names: list[str] = []
    for account_id in ids:
        account = accounts.get(account_id)
        if account is not None:
            names += [n for n in (account.name, account.username, account.platform_id) if n]
    if not names and (leading := re.match(r"\W*([A-Z][\w-]*)", text)):
        names.append(leading.group(1))
    return names

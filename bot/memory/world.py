"""One world's memory, as a plugin is handed it: read the facts about its people, propose
claims with their evidence, nothing else. No collection, vector index or other world is
reachable through it (the plugin SDK's `FactMemory`: bot/plugin/services.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from bot.domain.records import Account, Evidence, Fact, Memory, epoch_millis, stable_id
from bot.memory.claims import Claim, Learned
from bot.memory.evidence import QUOTE_NOT_SAID, Said, locate
from bot.memory.store import Knowledge
from bot.memory.text import find_words

NO_MESSAGE = "quote from an unknown message"


class WorldFacts:
    def __init__(
        self,
        knowledge: Knowledge,
        world_id: str,
        *,
        on_learned: Callable[[list[Fact]], Awaitable[None]] | None = None,
    ) -> None:
        self._knowledge = knowledge
        self.world_id = world_id
        self.language = knowledge.language
        # Told what was stored (the plugins' `learned` hooks), before `propose` returns.
        self._on_learned = on_learned

    async def facts_about(self, person_ids: Sequence[str], *, limit: int = 12) -> list[Fact]:
        """The people's current facts in this world, most recently learned first."""
        return await self._knowledge.recent_facts(person_ids, self.world_id, limit=limit)

    async def relevant_facts(
        self, text: str, person_ids: Sequence[str], *, limit: int = 8
    ) -> list[Fact]:
        """The people's current facts most relevant to `text`; the most recent ones when none
        is."""
        return await self._knowledge.search_facts(
            text, subject_ids=person_ids, world_id=self.world_id, limit=limit
        )

    async def similar_facts(
        self, texts: Sequence[str], person_ids: Sequence[str], *, limit: int = 12
    ) -> list[Fact]:
        """The people's current facts most like any of `texts`, most alike first."""
        return await self._knowledge.similar_facts(
            texts, subject_ids=person_ids, world_id=self.world_id, limit=limit
        )

    async def history(self, person_id: str) -> list[Fact]:
        """Every fact about a person in this world, current and closed, oldest first."""
        return await self._knowledge.fact_history(person_id, self.world_id)

    async def participants(self) -> dict[str, Account]:
        """Everyone who has written in this world but the bot."""
        return await self._knowledge.participants(self.world_id)

    async def propose(
        self,
        claims: Sequence[Claim],
        *,
        messages: Sequence[Memory] = (),
        people: Mapping[str, Account] | None = None,
    ) -> Learned:
        """Offer claims to the memory. Each is kept only when its quote is in its message,
        written by whoever that message's author is, and it says no more than the quote
        (evidence.py); a claim about someone other than its speaker is kept as theirs said
        by the speaker; a claim that ends (`ends`) closes its subject's current value of the
        attribute when the subject said so. `messages` are the messages at hand (the others
        are read); `people` the accounts at hand. Idempotent: the same claim from the same
        message is the same fact, stored once."""
        learned = Learned()
        by_id = {m.id: m for m in messages}
        missing = sorted({c.message_id for c in claims if c.message_id} - set(by_id))
        if missing:
            found = await self._knowledge.store.memories.get_many(missing)
            by_id.update({m.id: m for m in found if m.world_id == self.world_id})
        facts: list[Fact] = []
        endings: list[Fact] = []
        unfounded: list[str] = []
        for claim in claims:
            found_in = _evidence_of(claim, by_id)
            if isinstance(found_in, str):
                learned.rejected[found_in] += 1
                unfounded.append(found_in)
                continue
            message, quote = found_in
            fact = _fact(claim, message, quote)
            (endings if claim.ends else facts).append(fact)
        # Counted here, as the store counts what its gate refuses: whatever the memory does
        # not keep is in the world's ledger (/stats) once.
        await self._knowledge.gate.count([(self.world_id, reason) for reason in unfounded])
        if facts:
            writes = await self._knowledge.add_facts(
                facts,
                near_duplicate_distance=self._knowledge.near_duplicate_distance,
                said=list(by_id.values()),
                people=people,
            )
            again = []
            for write in writes:
                if write.stored:
                    learned.stored.append(write.fact)
                    if write.superseded is not None:
                        learned.closed.append(write.superseded)
                elif write.rejected is not None:
                    learned.rejected[write.rejected] += 1
                else:
                    learned.duplicates += 1
                    if write.duplicate_of == write.fact.id:
                        again.append(write.fact)  # stored by an earlier run of this reading
            if self._on_learned is not None and (learned.stored or again):
                # Before anything else can fail: a re-run hands the same facts again.
                await self._on_learned([*learned.stored, *again])
        for ending in endings:
            verdicts = await self._knowledge.gate.verdicts(
                [ending], list(by_id.values()), people=people, ending=True
            )
            reason = verdicts.get(ending.id)
            if reason is None and ending.said_by is not None:
                reason = NOT_THEIR_WORD
            if reason is not None:
                learned.rejected[reason] += 1
                await self._knowledge.gate.count([(self.world_id, reason)])
                continue
            learned.closed += await self._knowledge.end_slot(ending)
        return learned

    async def learn_name(self, person_id: str, name: str) -> None:
        await self._knowledge.learn_name(person_id, name, self.world_id)

    async def count_rejected(self, reasons: Mapping[str, int]) -> None:
        await self._knowledge.gate.count(
            [(self.world_id, reason) for reason, count in reasons.items() for _ in range(count)]
        )


# A take-back said of someone by someone else ("Tobrin quit his job", said by Quorra).
NOT_THEIR_WORD = "ended by someone else's word"


def _said(text: str) -> str:
    return " ".join(text.casefold().split())


def _evidence_of(claim: Claim, messages: dict[str, Memory]) -> tuple[Memory, str] | str:
    """The message a claim rests on and the sentence of it that holds its value or quote
    (evidence.locate): the message it names first, then the others its speaker wrote; or why
    there is none."""
    named = messages.get(claim.message_id) if claim.message_id else None
    if claim.message_id and named is None:
        return NO_MESSAGE
    speaker = named.user_id if named is not None else (claim.said_by or claim.about)
    candidates = [named] if named is not None else []
    candidates += [m for m in messages.values() if m.user_id == speaker and m is not named]
    said = [Said(m.id, m.user_id, m.content.text) for m in candidates]
    wanted = claim.value if claim.value is not None else claim.text
    quote = claim.value if claim.value is not None else claim.quote
    if claim.value is not None:
        # A value is the person's own words: only a sentence holding it word for word.
        said = [s for s in said if find_words(claim.value, s.text) is not None]
    located = locate(wanted, quote, said, names=[], ending=claim.ends)
    if located is None:
        return QUOTE_NOT_SAID
    message = next(m for m in candidates if m.id == located.said.message_id)
    return message, located.quote


def _fact(claim: Claim, message: Memory, quote: str) -> Fact:
    said_at = epoch_millis(message.created_at)
    return Fact(
        # The same claim from the same message always gets the same id: a re-run extraction
        # stores it once and closes nothing twice.
        id=stable_id(
            "fact",
            message.id,
            claim.about,
            " ".join(claim.text.casefold().split()),
            str(claim.ends),
        ),
        text=claim.text,
        type=claim.type,
        subject_id=claim.about,
        said_by=message.user_id if message.user_id != claim.about else None,
        room_id=message.room_id,
        world_id=message.world_id,
        agent_id=message.agent_id,
        source_message_ids=[message.id],
        valid_from=said_at,
        attribute=claim.attribute,
        value=claim.value,
        evidence=Evidence(message_id=message.id, quote=quote, said_at=said_at),
    )

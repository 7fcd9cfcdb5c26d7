"""What Mnemo knows about people: fact writes and reads that span MongoDB (truth) and Chroma
(vectors).

Consistency rule: MongoDB is written first and is the source of truth. A vector write that
fails leaves the document marked unindexed (`indexed_at is None`) for `reindex_missing()` to
rebuild; every vector hit is hydrated through MongoDB, so a vector whose document is gone
(a failed delete) is never shown and is swept later.

Over 400 lines: the one class whose writes span MongoDB and Chroma, kept whole so that rule
stays in one place; what decides whether a fact may be written is beside it (fact_gate.py,
grounding.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo.errors import DuplicateKeyError

from bot.domain.records import Account, Fact, Memory, utcnow
from bot.knowledge.embeddings import Embedder
from bot.knowledge.vector_metadata import fact_metadata, scope_filter
from bot.knowledge.vectors import VectorHit, VectorIndex
from bot.memory.at_hand import KnownFacts
from bot.memory.fact_values import state_different_values
from bot.memory.gate import FactGate
from bot.memory.grounding import OTHER_KIND, Grounding, same_kind
from bot.storage.facts import fact_text_key
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)


async def nearest_facts(
    vectors: VectorIndex,
    vector: list[float],
    *,
    subject_ids: Sequence[str],
    world_id: str,
    limit: int,
) -> list[VectorHit]:
    """The facts about these people in this world nearest to `vector`, nearest first.

    Ranked exactly (`VectorIndex.nearest_within`): a person has tens of facts, and HNSW is
    slowest with exactly this kind of narrow filter. `mnemo bench vectors` times this call.
    """
    return await vectors.nearest_within(
        "facts",
        vector,
        where=scope_filter(subject_id=list(subject_ids), world_id=world_id),
        limit=limit,
    )


@dataclass(frozen=True)
class FactWrite:
    """The outcome of offering one fact: stored, or a duplicate of an existing one."""

    fact: Fact
    stored: bool
    duplicate_of: str | None = None
    # The current fact this one replaced: closed, with this one as its successor.
    superseded: str | None = None
    # Why it was not stored: what its speaker said does not support it (grounding.py).
    rejected: str | None = None


class Knowledge:
    def __init__(
        self,
        store: MongoStore,
        vectors: VectorIndex,
        embedder: Embedder,
        grounding: Grounding | None = None,
        *,
        near_duplicate_distance: float = 0.04,
        language: str | None = None,
    ) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        # What every fact offered is checked against before it is stored (grounding.py).
        self.grounding = grounding or Grounding()
        # The one language facts are written in (MNEMO_FACTS_LANGUAGE); None: as said.
        self.language = language
        self.gate = FactGate(store, self.grounding, translated=language is not None)
        # Under this cosine distance a new fact is a paraphrase of a stored one (settings).
        self.near_duplicate_distance = near_duplicate_distance

    # facts --------------------------------------------------------------------------------
    async def add_facts(
        self,
        facts: Sequence[Fact],
        *,
        near_duplicate_distance: float,
        replaces: Mapping[str, str] | None = None,
        said: Sequence[Memory] = (),
        given: bool = False,
        people: Mapping[str, Account] | None = None,
    ) -> list[FactWrite]:
        """Store new facts, skipping exact and near duplicates (paraphrases) of the subject's
        current facts and of each other. One embedding call for the whole batch.

        Every fact is grounded first (grounding.py): one whose speaker (`said_by`, else its
        subject) did not say what it claims in its source messages, that is about the
        assistant, a transcript line, an echo of the character or a prompt, is not stored
        and is counted in the rejects ledger by reason. `said` are the messages at hand (the
        extracted window) and `people` the accounts at hand; what is missing is read. A fact
        given without source messages (an import, a fixture), or with `given` (facts a
        person or a dataset wrote, never a model's claims), is checked for everything but
        its support.

        `replaces` maps a new fact's id to the current fact it updates: once the new fact is
        stored, the old one is closed with it as successor, if the two say the same kind of
        thing (a city for a city): "lives in Tallinn" is never closed by "is a friendly
        presence". A near duplicate whose numbers, dates or names differ ("has 2 kids" /
        "has 3 kids") is such an update, never a duplicate. A fact whose id is already
        stored (a re-run extraction) changes nothing.
        """
        if not facts:
            return []
        replaces = replaces or {}
        verdicts = await self.gate.verdicts(facts, said, given=given, people=people)
        results: list[FactWrite] = []
        grounded = []
        for fact in facts:
            if verdicts.get(fact.id) is not None:
                results.append(FactWrite(fact, stored=False, rejected=verdicts[fact.id]))
            else:
                grounded.append(fact)
        await self.gate.count(
            [(f.world_id, r) for f in facts if (r := verdicts.get(f.id)) is not None]
        )
        if not grounded:
            return results
        vectors = await self.embedder.embed([f.text for f in grounded])
        accepted: list[tuple[Fact, list[float]]] = []
        for fact, vector in zip(grounded, vectors, strict=True):
            slot = await self._slot_of(fact)
            same = [f.id for f in slot if fact_text_key(f.text) == fact_text_key(fact.text)]
            duplicate, resembled = (
                (same[0], None)
                if same
                else await self._resemblance(fact, vector, accepted, near_duplicate_distance)
            )
            if duplicate is not None:
                results.append(FactWrite(fact, stored=False, duplicate_of=duplicate))
                continue
            try:
                await self.store.facts.insert(fact)
            except DuplicateKeyError:
                # Stored by an earlier run of this same extraction: what it closed is closed.
                results.append(FactWrite(fact, stored=False, duplicate_of=fact.id))
                continue
            accepted.append((fact, vector))
            if slot:
                # The same attribute of the same person: the new value replaces the old,
                # whatever words the two share ("17 postcards" -> "25 postcards").
                closed = [await self._close(old, fact) for old in slot]
                superseded = next(
                    (o.id for o, done in zip(slot, closed, strict=True) if done), None
                )
            else:
                target = replaces.get(fact.id)
                superseded = await self._supersede(
                    fact, target or resembled, asked=target is not None
                )
            results.append(FactWrite(fact, stored=True, superseded=superseded))
        if accepted:
            await self._index_facts(accepted)
        return results

    async def _resemblance(
        self,
        fact: Fact,
        vector: list[float],
        accepted: list[tuple[Fact, list[float]]],
        threshold: float,
    ) -> tuple[str | None, str | None]:
        """(the fact this one duplicates, the current fact it may update): a near duplicate
        that states different values is a possible update, not a duplicate."""
        for other, other_vector in reversed(accepted):
            if (
                other.subject_id == fact.subject_id
                and _cosine_distance(vector, other_vector) <= threshold
            ):
                if state_different_values(fact.text, other.text):
                    return None, other.id
                return other.id, None
        same = await self.store.facts.find_by_text(
            subject_id=fact.subject_id, world_id=fact.world_id, text=fact.text
        )
        if same is not None:
            return same.id, None
        hits = await self._nearest_facts_or_nothing(
            vector, subject_ids=[fact.subject_id], world_id=fact.world_id, limit=1
        )
        if hits and hits[0].distance <= threshold:
            # Only trust the vector if its document still exists and still holds.
            existing = [f for f in await self.store.facts.get_many([hits[0].id]) if f.is_current]
            if existing:
                if state_different_values(fact.text, existing[0].text):
                    return None, existing[0].id
                return existing[0].id, None
        return None, None

    async def _slot_of(self, fact: Fact) -> list[Fact]:
        """The current facts a new one replaces by its attribute: the subject's own facts of
        the same attribute. What someone said of another person (`said_by`) replaces nothing
        the person said themselves, and is replaced by nothing but their own word."""
        if fact.attribute is None or fact.said_by is not None:
            return []
        slot = await self.store.facts.in_slot(
            subject_id=fact.subject_id, world_id=fact.world_id, attribute=fact.attribute
        )
        return [old for old in slot if old.id != fact.id and old.said_by is None]

    async def _close(self, old: Fact, successor: Fact) -> bool:
        """Close `old` with `successor` as its successor; False when it was closed already."""
        until = max(successor.valid_from, old.valid_from)
        if not await self.store.facts.close(
            old.id, world_id=old.world_id, until=until, superseded_by=successor.id
        ):
            return False
        await self._delete_vectors("facts", ids=[old.id])
        return True

    async def end_slot(self, fact: Fact) -> list[str]:
        """A take-back ("I sold the car", "I don't work there any more"): close the subject's
        current facts of `fact`'s attribute (with none, the current fact of `fact`'s text),
        without a successor; `fact` is the claim saying
        it stopped (already checked: grounded by its speaker, who is its subject). Returns
        the ids closed."""
        closed = []
        ended = await self._slot_of(fact)
        if fact.attribute is None and fact.said_by is None:
            # No attribute: the fact it ends is named by its text (a known fact said again).
            same = await self.store.facts.find_by_text(
                subject_id=fact.subject_id, world_id=fact.world_id, text=fact.text
            )
            ended = [same] if same is not None else []
        for old in ended:
            if old.valid_from >= fact.valid_from:
                # Said with the take-back or after it ("I quit teaching, I'm a carpenter
                # now"): the new value, not what stopped.
                continue
            until = max(fact.valid_from, old.valid_from)
            if await self.store.facts.close(
                old.id, world_id=old.world_id, until=until, superseded_by=None
            ):
                closed.append(old.id)
        if closed:
            await self._delete_vectors("facts", ids=closed)
        return closed

    async def _supersede(self, fact: Fact, old_id: str | None, *, asked: bool) -> str | None:
        """Close `old_id` with `fact` as its successor, if it is a current fact about the same
        person in the same world, of the same kind; returns the id closed. `asked`: the
        writer named the fact to replace (a model's "update"), so a refusal is counted."""
        if old_id is None or old_id == fact.id:
            return None
        found = await self.store.facts.get_many([old_id])
        old = found[0] if found else None
        if old is None or old.subject_id != fact.subject_id or old.world_id != fact.world_id:
            log.info("fact %s cannot replace %s: not the same person's", fact.id, old_id)
            return None
        if not same_kind(old.text, fact.text):
            log.info("fact %s cannot replace %s: not the same kind of fact", fact.id, old_id)
            if asked:
                await self.gate.count([(fact.world_id, OTHER_KIND)])
            return None
        until = max(fact.valid_from, old.valid_from)
        if not await self.store.facts.close(
            old_id, world_id=fact.world_id, until=until, superseded_by=fact.id
        ):
            return None  # closed already (a re-run, or another update got there first)
        # Only current facts are searched; the history is read from MongoDB.
        await self._delete_vectors("facts", ids=[old_id])
        return old_id

    async def retract_facts(
        self,
        claims: Mapping[str, Fact],
        *,
        world_id: str,
        when: int,
        said: Sequence[Memory] = (),
    ) -> list[str]:
        """Close current facts without a successor ("I no longer work there"); returns the
        ids closed. `claims` maps each fact to close to the claim saying it stopped (its
        text, subject, speaker and source messages, as a Fact). A fact is closed only when
        that claim is grounded, is about the fact's subject, says the same kind of thing,
        and its speaker's words say something changed ("quit", "no longer", "sold"): an
        unrelated or invented claim never ends a true memory. Closing is conditional on the
        fact being current: never twice."""
        if not claims:
            return []
        closed = []
        for fact_id in await self.gate.retractable(claims, world_id=world_id, said=said):
            if await self.store.facts.close(
                fact_id, world_id=world_id, until=when, superseded_by=None
            ):
                closed.append(fact_id)
        if closed:
            await self._delete_vectors("facts", ids=closed)
        return closed

    async def similar_facts(
        self,
        texts: Sequence[str],
        *,
        subject_ids: Sequence[str],
        world_id: str,
        per_text: int = 3,
        limit: int = 12,
    ) -> list[Fact]:
        """The current facts about these people most similar to any of `texts` (what was
        just said), most similar first: what a new claim may update, retract or repeat.
        The texts are messages, so their embeddings are usually cached already."""
        texts = [t for t in dict.fromkeys(texts) if t.strip()]
        if not texts or not subject_ids or limit <= 0:
            return []
        vectors = await self.embedder.embed(texts)
        found = await asyncio.gather(
            *(
                self._nearest_facts_or_nothing(
                    v, subject_ids=subject_ids, world_id=world_id, limit=per_text
                )
                for v in vectors
            )
        )
        best: dict[str, float] = {}
        for hits in found:
            for hit in hits:
                best[hit.id] = min(hit.distance, best.get(hit.id, 2.0))
        ranked = sorted(best, key=best.__getitem__)[:limit]
        return [f for f in await self.store.facts.get_many(ranked) if f.is_current]

    async def participants(self, world_id: str) -> dict[str, Account]:
        """Everyone who has written in a world but the bot: whom a claim may be about."""
        ids = [
            i for i in await self.store.memories.speakers(world_id) if i != self.grounding.agent_id
        ]
        return await self.store.accounts.get_many(ids)

    async def learn_name(self, account_id: str, name: str, world_id: str) -> None:
        """The name a person told the bot in a world: shown there from now on, not elsewhere;
        told apart from the world's other members' (Accounts.set_told_name)."""
        others = await self.participants(world_id)
        await self.store.accounts.set_told_name(account_id, world_id, name, others=others.values())

    async def recent_facts(self, ids: Sequence[str], world_id: str, limit: int = 10) -> list[Fact]:
        """The most recently learned current facts about these people in a world."""
        return await self.store.facts.about(list(ids), world_id, limit=limit)

    async def fact_subjects(self, world_id: str) -> list[str]:
        """The ids of everyone a fact was ever learned about in a world."""
        return await self.store.facts.subjects(world_id)

    async def fact_history(self, subject_id: str, world_id: str) -> list[Fact]:
        """Every fact about a person in a world, current and closed, oldest first."""
        return await self.store.facts.history(subject_id, world_id)

    async def _index_facts(self, pairs: list[tuple[Fact, list[float]]]) -> None:
        try:
            await self.vectors.upsert(
                "facts",
                ids=[f.id for f, _ in pairs],
                embeddings=[v for _, v in pairs],
                metadatas=[fact_metadata(f) for f, _ in pairs],
            )
        except Exception:
            log.warning("vector write failed for %d facts; will reindex", len(pairs), exc_info=True)
            return
        now = utcnow()
        for fact, _ in pairs:
            await self.store.facts.mark_indexed(fact.id, now)

    async def search_facts(
        self,
        query: str,
        *,
        subject_ids: Sequence[str],
        world_id: str,
        limit: int = 10,
        max_distance: float = 0.8,
        known: KnownFacts | None = None,
    ) -> list[Fact]:
        """Facts about these people most relevant to `query`; recent facts when none is.
        Answered from `known`, the current facts read with the room's window, when given
        (at_hand.py)."""
        if not subject_ids:
            return []
        found: list[Fact] | None = []
        if query.strip():
            [vector] = await self.embedder.embed([query])
            hits = await self._nearest_facts_or_nothing(
                vector, subject_ids=subject_ids, world_id=world_id, limit=limit
            )
            relevant = [hit.id for hit in hits if hit.distance <= max_distance]
            # A vector can outlive its fact's lifetime (a failed delete): check in MongoDB.
            found = known.named(relevant) if known is not None else None
            if found is None:
                found = [f for f in await self.store.facts.get_many(relevant) if f.is_current]
        if not found:
            found = known.newest(limit) if known is not None else None
            if found is None:
                found = await self.store.facts.about(list(subject_ids), world_id, limit=limit)
        return found

    async def _nearest_facts_or_nothing(
        self, vector: list[float], *, subject_ids: Sequence[str], world_id: str, limit: int
    ) -> list[VectorHit]:
        """Vectors are an index, not the truth: while Chroma is down, answer from MongoDB."""
        try:
            return await nearest_facts(
                self.vectors, vector, subject_ids=subject_ids, world_id=world_id, limit=limit
            )
        except Exception:
            log.warning("vector query failed in facts; falling back to MongoDB", exc_info=True)
            return []

    async def delete_fact(self, fact_id: str, *, world_id: str) -> bool:
        deleted = await self.store.facts.delete(fact_id, world_id=world_id)
        if deleted:
            await self._delete_vectors("facts", ids=[fact_id])
        return deleted

    async def withdraw_message(
        self, message_id: str, *, world_id: str, learned_before: datetime
    ) -> list[str]:
        """Withdraw what was learned from a message its author changed (an edit): every fact
        of the world resting on it and learned before `learned_before` (what a reading of
        the new words learned stays), deleted from MongoDB and Chroma as `/forget` deletes
        one. A fact one of them had replaced is current again, with its vector: its own
        words were never taken back. Returns the ids deleted."""
        found = await self.store.facts.from_message(message_id, world_id=world_id)
        gone = [f for f in found if f.created_at < learned_before]
        for fact in gone:
            await self.delete_fact(fact.id, world_id=world_id)
        ids = {f.id for f in gone}
        current = [f.id for f in gone if f.is_current]
        reopened = [
            old.model_copy(update={"valid_until": None, "superseded_by": None})
            for old in await self.store.facts.closed_by(current, world_id=world_id)
            if old.id not in ids
            and old.superseded_by is not None
            and await self.store.facts.reopen(
                old.id, world_id=world_id, successor=old.superseded_by
            )
        ]
        if reopened:
            vectors = await self.embedder.embed([f.text for f in reopened])
            await self._index_facts(list(zip(reopened, vectors, strict=True)))
        return sorted(ids)

    async def forget_vectors(self, *, fact_ids: Sequence[str], user_id: str, world_id: str) -> None:
        """Delete the vectors of these facts, and every fact vector about the person in the
        world (also those whose documents went in an earlier attempt). Raises when Chroma
        fails: forgetting must not report success with vectors left."""
        if fact_ids:
            await self.vectors.delete("facts", ids=list(fact_ids))
        await self.vectors.delete(
            "facts", where=scope_filter(subject_id=user_id, world_id=world_id)
        )

    async def _delete_vectors(self, collection: str, **selector: Any) -> None:
        try:
            await self.vectors.delete(collection, **selector)  # type: ignore[arg-type]
        except Exception:
            # Harmless until swept: hits are always hydrated through MongoDB.
            log.warning("vector delete failed in %s", collection, exc_info=True)

    async def reindex_missing(
        self, *, batch: int = 256, progress: Callable[[int], object] | None = None
    ) -> int:
        """Rebuild vectors for facts whose vector write never succeeded; `progress` is told
        how many were done after each batch (a restore's progress bar)."""
        total = 0
        while facts := await self.store.facts.unindexed(limit=batch):
            vectors = await self.embedder.embed([f.text for f in facts])
            await self.vectors.upsert(
                "facts",
                ids=[f.id for f in facts],
                embeddings=vectors,
                metadatas=[fact_metadata(f) for f in facts],
            )
            now = utcnow()
            for fact in facts:
                await self.store.facts.mark_indexed(fact.id, now)
            total += len(facts)
            if progress is not None:
                progress(len(facts))
        return total


def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    # Embeddings are unit length, so the dot product is the cosine similarity.
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True))

"""The metadata stored beside each vector in Chroma: what a vector search filters on (person,
room, world) and when the fact or message was said. Written at learning time
(`bot.memory.store`) and when vectors are rebuilt (`bot.knowledge.reindex`), the same way."""

from __future__ import annotations

from typing import Any

from bot.domain.records import Fact, Memory


def scope_filter(**conditions: Any) -> dict[str, Any]:
    """A Chroma `where` for all the given equalities (lists become `$in`); None is ignored."""
    clauses = [
        {key: {"$in": list(value)} if isinstance(value, list | tuple | set) else value}
        for key, value in conditions.items()
        if value is not None
    ]
    if not clauses:
        return {}
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def fact_metadata(fact: Fact) -> dict[str, Any]:
    return {
        "subject_id": fact.subject_id,
        "world_id": fact.world_id,
        "room_id": fact.room_id,
        "type": fact.type,
        "created_at": fact.created_at.timestamp(),
    }


def message_metadata(memory: Memory) -> dict[str, Any]:
    return {
        "user_id": memory.user_id,
        "room_id": memory.room_id,
        "world_id": memory.world_id,
        "created_at": memory.created_at.timestamp(),
    }

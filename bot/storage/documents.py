"""Documents <-> models, and the time conversions every collection shares.

Models are pydantic at this boundary: a document is validated into its model on the way out,
with every datetime made aware UTC (nx-27017 stores a `$set` datetime as a naive string, and
a client without `tz_aware=True` returns naive datetimes). Times that are queried are stored
as integer milliseconds beside them: nx compares dates only to the second.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from pymongo.asynchronous.collection import AsyncCollection

M = TypeVar("M", bound=BaseModel)


def fields(model: BaseModel) -> dict[str, Any]:
    """The model as document fields, without its id (the `_id`, which `$set` cannot touch)."""
    values = model.model_dump(mode="python")
    values.pop("id", None)
    return values


def dump(model: BaseModel) -> dict[str, Any]:
    return {"_id": model.id, **fields(model)}  # type: ignore[attr-defined]


def load(model: type[M], document: Mapping[str, Any]) -> M:
    data = dict(document)
    data["id"] = data.pop("_id")
    return _utc_fields(model.model_validate(data))


def load_one(model: type[M], document: Mapping[str, Any] | None) -> M | None:
    return None if document is None else load(model, document)


def load_all(model: type[M], documents: Iterable[Mapping[str, Any]]) -> list[M]:
    return [load(model, document) for document in documents]


async def by_ids(collection: AsyncCollection, model: type[M], ids: list[str]) -> list[M]:
    """The documents with these ids that exist, as models, in the order of `ids`."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return []
    found = {doc["_id"]: doc async for doc in collection.find({"_id": {"$in": wanted}})}
    return [load(model, found[i]) for i in wanted if i in found]


def _utc_fields(instance: M) -> M:
    """Make every datetime of a validated model (nested ones too) aware UTC in place."""
    for name in type(instance).model_fields:
        value = getattr(instance, name)
        if isinstance(value, datetime):
            setattr(instance, name, utc(value))
        elif isinstance(value, BaseModel):
            _utc_fields(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, BaseModel):
                    _utc_fields(item)
    return instance


def as_utc(value: object) -> datetime | None:
    """A stored datetime as aware UTC, or None. Also accepts nx-27017's stand-ins: an ISO
    string (from `$set`) or an extended-JSON `{"$date": ...}` string (from aggregations)."""
    if isinstance(value, datetime):
        return utc(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.startswith("{"):
        try:
            text = str(json.loads(text)["$date"])
        except (ValueError, KeyError, TypeError):
            return None
    try:
        return utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def millis(value: datetime) -> int:
    return int(utc(value).timestamp() * 1000)


def utc(value: datetime) -> datetime:
    # Naive means UTC: that is what MongoDB stores and a client without tz_aware returns.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

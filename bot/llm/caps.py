"""Daily spending caps: at most so many tokens (or estimated dollars) a day per world, per
person and for the whole deployment, counted across every process, checked before every
model call.

The operator sets them (`MNEMO_DAILY_TOKENS_PER_WORLD`, `..._PER_PERSON`, `..._TOTAL`, and the
`MNEMO_DAILY_USD_...` ones); none is set by default. A day is a UTC day. What is counted is what
the ledger records of every model call (bot/llm/accounting.py): the tokens the endpoint
reported (a guess from the characters when it reported none) and their cost at
MNEMO_MODEL_PRICES, charged to the call's world, to the person whose message it was made for
(a reply to them, learning from what they said) and to the deployment. The total is there
because the other two can be multiplied: anyone can open more servers or accounts.

`CappedModel` wraps the model every part of the runtime calls (replies, evaluator selection,
every plugin's calls, tasks, `/model`'s check), so there is one check, before each call: a world
or person at or past a cap gets `OverCap` (a `ModelError`) and no request is sent. What one
call spends is added to the shared count in MongoDB when it ends (`SpendCounter`, one atomic
`$inc` per world or person, which also reads the deployment's total back), so every process
sees every other's spend; a total read is trusted for `READ_SECONDS` before it is read again.
A call admitted under the cap finishes, so the cap can be passed by what the calls already
under way spend (one reply, as a rule).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from bot.i18n import N_
from bot.llm.accounting import ModelCall, UsageLedger
from bot.llm.base import LanguageModel, ModelError, ModelRequest
from bot.llm.streaming import stream_text

log = logging.getLogger(__name__)

Scope = Literal["world", "person", "deployment"]
# Whose spend: ("world", world id), ("person", account id) or ("deployment", "").
CapKey = tuple[Scope, str]
DEPLOYMENT: CapKey = ("deployment", "")

# Seconds a total read from MongoDB is trusted before the next call reads it again (this
# process's own spend is always counted at once).
READ_SECONDS = 1.0
# What a room hears, once a day, instead of a reply, when a cap is reached.
# In English: translated where it is sent, into the room's language (bot/i18n).
WORLD_CAP_REPLY = N_("I've reached today's limit here; I'll be back tomorrow.")
PERSON_CAP_REPLY = N_("I've reached today's limit for our conversations; I'll be back tomorrow.")
DEPLOYMENT_CAP_REPLY = N_("I've reached today's limit; I'll be back tomorrow.")
REPLIES: dict[Scope, str] = {
    "world": WORLD_CAP_REPLY,
    "person": PERSON_CAP_REPLY,
    "deployment": DEPLOYMENT_CAP_REPLY,
}


@dataclass(frozen=True)
class DailyCaps:
    """The operator's caps for one UTC day; None is no cap."""

    tokens_per_world: int | None = None
    tokens_per_person: int | None = None
    usd_per_world: float | None = None
    usd_per_person: float | None = None
    tokens_total: int | None = None
    usd_total: float | None = None

    def of(self, scope: Scope) -> tuple[int | None, float | None]:
        """The (tokens, USD) caps of a scope."""
        if scope == "world":
            return self.tokens_per_world, self.usd_per_world
        if scope == "person":
            return self.tokens_per_person, self.usd_per_person
        return self.tokens_total, self.usd_total

    @property
    def scopes(self) -> tuple[Scope, ...]:
        """The scopes with a cap: only those are counted and checked."""
        every: tuple[Scope, ...] = ("world", "person", "deployment")
        return tuple(scope for scope in every if self.of(scope) != (None, None))

    def reached(self, scope: Scope, spent: Spent) -> bool:
        tokens, usd = self.of(scope)
        return (tokens is not None and spent.tokens >= tokens) or (
            usd is not None and spent.micro_usd >= usd * 1_000_000
        )

    def describe(self, scope: Scope) -> str | None:
        """The cap in words ("200,000 tokens", "$0.50", "200,000 tokens or $0.50")."""
        tokens, usd = self.of(scope)
        parts = [f"{tokens:,} tokens"] if tokens is not None else []
        if usd is not None:
            parts.append(f"${usd:,.2f}")
        return " or ".join(parts) or None


@dataclass(frozen=True)
class Spent:
    """Tokens and estimated cost (millionths of a dollar: whole numbers add up exactly)."""

    tokens: int = 0
    micro_usd: int = 0

    def __add__(self, other: Spent) -> Spent:
        return Spent(self.tokens + other.tokens, self.micro_usd + other.micro_usd)

    def __sub__(self, other: Spent) -> Spent:
        return Spent(self.tokens - other.tokens, self.micro_usd - other.micro_usd)

    def __bool__(self) -> bool:
        return bool(self.tokens or self.micro_usd)

    @property
    def usd(self) -> float:
        return self.micro_usd / 1_000_000


class OverCap(ModelError):
    """A world or a person has reached a daily cap: no request was sent."""

    def __init__(self, scope: Scope, subject: str, day: str) -> None:
        super().__init__(f"the daily {scope} spending cap is reached ({day}, UTC)")
        self.scope: Scope = scope
        self.subject = subject
        self.day = day

    @property
    def reply(self) -> str:
        """What the room is told instead of a reply (once a day: `DailySpend.first_notice`)."""
        return REPLIES[self.scope]


class SpendCounter(Protocol):
    """Where a deployment's daily spend is shared (bot/storage/daily_spend.py)."""

    async def add(self, day: str, spent: Mapping[CapKey, Spent]) -> dict[CapKey, Spent]:
        """Add `spent` (zero for a plain read) to each key's count for `day`, atomically, and
        return each key's total after."""
        ...

    async def first_notice(self, day: str, key: CapKey, room_id: str) -> bool:
        """True the first time it is asked for this day, key and room, by any process."""
        ...

    async def forget_before(self, day: str) -> None:
        """Drop the counts and notices of the days before `day`."""
        ...


@dataclass
class _Known:
    total: Spent  # the deployment's, as MongoDB returned it
    read_at: float


def utc_day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).date().isoformat()


def _larger(one: Spent, other: Spent) -> Spent:
    return Spent(max(one.tokens, other.tokens), max(one.micro_usd, other.micro_usd))


@dataclass
class DailySpend:
    """Today's spend per world and person: this process's calls, as the ledger records them,
    and the deployment's totals from MongoDB. One per process (see the module's doc)."""

    caps: DailyCaps
    counter: SpendCounter
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # The bot's own account: a call for one of its messages (an idle evaluation) is charged
    # to the world only.
    agent_id: str | None = None
    read_seconds: float = READ_SECONDS
    clock: Callable[[], float] = time.time
    # Spent here and not yet added to MongoDB, by day and key; being added now.
    _unwritten: dict[tuple[str, CapKey], Spent] = field(default_factory=dict, repr=False)
    _writing: dict[tuple[str, CapKey], Spent] = field(default_factory=dict, repr=False)
    _known: dict[tuple[str, CapKey], _Known] = field(default_factory=dict, repr=False)
    _told: set[tuple[str, CapKey, str]] = field(default_factory=set, repr=False)
    _swept: str = ""

    def listen(self, ledger: UsageLedger) -> None:
        """Count every call the ledger records from now on."""
        ledger.listeners.append(self.record)

    # ------------------------------------------------------------------ counting
    def keys(self, world_id: str | None, person_id: str | None) -> list[CapKey]:
        """The keys a call for this world and person is counted and checked under."""
        keys: list[CapKey] = []
        scopes = self.caps.scopes
        if world_id and "world" in scopes:
            keys.append(("world", world_id))
        if person_id and person_id != self.agent_id and "person" in scopes:
            keys.append(("person", person_id))
        if "deployment" in scopes:
            keys.append(DEPLOYMENT)  # every call, whoever it is made for
        return keys

    def record(self, call: ModelCall) -> None:
        """A ledger listener: the call's tokens and cost, kept until written."""
        keys = self.keys(call.world_id, call.person_id)
        if not keys:
            return
        prompt, completion = call.prompt_tokens, call.completion_tokens
        if call.estimated is not None and not (prompt or completion):
            prompt, completion = call.estimated  # nothing reported: the guess counts
        price = self.prices.get(call.model or "")
        cost = 0.0 if price is None else (prompt * price[0] + completion * price[1])
        spent = Spent(prompt + completion, round(cost))  # USD per 1M tokens = micro-USD each
        day = utc_day(self.clock())
        for key in keys:
            self._unwritten[(day, key)] = self._unwritten.get((day, key), Spent()) + spent

    def _local(self, day: str, key: CapKey) -> Spent:
        """This process's spend not yet in the total read from MongoDB."""
        return self._unwritten.get((day, key), Spent()) + self._writing.get((day, key), Spent())

    async def _sync(self, day: str, keys: Sequence[CapKey]) -> None:
        """Add this process's unwritten spend for `keys` to MongoDB and read the totals back.
        A failure keeps the spend for the next time (and the last totals read)."""
        taken: dict[CapKey, Spent] = {}
        for key in keys:
            spent = self._unwritten.pop((day, key), Spent())
            taken[key] = spent
            self._writing[(day, key)] = self._writing.get((day, key), Spent()) + spent
        try:
            totals = await self.counter.add(day, taken)
        except Exception as error:
            log.warning("daily spend not shared yet (kept for the next call): %s", error)
            totals = None
        for key, spent in taken.items():
            self._writing[(day, key)] = self._writing[(day, key)] - spent
            if not self._writing[(day, key)]:
                del self._writing[(day, key)]
            if totals is None:
                self._unwritten[(day, key)] = self._unwritten.get((day, key), Spent()) + spent
            elif key in totals:
                # A day's totals only grow: an answer overtaken by a later one says less.
                known = self._known.get((day, key))
                total = totals[key] if known is None else _larger(known.total, totals[key])
                self._known[(day, key)] = _Known(total, self.clock())
        today = utc_day(self.clock())
        if totals is not None and day == today and self._swept != today:
            # Once a day per process, at its first count of the day (not a late flush of
            # yesterday's): what was kept of the days before goes.
            self._swept = today
            self._known = {kept: known for kept, known in self._known.items() if kept[0] == day}
            self._told = {told for told in self._told if told[0] == day}
            try:
                await self.counter.forget_before(day)
            except Exception as error:
                log.warning("old daily spend not dropped (next day, again): %s", error)

    async def flush(self) -> None:
        """Add every unwritten spend to MongoDB (timed, and at shutdown)."""
        by_day: dict[str, list[CapKey]] = {}
        for day, key in list(self._unwritten):
            by_day.setdefault(day, []).append(key)
        for day, keys in by_day.items():
            await self._sync(day, keys)

    async def today(self, key: CapKey) -> Spent:
        """The deployment's spend today under `key` (read now)."""
        day = utc_day(self.clock())
        await self._sync(day, [key])
        known = self._known.get((day, key))
        return (known.total if known is not None else Spent()) + self._local(day, key)

    # ------------------------------------------------------------------ checking
    async def over(self, world_id: str | None, person_id: str | None) -> OverCap | None:
        """Whether a call for this world and person would pass a cap today (None: it may
        be made). The totals are read again when older than `read_seconds`."""
        keys = self.keys(world_id, person_id)
        if not keys:
            return None
        day = utc_day(self.clock())
        now = self.clock()
        stale = [
            key
            for key in keys
            if (known := self._known.get((day, key))) is None
            or now - known.read_at >= self.read_seconds
        ]
        if stale:
            await self._sync(day, stale)
        for key in keys:
            known = self._known.get((day, key))
            total = (known.total if known is not None else Spent()) + self._local(day, key)
            if self.caps.reached(key[0], total):
                return OverCap(key[0], key[1], day)
        return None

    async def settle(self, world_id: str | None, person_id: str | None) -> None:
        """After a call: what it spent, added to MongoDB now (every process sees it)."""
        keys = self.keys(world_id, person_id)
        if keys:
            await self._sync(utc_day(self.clock()), keys)

    async def first_notice(self, over: OverCap, room_id: str) -> bool:
        """Whether the room is to be told of `over` now: once a day per room and cap, across
        every process. A database that cannot answer tells it (once here) rather than never."""
        told = (over.day, (over.scope, over.subject), room_id)
        if told in self._told:
            return False
        self._told.add(told)
        try:
            return await self.counter.first_notice(over.day, (over.scope, over.subject), room_id)
        except Exception as error:
            log.warning("daily cap notice not shared: %s", error)
            return True


class CappedModel:
    """The model behind the daily caps: every call for a world or person at a cap is refused
    with `OverCap` before anything is sent; what each call spent is shared when it ends."""

    def __init__(self, model: LanguageModel, spend: DailySpend) -> None:
        self.model = model
        self.spend = spend
        self.name = model.name

    async def generate(self, request: ModelRequest) -> str:
        await self._admit(request)
        try:
            return await self.model.generate(request)
        finally:
            await self._settle(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        """As `stream_text` of the model (its pieces as written), under the same check."""
        await self._admit(request)
        try:
            async with aclosing(stream_text(self.model, request)) as pieces:
                async for piece in pieces:
                    yield piece
        finally:
            await self._settle(request)

    async def close(self) -> None:
        await self.model.close()

    async def _admit(self, request: ModelRequest) -> None:
        over = await self.spend.over(request.world, request.person)
        if over is not None:
            log.info("model call %s refused: %s", request.task, over)
            raise over

    async def _settle(self, request: ModelRequest) -> None:
        # Shielded: a reply cancelled mid-call (a shutdown) has spent its tokens all the same.
        await asyncio.shield(self.spend.settle(request.world, request.person))

"""Model spend per world: kept by the ledger as it happens, written to MongoDB in batches
(every `FLUSH_SECONDS` and at shutdown), shown by `/stats` for the world it is used in.

Written in batches, not per call, so a message costs no extra round trip; `/stats` adds what
this process has not written yet, so its own spend always shows at once. Another process's
shows once that process has written it (within `FLUSH_SECONDS`).
"""

from __future__ import annotations

import logging

from pymongo.errors import PyMongoError

from bot.i18n import SOURCE_TEXTS, Texts
from bot.llm.accounting import TaskUsage, UsageLedger, merge
from bot.llm.caps import DEPLOYMENT, DailySpend
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

FLUSH_SECONDS = 30.0


async def flush_usage(ledger: UsageLedger, store: MongoStore) -> None:
    """Write the per-world usage not yet written; kept for the next flush if that fails."""
    taken = ledger.take_unwritten()
    if not taken:
        return
    try:
        await store.usage.add(taken)
    except PyMongoError as error:
        ledger.written(taken, ok=False)
        log.warning("model usage not written yet (kept for the next try): %s", error)
        return
    ledger.written(taken, ok=True)


async def usage_in_world(
    ledger: UsageLedger, store: MongoStore, world_id: str
) -> dict[str, TaskUsage]:
    """What the deployment spent in a world, by model: stored, plus this process's unwritten."""
    found = await store.usage.in_world(world_id)
    for model, usage in ledger.unwritten_in(world_id).items():
        merge(found.setdefault(model, TaskUsage()), usage)
    return found


def describe_usage(
    usage: dict[str, TaskUsage], ledger: UsageLedger, texts: Texts = SOURCE_TEXTS
) -> str:
    """One line for /stats: calls, prompt and completion tokens, and the estimated cost."""
    calls = sum(u.calls for u in usage.values())
    if not calls:
        return texts.gettext("Model use here: none yet")
    prompt = sum(u.prompt_tokens for u in usage.values())
    completion = sum(u.completion_tokens for u in usage.values())
    line = texts.ngettext(
        "Model use here: {calls} call, {prompt} prompt + {completion} completion tokens",
        "Model use here: {calls} calls, {prompt} prompt + {completion} completion tokens",
        calls,
    ).format(calls=f"{calls:,}", prompt=f"{prompt:,}", completion=f"{completion:,}")
    costs = {m: ledger.cost(m, u.prompt_tokens, u.completion_tokens) for m, u in usage.items()}
    priced = [cost for cost in costs.values() if cost is not None]
    unpriced = sorted(m for m, cost in costs.items() if cost is None and usage[m].calls)
    if priced:
        line += texts.gettext(", about {cost}").format(cost=_dollars(sum(priced)))
    if unpriced:
        missing = texts.gettext(" (no price for {models}: set MNEMO_MODEL_PRICES)")
        line += missing.format(models=", ".join(unpriced))
    counted = sum(u.counted_calls for u in usage.values())
    if counted:
        # Not the server's figures: say whose they are.
        ours = texts.gettext(
            "; the tokens of {count} of the calls counted by Mnemo: the server reported none"
        )
        line += ours.format(count=f"{counted:,}")
    return line


async def describe_caps(
    spend: DailySpend | None, world_id: str, texts: Texts = SOURCE_TEXTS
) -> str | None:
    """The /stats line of the daily caps: the world's, with what it used today, whether it
    is reached, and each person's; None when the operator set none."""
    if spend is None:
        return None
    caps = spend.caps
    parts = []
    world_cap = caps.describe("world")
    if world_cap is not None:
        today = await spend.today(("world", world_id))
        used = texts.gettext("{count} tokens").format(count=f"{today.tokens:,}")
        if caps.usd_per_world is not None:
            used += texts.gettext(", about {cost}").format(cost=_dollars(today.usd))
        line = texts.gettext("Daily limit here: {cap} (used today, UTC: {used})").format(
            cap=world_cap, used=used
        )
        if caps.reached("world", today):
            line += texts.gettext(
                "; reached: no replies and no learning that needs the model until 00:00 UTC"
            )
        parts.append(line)
    person_cap = caps.describe("person")
    if person_cap is not None:
        parts.append(texts.gettext("Daily limit for each person: {cap}").format(cap=person_cap))
    total_cap = caps.describe("deployment")
    if total_cap is not None:
        line = texts.gettext("Daily limit for the whole bot: {cap}").format(cap=total_cap)
        if caps.reached("deployment", await spend.today(DEPLOYMENT)):
            line += texts.gettext(", reached today")
        parts.append(line)
    return ". ".join(parts) + "."


def _dollars(amount: float) -> str:
    # Cents hide a small world's spend: below a dollar, four decimals.
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"

"""`/facts_history [person]`: how what Mnemo knows about someone changed, oldest first.

Facts are never deleted by an update (see `Fact`): each chain reads from the first value to the
current one, "Sarah lives in Seattle (until 2026-11-20) → Sarah lives in Berlin". Everyone may
see their own history; someone else's is for admins, like `/facts`.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot import Account, Command, CommandContext
from bot.models import Fact, from_epoch_millis

MAX_CHAINS = 30
USAGE = "[person]"


def _day(millis: int) -> str:
    return from_epoch_millis(millis).strftime("%Y-%m-%d")


def chains(facts: Sequence[Fact]) -> list[list[Fact]]:
    """Each fact's line of successors, starting from the facts nothing replaced into."""
    by_id = {fact.id: fact for fact in facts}
    successors = {f.superseded_by for f in facts if f.superseded_by in by_id}
    found = []
    for fact in facts:  # oldest first, as fact_history returns them
        if fact.id in successors:
            continue
        chain, seen = [fact], {fact.id}
        while chain[-1].superseded_by in by_id and chain[-1].superseded_by not in seen:
            chain.append(by_id[chain[-1].superseded_by])  # type: ignore[index]
            seen.add(chain[-1].id)
        found.append(chain)
    return found


def describe_chain(chain: Sequence[Fact]) -> str:
    parts = []
    for fact in chain:
        if fact.valid_until is None:
            parts.append(fact.text)
        elif fact.superseded_by is None:
            parts.append(f"{fact.text} (until {_day(fact.valid_until)}, no longer true)")
        else:
            parts.append(f"{fact.text} (until {_day(fact.valid_until)})")
    return " → ".join(parts)


def history_text(name: str, facts: Sequence[Fact]) -> str:
    if not facts:
        return f"I haven't learned anything about {name} here."
    lines = [describe_chain(chain) for chain in chains(facts)]
    more = len(lines) - MAX_CHAINS
    shown = "\n".join(f"• {line}" for line in lines[:MAX_CHAINS])
    suffix = f"\n(and {more} more)" if more > 0 else ""
    return f"What I learned about {name}, and how it changed:\n{shown}{suffix}"


def _matches(account: Account, wanted: str) -> bool:
    names = {account.name, account.username or "", account.platform_id}
    return wanted in {n.casefold().lstrip("@") for n in names if n}


async def _history(ctx: CommandContext) -> str:
    wanted = ctx.args.strip().casefold().lstrip("@")
    if not wanted:
        facts = await ctx.knowledge.fact_history(ctx.account_id, ctx.world_id)
        return history_text("you", facts)
    if not ctx.is_admin:
        return "Only admins can see someone else's history; /facts_history alone shows yours."
    subjects = await ctx.knowledge.fact_subjects(ctx.world_id)
    accounts = await ctx.conversations.accounts(subjects)
    found = [a for a in accounts.values() if _matches(a, wanted)]
    if not found:
        return f"I know nothing about {ctx.args.strip()} here."
    if len(found) > 1:
        return f"{len(found)} people here are called {ctx.args.strip()}; use their @username."
    facts = await ctx.knowledge.fact_history(found[0].id, ctx.world_id)
    return history_text(found[0].name, facts)


history_command = Command(
    name="facts_history",
    description="How what I know about you (admins: anyone) changed over time",
    handler=_history,
    usage=USAGE,
    # A change said in the last message is in the history.
    after_learning=True,
)

"""`/facts history [person]`: how what Mnemo knows about someone changed, oldest first.

Facts are never deleted by an update (see `Fact`): each chain reads from the first value to the
current one, "Sarah lives in Seattle (until 2026-11-20) → Sarah lives in Berlin". Everyone may
see their own history; someone else's is for admins, like `/facts`. Part of the core because
facts are (docs/architecture.md: claims about people are Mnemo's memory type).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

from bot.domain.records import Account, Fact, from_epoch_millis
from bot.i18n import N_, SOURCE_TEXTS, Texts, day_and_month

if TYPE_CHECKING:
    from bot.commands.services import CommandServices

MAX_CHAINS = 30
# Page numbers are short (bot.commands.command_set reads them the same way); longer numbers are ids.
MAX_PAGE_DIGITS = 4
# `/facts history` is read as this subcommand of `/facts` on every surface.
SUBCOMMAND = "history"
# Its /help line: everyone may use it (their own history), so it is shown to everyone and
# never under the "Admins:" label of the rest of /facts.
HELP_FOR_EVERYONE = N_("How what I know about you changed")
HELP_FOR_ADMINS = N_("How what I know about you changed (admins: anyone's)")
OTHERS_ONLY_FOR_ADMINS = N_(
    "Only admins can see someone else's history; /facts history alone shows yours."
)


class AccountReader(Protocol):
    async def get_many(self, ids: list[str]) -> dict[str, Account]: ...


# A quote shown beside a fact is cut to this many characters: enough to recognise it.
QUOTE_SHOWN = 70


def evidence_of(
    fact: Fact, *, teller: str | None = None, yours: bool = False, texts: Texts = SOURCE_TEXTS
) -> str | None:
    """Where a fact came from, as people are shown it: `from your message of 1 Dec: "vivo en
    Málaga desde…"` (`yours`; else `teller`'s, the name of who said it, or "their" when
    unknown); None for a fact with no evidence kept."""
    evidence = fact.evidence
    if evidence is None or not evidence.quote.strip():
        return None
    quote = " ".join(evidence.quote.split())
    if len(quote) > QUOTE_SHOWN:
        quote = quote[: QUOTE_SHOWN - 1].rstrip() + "…"
    when = from_epoch_millis(evidence.said_at or fact.valid_from)
    if yours:
        source = texts.gettext('from your message of {date}: "{quote}"')
    elif teller is not None:
        source = texts.gettext('from {name}\'s message of {date}: "{quote}"')
    else:
        source = texts.gettext('from their message of {date}: "{quote}"')
    return source.format(name=teller, date=day_and_month(when, texts), quote=quote)


async def told_lines(
    accounts: AccountReader, facts: Sequence[Fact], texts: Texts = SOURCE_TEXTS
) -> list[str]:
    """Each fact's text, who said it when someone else did ("Tobrin is a convicted thief
    (said by Quorra)": Fact.said_by), so a person sees whose word their memory is, and the
    words it was learned from."""
    tellers = sorted({f.said_by for f in facts if f.said_by})
    names = await accounts.get_many(tellers) if tellers else {}
    lines = []
    for fact in facts:
        teller = names.get(fact.said_by) if fact.said_by else None
        said = " " + (
            texts.gettext("(said by {name})").format(name=teller.name)
            if teller
            else texts.gettext("(said by someone else)")
        )
        source = evidence_of(
            fact,
            teller=teller.name if teller else None,
            yours=not fact.said_by,
            texts=texts,
        )
        lines.append(
            fact.text + (said if fact.said_by else "") + (f" — {source}" if source else "")
        )
    return lines


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
            chain.append(by_id[chain[-1].superseded_by])
            seen.add(chain[-1].id)
        found.append(chain)
    return found


def describe_chain(chain: Sequence[Fact], texts: Texts = SOURCE_TEXTS) -> str:
    parts = []
    for fact in chain:
        if fact.valid_until is None:
            parts.append(fact.text)
        elif fact.superseded_by is None:
            until = texts.gettext("(until {day}, no longer true)")
            parts.append(f"{fact.text} {until.format(day=_day(fact.valid_until))}")
        else:
            until = texts.gettext("(until {day})")
            parts.append(f"{fact.text} {until.format(day=_day(fact.valid_until))}")
    return " → ".join(parts)


def history_text(name: str | None, facts: Sequence[Fact], texts: Texts = SOURCE_TEXTS) -> str:
    """The history of `name`'s facts (None: the asker's own)."""
    if not facts:
        if name is None:
            return texts.gettext("I haven't learned anything about you here.")
        return texts.gettext("I haven't learned anything about {name} here.").format(name=name)
    lines = [describe_chain(chain, texts) for chain in chains(facts)]
    more = len(lines) - MAX_CHAINS
    shown = "\n".join(f"• {line}" for line in lines[:MAX_CHAINS])
    suffix = "\n" + texts.gettext("(and {count} more)").format(count=more) if more > 0 else ""
    if name is None:
        heading = texts.gettext("What I learned about you, and how it changed:")
    else:
        heading = texts.gettext("What I learned about {name}, and how it changed:")
    return f"{heading.format(name=name)}\n{shown}{suffix}"


def named(accounts: Sequence[Account], wanted: str) -> list[Account]:
    """The accounts a typed name, @username or platform id names (any case)."""
    wanted = wanted.strip().casefold().lstrip("@")
    return [
        account
        for account in accounts
        if wanted
        in {
            n.casefold().lstrip("@")
            for n in (account.name, account.username, account.platform_id)
            if n
        }
    ]


class Asking(Protocol):
    """What a surface's command request tells (`bot.commands.command_set.Request` has it all)."""

    @property
    def account_id(self) -> str: ...
    @property
    def world_id(self) -> str: ...
    @property
    def is_admin(self) -> bool: ...
    @property
    def subject_id(self) -> str | None: ...
    @property
    def args(self) -> str: ...


def asks_history(args: str) -> bool:
    """`/facts history ...` rather than a `/facts` listing."""
    return [word.casefold() for word in args.split()[:1]] == [SUBCOMMAND]


def help_line(*, is_admin: bool, texts: Texts = SOURCE_TEXTS) -> str:
    """The /help line of `/facts history`, for everyone (not under "Admins:")."""
    if is_admin:
        return f"/facts {SUBCOMMAND} [@user] - {texts.gettext(HELP_FOR_ADMINS)}"
    return f"/facts {SUBCOMMAND} - {texts.gettext(HELP_FOR_EVERYONE)}"


def open_to_all(command: str, args: str) -> bool:
    """The form of an admin command everyone may use: `/facts history` (one's own)."""
    return command == "facts" and asks_history(args)


def history_of(
    services: CommandServices, request: Asking, texts: Texts = SOURCE_TEXTS
) -> Callable[[], Awaitable[str]]:
    """The `/facts history` answer, to be computed once the room has learned."""
    return partial(facts_history, services, request, texts)


async def facts_history(
    services: CommandServices, request: Asking, texts: Texts = SOURCE_TEXTS
) -> str:
    """The answer to `/facts history [person]`: the asker's own history, or (admins) the
    history of the person the surface named (`subject_id`) or whose name follows."""
    words = request.args.split()[1:]
    if words and words[-1].isdigit() and len(words[-1]) <= MAX_PAGE_DIGITS:
        words.pop()  # a page number a surface adds (Discord's /facts always sends one)
    wanted, world_id, subject_id = " ".join(words), request.world_id, request.subject_id
    if (subject_id is None or subject_id == request.account_id) and not wanted:
        own = await services.knowledge.fact_history(request.account_id, world_id)
        return history_text(None, own, texts)
    if not request.is_admin:
        return texts.gettext(OTHERS_ONLY_FOR_ADMINS)
    if subject_id is not None:
        known = await services.store.accounts.get_many([subject_id])
        name = (
            known[subject_id].in_world(world_id).name
            if subject_id in known
            else texts.gettext("them")
        )
        facts = await services.knowledge.fact_history(subject_id, world_id)
        return history_text(name, facts, texts)
    subjects = await services.knowledge.fact_subjects(world_id)
    # As they are known here: by the name told in this world, if any.
    accounts = await services.store.accounts.get_many(subjects)
    found = named([a.in_world(world_id) for a in accounts.values()], wanted)
    if not found:
        return texts.gettext("I know nothing about {name} here.").format(name=wanted)
    if len(found) > 1:
        several = texts.ngettext(
            "{count} person here is called {name}; use their @username.",
            "{count} people here are called {name}; use their @username.",
            len(found),
        )
        return several.format(count=len(found), name=wanted)
    facts = await services.knowledge.fact_history(found[0].id, world_id)
    return history_text(found[0].name, facts, texts)

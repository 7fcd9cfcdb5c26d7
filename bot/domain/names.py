"""Names nobody can borrow: a name that reads like another member's is shown with what tells
its owner apart.

Two places need it. A name a person tells the bot ("call me Tobrin") that reads like (`name_key`:
case, accents and look-alike forms folded) another member's name in that world is kept with
the teller's own platform name after it, "Tobrin (Zed)" (`told_name_for`): Zed is not refused a
name two people may really share, but he is never shown as the other Tobrin, in the prompts,
/facts or /me. And a prompt names every account it shows differently (`distinct`): two members
whose names read alike there (two "Alex", or a Tobrin who joined after Zed took the name, or
someone called like the bot) are told apart the same way, so the model always knows which
account said what.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from bot.domain.records import Account
from bot.domain.text import name_key, readable


def names_of(account: Account, world_id: str) -> set[str]:
    """The keys of every name `account` goes by in a world: shown there, platform, username."""
    names = [account.in_world(world_id).name, account.name, account.username or ""]
    return {key for key in map(name_key, names) if key}


def told_name_for(name: str, teller: Account, others: Iterable[Account], world_id: str) -> str:
    """The name to keep for `teller`, who told the bot `name` in a world: as told (made
    readable), unless it reads like a name another member goes by there; then with what tells
    the teller apart after it ("Tobrin (Zed)")."""
    told = readable(name)
    taken = set().union(*(names_of(other, world_id) for other in others if other.id != teller.id))
    if name_key(told) not in taken:
        return told
    return f"{told} ({_apart(teller, told, taken)})"


def distinct(
    accounts: Mapping[str, Account], world_id: str, *, taken: Iterable[str] = ()
) -> dict[str, Account]:
    """The accounts as shown in a world (`Account.in_world`), no two of them by names that
    read alike and none like a name in `taken` (the bot's). Of a group sharing a name, the
    one whose own platform name it is keeps it when it is the only such; the others, or all
    of them, get what tells them apart after it."""
    shown = {i: account.in_world(world_id) for i, account in accounts.items()}
    reserved = {name_key(name) for name in taken}
    groups: dict[str, list[str]] = defaultdict(list)
    for account_id, account in shown.items():
        groups[name_key(account.name)].append(account_id)
    for key, members in groups.items():
        if len(members) < 2 and key not in reserved:
            continue
        owners = [i for i in members if name_key(accounts[i].name) == key]
        keeps = owners[0] if len(owners) == 1 and key not in reserved else None
        for account_id in members:
            if account_id == keeps:
                continue
            # The names the rest of the group (and the bot) go by: none may tell this one apart.
            rest = [names_of(accounts[i], world_id) for i in members if i != account_id]
            name = shown[account_id].name
            apart = _apart(accounts[account_id], name, set().union(*rest) | reserved | {key})
            shown[account_id] = shown[account_id].model_copy(update={"name": f"{name} ({apart})"})
    return shown


def _apart(account: Account, name: str, taken: set[str]) -> str:
    """What tells `account` apart from the others called `name`: its platform name when that
    is another name nobody else goes by, else its username, else its platform id."""
    if account.name and name_key(account.name) not in taken | {name_key(name)}:
        return account.name
    if account.username:
        return f"@{account.username}"
    return f"id {account.platform_id}"

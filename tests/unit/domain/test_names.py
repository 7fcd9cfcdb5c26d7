"""Names are what people can read, and nobody borrows another's (bot/domain/text.py,
bot/domain/names.py): invisible and control characters go, names that read alike compare
alike, and a name two accounts would share is shown with what tells them apart."""

from __future__ import annotations

import pytest

from bot.domain.names import distinct, told_name_for
from bot.domain.records import Account, Fact
from bot.domain.text import name_key, readable

WORLD = "world-1"


def account(id: str, name: str, username: str | None = None, told: str | None = None) -> Account:
    told_names = {WORLD: told} if told else {}
    return Account(
        id=id, platform="test", platform_id=id, name=name, username=username, told_names=told_names
    )


@pytest.mark.parametrize(
    ("shown", "read"),
    [
        ("Zed\u202eevil\u200b", "Zedevil"),  # a right-to-left override, a zero-width space
        ("\u2066Tobrin\u2069", "Tobrin"),  # an isolate around it
        ("Jo\u200dhn\ufeff", "John"),  # a joiner, a BOM
        ("Ann\u00adna", "Annna"),  # a soft hyphen
        ("two\nlines\tand\u2028more", "two lines and more"),  # no line break in a prompt
        ("  wide\u3000\u00a0 spaces  ", "wide spaces"),
        ("\u3164", ""),  # a Hangul filler: a name that draws nothing
        ("Tóbrin", "Tóbrin"),  # what can be seen stays
    ],
)
def test_readable_keeps_only_what_people_can_see(shown: str, read: str) -> None:
    assert readable(shown) == read


def test_names_that_read_alike_share_a_key() -> None:
    assert (
        len({name_key(n) for n in ("Tobrin", "TOBRIN", "Tóbrin", "Ｔｏｂｒｉｎ", "To\u200bbrin")})
        == 1
    )
    assert name_key("Tobrin") != name_key("Torbin")


def test_accounts_and_facts_are_readable_on_the_way_in() -> None:
    zed = Account(
        id="z",
        platform="test",
        platform_id="7",
        name="Zed\u202eevil\u200b",
        username="\u200b",
        told_names={WORLD: "Tob\u202erin"},
    )
    assert (zed.name, zed.username, zed.told_name_in(WORLD)) == ("Zedevil", None, "Tobrin")
    blank = Account(id="b", platform="test", platform_id="8", name="\u3164\u200b", username="bo")
    assert blank.name == "bo"  # nothing to read: called by the username
    fact = Fact(
        text="Zed\u202eevil's name is Tobrin",
        subject_id="z",
        room_id="r",
        world_id=WORLD,
        agent_id="a",
    )
    assert fact.text == "Zedevil's name is Tobrin"
    spaced = fact.model_validate({**fact.model_dump(), "text": "Alice  lives\nin Paris"})
    assert spaced.text == "Alice  lives in Paris"  # a fact's own spacing stays; no line break


def test_a_told_name_reading_like_another_members_is_told_apart() -> None:
    tobrin = account("1", "Tobrin", "tobrin")
    zed = account("2", "Zedevil", "zed")
    assert told_name_for("Tobrin", zed, [tobrin], WORLD) == "Tobrin (Zedevil)"
    assert told_name_for("tóbrin", zed, [tobrin], WORLD) == "tóbrin (Zedevil)"
    assert told_name_for("tobrin", zed, [], WORLD) == "tobrin"  # nobody else goes by it
    assert told_name_for("Priya", zed, [tobrin], WORLD) == "Priya"
    # Another's username, or the name told there, is theirs as much.
    assert told_name_for("tobrin", zed, [account("3", "T.", "tobrin")], WORLD) == "tobrin (Zedevil)"
    assert told_name_for("Mira", zed, [account("4", "M", told="Mira")], WORLD) == "Mira (Zedevil)"
    # A teller whose platform name is that name too is told apart by the username.
    assert told_name_for("Tobrin", account("5", "Tobrin", "tob2"), [tobrin], WORLD) == (
        "Tobrin (@tob2)"
    )


def test_a_prompt_tells_apart_accounts_whose_names_read_alike() -> None:
    tobrin = account("1", "Tobrin", "tobrin")
    # Zed took the name before Tobrin came: the owner of the name keeps it.
    late = distinct({"1": tobrin, "2": account("2", "Zed", "zed", told="Tobrin")}, WORLD)
    assert {i: a.name for i, a in late.items()} == {"1": "Tobrin", "2": "Tobrin (Zed)"}
    # Two people really called Alex: both told apart.
    alexes = distinct({"3": account("3", "Alex", "alex1"), "4": account("4", "alex")}, WORLD)
    assert {i: a.name for i, a in alexes.items()} == {"3": "Alex (@alex1)", "4": "alex (id 4)"}
    # Someone called like the bot never passes for it.
    named = distinct({"5": account("5", "Mnemo", "mn"), "1": tobrin}, WORLD, taken=["Mnemo"])
    assert {i: a.name for i, a in named.items()} == {"5": "Mnemo (@mn)", "1": "Tobrin"}
    # Nobody alike: everyone as shown in the world (a told name there).
    plain = distinct({"1": tobrin, "6": account("6", "J", told="Jane")}, WORLD)
    assert {i: a.name for i, a in plain.items()} == {"1": "Tobrin", "6": "Jane"}

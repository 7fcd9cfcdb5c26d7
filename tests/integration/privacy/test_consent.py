"""Consent choices in MongoDB (over the wire): opt-out, opt-in, learning off for a room or a
world, and the once-only notice."""

from __future__ import annotations

from bot.domain.records import stable_id
from bot.privacy.consent import ConsentStore, NotLearning

SAM, TOM, ADMIN = (stable_id(x) for x in ("sam", "tom", "admin"))
WORLD, OTHER_WORLD, ROOM, OTHER_ROOM = (stable_id(x) for x in ("w", "w2", "r", "r2"))


async def test_an_opt_out_holds_in_its_world_only_and_is_told_once(store) -> None:
    consent = ConsentStore(store.db)
    assert await consent.check(user_id=SAM, room_id=ROOM, world_id=WORLD) is None

    assert await consent.opt_out(user_id=SAM, world_id=WORLD) is True
    assert await consent.opt_out(user_id=SAM, world_id=WORLD) is False  # already
    assert isinstance(await consent.opted_out_since(user_id=SAM, world_id=WORLD), int)
    assert await consent.opted_out_since(user_id=TOM, world_id=WORLD) is None

    assert await consent.check(user_id=SAM, room_id=OTHER_ROOM, world_id=WORLD) == NotLearning(
        "person", notify=True
    )
    assert await consent.check(user_id=SAM, room_id=ROOM, world_id=OTHER_WORLD) is None
    assert await consent.check(user_id=TOM, room_id=ROOM, world_id=WORLD) is None
    assert await consent.claim_notice(user_id=SAM, world_id=WORLD) is True
    assert await consent.claim_notice(user_id=SAM, world_id=WORLD) is False
    assert await consent.check(user_id=SAM, room_id=ROOM, world_id=WORLD) == NotLearning(
        "person", notify=False
    )

    assert await consent.opt_in(user_id=SAM, world_id=WORLD) is True
    assert await consent.opt_in(user_id=SAM, world_id=WORLD) is False
    assert await consent.check(user_id=SAM, room_id=ROOM, world_id=WORLD) is None
    # Opting out again is told again.
    await consent.opt_out(user_id=SAM, world_id=WORLD)
    assert await consent.claim_notice(user_id=SAM, world_id=WORLD) is True


async def test_learning_off_in_a_room_or_a_world_holds_for_everyone_there(store) -> None:
    consent = ConsentStore(store.db)
    assert await consent.set_learning(world_id=WORLD, room_id=ROOM, on=False, by=ADMIN)
    assert not await consent.set_learning(world_id=WORLD, room_id=ROOM, on=False, by=ADMIN)
    for person in (SAM, TOM):
        assert await consent.check(user_id=person, room_id=ROOM, world_id=WORLD) == NotLearning(
            "room"
        )
        assert await consent.check(user_id=person, room_id=OTHER_ROOM, world_id=WORLD) is None

    assert await consent.set_learning(world_id=WORLD, room_id=None, on=False, by=ADMIN)
    assert await consent.check(user_id=TOM, room_id=OTHER_ROOM, world_id=WORLD) == NotLearning(
        "world"
    )
    assert await consent.check(user_id=TOM, room_id=ROOM, world_id=OTHER_WORLD) is None
    state = await consent.state(user_id=TOM, room_id=ROOM, world_id=WORLD)
    assert (state.room_off, state.world_off, state.person_off, state.learning) == (
        True,
        True,
        False,
        False,
    )

    assert await consent.set_learning(world_id=WORLD, room_id=None, on=True, by=ADMIN)
    assert await consent.set_learning(world_id=WORLD, room_id=ROOM, on=True, by=ADMIN)
    assert await consent.check(user_id=TOM, room_id=ROOM, world_id=WORLD) is None
    # Ids are stable UUID strings and times integer milliseconds (nx-27017's gaps).
    await consent.set_learning(world_id=WORLD, room_id=ROOM, on=False, by=ADMIN)
    [document] = await store.db.consent.find().to_list()
    assert isinstance(document["_id"], str) and len(document["_id"]) == 36
    assert isinstance(document["changed_ms"], int)

"""/forgetme leaves nothing behind: after a real conversation (bundled MongoDB over the wire,
real Chroma, the offline model and the built-in plugins), the person's name and every
distinctive word they said are in no MongoDB collection and no Chroma collection, while other
people's data and the same person's data in another world stay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chromadb
from chromadb.config import Settings as ChromaSettings

from bot.app.composition import App
from bot.commands.command_set import Commands, Request
from bot.testing.harness import TestChat, open_test_app
from plugins.facts import plugin as facts
from plugins.goals import plugin as goals
from plugins.recall import plugin as recall
from plugins.sentiment import plugin as sentiment

PRIYA_SAID = [
    "Hi Mnemo, my name is Priya and I live in Reykjavik.",
    "Mnemo, I work as a glassblower and I have a dog named Wobbleton.",
    "Mnemo, I want to learn the theremin: buy a theremin; practise daily",
]
# Her name and what only she said in the group: none of it may be left anywhere.
HERS = ["priya", "reykjavik", "glassblower", "wobbleton", "theremin", "zeppelin"]
# What Tom said in the same room, and what she said in her DM (another world): all stays.
TOMS = ["lisbon", "beekeeper"]
ELSEWHERE = ["mongolia"]


async def everything_in_mongodb(app: App) -> str:
    """Every document of every collection, as one lower-cased text."""
    texts = []
    db = app.store.db
    for name in sorted(await db.list_collection_names()):
        async for document in db[name].find({}):
            texts.append(json.dumps(document, default=str, ensure_ascii=False))
    return "\n".join(texts).casefold()


def everything_in_chroma(data_dir: Path) -> tuple[str, list[dict[str, Any]]]:
    """Every document and metadata of every Chroma collection (as text), and the metadata."""
    client = chromadb.PersistentClient(
        path=str(data_dir / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    texts: list[str] = []
    metadatas: list[dict[str, Any]] = []
    for listed in client.list_collections():
        name = listed if isinstance(listed, str) else listed.name
        found = client.get_collection(name).get(include=["documents", "metadatas"])
        texts += [json.dumps([i, d, m], default=str) for i, d, m in zip(
            found["ids"], found["documents"] or [], found["metadatas"] or [], strict=False
        )]  # fmt: skip
        metadatas += [dict(m or {}) for m in found["metadatas"] or []]
    return "\n".join(texts).casefold(), metadatas


async def test_forgetme_leaves_nothing_of_the_person_in_any_collection_or_vector(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path,
        plugins=[facts, goals, sentiment, recall],
        mongodb_uri=mongo_uri,
        model_dir=model_dir,
        evaluator_selection="all",
    ) as app:
        runtime = app.runtime
        # Her platform name is not the name she tells the bot.
        priya = TestChat(runtime, name="user4711", chat="general", world="guild", kind="group")
        tom = TestChat(runtime, name="tom", chat="general", world="guild", kind="group")
        in_dm = TestChat(runtime, name="user4711", chat="dm-4711")
        for text in PRIYA_SAID:
            await priya.say(text)
        toms = await tom.say("Mnemo, I live in Lisbon and I work as a beekeeper.")
        await in_dm.say("I collect stamps from Mongolia.")
        commands = Commands(app.commands, learn_wait=30)
        # Learn from everything said (as a quiet room or a /me would).
        assert await commands.learned(priya.room.id) and await commands.learned(in_dm.room.id)
        learned = await app.store.facts.history(priya.account.id, priya.room.world_id)
        # A message taken in but never answered (a crash mid-reply): its job holds the text.
        await runtime.evaluations.open_intake(priya.message("Mnemo, I fly a zeppelin."))
        before = await everything_in_mongodb(app)
        dm_messages = await app.store.memories.count_in_world(in_dm.room.world_id)
        dm_facts = await app.store.facts.history(priya.account.id, in_dm.room.world_id)
        where = {"platform": "test", "account_id": priya.account.id, "is_admin": False}
        group = {"world_id": priya.room.world_id, "room_id": priya.room.id}
        asked = (await commands.run("forgetme", Request(**where, **group))).text
        done = (await commands.run("forgetme", Request(**where, **group, args="yes"))).text

        after = await everything_in_mongodb(app)
        vectors, metadatas = everything_in_chroma(tmp_path)
        tom_facts = await app.store.facts.history(tom.account.id, tom.room.world_id)
        to_tom = await app.store.memories.get_many([r.id for r in toms.replies])
        accounts = await app.store.accounts.get_many([priya.account.id])
        dm_after = await app.store.memories.count_in_world(in_dm.room.world_id)
        dm_facts_after = await app.store.facts.history(priya.account.id, in_dm.room.world_id)

        # Forgotten in her DM too, nothing refers to her account any more: it goes.
        await commands.run(
            "forgetme",
            Request(**where, world_id=in_dm.room.world_id, room_id=in_dm.room.id, args="yes"),
        )
        last = await everything_in_mongodb(app)
        # She is welcome back: a new message brings a new account record.
        await in_dm.say("Hello again.")
        back = await app.store.accounts.get_many([priya.account.id])

    # It asked first, and nothing went until she confirmed.
    assert "cannot be undone" in asked and "/forgetme yes" in asked
    assert all(word in before for word in HERS + TOMS + ELSEWHERE)
    assert any("Wobbleton" in fact.text for fact in learned)
    assert done.startswith("Done: I forgot ") and "goals: 1" in done, done
    for word in HERS:
        assert word not in after, f"{word!r} is still stored in MongoDB"
        assert word not in vectors, f"{word!r} is still stored in Chroma"
    group_scope = [
        m
        for m in metadatas
        if m.get("world_id") == priya.room.world_id
        and priya.account.id in (m.get("user_id"), m.get("subject_id"))
    ]
    assert group_scope == []
    # Tom's words, facts and the bot's replies to him stay.
    assert all(word in after for word in TOMS)
    assert any("Lisbon" in fact.text for fact in tom_facts)
    assert toms.replies and len(to_tom) == len(toms.replies)
    # Her DM is another world: its messages and facts stay, and so does her account
    # (without the name she told in the group).
    assert "mongolia" in after
    assert dm_after == dm_messages and dm_facts_after == dm_facts
    assert priya.account.id in accounts and accounts[priya.account.id].name == "user4711"
    assert priya.account.id not in last and "user4711" not in last and "mongolia" not in last
    assert priya.account.id in back

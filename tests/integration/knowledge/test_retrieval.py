"""MessageRetriever on real parts: MongoDB over the wire, Chroma, the ONNX embedder.

Messages are stored and indexed the way the bot stores them (MongoStore.memories.insert, then
MessageIndex.index_message), and searched through the same class the recall provider uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from bot.domain.records import Account, Content, Memory, Room, new_id, stable_id, utcnow
from bot.knowledge.messages import MessageIndex
from bot.knowledge.ranking import reciprocal_rank_fusion
from bot.knowledge.retrieval import MessageRetriever, RetrieverOptions
from bot.memory.store import Knowledge

AGENT = stable_id("agent", "test")


@pytest.fixture
def retriever(knowledge: Knowledge) -> MessageRetriever:
    return MessageRetriever(knowledge.store, knowledge.vectors, knowledge.embedder)


@dataclass
class Chat:
    """A room people talk in; messages are stored and indexed as the bot does."""

    knowledge: Knowledge
    name: str = "general"
    world: str = "guild"
    said: list[Memory] = field(default_factory=list)

    @property
    def room_id(self) -> str:
        return stable_id("test", "room", self.name)

    @property
    def world_id(self) -> str:
        return stable_id("test", "world", self.world)

    async def open(self) -> Chat:
        await self.knowledge.store.rooms.upsert(
            Room(id=self.room_id, world_id=self.world_id, platform="test", kind="group")
        )
        return self

    async def say(self, text: str, *, by: str = "Sarah", index: bool = True) -> Memory:
        user = stable_id("test", "account", by)
        await self.knowledge.store.accounts.upsert(
            Account(id=user, platform="test", platform_id=by, name=by)
        )
        memory = Memory(
            id=new_id(),
            user_id=user,
            agent_id=AGENT,
            room_id=self.room_id,
            world_id=self.world_id,
            content=Content(text=text),
            # Strictly increasing: the order in the room is the order of the script.
            created_at=utcnow() + timedelta(milliseconds=len(self.said) + 1),
        )
        await self.knowledge.store.memories.insert(memory)
        if index:
            await MessageIndex(self.knowledge.vectors, self.knowledge.embedder).index_message(
                memory
            )
        self.said.append(memory)
        return memory

    async def say_all(self, texts: list[str], *, by: str = "Sarah") -> list[Memory]:
        return [await self.say(text, by=by) for text in texts]


def texts(found: list) -> list[str]:
    return [r.memory.content.text for r in found]


# -- the two rankers complement each other ---------------------------------------------------


async def test_a_rare_word_is_found_by_keywords_where_vectors_rank_it_low(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    target = "My cousin works at the warehouse, 88412 is her badge number by the way."
    await chat.say_all(
        [
            target,
            "I had pasta for lunch.",
            "My sister called me yesterday.",
            "The weather is nice today.",
            "Work has been busy lately.",
            "Still waiting on news about my order.",
            "Any update on the delivery?",
            "The order I placed last week has not arrived.",
            "Has my package shipped yet?",
            "Did the parcel go out today?",
        ]
    )
    query = "Did 88412 ship yet?"

    vectors_only = await retriever.with_options(keyword_weight=0.0).search(
        query, room_id=chat.room_id, limit=3
    )
    hybrid = await retriever.search(query, room_id=chat.room_id, limit=3)

    # The premise: by meaning alone, the messages about parcels look closer.
    assert target not in texts(vectors_only)
    assert target in texts(hybrid)
    assert next(r for r in hybrid if r.memory.content.text == target).keyword_rank == 1


async def test_a_paraphrase_is_found_by_vectors_where_no_keyword_matches(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    target = "I adopted a puppy last week, he is a golden retriever."
    await chat.say_all(
        [
            "Do you have any plans for the weekend?",
            "I have a new job at the library.",
            target,
            "The weather is nice today.",
            "Do you have time tomorrow?",
            "My sister called me yesterday.",
        ]
    )
    query = "Do you have a dog?"

    keywords_only = await retriever.with_options(vector_weight=0.0).search(
        query, room_id=chat.room_id, limit=3
    )
    hybrid = await retriever.search(query, room_id=chat.room_id, limit=3)

    assert keywords_only == []  # "dog" is in no message, and the rest are stop words
    assert texts(hybrid)[0] == target
    assert hybrid[0].vector_rank == 1 and hybrid[0].keyword_rank is None


# -- scope, exclusions, deletions ------------------------------------------------------------


async def test_only_the_searched_room_or_world_is_ever_returned(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    here = await Chat(knowledge, name="general", world="guild").open()
    next_door = await Chat(knowledge, name="random", world="guild").open()
    elsewhere = await Chat(knowledge, name="dm", world="other-server").open()
    mine = await here.say("We spent a week in Lisbon eating pastéis de nata.")
    await here.say("Work has been busy lately.")
    same_world = await next_door.say("Lisbon in spring is lovely, we went in April.")
    other_world = await elsewhere.say("Lisbon! I grew up in Lisbon, ask me anything.")
    query = "What did you do in Lisbon?"

    in_room = await retriever.search(query, room_id=here.room_id, limit=10)
    in_world = await retriever.search(query, world_id=here.world_id, limit=10)
    in_other = await retriever.search(query, world_id=elsewhere.world_id, limit=10)

    assert mine.id in {r.memory.id for r in in_room}
    assert {r.memory.room_id for r in in_room} == {here.room_id}
    assert {mine.id, same_world.id} <= {r.memory.id for r in in_world}
    assert other_world.id not in {r.memory.id for r in in_world}
    assert [r.memory.id for r in in_other] == [other_world.id]


async def test_excluded_and_later_messages_are_left_out(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    first = await chat.say("My cat Miso knocked over the plant again.")
    await chat.say("I need to buy groceries.")
    second = await chat.say("Miso also ate a sock this morning, silly cat.")
    later = await chat.say("Miso is asleep on the sofa now.")
    query = "How is Miso the cat?"

    found = await retriever.search(
        query, room_id=chat.room_id, exclude_ids=[second.id], before=later.created_at, limit=5
    )

    ids = [r.memory.id for r in found]
    assert first.id in ids
    assert second.id not in ids  # excluded: already in the prompt's recent window
    assert later.id not in ids  # not earlier than the message being answered


async def test_a_deleted_message_is_never_returned_though_its_vector_remains(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    kept = await chat.say("I'm training for the Berlin marathon.", by="Sarah")
    gone = await chat.say("The Berlin marathon route passes my flat.", by="Sam")
    await chat.say("Lunch was great.", by="Sarah")
    query = "Who is running the Berlin marathon?"
    # Searched once first, so the keyword index is cached with the message in it.
    assert gone.id in {r.memory.id for r in await retriever.search(query, room_id=chat.room_id)}

    await knowledge.store.memories.delete(user_id=gone.user_id, world_id=chat.world_id)
    found = await retriever.search(query, room_id=chat.room_id)

    [still_there] = await knowledge.vectors.query(
        "messages",
        (await knowledge.embedder.embed([gone.content.text]))[0],
        where={"room_id": chat.room_id},
        limit=1,
    )
    assert still_there.id == gone.id  # Chroma still holds the vector
    assert kept.id in {r.memory.id for r in found}
    assert gone.id not in {r.memory.id for r in found}


# -- the keyword index follows the room ------------------------------------------------------


async def test_new_messages_are_found_by_keywords_after_the_index_was_built(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    await chat.say_all(["Good morning!", "The coffee machine is broken again."])
    query = "Where is the quokka sanctuary?"
    assert await retriever.search(query, room_id=chat.room_id) == []  # the index is now cached

    # No vector for it: it is known only to a keyword index read after it was stored.
    new = await chat.say("The quokka sanctuary is on Rottnest Island.", index=False)
    found = await retriever.search(query, room_id=chat.room_id, limit=1)

    assert [r.memory.id for r in found] == [new.id]
    assert found[0].keyword_rank == 1


async def test_the_index_is_rebuilt_when_messages_were_deleted_and_added(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    await chat.say("Paella night at my place on Friday.", by="Sam")
    await chat.say("I'll bring the wine.", by="Sarah")
    query = "When is paella night?"
    assert await retriever.search(query, room_id=chat.room_id) != []

    # One message gone and one new: the same count, a different room.
    await knowledge.store.memories.delete(user_id=stable_id("test", "account", "Sam"),
                                          world_id=chat.world_id)  # fmt: skip
    new = await chat.say("Paella night moved to Saturday, same place.", by="Alex", index=False)
    found = await retriever.search(query, room_id=chat.room_id, limit=1)

    assert [r.memory.id for r in found] == [new.id]


async def test_an_empty_query_or_room_returns_nothing(
    knowledge: Knowledge, retriever: MessageRetriever
) -> None:
    chat = await Chat(knowledge).open()
    assert await retriever.search("anything at all", room_id=chat.room_id) == []
    await chat.say("Hello there")
    assert await retriever.search("   ", room_id=chat.room_id) == []
    with pytest.raises(ValueError):
        await retriever.search("hello", room_id=chat.room_id, world_id=chat.world_id)


def test_reciprocal_rank_fusion_rewards_agreement_and_weights() -> None:
    fused = reciprocal_rank_fusion([(["a", "b", "c"], 1.0), (["c", "a"], 1.0)], k=60)
    assert max(fused, key=lambda i: fused[i]) == "a"  # high in both lists
    assert fused["c"] > fused["b"]  # in both lists beats a better place in one
    weighted = reciprocal_rank_fusion([(["a"], 0.5), (["b"], 1.0)], k=20)
    assert weighted["b"] == pytest.approx(2 * weighted["a"])


async def test_more_rooms_than_the_cache_holds_are_each_searched_right(
    knowledge: Knowledge,
) -> None:
    # Two rooms' indexes kept at a time: the third search drops the least recently used one,
    # and searching that room again reads it afresh, with what was said there meanwhile.
    retriever = MessageRetriever(
        knowledge.store, knowledge.vectors, knowledge.embedder,
        options=RetrieverOptions(cached_scopes=2),
    )  # fmt: skip
    rooms = [await Chat(knowledge, name=f"room {n}").open() for n in range(3)]
    for n, chat in enumerate(rooms):
        await chat.say(f"the key to room {n} is under the blue flowerpot")
    for n, chat in enumerate(rooms):
        found = await retriever.search("where is the key?", room_id=chat.room_id, limit=1)
        assert texts(found) == [f"the key to room {n} is under the blue flowerpot"]
    await rooms[0].say("the key to room 0 moved to the red mailbox")
    found = await retriever.search("red mailbox key", room_id=rooms[0].room_id, limit=1)
    assert texts(found) == ["the key to room 0 moved to the red mailbox"]

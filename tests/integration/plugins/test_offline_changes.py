"""The offline model reconciles too: what people plainly say about a change updates or retracts
the fact it changes. Full app, offline model, bundled MongoDB, Chroma and the ONNX embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.testing.harness import TestChat, open_test_app
from plugins.facts import plugin


async def learn_each(chat: TestChat, *texts: str) -> None:
    for text in texts:
        said = chat.message(text)
        await chat.send(said)
        await chat.settle()
        assert await chat.runtime.flush_room(said, timeout=60)


@pytest.mark.parametrize(
    ("before", "after", "now", "gone"),
    [
        ("I live in Seattle.", "I moved to Berlin last month.", "berlin", "seattle"),
        ("I live in Porto.", "I now live in Lisbon.", "lisbon", "porto"),
        ("I work at Google.", "I now work at Microsoft.", "microsoft", "google"),
        ("I work as a nurse.", "I'm a teacher now.", "teacher", "nurse"),
        ("I'm 34.", "I'm 35 now.", "35", "34"),
        ("I'm 34.", "I just turned 35!", "35", "34"),
        ("I have 2 kids.", "We have 3 kids now.", "3 kids", "2 kids"),
        ("I work at the bakery.", "I no longer work at the bakery.", None, "bakery"),
        ("I live in Oslo.", "I don't live in Oslo anymore.", None, "oslo"),
        ("I work at Initech.", "I quit my job at Initech.", None, "initech"),
        ("I have a horse named Star.", "I sold my horse.", None, "horse"),
    ],
)
async def test_a_change_said_plainly_updates_or_retracts_the_known_fact(
    tmp_path: Path,
    mongo_uri: str,
    model_dir: Path,
    before: str,
    after: str,
    now: str | None,
    gone: str,
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        await learn_each(chat, before, after)
        current, _ = await app.store.facts.page(chat.room.world_id)
        history = await app.knowledge.fact_history(chat.account.id, chat.room.world_id)

    texts = [f.text.casefold() for f in current]
    assert not any(gone in text for text in texts), texts
    if now is not None:
        assert any(now in text for text in texts), texts
    [closed] = [f for f in history if not f.is_current]
    assert gone in closed.text.casefold()
    assert (closed.superseded_by is None) == (now is None)


async def test_two_pets_are_two_facts_and_a_repeat_is_no_change(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Noor")
        await learn_each(
            chat,
            "I have a dog named Rex.",
            "I have a cat named Luna.",
            "I live in Paris.",
            "Yes, I live in Paris.",
        )
        history = await app.knowledge.fact_history(chat.account.id, chat.room.world_id)

    assert sorted(f.text for f in history) == [
        "Noor has a cat named Luna",
        "Noor has a dog named Rex",
        "Noor lives in Paris",
    ]
    assert all(f.is_current for f in history)


async def test_said_and_taken_back_in_one_window_is_never_current(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        for text in ("I work at the bakery.", "I live in Oslo.", "I no longer work at the bakery."):
            last = chat.message(text)
            await chat.send(last)
        await chat.settle()
        assert await app.runtime.flush_room(last, timeout=60)  # one extraction reads all three
        current, _ = await app.store.facts.page(chat.room.world_id)

    assert [f.text for f in current] == ["Sam lives in Oslo"]

"""The LoCoMo recall benchmark: evidence ids as the README defines them, and a tiny
conversation scored end to end through Mnemo's own storage and retrieval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.locomo import LocomoError, load_locomo, normalise_evidence
from benchmarks.recall import conversation_scope, main, run_recall
from bot.knowledge.retrieval import MessageRetriever
from bot.memory.store import Knowledge
from bot.storage.mongo import MongoStore


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        ("D1:3", ["D1:3"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),  # two ids in one entry
        ("D:11:26", ["D11:26"]),  # a stray colon
        ("D30:05", ["D30:5"]),  # a leading zero
        ("D", []),  # nothing left to parse
        ("  D2:1 D2:2 ", ["D2:1", "D2:2"]),
        ("session 3", []),
    ],
)
def test_evidence_ids_are_normalised_as_the_readme_says(raw: str, ids: list[str]) -> None:
    assert normalise_evidence(raw) == ids


def turn(speaker: str, dia_id: str, text: str, **extra: str) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


# Two sessions, six turns. Q1 and Q3 can be answered fully; Q2 names a turn that does not
# exist (so at most half of it is found); Q4 has no evidence and Q5 is adversarial: both are
# left out. With six turns, the top 20 hold every turn: recall@20 is known exactly.
SAMPLE: dict[str, Any] = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            turn("Caroline", "D1:1", "Hey Mel! How have you been?"),
            turn("Melanie", "D1:2", "Busy! The kids keep me running all day."),
            turn(
                "Caroline",
                "D1:3",
                "I got a hamster, her name is Biscuit.",
                img_url=["https://example.invalid/biscuit.jpg"],
                blip_caption="a photo of a small hamster in a cage",
            ),
        ],
        "session_2_date_time": "10:01 am on 20 June, 2023",
        "session_2": [
            turn("Melanie", "D2:1", "We moved to Lisbon last week!"),
            turn("Caroline", "D2:2", "Wow, Portugal! How is the new flat?"),
            turn("Melanie", "D2:3", "Small but sunny, the kids love the balcony."),
        ],
    },
    "qa": [
        {"question": "What is the name of Caroline's hamster?", "answer": "Biscuit",
         "evidence": ["D1:3"], "category": 4},
        {"question": "Where did Melanie move to?", "answer": "Lisbon",
         "evidence": ["D2:1", "D7:1"], "category": 1},
        {"question": "What does Caroline's pet look like?", "answer": "small",
         "evidence": ["D:1:3"], "category": 3},
        {"question": "Is Melanie an ally?", "answer": "yes", "evidence": [], "category": 3},
        {"question": "What is Melanie's hamster called?", "adversarial_answer": "Biscuit",
         "evidence": ["D1:3"], "category": 5},
    ],
    "observation": {
        "session_1_observation": {
            "Caroline": [["Caroline has a hamster named Biscuit.", "D1:3"]],
            "Melanie": [["Melanie has kids who keep her busy.", "D1:2"]],
        },
        "session_2_observation": {
            "Melanie": [["Melanie moved to Lisbon, Portugal.", ["D2:1", "D2:2"]]],
        },
    },
    "session_summary": {},
    "event_summary": {},
}  # fmt: skip


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    return path


def test_the_file_is_read_into_sessions_turns_and_questions(data: Path) -> None:
    [conversation] = load_locomo(data)
    assert [s.number for s in conversation.sessions] == [1, 2]
    assert conversation.sessions[1].started_at.isoformat() == "2023-06-20T10:01:00+00:00"
    biscuit = conversation.turns[2]
    assert (biscuit.dia_id, biscuit.speaker) == ("D1:3", "Caroline")
    assert biscuit.caption == "a photo of a small hamster in a cage"
    assert [q.evidence for q in conversation.questions][:3] == [
        ("D1:3",),
        ("D2:1", "D7:1"),
        ("D1:3",),
    ]
    assert conversation.observations[2].evidence == ("D2:1", "D2:2")


def test_a_file_that_is_not_locomo_is_one_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"sample_id": "x", "conversation": {}}]), encoding="utf-8")
    with pytest.raises(LocomoError, match="conversation #0"):
        load_locomo(broken)


async def test_a_tiny_conversation_is_scored_end_to_end(
    data: Path, store: MongoStore, knowledge: Knowledge
) -> None:
    retriever = MessageRetriever(store, knowledge.vectors, knowledge.embedder)

    result = await run_recall(
        data, store=store, knowledge=knowledge, retriever=retriever, limit_conversations=None
    )

    messages = result["messages"]
    assert result["turns"] == 6
    assert messages["questions"] == 3  # no evidence and adversarial are left out
    assert result["skipped_without_evidence"] == 1
    # Every turn is in the top 20: Q1 and Q3 fully found, Q2 half (D7:1 does not exist).
    assert messages["recall_at"]["20"] == pytest.approx((1 + 0.5 + 1) / 3, abs=1e-3)
    # The hamster's name is a keyword match: it comes first.
    assert messages["by_category"]["single-hop"]["recall_at"]["1"] == 1.0
    assert set(messages["latency_ms"]) == {"p50", "p95"}
    # Facts stand for the turns they were learned from: the same evidence is reachable.
    assert result["facts"]["facts"] == 3
    assert result["facts"]["recall_at"]["20"] == pytest.approx((1 + 0.5 + 1) / 3, abs=1e-3)
    # The turns really are Mnemo memories, dated by their session.
    room_id, _ = conversation_scope("conv-test")
    stored = await store.memories.recent(room_id, 10)
    assert [m.created_at.date().isoformat() for m in stored] == ["2023-05-08"] * 3 + [
        "2023-06-20"
    ] * 3


def test_the_command_prints_the_table_and_writes_json(
    data: Path, tmp_path: Path, model_dir: Path, mongo_uri: str, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "result.json"

    code = main(
        ["--data", str(data), "--model-dir", str(model_dir), "--mongodb-uri", mongo_uri,
         "--json", str(out)]
    )  # fmt: skip

    assert code == 0
    printed = capsys.readouterr().out
    assert "| messages (hybrid) |" in printed and "| facts |" in printed
    assert json.loads(out.read_text())["messages"]["questions"] == 3


def test_the_command_fails_in_one_line_on_a_missing_file(
    tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["--data", str(tmp_path / "nope.json"), "--model-dir", str(model_dir)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mnemo bench recall:") and "nope.json" in err and "\n" not in err

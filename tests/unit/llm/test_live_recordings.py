"""What the live runs found, kept without the model: every answer recorded by `make
bench-live` (tests/data/real-model/live/, Qwen2.5-Coder-0.5B on llama.cpp, 2 CPU threads)
replayed through the code that reads it.

- Replies: each recorded reply is checked as the reply path checks it (the character and the
  instructions it was given, the person's lines and the bot's own earlier replies from the
  conversation it saw); the table below is what each one showed. A reply listed with a
  problem is never shown to a person (tests/integration/runtime/test_reply_machinery.py drives
  that path).
- Facts: each claim the model made is judged by the memory bench's judge; the claims a 0.5B
  model drew from the bot's own replies ("Mnemo is tracking my ferry engineer's work") are
  wrong by its measure, so a run that stored them cannot report 100% precision.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from benchmarks.memory_judge import WRONG_UNSAID, FactJudge
from bot.llm.parsing import parse_json_object, parse_reply, partial_reply_text
from bot.llm.reply_checks import (
    ACTION_NAME,
    PARROTING,
    PROMPT_TEXT,
    REPEATED,
    ReplyCheck,
)
from tests.paths import DATA

LIVE = DATA / "real-model" / "live"
FIRST_RUN = "qwen2.5-coder-0.5b-bench-1.jsonl"
# `make bench-live` on family-move-job-car, retract-misspoke-library, likes-and-dislikes and
# group-injection, with the rewritten reply prompt.
SECOND_RUN = "qwen2.5-coder-0.5b-bench-2.jsonl"


def recording(name: str) -> list[dict[str, Any]]:
    lines = (LIVE / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def reply_check(row: dict[str, Any]) -> ReplyCheck:
    """The check the reply path made for this request, rebuilt from what it sent: the system
    message (the character, up to its Style line) and the task; the conversation's lines."""
    prompt = row["prompt"]
    head, _, rest = prompt.partition("# Conversation\n")
    system = head.split("\nStyle:", 1)[0]
    conversation, _, task = rest.partition("\n\n# Task")
    lines = [line.partition(": ") for line in conversation.splitlines() if ": " in line]
    person = lines[-1][0]
    return ReplyCheck(
        action_names=["CREATE_GOAL"],
        standing_text=[system, task],
        person_lines=[text for name, _, text in lines if name == person],
        own_lines=[text for name, _, text in lines if name == "Mnemo"],
        speaker_names=sorted({name for name, _, _ in lines} | {"Mnemo"}),
    )


# seq -> what the reply showed. 2 and 6 copied the CREATE_GOAL description of the time
# ("start tracking it and its steps") in runs too short to be told from ordinary words: the
# description was rewritten instead.
FIRST_RUN_REPLIES = {
    2: [],
    6: [],
    10: [ACTION_NAME, REPEATED],
    11: [PARROTING, REPEATED],
    15: [PROMPT_TEXT, REPEATED],
    18: [PROMPT_TEXT, REPEATED],
    19: [REPEATED],
}


# 2, 26, 30, 33, 37 and 40 are the model's own words, however wrong ("I will help Kenji to
# find a new job at the library"): no check of the words can tell; 11 and 20 speak in the
# person's voice with eight of their words in a row ("I live in Tallinn and I work as a ...");
# 45 and 50 give back a dozen words and more of its jazz monologue (40), which the share of
# the reply alone let through.
SECOND_RUN_REPLIES = {
    2: [],
    5: [PARROTING],
    6: [PARROTING],
    10: [PARROTING],
    11: [PARROTING],
    15: [REPEATED],
    16: [PARROTING, REPEATED],
    20: [PARROTING, REPEATED],
    21: [PARROTING, REPEATED],
    25: [PARROTING, REPEATED],
    26: [],
    30: [],
    33: [],
    37: [],
    40: [],
    44: [REPEATED],
    45: [REPEATED],
    50: [REPEATED],
}


@pytest.mark.parametrize(
    ("name", "table"), [(FIRST_RUN, FIRST_RUN_REPLIES), (SECOND_RUN, SECOND_RUN_REPLIES)]
)
def test_each_recorded_reply_shows_what_the_table_says(name: str, table: dict) -> None:
    found = {
        row["seq"]: reply_check(row).problems(parse_reply(row["content"]).text)
        for row in recording(name)
        if row["task"] == "reply"
    }
    assert found == table


# `make bench-live BENCH=cost BENCH_ARGS='--selection llm --pace 15'` on the final code of
# issue 22 (commit e81b285): every reply request of the run, each read as it was written.
FINAL_COST_RUN = "qwen2.5-coder-0.5b-cost-final.jsonl"


def test_the_live_replies_were_stopped_for_good_or_judged_whole() -> None:
    """Each answer the run stopped early (the proxy saw the bot close the request) fails a
    check no more words can pass; the others were read to the end and judged whole."""
    stopped: Counter[str] = Counter()
    whole: Counter[tuple[str, ...]] = Counter()
    for row in recording(FINAL_COST_RUN):
        if row["status"] != 200:
            continue  # llama.cpp refused json_schema once; the client moved to JSON mode
        check = reply_check(row)
        if row.get("stopped"):
            text = partial_reply_text(row["content"]) or ""
            assert check.settled_problems(text), (row["seq"], text)
            stopped.update(check.problems(text))
        else:
            whole[tuple(check.problems(parse_reply(row["content"]).text))] += 1
    # The model's own earlier reply came back in 18 answers, each cut a dozen words in; the
    # one that spoke as Sarah ("Sarah: I have a") was stopped at her label, three of her words
    # too few to call it her voice.
    assert stopped == {REPEATED: 18, PARROTING: 6, PROMPT_TEXT: 3}
    # 8 shown; one repeat whose dozen words were complete only as the answer ended.
    assert whole == {(): 8, (REPEATED,): 1}


def claims_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    answer = parse_json_object(row["content"] or "")
    claims = answer.get("claims", []) if answer else []
    return [c for c in claims if isinstance(c, dict)]


@pytest.mark.parametrize("seq", [9, 14, 17])
def test_claims_drawn_from_the_bots_own_replies_are_judged_wrong(seq: int) -> None:
    [row] = [r for r in recording(FIRST_RUN) if r["seq"] == seq]
    said = {
        "Dmitri": [
            "Hi, I'm Dmitri. I live in Tallinn and I work as a ferry engineer.",
            "My wife Lena is a violinist in the city orchestra.",
            "We have two daughters, Mila and Zoe.",
            "The weather has been grey all week.",
        ]
    }
    judge = FactJudge(said, {}, {}, {}, group=False, agent_name="Mnemo")
    tracking = [c for c in claims_of(row) if "tracking" in str(c.get("claim"))]
    assert tracking, "the recording holds the claim this test is about"
    for claim in tracking:
        assert judge.verdict("Dmitri", str(claim["claim"])) == WRONG_UNSAID

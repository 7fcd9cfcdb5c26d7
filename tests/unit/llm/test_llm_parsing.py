"""Tolerant parsing of model output: arrays, objects, replies and evaluator selection."""

from __future__ import annotations

from typing import Any

import pytest

from bot.llm.parsing import (
    ReplyDraft,
    cap_reply,
    parse_json_array,
    parse_json_object,
    parse_reply,
    read_evaluator_selection,
)

FENCE = "```"

ARRAYS: list[tuple[str, str, list[Any] | None]] = [
    ("bare", '[{"claim": "a"}]', [{"claim": "a"}]),
    ("json fence", f'{FENCE}json\n[{{"claim": "a"}}]\n{FENCE}', [{"claim": "a"}]),
    ("plain fence", f"{FENCE}\n[1, 2]\n{FENCE}", [1, 2]),
    (
        "misplaced fence from the seed",
        f'Claims:\njson{FENCE}\n[\n  {{ "claim": "Alex ran", "type": "fact" }}\n]\n{FENCE}\n',
        [{"claim": "Alex ran", "type": "fact"}],
    ),
    ("prose around", 'Sure! Here you go: ["GET_FACTS"] Hope it helps.', ["GET_FACTS"]),
    (
        "prose with a stray bracket first",
        'Note [see below]: {FENCE}json\n["A"]\n{FENCE}'.replace("{FENCE}", FENCE),
        ["A"],
    ),
    (
        "single object is wrapped",
        '{"id": "g1", "status": "DONE"}',
        [{"id": "g1", "status": "DONE"}],
    ),
    (
        "seed outcome: object with a trailing comma",
        '{ "claim": "Bob is from Oakland", "type": "fact", "in_bio": false, '
        '"already_known": false },',
        [
            {
                "claim": "Bob is from Oakland",
                "type": "fact",
                "in_bio": False,
                "already_known": False,
            }
        ],
    ),
    ("a run of objects", '{"a": 1}\n{"b": 2},\n{"c": 3}', [{"a": 1}, {"b": 2}, {"c": 3}]),
    ("trailing commas", '[{"a": [1, 2,],}, {"b": 3},]', [{"a": [1, 2]}, {"b": 3}]),
    ("trailing comma in fence", f"{FENCE}json\n[\n 1,\n 2,\n]\n{FENCE}", [1, 2]),
    ("empty array", "[]", []),
    ("unterminated fence", f'{FENCE}json\n["A", "B"]', ["A", "B"]),
    ("commas inside strings survive", '["a, ]", "b",]', ["a, ]", "b"]),
    ("garbage", "I could not find anything.", None),
    ("cut off: what arrived is salvaged", '[{"claim": "a", ', [{"claim": "a"}]),
    (
        "unquoted id: the top level is repaired, never the nested array taken",
        '[{"id": e5683f6f-facf, "status": "DONE", "objectives": [{"description": "a", '
        '"completed": true}]}]',
        [
            {
                "id": "e5683f6f-facf",
                "status": "DONE",
                "objectives": [{"description": "a", "completed": True}],
            }
        ],
    ),
    ("missing comma between objects", '[{"a": 1}\n{"b": 2}]', [{"a": 1}, {"b": 2}]),
    ("single quotes", "[{'a': 'it is'}]", [{"a": "it is"}]),
    (
        "a // comment copied from a template",
        '[{"id": "g1", "status": "DONE", // Updated status\n}]',
        [{"id": "g1", "status": "DONE"}],
    ),
    ("brackets that are not json", "[not json] {nor this}", None),
    ("empty", "", None),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in ARRAYS], ids=[c[0] for c in ARRAYS])
def test_parse_json_array(text: str, expected: list[Any] | None) -> None:
    assert parse_json_array(text) == expected


OBJECTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("bare", '{"score": 0.5}', {"score": 0.5}),
    (
        "fenced",
        f'{FENCE}json\n{{"score": 0.5, "label": "positive"}}\n{FENCE}',
        {"score": 0.5, "label": "positive"},
    ),
    ("misplaced fence", f'json{FENCE}\n{{"a": 1,}}\n{FENCE}', {"a": 1}),
    ("prose", 'The result is {"label": "neutral"} as requested.', {"label": "neutral"}),
    ("object inside an array", '[{"a": 1}]', {"a": 1}),
    ("no object", "[1, 2, 3]", None),
    ("bare word value", '{"text": "Hi", "action": NONE}', {"text": "Hi", "action": None}),
    ("missing comma", '{"score": 0.6 "label": "positive"}', {"score": 0.6, "label": "positive"}),
    ("garbage", "nothing here", None),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in OBJECTS], ids=[c[0] for c in OBJECTS]
)
def test_parse_json_object(text: str, expected: dict[str, Any] | None) -> None:
    assert parse_json_object(text) == expected


REPLIES: list[tuple[str, str, ReplyDraft]] = [
    (
        "template",
        f'{FENCE}json\n{{"text": "Hi Sarah!", "action": "NONE"}}\n{FENCE}',
        ReplyDraft("Hi Sarah!", None),
    ),
    (
        "with action",
        '{"text": "Let\'s track that.", "action": "CREATE_GOAL"}',
        ReplyDraft("Let's track that.", "CREATE_GOAL"),
    ),
    ("empty action", '{"text": "Hello", "action": ""}', ReplyDraft("Hello", None)),
    ("null action", '{"text": "Hello", "action": null}', ReplyDraft("Hello", None)),
    ("lower-case none", '{"text": "Hello", "action": "none"}', ReplyDraft("Hello", None)),
    ("no action key", '{"text": "Hello"}', ReplyDraft("Hello", None)),
    ("prose before the json", 'Reply:\n{"text": "Hey", "action": "NONE"}', ReplyDraft("Hey", None)),
    ("plain text", "Just a plain answer.", ReplyDraft("Just a plain answer.", None)),
    ("plain text with braces", "Use {curly} braces.", ReplyDraft("Use {curly} braces.", None)),
    ("fenced plain text", f"{FENCE}\nHello there\n{FENCE}", ReplyDraft("Hello there", None)),
    (
        "unescaped quote keeps the text",
        f'{FENCE}json\n{{"text": "She said "hi" to me", "action": "NONE"}}\n{FENCE}',
        ReplyDraft('She said "hi" to me', None),
    ),
    (
        "broken json keeps the action",
        '{"text": "Run a "5k" daily", "action": "CREATE_GOAL"}',
        ReplyDraft('Run a "5k" daily', "CREATE_GOAL"),
    ),
    (
        "action before broken text",
        '{"action": "CREATE_GOAL", "text": "Go "now""}',
        ReplyDraft('Go "now"', "CREATE_GOAL"),
    ),
    (
        "trailing comma",
        '{"text": "Line one\\nline two", "action": "NONE",}',
        ReplyDraft("Line one\nline two", None),
    ),
    ("other text key", '{"reply": "Hi", "action": "NONE"}', ReplyDraft("Hi", None)),
    ("truncated", '{"text": "Half a JSON reply', ReplyDraft("Half a JSON reply", None)),
    (
        "bare NONE, as a real model wrote it 17 times in 40 replies",
        f'{FENCE}json\n{{"text": "Hey Priya, how was it?", "action": NONE}}\n{FENCE}',
        ReplyDraft("Hey Priya, how was it?", None),
    ),
    ("single quotes", "{'text': 'Tom\\'s here', 'action': 'NONE'}", ReplyDraft("Tom's here", None)),
    (
        "wrapped twice",
        '{"text": "{\\"text\\": \\"Hi\\", \\"action\\": \\"NONE\\"}"}',
        ReplyDraft("Hi", None),
    ),
    (
        "truncated in a fence",
        f'{FENCE}json\n{{"text": "Cut \\"off',
        ReplyDraft('Cut "off', None),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in REPLIES], ids=[c[0] for c in REPLIES]
)
def test_parse_reply(text: str, expected: ReplyDraft) -> None:
    assert parse_reply(text) == expected


CANDIDATES = [
    ("GET_FACTS", ["GET_CLAIMS", "EXTRACT_CLAIMS", "EXTRACT_FACTS"]),
    ("UPDATE_GOAL", ["UPDATE_GOALS", "EDIT_GOAL", "UPDATE_OBJECTIVES"]),
    ("SENTIMENT", []),
]

SELECTIONS: list[tuple[str, str, list[str]]] = [
    ("array", '["GET_FACTS", "UPDATE_GOAL"]', ["GET_FACTS", "UPDATE_GOAL"]),
    ("candidate order, not answer order", '["SENTIMENT", "GET_FACTS"]', ["GET_FACTS", "SENTIMENT"]),
    ("similes", '["EXTRACT_FACTS", "UPDATE_OBJECTIVES"]', ["GET_FACTS", "UPDATE_GOAL"]),
    ("case", '["get_facts", "Sentiment"]', ["GET_FACTS", "SENTIMENT"]),
    ("spaces and hyphens", '["get facts", "update-goal"]', ["GET_FACTS", "UPDATE_GOAL"]),
    ("duplicates", '["GET_FACTS", "GET_CLAIMS", "get_facts"]', ["GET_FACTS"]),
    ("unknowns ignored", '["WHATEVER", "SENTIMENT", "FOO"]', ["SENTIMENT"]),
    ("empty array means none", "[]", []),
    (
        "empty array wins over names in prose",
        "No evaluator needed for GET_FACTS here: []",
        [],
    ),
    ("fenced with prose", f'I pick:\n{FENCE}json\n["UPDATE_GOALS"]\n{FENCE}', ["UPDATE_GOAL"]),
    ("names nested in objects", '[{"name": "GET_FACTS"}]', ["GET_FACTS"]),
    (
        "fallback to whole words",
        "Run GET_FACTS and then update_goals, please.",
        ["GET_FACTS", "UPDATE_GOAL"],
    ),
    ("fallback ignores parts of words", "Run GET_FACTSX and XSENTIMENT", []),
    ("fallback ignores prose", "no need to update goals", []),
    ("nothing", "None of them.", []),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in SELECTIONS], ids=[c[0] for c in SELECTIONS]
)
def test_parse_evaluator_selection(text: str, expected: list[str]) -> None:
    assert read_evaluator_selection(text, CANDIDATES).names == expected


def test_selection_without_candidates() -> None:
    assert read_evaluator_selection('["GET_FACTS"]', []).names == []


def test_unreadable_reply_gives_plain_words_marked_unreadable() -> None:
    draft = parse_reply('{"thoughts": "She is happy", "action": "NONE"}')
    assert draft.text == "She is happy"
    assert not draft.readable
    assert not any(mark in draft.text for mark in '{}[]"')


@pytest.mark.parametrize("text", ["", "   \n ", f"{FENCE}json\n{FENCE}", '{"action": "NONE"}'])
def test_empty_reply_is_empty_and_unreadable(text: str) -> None:
    draft = parse_reply(text)
    assert draft.text == ""
    assert not draft.readable


def test_plain_prose_reply_is_readable() -> None:
    assert parse_reply("Nice to meet you, Sam.").readable


CAPS: list[tuple[str, str, int, str]] = [
    ("short text unchanged", "One. Two.", 50, "One. Two."),
    (
        "cut at the last sentence that fits",
        "One two. Three four! Five six seven.",
        25,
        "One two. Three four!",
    ),
    (
        "no sentence end: cut at a word, marked",
        "word " * 30,
        40,
        ("word " * 8).strip() + "…",
    ),
    (
        "a sentence end too early is not used",
        "Hi. " + "a" * 10 + " " + "b" * 30,
        40,
        "Hi. " + "a" * 10 + "…",
    ),
]


@pytest.mark.parametrize(
    ("text", "limit", "expected"), [c[1:] for c in CAPS], ids=[c[0] for c in CAPS]
)
def test_cap_reply(text: str, limit: int, expected: str) -> None:
    capped = cap_reply(text, limit)
    assert capped == expected
    assert len(capped) <= limit


def test_placeholder_selection_names_nothing_known() -> None:
    selection = read_evaluator_selection('["EVALUATOR_NAME"]', CANDIDATES)
    assert selection.names == []
    assert selection.named_nothing_known
    assert not read_evaluator_selection("[]", CANDIDATES).named_nothing_known


def test_selection_object_answer() -> None:
    answer = '{"evaluators": ["SENTIMENT", "GET_FACTS"]}'
    assert read_evaluator_selection(answer, CANDIDATES).names == ["GET_FACTS", "SENTIMENT"]

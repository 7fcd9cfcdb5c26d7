"""The facts answer as structured output: the extraction asks for `{"claims": [...]}` with its
JSON schema where the endpoint takes one (the real `openai` client against the local fake
server), and every shape a model answered before still reads: the bare array of the recorded
real-model answers (tests/data/real-model), a lone claim, a run of claims, repaired JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.config.settings import ModelSettings
from bot.llm.accounting import UsageLedger
from bot.llm.base import JSON_TEMPERATURE
from bot.llm.openai_model import OpenAIModel
from bot.testing.harness import TestChat, open_test_app
from bot.testing.openai_server import FakeOpenAIServer, last_user_message, status
from plugins.facts import FactsSettings, plugin
from plugins.facts.claims import claim_items, parse_claims
from plugins.facts.evaluator import FACTS_ANSWER_TOKENS
from tests import paths

DATA = paths.DATA / "real-model"
RECORDED_FACTS = [
    json.loads(line)
    for path in sorted(DATA.glob("*.jsonl"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if json.loads(line)["task"] == "facts"
]
LISBON = {
    "claim": "Sam lives in Lisbon",
    "subject": "Sam",
    "type": "fact",
    "change": "new",
    "fact": None,
    "in_bio": False,
}
NURSE = {**LISBON, "claim": "Sam works as a nurse"}


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps({"claims": [LISBON, NURSE]}),  # what the prompt and the schema ask for
        "```json\n" + json.dumps({"Claims": [LISBON, NURSE]}) + "\n```",
        "Claims:\n```json\n" + json.dumps([LISBON, NURSE]) + "\n```",  # the old bare array
        json.dumps(LISBON) + ",\n" + json.dumps(NURSE),  # a run of claims, no brackets
        '{"claims": [' + json.dumps(LISBON) + ", " + json.dumps(NURSE),  # cut off at the end
    ],
    ids=["object", "fenced-capitalised", "bare-array", "run", "truncated"],
)
def test_every_answer_shape_reads_as_the_same_claims(answer: str) -> None:
    parsed = parse_claims(answer)
    assert parsed is not None and parsed.malformed == 0
    assert [c.claim for c in parsed.claims][:1] == ["Sam lives in Lisbon"]
    assert all(c.subject == "Sam" and c.fact is None for c in parsed.claims)


def test_an_empty_answer_is_no_claims_and_a_lone_claim_is_one() -> None:
    assert claim_items('{"claims": []}') == []
    assert claim_items(json.dumps(LISBON)) == [LISBON]
    assert parse_claims("I found nothing to extract.") is None


@pytest.mark.parametrize("answer", RECORDED_FACTS, ids=[str(a["seq"]) for a in RECORDED_FACTS])
def test_every_recorded_real_answer_still_parses(answer: dict[str, Any]) -> None:
    parsed = parse_claims(answer["content"])
    assert parsed is not None and parsed.claims
    assert all(claim.claim for claim in parsed.claims)


async def test_the_extraction_asks_for_the_claims_object_and_survives_a_refusal(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """llama-cpp-python refuses `json_schema` with a 500: the same extraction is sent again
    in JSON mode with the schema beside it, and its `{"claims": [...]}` answer is stored."""

    def responder(body: dict[str, Any]) -> str:
        if "Extract Claims" in last_user_message(body):
            return json.dumps({"claims": [LISBON]})
        return '{"text": "Noted.", "action": "NONE"}'

    refusal = status(
        500,
        message="1 validation error: {'type': 'literal_error', 'loc': ('body', "
        "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}",
    )
    settings = ModelSettings(
        _env_file=None,  # type: ignore[call-arg]
        openai_api_key="sk-test",
        openai_base_url="http://127.0.0.1:1/v1",
        max_retries=0,
    )
    async with FakeOpenAIServer(responder=responder) as server:
        model = OpenAIModel(
            settings.model_copy(update={"openai_base_url": server.base_url}), UsageLedger()
        )
        facts_settings = FactsSettings().model_copy(update={"conversation_length": 10_000})
        async with open_test_app(
            tmp_path,
            plugins=[plugin],
            model=model,
            mongodb_uri=mongo_uri,
            model_dir=model_dir,
            plugin_settings={"facts": facts_settings},
            evaluator_selection="all",
        ) as app:
            chat = TestChat(app.runtime, name="Sam")
            said = chat.message("I moved to Lisbon last month")
            await chat.send(said)
            await chat.settle()
            server.enqueue(refusal)
            assert await app.runtime.flush_room(said, timeout=60)
            facts, _ = await app.store.facts.page(chat.room.world_id, limit=10)
        await model.close()

    refused, answered = [
        r.json for r in server.chat_requests if "Extract Claims" in last_user_message(r.json)
    ]
    assert refused["response_format"]["type"] == "json_schema"
    schema = refused["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["claims"]
    assert answered["response_format"] == {"type": "json_object", "schema": schema}
    assert answered["temperature"] == JSON_TEMPERATURE
    assert answered["max_tokens"] == FACTS_ANSWER_TOKENS
    assert '{"claims": [' in last_user_message(answered)
    assert [(f.text, f.subject_id) for f in facts] == [("Sam lives in Lisbon", chat.account.id)]

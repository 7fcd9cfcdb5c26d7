"""The facts answer as structured output: the reading asks for one key per message
(`{"m1": [...], "m2": [...]}`) with its JSON schema where the endpoint takes one (the real
`openai` client against the local fake server), and every shape a model may answer still
reads: fenced, capitalised, a bare list of notes, a label and value, cut off at the end."""

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
from plugins.facts.reading import UNREADABLE_NOTE, read_answer

LISBON = {"fact": "Sam lives in Lisbon", "quote": "I moved to Lisbon", "about": "home city"}
NURSE = {"fact": "Sam works as a nurse", "quote": "I work as a nurse", "about": "job"}


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps({"m1": [LISBON], "m2": [NURSE]}),  # what the prompt and the schema ask for
        "```json\n" + json.dumps({"M1": [LISBON], "M2": [NURSE]}) + "\n```",
        "Facts:\n```json\n" + json.dumps([LISBON, NURSE]) + "\n```",  # a bare list
        '{"m1": [' + json.dumps(LISBON) + '], "m2": [' + json.dumps(NURSE),  # cut off
    ],
    ids=["object", "fenced-capitalised", "bare-list", "truncated"],
)
def test_every_answer_shape_reads_as_the_same_notes(answer: str) -> None:
    reading = read_answer(answer)
    assert reading is not None and reading.malformed == 0
    assert [n.fact for n in reading.notes] == ["Sam lives in Lisbon", "Sam works as a nurse"]
    assert [n.quote for n in reading.notes] == ["I moved to Lisbon", "I work as a nurse"]


def test_a_label_and_value_is_a_note_and_junk_is_counted_not_read() -> None:
    reading = read_answer('{"m1": [{"about": "home city", "value": "Lisbon"}, 7, "Lisbon"]}')
    assert reading is not None
    assert [(n.message, n.about, n.value) for n in reading.notes] == [(1, "home city", "Lisbon")]
    assert reading.malformed == 2
    assert read_answer("I found nothing to extract.") is None
    assert read_answer('{"m1": []}') is not None


def is_reading(body: dict[str, Any]) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and "write down facts" in first["content"]


async def test_the_reading_asks_for_its_schema_and_survives_a_refusal(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """llama-cpp-python refuses `json_schema` with a 500: the same reading is sent again in
    JSON mode with the schema beside it, and its answer is stored."""

    def responder(body: dict[str, Any]) -> str:
        if is_reading(body):
            return json.dumps({"m1": [LISBON]})
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
            rejects = app.ledger.rejects("evaluator:GET_FACTS")
        await model.close()

    refused, answered = [r.json for r in server.chat_requests if is_reading(r.json)]
    assert "Sam: I moved to Lisbon" in last_user_message(answered)
    assert refused["response_format"]["type"] == "json_schema"
    schema = refused["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["m1"]
    assert answered["response_format"] == {"type": "json_object", "schema": schema}
    assert answered["temperature"] == JSON_TEMPERATURE
    # The worked examples go first, as turns the model gave, and the system text before them.
    assert answered["messages"][0]["role"] == "system"
    assert [m["role"] for m in answered["messages"][1:3]] == ["user", "assistant"]
    assert [(f.text, f.subject_id) for f in facts] == [("Sam lives in Lisbon", chat.account.id)]
    assert (
        facts[0].evidence is not None and facts[0].evidence.quote == "I moved to Lisbon last month"
    )
    assert UNREADABLE_NOTE not in rejects

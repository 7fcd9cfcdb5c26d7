"""Characters: the shipped personas load, elizaOS files (v0 and v1) load unchanged with their
extra fields kept, and a broken file is one line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.domain.characters import Character, CharacterError, load_character
from tests.paths import DATA, REPO


def write(tmp_path: Path, data: Any, name: str = "x.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


MINIMAL = {"name": "Tess", "messageExamples": [[{"user": "{{user1}}", "content": {"text": "hi"}}]]}


@pytest.mark.parametrize("name", ["mnemo", "archivist"])
def test_shipped_characters_load_and_are_complete(name: str) -> None:
    character = load_character(REPO / "characters" / f"{name}.json")
    assert character.name.lower() == name
    assert character.bio and character.lore and character.topics and character.adjectives
    assert character.style.all and character.style.chat
    assert len(character.message_examples) >= 3
    for conversation in character.message_examples:
        assert conversation[-1].user == character.name
        assert all(turn.content.text for turn in conversation)
    assert not character.model_extra


def test_default_character_recalls_a_fact_in_an_example() -> None:
    """The default persona shows the model what remembering looks like."""
    character = load_character(REPO / "characters" / "mnemo.json")
    replies = [c[-1].content.text.lower() for c in character.message_examples]
    assert any("you said" in reply or "you mentioned" in reply for reply in replies)
    assert character.names == ["Mnemo", "mnemo"]


def test_elizaos_v0_file_loads_unchanged_with_extras_kept() -> None:
    path = DATA / "eliza_character.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    character = load_character(path)

    assert character.name == "Pixel"
    assert character.clients == ["discord", "telegram"]
    assert character.bio == [raw["bio"]]  # a single string becomes a one-item list
    assert character.lore == raw["lore"]
    assert character.post_examples == raw["postExamples"]
    assert character.system == raw["system"]
    assert character.knowledge[-1] == {"path": "knowledge/consoles.md", "shared": False}
    first = character.message_examples[0]
    assert [turn.user for turn in first] == ["{{user1}}", "Pixel"]
    assert character.message_examples[1][1].content.action == "CONTINUE"
    assert character.template("factsTemplate", "default").startswith("TASK: Extract claims")
    assert character.template("goalsTemplate", "default") == "default"
    # Fields Mnemo does not use are kept, as they were written.
    extra = character.model_extra or {}
    assert extra["modelProvider"] == "openai"
    assert extra["clientConfig"] == raw["clientConfig"]
    assert extra["people"] == ["@retrofan42"]
    assert extra["twitterProfile"] == raw["twitterProfile"]
    assert character.settings["voice"] == {"model": "en_US-hfc_female-medium"}
    assert character.settings["embeddingModel"] == "text-embedding-3-small"


def test_character_secrets_are_usable_but_never_shown() -> None:
    character = load_character(DATA / "eliza_character.json")
    assert character.secret("OPENAI_API_KEY") == "sk-test-not-a-real-key-0000"
    assert character.secret("MISSING") is None
    shown = repr(character) + str(character) + character.model_dump_json()
    assert "sk-test-not-a-real-key" not in shown
    assert "discord-secret-token" not in shown


def test_elizaos_v1_file_loads_unchanged() -> None:
    path = DATA / "eliza_character_v1.json"
    character = load_character(path)
    assert character.name == "Juniper"
    assert character.plugins == [
        "@elizaos/plugin-sql",
        "@elizaos/plugin-openai",
        "@elizaos/plugin-discord",
        "@elizaos/plugin-bootstrap",
    ]
    # v1 names the speaker `name`; it means the same as v0's `user`.
    assert [turn.user for turn in character.message_examples[0]] == ["{{name1}}", "Juniper"]
    reply = character.message_examples[0][1].content
    assert (reply.model_extra or {})["actions"] == ["REPLY"]
    assert (reply.model_extra or {})["providers"] == ["RECENT_MESSAGES"]
    assert character.settings["avatar"] == "https://example.com/juniper.png"
    assert character.settings["discord"] == {"shouldRespondOnlyToMentions": True}
    assert character.secret("DISCORD_API_TOKEN") == "v1-discord-secret-2222"
    assert {"directory": "knowledge/plants", "shared": False} in character.knowledge
    assert character.lore == [] and character.clients == []


@pytest.mark.parametrize("bio", ["One line of bio.", ["One line of bio."]])
def test_bio_as_string_or_list(tmp_path: Path, bio: str | list[str]) -> None:
    character = load_character(write(tmp_path, {**MINIMAL, "bio": bio}))
    assert character.bio == ["One line of bio."]


def test_unknown_fields_are_kept_at_every_level(tmp_path: Path) -> None:
    data = {
        **MINIMAL,
        "futureField": {"a": 1},
        "style": {"all": ["calm"], "voiceTone": "low"},
        "messageExamples": [
            [{"user": "a", "content": {"text": "hi", "mood": "happy"}, "emote": "wave"}]
        ],
    }
    character = load_character(write(tmp_path, data))
    assert (character.model_extra or {})["futureField"] == {"a": 1}
    assert (character.style.model_extra or {})["voiceTone"] == "low"
    turn = character.message_examples[0][0]
    assert (turn.model_extra or {})["emote"] == "wave"
    assert (turn.content.model_extra or {})["mood"] == "happy"
    # Dumped by alias, the file comes back out as it went in.
    assert character.model_dump(by_alias=True)["futureField"] == {"a": 1}


def test_minimal_character_gets_defaults(tmp_path: Path) -> None:
    character = load_character(write(tmp_path, {"name": "Solo"}))
    assert character.bio == [] and character.message_examples == []
    assert character.style.all == [] and character.settings == {} and character.templates == {}


def test_accepts_a_string_path_and_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_text(json.dumps(MINIMAL), encoding="utf-8-sig")
    assert load_character(str(path)).name == "Tess"


def test_model_validate_by_python_names() -> None:
    character = Character(name="Code", message_examples=[[{"user": "a", "content": {}}]])
    assert character.message_examples[0][0].content.text == ""


def test_broken_json_names_the_file_and_the_place(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "Tess",\n  "bio": [,]\n}', encoding="utf-8")
    with pytest.raises(CharacterError) as caught:
        load_character(path)
    message = str(caught.value)
    assert message.startswith(f"character file {path}: not valid JSON at line 2")
    assert "\n" not in message
    assert caught.value.__cause__ is None


def test_missing_content_names_the_file_and_the_json_field(tmp_path: Path) -> None:
    data = {
        "name": "Tess",
        "messageExamples": [[{"user": "a", "content": {"text": "hi"}}, {"user": "b"}]],
    }
    path = write(tmp_path, data)
    with pytest.raises(CharacterError) as caught:
        load_character(path)
    assert str(caught.value) == (
        f"character file {path}: field messageExamples.0.1.content: Field required"
    )


def test_missing_speaker_mentions_both_spellings(tmp_path: Path) -> None:
    path = write(tmp_path, {"name": "Tess", "messageExamples": [[{"content": {"text": "hi"}}]]})
    with pytest.raises(CharacterError, match=r"messageExamples\.0\.0\.user \(or name\): Field"):
        load_character(path)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"bio": ["x"]}, "name: Field required"),
        ({"name": ""}, "name: String should have at least 1 character"),
        ({"name": "  "}, "name: must not be blank"),
        ({"name": "T", "postExamples": [1]}, "postExamples.0: Input should be a valid string"),
        ({"name": "T", "style": {"chat": [{"x": 1}]}}, "style.chat.0: Input should be a valid"),
        ({"name": "T", "templates": {"factsTemplate": 3}}, "templates.factsTemplate: Input"),
        ({"name": "T", "messageExamples": {"user": "a"}}, "messageExamples: Input should be a"),
    ],
)
def test_invalid_field_names_the_json_key(tmp_path: Path, data: dict[str, Any], field: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(CharacterError) as caught:
        load_character(path)
    assert str(caught.value).startswith(f"character file {path}: field {field}")
    assert "\n" not in str(caught.value)


def test_several_problems_are_counted(tmp_path: Path) -> None:
    path = write(tmp_path, {"name": 5, "topics": [1, 2]})
    with pytest.raises(CharacterError, match=r"\(and 2 more\)$"):
        load_character(path)


def test_missing_file_and_wrong_top_level(tmp_path: Path) -> None:
    with pytest.raises(CharacterError, match=r"nope\.json: not found"):
        load_character(tmp_path / "nope.json")
    with pytest.raises(CharacterError, match=r"list\.json: expected a JSON object"):
        load_character(write(tmp_path, [MINIMAL], "list.json"))
    with pytest.raises(CharacterError, match="cannot read it"):
        load_character(tmp_path)

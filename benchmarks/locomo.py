"""The LoCoMo long-term conversational memory benchmark: loading and evidence ids.

LoCoMo (Maharana et al., 2024) is a JSON list of conversations between two speakers, over
many dated sessions, with questions whose evidence is a list of turn ids (`"D{session}:{turn}"`).
The file is validated with pydantic on the way in and handed on as plain dataclasses. Only
the parts the recall benchmark needs are kept: turns, questions and observations (the
per-session facts a careful reader would extract, each with the turns it came from).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# Categories with retrievable evidence; 5 is adversarial (speakers swapped on purpose).
RETRIEVAL_CATEGORIES: frozenset[int] = frozenset({1, 2, 3, 4})
CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


class LocomoError(ValueError):
    """The file is not LoCoMo data; the message says where."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    index: int  # 1-based within its session
    speaker: str
    text: str
    caption: str | None = None  # BLIP caption of a shared image
    image_url: str | None = None


@dataclass(frozen=True)
class Session:
    number: int
    started_at: datetime  # UTC; LoCoMo gives local wall-clock times without a zone
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]  # normalised turn ids
    answer: str | None = None


@dataclass(frozen=True)
class Observation:
    """A fact about `speaker` learned in `session`, from the turns in `evidence`."""

    text: str
    speaker: str
    session: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    observations: tuple[Observation, ...]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]

    @property
    def speakers(self) -> tuple[str, str]:
        return self.speaker_a, self.speaker_b


def normalise_evidence(raw: str) -> list[str]:
    """Turn ids in a raw evidence entry, normalised to `D{n}:{k}`.

    A few entries are malformed: `"D8:6; D9:17"` holds two ids, `"D:11:26"` has a stray
    colon, `"D30:05"` a leading zero. Split on `;` and spaces, drop the stray colon and
    leading zeros, and drop what still does not parse (`"D"`).
    """
    found = []
    for piece in re.split(r"[;\s]+", raw.strip()):
        match = _EVIDENCE.fullmatch(piece)
        if match is None:
            continue
        session, turn = int(match.group(1)), int(match.group(2))
        if session >= 1 and turn >= 1:
            found.append(f"D{session}:{turn}")
    return found


def evidence_ids(raw: list[str]) -> tuple[str, ...]:
    """Every normalised id of a question's evidence list, each once, in order."""
    return tuple(dict.fromkeys(i for entry in raw for i in normalise_evidence(entry)))


def parse_session_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=UTC)


# --------------------------------------------------------------------------------------------
# The file, validated


class _Raw(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _RawTurn(_Raw):
    speaker: str
    dia_id: str
    text: str
    blip_caption: str | None = None
    img_url: list[str] | str | None = None


class _RawQuestion(_Raw):
    question: str
    category: int
    evidence: list[str] = Field(default_factory=list)
    answer: str | None = None

    @field_validator("answer", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        # Some answers are numbers (a year).
        return None if value is None else str(value)


class _RawSample(_Raw):
    sample_id: str
    conversation: dict[str, Any]
    qa: list[_RawQuestion] = Field(default_factory=list)
    observation: dict[str, dict[str, list[list[Any]]]] = Field(default_factory=dict)


def load_locomo(path: Path) -> list[Conversation]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LocomoError(f"{path}: cannot read LoCoMo data ({error})") from None
    if not isinstance(raw, list):
        raise LocomoError(f"{path}: expected a JSON list of conversations")
    conversations = []
    for position, item in enumerate(raw):
        try:
            sample = _RawSample.model_validate(item)
            conversations.append(_conversation(sample))
        except (ValidationError, ValueError, KeyError, TypeError) as error:
            raise LocomoError(f"{path}: conversation #{position}: {error}") from None
    return conversations


def _conversation(sample: _RawSample) -> Conversation:
    body = sample.conversation
    sessions = []
    for key, value in body.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is None or not isinstance(value, list) or not value:
            continue
        number = int(match.group(1))
        started = parse_session_date(str(body[f"{key}_date_time"]))
        turns = tuple(
            _turn(_RawTurn.model_validate(t), number, index)
            for index, t in enumerate(value, start=1)
        )
        sessions.append(Session(number=number, started_at=started, turns=turns))
    sessions.sort(key=lambda s: s.number)
    questions = tuple(
        Question(q.question, q.category, evidence_ids(q.evidence), q.answer) for q in sample.qa
    )
    return Conversation(
        sample_id=sample.sample_id,
        speaker_a=str(body["speaker_a"]),
        speaker_b=str(body["speaker_b"]),
        sessions=tuple(sessions),
        questions=questions,
        observations=tuple(_observations(sample.observation)),
    )


def _turn(raw: _RawTurn, session: int, index: int) -> Turn:
    if isinstance(raw.img_url, list):  # some turns list their images: keep the first
        url = raw.img_url[0] if raw.img_url else None
    else:
        url = raw.img_url
    return Turn(
        # By definition D{N}:{k} is the k-th turn of session N: the position is the id.
        dia_id=f"D{session}:{index}",
        session=session,
        index=index,
        speaker=raw.speaker,
        text=raw.text,
        caption=raw.blip_caption or None,
        image_url=url or None,
    )


def _observations(raw: dict[str, dict[str, list[list[Any]]]]) -> list[Observation]:
    found = []
    for key, by_speaker in raw.items():
        match = re.fullmatch(r"session_(\d+)_observation", key)
        if match is None:
            continue
        for speaker, items in by_speaker.items():
            for item in items:
                if len(item) < 2 or not isinstance(item[0], str):
                    continue
                ids = item[1] if isinstance(item[1], list) else [item[1]]
                evidence = evidence_ids([str(i) for i in ids])
                found.append(Observation(item[0], speaker, int(match.group(1)), evidence))
    return found

"""A real Mnemo for tests: real MongoDB wire protocol, real Chroma, the real embedder,
with a scripted model and the plugins you choose.

    async with open_test_app(tmp_path, plugins=[my_plugin], model=ScriptedModel(...)) as app:
        chat = TestChat(app.runtime)
        await chat.say("Hi, I'm Sarah")

Plugin authors use this to test an evaluator the way it runs.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pymongo import monitoring

from bot.app.composition import App, open_app
from bot.config.base import BUILTIN_CHARACTERS
from bot.config.settings import (
    EmbeddingSettings,
    ModelSettings,
    PlatformSettings,
    RuntimeSettings,
    Settings,
    StorageSettings,
)
from bot.domain.records import (
    Account,
    Content,
    Memory,
    Room,
    RoomKind,
    account_id,
    message_id,
    room_id,
    utcnow,
    world_id,
)
from bot.knowledge.embeddings import EmbedderError
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.llm.base import LanguageModel
from bot.ops.spend import flush_usage
from bot.plugin.api import Plugin
from bot.plugin.loading import Registry
from bot.runtime.agent import AgentRuntime, HandleResult

# The checkout's character, or the copy shipped in the wheel: a plugin author's tests run
# against an installed Mnemo, with no checkout.
DEFAULT_CHARACTER = BUILTIN_CHARACTERS / "mnemo.json"


def test_settings(
    data_dir: Path,
    *,
    mongodb_uri: str | None = None,
    model_dir: Path | None = None,
    character: Path = DEFAULT_CHARACTER,
    evaluator_selection: Literal["llm", "all"] = "llm",
    rate_limit_per_minute: int = 0,
    # Above the product's 4,000: the platform tests send longer replies to test splitting.
    reply_max_chars: int = 100_000,
    evaluation_max_attempts: int = 5,
    evaluation_retry_seconds: float = 5.0,
    answer_window_minutes: float = 5.0,
    evaluator_timeout: float = 30.0,
    mongodb_timeout_seconds: float = 5.0,
    journal_max_mb: float = 50.0,
    store_call_seconds: float = 15.0,
    metrics_port: int | None = None,
    stream_replies: bool = True,
    language: str = "en",
) -> Settings:
    """Settings for a test: everything under `data_dir`, nothing read from the environment
    except MNEMO_TEST_MONGODB_URI / MNEMO_TEST_MODEL_DIR as defaults."""
    uri = mongodb_uri or os.environ.get("MNEMO_TEST_MONGODB_URI")
    folder = model_dir or (
        Path(os.environ["MNEMO_TEST_MODEL_DIR"]) if os.environ.get("MNEMO_TEST_MODEL_DIR") else None
    )
    settings = Settings(
        model=ModelSettings.model_construct(
            openai_api_key=None,
            openai_base_url=None,
            small_model="small",
            large_model="large",
            timeout_seconds=5.0,
            max_retries=0,
        ),
        embedding=EmbeddingSettings.model_construct(model="local", model_dir=folder, batch_size=64),
        storage=StorageSettings.model_construct(
            mongodb_uri=None if uri is None else _secret(uri),
            mongodb_database=f"mnemo_test_{os.getpid()}_{abs(hash(data_dir)) % 10**8}",
            chroma_host=None,
            chroma_port=8000,
            data_dir=data_dir,
            mongodb_timeout_seconds=mongodb_timeout_seconds,
            journal_max_mb=journal_max_mb,
            store_call_seconds=store_call_seconds,
        ),
        platforms=PlatformSettings.model_construct(
            discord_token=None,
            telegram_token=None,
            admin_ids=[],
            rate_limit_per_minute=rate_limit_per_minute,
        ),
        runtime=RuntimeSettings.model_construct(
            character=character,
            evaluator_selection=evaluator_selection,
            evaluator_timeout=evaluator_timeout,
            reply_max_chars=reply_max_chars,
            evaluation_max_attempts=evaluation_max_attempts,
            evaluation_retry_seconds=evaluation_retry_seconds,
            answer_window_minutes=answer_window_minutes,
            stream_replies=stream_replies,
            language=language,  # MNEMO_LANGUAGE
            plugins_dir=data_dir / "no-plugins",
            builtin_plugins=False,
            disabled_plugins=[],
            log_level="INFO",
        ),
    )
    if metrics_port is None:
        return settings
    # 0: a free port, so a test can scrape /metrics.
    return dataclasses.replace(
        settings, ops=settings.ops.model_copy(update={"metrics_port": metrics_port})
    )


test_settings.__test__ = False  # type: ignore[attr-defined]  # a helper, not a pytest test


def _secret(value: str) -> SecretStr:
    return SecretStr(value)


# One per test process: every app a test run boots (hundreds) shares the loaded ONNX model
# instead of loading its own (about half a second each). The model is read-only and its use
# serialised; each app's embedder still counts into that app's ledger (`counting_into`).
@functools.cache
def local_model(folder: Path, batch_size: int = 64) -> OnnxEmbedder:
    """This process's one copy of the local model in `folder` (loaded at its first embed)."""
    return OnnxEmbedder(folder, batch_size=batch_size)


def shared_local_embedder(embedding: EmbeddingSettings) -> OnnxEmbedder | None:
    """This process's loaded copy of the local model `embedding` names, or None when the
    settings name another model or a folder without one (the app then does as `mnemo run`
    does: looks elsewhere, or fails with the operator's message)."""
    if embedding.model != "local" or embedding.model_dir is None:
        return None
    try:
        return local_model(embedding.model_dir.resolve(), embedding.batch_size)
    except EmbedderError:
        return None


@asynccontextmanager
async def open_test_app(
    data_dir: Path,
    *,
    plugins: Sequence[Plugin] = (),
    model: LanguageModel | None = None,
    settings: Settings | None = None,
    plugin_settings: Mapping[str, BaseModel] | None = None,
    keep_database: bool = False,
    mongo_listeners: Sequence[monitoring.CommandListener] = (),
    **setting_overrides: object,
) -> AsyncIterator[App]:
    """A running app with exactly `plugins`; the database is dropped afterwards unless
    `keep_database` (a later app on the same `data_dir` then starts where this one stopped).
    `mongo_listeners` watch every command the app's MongoDB client sends. The local embedding
    model is loaded once per process and shared by every app opened here.

    `plugin_settings` maps a plugin's name to its settings, instead of reading them from the
    environment (e.g. `{"questions": QuestionSettings(min_chars=20)}`)."""
    registry = Registry()
    for plugin in plugins:
        registry.add(plugin, plugin.name)
    for name, chosen in (plugin_settings or {}).items():
        registry.use_settings(name, chosen)
    settings = settings or test_settings(data_dir, **setting_overrides)  # type: ignore[arg-type]
    async with open_app(
        settings,
        model=model,
        registry=registry,
        mongo_listeners=mongo_listeners,
        local_embedder=shared_local_embedder(settings.embedding),
    ) as app:
        try:
            yield app
        finally:
            await app.runtime.evaluations.stop(grace=5)
            if not keep_database:
                # Written now, so the shutdown's write does not bring the database back.
                await flush_usage(app.ledger, app.store)
                await app.store.client.drop_database(settings.storage.mongodb_database)


@dataclass
class TestChat:
    """A person talking in a room, as an adapter would present them to the runtime."""

    __test__ = False  # not a pytest test class, despite the name

    runtime: AgentRuntime
    name: str = "Sarah"
    platform: str = "test"
    chat: str = "chat-1"
    world: str | None = None
    kind: RoomKind = "dm"
    replies: list[str] = field(default_factory=list)
    _sent: int = 0

    def __post_init__(self) -> None:
        self.account = Account(
            id=account_id(self.platform, self.name),
            platform=self.platform,
            platform_id=self.name,
            name=self.name,
        )
        self.room = Room(
            id=room_id(self.platform, self.chat),
            world_id=world_id(self.platform, self.world or self.chat),
            platform=self.platform,
            kind=self.kind,
            name=self.chat,
        )

    # `fields`: any other Memory field, as the test needs it.
    def message(self, text: str, *, number: int | None = None, **fields: Any) -> Memory:
        if number is None:
            self._sent += 1
            number = self._sent
        return Memory(
            id=message_id(self.platform, self.chat, f"{self.name}-{number}"),
            user_id=self.account.id,
            agent_id=self.runtime.agent_id,
            room_id=self.room.id,
            world_id=self.room.world_id,
            content=Content(text=text, source=self.platform),
            # Strictly increasing, so order in the room is the order of the script.
            created_at=utcnow() + timedelta(milliseconds=number),
            **fields,
        )

    async def say(self, text: str, **fields: Any) -> HandleResult:
        return await self.send(self.message(text, **fields))

    async def send(self, memory: Memory) -> HandleResult:
        async def collect(content: Content) -> None:
            self.replies.append(content.text)

        return await self.runtime.handle(memory, collect, account=self.account, room=self.room)

    async def settle(self, timeout: float = 60.0) -> None:
        """Wait until every evaluation of this room has run."""
        assert await self.runtime.evaluations.join(self.room.id, timeout), "evaluations hung"

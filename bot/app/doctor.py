"""`mnemo doctor`: check every configured part for real, one line each, and say which failed.

Each check talks to the real thing: the character file is parsed, plugins are loaded with their
settings, MongoDB and Chroma answer a query, the embedder embeds a text, the model answers one
tiny prompt, and each platform token that is set is tried (Telegram `getMe`, a Discord log-in).
A failing check does not stop the others. Messages are one line and never hold a secret.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from bot.config.settings import Settings

# The model check is one tiny call: no retries, and a short wait for an unreachable server.
_MODEL_TIMEOUT_SECONDS = 20.0
_PROMPT = "Reply with the single word OK."


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class PlatformEndpoints:
    """Where the platform APIs are; None is the real service (tests pass local fakes)."""

    telegram_base_url: str | None = None


def _one_line(error: BaseException, secrets: list[str]) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else type(error).__name__
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    return message


class Doctor:
    def __init__(
        self,
        settings: Settings,
        *,
        env_file: Path | None = None,
        endpoints: PlatformEndpoints | None = None,
        secrets: list[str] | None = None,
    ) -> None:
        self.settings = settings
        self.env_file = env_file
        self.endpoints = endpoints or PlatformEndpoints()
        self.secrets = secrets or []

    async def run(self, out: TextIO) -> bool:
        """Run every check, printing a line as each ends; True when all passed."""
        checks: list[tuple[str, Callable[[], Awaitable[str]]]] = [
            ("character", self.character),
            ("plugins", self.plugins),
            ("mongodb", self.mongodb),
            ("chroma", self.chroma),
            ("embedder", self.embedder),
            ("model", self.model),
        ]
        if self.settings.platforms.telegram_token is not None:
            checks.append(("telegram", self.telegram))
        if self.settings.platforms.discord_token is not None:
            checks.append(("discord", self.discord))
        failed = 0
        for name, check in checks:
            result = await self._run_one(name, check)
            status = "ok  " if result.ok else "FAIL"
            print(f"{status} {result.name:<10} {result.detail}", file=out, flush=True)
            failed += not result.ok
        print(
            "all checks passed" if not failed else f"{failed} check(s) failed",
            file=out,
            flush=True,
        )
        return not failed

    async def _run_one(self, name: str, check: Callable[[], Awaitable[str]]) -> CheckResult:
        try:
            return CheckResult(name, True, await check())
        except Exception as error:  # every failure is reported, the other checks still run
            return CheckResult(name, False, _one_line(error, self.secrets))

    # -- the checks ---------------------------------------------------------------------------

    async def character(self) -> str:
        from bot.domain.characters import load_character

        path = self.settings.runtime.character
        return f"{load_character(path).name} ({path})"

    async def plugins(self) -> str:
        from bot.plugin.loading import discover

        registry = discover(
            self.settings.runtime.plugins_dir,
            disabled=self.settings.runtime.disabled_plugins,
            env_file=self.env_file,
        )
        names = ", ".join(plugin.name for plugin in registry.plugins) or "none"
        return f"{names} (settings valid)"

    async def mongodb(self) -> str:
        from bot.storage.bundled.server import EmbeddedMongo

        storage = self.settings.storage
        if storage.mongodb_uri is None:
            async with EmbeddedMongo(storage.data_dir) as server:
                queue = await self._evaluation_queue(server.uri)
            return f"bundled server in {storage.data_dir / 'mongo'}; evaluations: {queue}"
        queue = await self._evaluation_queue(storage.mongodb_uri.get_secret_value())
        return f"MONGODB_URI answers; evaluations: {queue}"

    async def _evaluation_queue(self, uri: str) -> str:
        """Ping the database and describe the evaluation jobs an operator may need to see."""
        from bot.queue.worker import describe_queue
        from bot.storage.jobs import JobStore
        from bot.storage.mongo import MongoStore

        store = MongoStore.from_uri(uri, self.settings.storage.mongodb_database)
        try:
            await store.ping()
            return describe_queue(await JobStore(store.db).counts())
        finally:
            await store.close()

    async def chroma(self) -> str:
        from bot.knowledge.vectors import VectorIndex

        storage = self.settings.storage
        if storage.chroma_host:
            index = VectorIndex.remote(storage.chroma_host, storage.chroma_port)
            where = f"server {storage.chroma_host}:{storage.chroma_port}"
        else:
            index = VectorIndex.persistent(str(storage.data_dir / "chroma"))
            where = f"folder {storage.data_dir / 'chroma'}"
        try:
            facts = await index.count("facts")
        finally:
            await index.close()
        return f"{where} ({facts} fact vectors)"

    async def embedder(self) -> str:
        from bot.knowledge.embedder_factory import make_embedder

        embedder = make_embedder(self.settings.embedding, self.settings.model, None)
        [vector] = await embedder.embed(["doctor check"])
        return f"{embedder.name}, {len(vector)} dimensions"

    async def model(self) -> str:
        from bot.app.model_choice import make_model
        from bot.llm.accounting import UsageLedger
        from bot.llm.base import ModelClass

        settings = self.settings.model
        if settings.offline:
            return "offline model (no OPENAI_API_KEY or OPENAI_BASE_URL set)"
        quick = settings.model_copy(
            update={
                "max_retries": 0,
                "timeout_seconds": min(settings.timeout_seconds, _MODEL_TIMEOUT_SECONDS),
            }
        )
        model = make_model(quick, UsageLedger())
        started = time.perf_counter()
        try:
            await model.generate_text(
                _PROMPT, model_class=ModelClass.SMALL, task="doctor", max_tokens=5
            )
        finally:
            await model.close()
        took = time.perf_counter() - started
        return f"{settings.small_model} answered in {took:.1f} s"

    async def telegram(self) -> str:
        import telegram

        token = self.settings.platforms.telegram_token
        assert token is not None
        options: dict[str, Any] = {}
        if self.endpoints.telegram_base_url is not None:
            options["base_url"] = self.endpoints.telegram_base_url
        bot = telegram.Bot(token.get_secret_value(), **options)
        try:
            async with bot:  # initialize() calls getMe
                me = await bot.get_me()
        except telegram.error.InvalidToken:
            raise ValueError("TELEGRAM_TOKEN was refused by Telegram (getMe)") from None
        except telegram.error.NetworkError as error:
            raise ValueError(f"cannot reach the Telegram Bot API: {error}") from None
        return f"@{me.username} (getMe)"

    async def discord(self) -> str:
        import discord

        token = self.settings.platforms.discord_token
        assert token is not None
        client = discord.Client(intents=discord.Intents.none())
        try:
            await client.login(token.get_secret_value())
            user = client.user
        except discord.LoginFailure:
            raise ValueError("DISCORD_TOKEN was refused by Discord (log-in)") from None
        finally:
            await client.close()
        return f"{user} (log-in)"

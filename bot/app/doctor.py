"""`mnemo doctor`: check every configured part for real, one line each, and say which failed.

Each check talks to the real thing: the data folder takes a file, the character file is parsed,
plugins are loaded with their settings, every MNEMO_* name set is one something reads, MongoDB
and Chroma answer a query, the embedder embeds a text, each model (SMALL and LARGE) answers one
tiny prompt, and each platform token that is set is tried (Telegram `getMe` at the configured
Bot API server, a Discord log-in). A failing check does not stop the others. Messages are one
line, say what to do about a failure, and never hold a secret; an unknown setting name is a
warning, not a failure. The doctor's lines are all it prints: what the libraries it drives log
or warn meanwhile (discord.py's "Guilds intent seems to be disabled" for the doctor's own
intent-less client) goes to the log file only.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from pydantic_settings import BaseSettings

from bot.config.settings import Settings, check_data_dir, setting_names, unknown_setting_warnings

# The model check is one tiny call: no retries, and a short wait for an unreachable server.
_MODEL_TIMEOUT_SECONDS = 20.0
_PROMPT = "Reply with the single word OK."
# A 32x32 white PNG: sent with the LARGE call when MNEMO_MODEL_SEES_IMAGES says the model
# sees images, so a text-only model fails here rather than on the first photo.
_WHITE_SQUARE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAAAJklEQVR42u3NMQ0AAAwDoPo33arYsQQMkB6LQCAQCAQCgUAg+BIMi1X0ptsIcT0AAAAASUVORK5CYII="
)


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class PlatformEndpoints:
    """Where the platform APIs are; None is the real service (tests pass local fakes)."""

    telegram_base_url: str | None = None


class Advised(Exception):
    """A check's failure whose message already says what to do."""


# What to do when a check fails and its error does not say (the message names the cause).
_ADVICE = {
    "data": "set MNEMO_DATA_DIR to a folder Mnemo may write in",
    "character": "fix the file, or set MNEMO_CHARACTER to another (a path, or a name such as "
    "archivist)",
    "plugins": "fix the plugin it names, or leave it out with MNEMO_DISABLED_PLUGINS=<name>",
    "mongodb": "the bundled server's log is nx-27017.log in MNEMO_DATA_DIR/mongo; set "
    "MONGODB_URI to use a MongoDB of your own",
    "chroma": "start the Chroma server and check CHROMA_HOST and CHROMA_PORT, or unset "
    "CHROMA_HOST to keep the vectors in MNEMO_DATA_DIR",
    "embedder": "check MNEMO_EMBEDDING_MODEL and MNEMO_EMBEDDING_MODEL_DIR",
    "model": "check OPENAI_BASE_URL, OPENAI_API_KEY and the model names",
    "telegram": "check TELEGRAM_TOKEN (from @BotFather) and MNEMO_TELEGRAM_API_URL",
    "discord": "check DISCORD_TOKEN (the Developer Portal: your application, Bot, Reset Token)",
}


@contextlib.contextmanager
def _only_the_doctors_lines() -> Iterator[None]:
    """Keep what the checked libraries log and warn off the console while a check runs: the
    report is the doctor's lines. The log file (a FileHandler) still gets every record."""
    root = logging.getLogger()
    console = [
        handler
        for handler in root.handlers
        if isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
    ]
    levels = [handler.level for handler in console]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for handler in console:
            handler.setLevel(logging.CRITICAL + 1)
        try:
            yield
        finally:
            for handler, level in zip(console, levels, strict=True):
                handler.setLevel(level)


def _model_advice(failures: str) -> str:
    """What to do about the model endpoint's answers, from what each refusal said."""
    if "could not connect" in failures or "timed out" in failures.lower():
        return "check OPENAI_BASE_URL and that the server there is running"
    if "HTTP 401" in failures or "HTTP 403" in failures:
        return "check OPENAI_API_KEY: the endpoint refused it"
    if "HTTP 404" in failures:
        return "check the model names against the models the endpoint serves"
    return _ADVICE["model"]


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
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.env_file = env_file
        self.endpoints = endpoints or PlatformEndpoints()
        self.secrets = secrets or []
        self.environ = os.environ if environ is None else environ
        # The loaded plugins' settings models, known once the plugins check ran: the names
        # they read are valid MNEMO_* names too.
        self._plugin_settings: list[type[BaseSettings]] = []

    async def run(self, out: TextIO) -> bool:
        """Run every check, printing a line as each ends; True when all passed."""
        checks: list[tuple[str, Callable[[], Awaitable[str]]]] = [
            ("data", self.data),
            ("character", self.character),
            ("plugins", self.plugins),
            ("settings", self.setting_names),
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
        warned = 0
        for name, check in checks:
            if name == "settings":
                warnings = self.unknown_names()
                for warning in warnings:
                    print(f"warn {name:<10} {warning}", file=out, flush=True)
                warned += len(warnings)
                if warnings:
                    continue
            result = await self._run_one(name, check)
            status = "ok  " if result.ok else "FAIL"
            print(f"{status} {result.name:<10} {result.detail}", file=out, flush=True)
            failed += not result.ok
        summary = "all checks passed" if not failed else f"{failed} check(s) failed"
        if warned:
            summary += f", {warned} warning(s)"
        print(summary, file=out, flush=True)
        return not failed

    async def _run_one(self, name: str, check: Callable[[], Awaitable[str]]) -> CheckResult:
        try:
            with _only_the_doctors_lines():
                return CheckResult(name, True, await check())
        except Exception as error:  # every failure is reported, the other checks still run
            line = _one_line(error, self.secrets).rstrip(":;. ")
            if not isinstance(error, Advised) and name in _ADVICE:
                end = " " if line.endswith(("?", "!")) else ". "
                line = f"{line}{end}To fix: {_ADVICE[name]}"
            return CheckResult(name, False, line)

    # -- the checks ---------------------------------------------------------------------------

    async def data(self) -> str:
        data_dir = self.settings.storage.data_dir
        check_data_dir(data_dir)
        return f"{data_dir} (writable)"

    def unknown_names(self) -> list[str]:
        known = setting_names(self._plugin_settings)
        return unknown_setting_warnings(self.env_file, known, self.environ)

    async def setting_names(self) -> str:
        return "every MNEMO_* name set is one Mnemo or a loaded plugin reads"

    async def character(self) -> str:
        from bot.domain.characters import load_character

        path = self.settings.runtime.character
        return f"{load_character(path).name} ({path})"

    async def plugins(self) -> str:
        from bot.plugin.loading import PluginError, discover

        try:
            registry = discover(
                self.settings.runtime.plugin_folders,
                disabled=self.settings.runtime.disabled_plugins,
                env_file=self.env_file,
            )
        except PluginError as error:
            if str(error).startswith("setting MNEMO_DISABLED_PLUGINS"):  # a name, not a plugin
                raise Advised(
                    f"{error}. To fix: name known plugins only in MNEMO_DISABLED_PLUGINS"
                ) from None
            raise
        self._plugin_settings = [
            plugin.settings_model
            for plugin in registry.plugins
            if isinstance(plugin.settings_model, type)
            and issubclass(plugin.settings_model, BaseSettings)
        ]
        return f"{registry.loaded_from()}; settings valid"

    async def mongodb(self) -> str:
        from bot.storage.bundled.server import EmbeddedMongo

        storage = self.settings.storage
        if storage.mongodb_uri is None:
            async with EmbeddedMongo(storage.data_dir) as server:
                queue = await self._evaluation_queue(server.uri, bundled=True)
            return f"bundled server in {storage.data_dir / 'mongo'}; evaluations: {queue}"
        queue = await self._evaluation_queue(storage.mongodb_uri.get_secret_value(), bundled=False)
        return f"MONGODB_URI answers; evaluations: {queue}"

    async def _evaluation_queue(self, uri: str, *, bundled: bool) -> str:
        """Ping the database and describe the evaluation jobs an operator may need to see."""
        from bot.queue.worker import describe_queue
        from bot.storage.jobs import JobStore
        from bot.storage.mongo import MongoStore, StorageUnavailable
        from bot.storage.rejects import describe_rejects

        storage = self.settings.storage
        store = MongoStore.from_uri(
            uri,
            storage.mongodb_database,
            # The wait `mnemo run` gives a message before journaling it: the same answer here.
            server_selection_timeout_ms=int(storage.mongodb_timeout_seconds * 1000),
            bundled=bundled,
        )
        try:
            try:
                await store.ping()
            except StorageUnavailable as error:  # it says what to do (bot/storage/mongo.py)
                raise Advised(str(error)) from None
            queue = describe_queue(await JobStore(store.db).counts())
            # What the model said that was not stored, in every world (bot/storage/rejects.py).
            return f"{queue}; {describe_rejects(await store.rejects.counts()).lower()}"
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
        from bot.knowledge.embeddings import EmbedderError

        try:
            embedder = make_embedder(self.settings.embedding, self.settings.model, None)
            [vector] = await embedder.embed(["doctor check"])
        except EmbedderError as error:
            if "set MNEMO_EMBEDDING_MODEL" in str(error):  # it says which setting to set
                raise Advised(str(error)) from None
            raise
        return f"{embedder.name}, {len(vector)} dimensions"

    async def model(self) -> str:
        from bot.app.model_choice import make_model
        from bot.domain.images import ImageBytes
        from bot.llm.accounting import UsageLedger
        from bot.llm.base import ModelClass, ModelRequest

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
        # Both: replies use LARGE, evaluations SMALL; a wrong MNEMO_LARGE_MODEL would pass a
        # SMALL-only check and then fail every reply. One call when both name one model.
        classes = {
            settings.small_model: (ModelClass.SMALL, "MNEMO_SMALL_MODEL"),
            settings.large_model: (ModelClass.LARGE, "MNEMO_LARGE_MODEL"),
        }
        answered: list[str] = []
        refused: list[str] = []
        sees_images = self.settings.platforms.model_sees_images
        try:
            for name, (model_class, setting) in classes.items():
                with_image = sees_images and model_class == ModelClass.LARGE
                images = (ImageBytes(_WHITE_SQUARE, "image/png"),) if with_image else ()
                started = time.perf_counter()
                try:
                    await model.generate(
                        ModelRequest(
                            _PROMPT,
                            model_class=model_class,
                            task="doctor",
                            max_tokens=5,
                            images=images,
                        )
                    )
                except Exception as error:  # each model is reported, the other still tried
                    told = " (given an image: MNEMO_MODEL_SEES_IMAGES=true)" if images else ""
                    refused.append(f"{setting}={name}{told}: {_one_line(error, self.secrets)}")
                    continue
                seen = " with an image" if images else ""
                answered.append(f"{name} answered{seen} in {time.perf_counter() - started:.1f} s")
        finally:
            await model.close()
        if refused:
            failures = "; ".join(refused)
            raise Advised(f"{failures}. To fix: {_model_advice(failures)}")
        return "; ".join(answered)

    async def telegram(self) -> str:
        import telegram

        token = self.settings.platforms.telegram_token
        assert token is not None
        # The Bot API server the adapter uses: MNEMO_TELEGRAM_API_URL (a self-hosted server),
        # else Telegram's.
        base_url = self.endpoints.telegram_base_url or self.settings.platforms.telegram_api_url
        options: dict[str, Any] = {}
        if base_url is not None:
            base = base_url.rstrip("/")
            options = {"base_url": base, "base_file_url": base.replace("/bot", "/file/bot")}
        server = urlsplit(base_url).netloc if base_url is not None else "api.telegram.org"
        bot = telegram.Bot(token.get_secret_value(), **options)
        try:
            async with bot:  # initialize() calls getMe
                me = await bot.get_me()
        except telegram.error.InvalidToken:
            raise Advised(
                f"TELEGRAM_TOKEN was refused by {server} (getMe). To fix: copy the bot's token "
                "from @BotFather (/mybots, API Token) into TELEGRAM_TOKEN"
            ) from None
        except telegram.error.NetworkError as error:
            raise Advised(
                f"cannot reach the Telegram Bot API at {server}: {error}. To fix: check this "
                "machine's network, or MNEMO_TELEGRAM_API_URL if you run your own Bot API server"
            ) from None
        return f"@{me.username} (getMe at {server})"

    async def discord(self) -> str:
        import aiohttp
        import discord

        token = self.settings.platforms.discord_token
        assert token is not None
        client = discord.Client(intents=discord.Intents.none())
        try:
            await client.login(token.get_secret_value())
            user = client.user
        except discord.LoginFailure:
            raise Advised(
                "DISCORD_TOKEN was refused by Discord (log-in). To fix: in the Developer Portal "
                "open your application, Bot, Reset Token, and copy the new token into "
                "DISCORD_TOKEN"
            ) from None
        except (OSError, aiohttp.ClientError) as error:
            raise Advised(
                f"cannot reach Discord ({type(error).__name__}). To fix: check this machine's "
                "network"
            ) from None
        finally:
            await client.close()
        return f"{user} (log-in)"

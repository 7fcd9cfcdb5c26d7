"""Builds a running Mnemo from settings: stores, models, plugins and the runtime.

Zero set-up: no MONGODB_URI starts the bundled server, no CHROMA_HOST uses a local
PersistentClient, no model key selects the offline model. Everything opened here is closed
in reverse order when the context exits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from pymongo import monitoring

from bot.adapters.base import AdapterServices
from bot.app.model_choice import make_model, world_choices
from bot.app.prompt_texts import grounding_for
from bot.app.scheduler import build_scheduler
from bot.cancelling import cancel_and_wait
from bot.commands.services import CommandServices
from bot.config.settings import Settings
from bot.domain.characters import Character, load_character
from bot.domain.records import stable_id
from bot.faults import FaultHook
from bot.knowledge.embedder_factory import make_embedder
from bot.knowledge.embeddings import Embedder
from bot.knowledge.messages import MessageIndex
from bot.knowledge.onnx_embedder import OnnxEmbedder
from bot.knowledge.reindex import Missing, heal_in_background
from bot.knowledge.vectors import VectorIndex
from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel
from bot.llm.caps import CappedModel, DailyCaps, DailySpend
from bot.llm.transcription import Transcriber
from bot.memory.store import Knowledge
from bot.ops.metrics import Metrics, dependencies_of
from bot.ops.migrations import migrate
from bot.ops.server import MetricsServer
from bot.ops.spend import FLUSH_SECONDS, flush_usage
from bot.plugin.loading import Registry, discover
from bot.privacy.consent import ConsentStore
from bot.privacy.forgetting import DatabaseFiles
from bot.privacy.policy import PrivacyPolicy
from bot.privacy.retention import Retention
from bot.queue.succession import take_over
from bot.queue.worker import RetryPolicy
from bot.runtime.agent import AgentRuntime, RuntimeOptions
from bot.runtime.events import NO_EVENTS
from bot.runtime.intake.journal import Journal
from bot.runtime.intake.missed import MissedRooms
from bot.runtime.intake.outage import Outage, wait_until_reachable
from bot.runtime.intake.sent_replies import SentReplies
from bot.runtime.languages import Languages
from bot.runtime.ratelimit import RateLimiter, ReplyLimit, SharedRateLimiter
from bot.storage.bundled.scrub import BundledFiles
from bot.storage.bundled.server import EmbeddedMongo
from bot.storage.bundled.supervisor import MongoSupervisor
from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class App:
    settings: Settings
    character: Character
    runtime: AgentRuntime
    store: MongoStore
    knowledge: Knowledge
    messages: MessageIndex
    model: LanguageModel
    embedder: Embedder
    registry: Registry
    ledger: UsageLedger
    bundled_mongo: bool
    # What the command layer uses (bot/commands/services.py), instead of the whole runtime.
    commands: CommandServices
    # What the adapters use (bot/adapters/base.py), instead of the whole runtime.
    adapter_services: AdapterServices
    # The /metrics and /healthz server, when MNEMO_METRICS_PORT is set.
    metrics_server: MetricsServer | None = None
    # The bundled MongoDB server and what restarts it, when MONGODB_URI is unset.
    mongo_server: EmbeddedMongo | None = None
    mongo_supervisor: MongoSupervisor | None = None
    # Rebuilding vectors Chroma lacks (a wiped or replaced folder), started with the app.
    vector_healing: asyncio.Task[Missing | None] | None = None

    @property
    def offline(self) -> bool:
        return self.settings.model.offline


async def _shutdown_scheduler(scheduler: AsyncIOScheduler) -> None:
    scheduler.shutdown(wait=False)
    await asyncio.sleep(0)  # the shutdown is queued on the loop: let it run


def reply_limit(settings: Settings, store: MongoStore, *, bundled: bool) -> ReplyLimit:
    """The per-person reply limit: in MongoDB, shared by every process, when the database is
    one several processes may share (MONGODB_URI); in this process with the bundled server,
    which belongs to one process (and saves a round trip per message)."""
    per_minute = settings.platforms.rate_limit_per_minute
    return RateLimiter(per_minute) if bundled else SharedRateLimiter(store.db, per_minute)


def services_for_commands(
    runtime: AgentRuntime, database_files: DatabaseFiles | None = None
) -> CommandServices:
    """The parts of the runtime the command layer uses, named; `database_files`: the bundled
    server's, which forgetting scrubs."""
    return CommandServices(
        agent_id=runtime.agent_id,
        store=runtime.store,
        knowledge=runtime.knowledge,
        messages=runtime.messages,
        plugins=runtime.plugins,
        privacy=runtime.privacy,
        evaluations=runtime.evaluations,
        ledger=runtime.ledger,
        profiles=runtime.profiles,
        sent_replies=runtime.sent_replies,
        outage=runtime.intake.outage,
        note_profiles=runtime.note_profiles,
        worlds=runtime.composer.worlds,
        languages=runtime.languages,
        model=runtime.model,
        database_files=database_files,
        caps=runtime.caps,
    )


def services_for_adapters(
    runtime: AgentRuntime, commands: CommandServices, transcriber: Transcriber | None = None
) -> AdapterServices:
    """The parts of the runtime the adapters use, named (the console's reads included), and
    the transcriber of voice notes, when the operator set one."""
    return AdapterServices(
        agent_id=runtime.agent_id,
        handle=runtime.handle,
        edited=runtime.edits.edited,
        note_profiles=runtime.note_profiles,
        answer_unanswered=runtime.answer_unanswered,
        keep_first=runtime.intake.keep_first,
        plugin_rooms=runtime.plugins.rooms,
        commands=commands,
        accounts=runtime.store.accounts,
        facts=runtime.store.facts,
        worlds=runtime.composer.worlds,
        outage=runtime.intake.outage,
        evaluations=runtime.evaluations,
        transcriber=transcriber,
    )


def spending_caps(
    settings: Settings, store: MongoStore, ledger: UsageLedger, *, agent_id: str
) -> DailySpend | None:
    """The daily caps the operator set, counting every call the ledger records and shared
    through MongoDB (every process of the deployment counts against the same caps)."""
    ops = settings.ops
    caps = DailyCaps(
        tokens_per_world=ops.daily_tokens_per_world,
        tokens_per_person=ops.daily_tokens_per_person,
        usd_per_world=ops.daily_usd_per_world,
        usd_per_person=ops.daily_usd_per_person,
        tokens_total=ops.daily_tokens_total,
        usd_total=ops.daily_usd_total,
    )
    if not caps.scopes:
        return None
    spend = DailySpend(caps, store.spend, prices=ops.model_prices, agent_id=agent_id)
    spend.listen(ledger)
    return spend


def operator_models(settings: Settings) -> set[str]:
    """Every model name the operator configured: the two classes' and MNEMO_MODEL_CHOICES."""
    model = settings.model
    return {model.small_model, model.large_model, *model.model_choices}


def agent_id_for(character: Character) -> str:
    return stable_id("agent", character.name)


@asynccontextmanager
async def open_app(
    settings: Settings,
    *,
    model: LanguageModel | None = None,
    embedder: Embedder | None = None,
    local_embedder: OnnxEmbedder | None = None,
    registry: Registry | None = None,
    faults: FaultHook | None = None,
    mongo_listeners: Sequence[monitoring.CommandListener] = (),
    usage_flush_seconds: float = FLUSH_SECONDS,
    wait_for_database: bool = False,
) -> AsyncIterator[App]:
    """Start everything; `model`, `embedder` and `registry` may be passed in (tests, benches).
    `local_embedder`: an ONNX model already loaded in this process, shared (its calls counted
    in this app's ledger) when the settings name it: a test run boots hundreds of apps.
    `faults` defaults to the test-only hook read from MNEMO_TEST_FAULT (bot.faults).
    `mongo_listeners` watch every command the app's MongoDB client sends (round trips).
    `usage_flush_seconds`: how often per-world model usage is written (a benchmark counting
    round trips per message sets it beyond its run). `wait_for_database`: MongoDB unreachable
    is waited for, logged per attempt (`mnemo run`), instead of failing at once."""
    character = load_character(settings.runtime.character)
    if registry is None:
        registry = discover(
            settings.runtime.plugin_folders,
            disabled=settings.runtime.disabled_plugins,
            env_file=settings.env_file,
        )
    data_dir = settings.storage.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    ledger = UsageLedger(prices=settings.ops.model_prices)
    async with AsyncExitStack() as stack:
        bundled = settings.storage.mongodb_uri is None
        server: EmbeddedMongo | None = None
        supervisor: MongoSupervisor | None = None
        if bundled:
            server = await stack.enter_async_context(EmbeddedMongo(data_dir))
            supervisor = MongoSupervisor(server)
            supervisor.start()  # a killed server comes back by itself, on the same port
            stack.push_async_callback(supervisor.stop)
            uri = server.uri
        else:
            uri = settings.storage.mongodb_uri.get_secret_value()  # type: ignore[union-attr]
        store = MongoStore.from_uri(
            uri,
            settings.storage.mongodb_database,
            server_selection_timeout_ms=int(settings.storage.mongodb_timeout_seconds * 1000),
            event_listeners=mongo_listeners,
            bundled=bundled,
        )
        stack.push_async_callback(store.close)
        # After everything that may call the model has stopped: the last model spend is kept.
        stack.push_async_callback(flush_usage, ledger, store)
        if wait_for_database:  # `mnemo run`: an external MONGODB_URI down is waited for
            await wait_until_reachable(store.ping)
        else:
            await store.ping()
        await store.ensure_indexes()
        await migrate(store.db)
        # Before the journal's replay and start-up recovery: the previous run's leases are
        # released, so its interrupted work resumes now rather than when they expire.
        succession = await take_over(store.leases, data_dir, bundled=bundled)
        stack.callback(succession.close)

        deadline = settings.storage.store_call_seconds  # per Chroma call, per journal write
        if settings.storage.chroma_host:
            vectors = VectorIndex.remote(
                settings.storage.chroma_host, settings.storage.chroma_port, deadline=deadline
            )
        else:
            vectors = VectorIndex.persistent(str(data_dir / "chroma"), deadline=deadline)
        stack.push_async_callback(vectors.close)
        # The index connects lazily; touch it now so a bad CHROMA_HOST fails at start-up.
        await vectors.count("facts")
        embedder = embedder or make_embedder(
            settings.embedding, settings.model, ledger, loaded=local_embedder
        )
        model = model or make_model(settings.model, ledger, registry.offline_answers())
        # The operator's daily spending caps, when set: every model call passes their check.
        caps = spending_caps(settings, store, ledger, agent_id=agent_id_for(character))
        if caps is not None:
            model = CappedModel(model, caps)
            # After everything that may call the model has stopped, as the usage above.
            stack.push_async_callback(caps.flush)
        stack.push_async_callback(model.close)
        # Voice notes as text (MNEMO_TRANSCRIPTION_MODEL), on the same endpoint.
        transcriber = Transcriber.of(settings.model, ledger)
        if transcriber is not None:
            stack.push_async_callback(transcriber.close)
        # What each world may choose instead of the settings (/character, /model).
        worlds = world_choices(settings, character, store, registry)
        others = [installed.character for installed in worlds.catalog.others]
        knowledge = Knowledge(
            store,
            vectors,
            embedder,
            grounding_for(character, registry, agent_id_for(character), others=others),
            near_duplicate_distance=settings.memory.near_duplicate_distance,
            language=settings.memory.language,
        )
        messages = MessageIndex(vectors, embedder)
        faults = faults or FaultHook.from_environment()
        journal = Journal.in_folder(
            data_dir, max_bytes=int(settings.storage.journal_max_mb * 1_000_000)
        )
        outage = Outage(journal, ping=store.ping, faults=faults, disk_deadline=deadline)
        # Replies sent and not stored yet: a restart stores them instead of answering again.
        sent_replies = SentReplies.in_folder(data_dir)
        metrics = None
        if settings.ops.metrics_port is not None:
            metrics = Metrics(
                ledger,
                settings.ops.model_prices,
                dependencies_of(store, vectors, journal, outage.disk),
                models=operator_models(settings),
            )
        privacy = PrivacyPolicy(
            consent=ConsentStore(store.db),
            retention=Retention(settings.privacy.retention_days),
            operator_text=settings.privacy.operator_text(),
        )
        runtime = AgentRuntime(
            agent_id=agent_id_for(character),
            character=character,
            store=store,
            knowledge=knowledge,
            messages=messages,
            model=model,
            registry=registry,
            ledger=ledger,
            options=RuntimeOptions(
                evaluator_selection=settings.runtime.evaluator_selection,
                evaluator_timeout=settings.runtime.evaluator_timeout,
                max_reply_chars=settings.runtime.reply_max_chars,
                relevant_facts=settings.memory.relevant_facts,
                answer_window=settings.runtime.answer_window_minutes * 60,
                stream_replies=settings.runtime.stream_replies,
            ),
            rate_limiter=reply_limit(settings, store, bundled=bundled),
            events=metrics or NO_EVENTS,
            retry=RetryPolicy(
                max_attempts=settings.runtime.evaluation_max_attempts,
                base_delay=settings.runtime.evaluation_retry_seconds,
            ),
            faults=faults,
            privacy=privacy,
            outage=outage,
            lease_seconds=settings.runtime.evaluation_lease_seconds,
            owner=succession.owner,
            sent_replies=sent_replies,
            worlds=worlds,
            caps=caps,
            # Rooms owed "I missed some messages while I was restarting" (a data-folder file).
            missed=MissedRooms.in_folder(data_dir),
            # The bot's own words: the world's /language, the person's app's, MNEMO_LANGUAGE.
            languages=Languages(store.worlds, settings.runtime.language),
        )
        # Sets the plugins up (each keeps the state its setup returns) and tears them down.
        await runtime.start()
        stack.push_async_callback(runtime.stop)
        stack.push_async_callback(outage.stop)  # first: no replay while the runtime stops
        healing = heal_in_background(store, vectors, embedder, agent_id=runtime.agent_id)
        stack.push_async_callback(cancel_and_wait, healing)
        # The bundled server's files, scrubbed of what forgetting and retention delete.
        files = None
        if server is not None:
            database = settings.storage.mongodb_database
            files = BundledFiles(store.db, server.database_file(database))
        scheduler = build_scheduler(
            runtime,
            idle_minutes=settings.runtime.evaluation_idle_flush_minutes,
            retention=privacy.retention,
            database_files=files,
        )
        # Model spend per world, for /stats: written in batches (and at shutdown, above).
        scheduler.add_job(
            flush_usage, "interval", seconds=usage_flush_seconds, args=(ledger, store)
        )
        if caps is not None:  # each call shares its spend as it ends; this catches failures
            scheduler.add_job(caps.flush, "interval", seconds=usage_flush_seconds)
        scheduler.start()
        stack.push_async_callback(_shutdown_scheduler, scheduler)
        metrics_server = None
        if metrics is not None:
            metrics_server = MetricsServer(
                metrics, settings.ops.metrics_host, settings.ops.metrics_port or 0
            )
            await metrics_server.start()
            stack.push_async_callback(metrics_server.stop)
            log.info("metrics and health at %s/metrics and /healthz", metrics_server.url)
        commands = services_for_commands(runtime, files)
        yield App(
            settings=settings,
            character=character,
            runtime=runtime,
            store=store,
            knowledge=knowledge,
            messages=messages,
            model=model,
            embedder=embedder,
            registry=registry,
            ledger=ledger,
            bundled_mongo=bundled,
            commands=commands,
            adapter_services=services_for_adapters(runtime, commands, transcriber),
            metrics_server=metrics_server,
            vector_healing=healing,
            mongo_server=server,
            mongo_supervisor=supervisor,
        )

"""`mnemo` command line: run · chat · doctor · bench.

Every expected failure (a bad setting, a broken character or plugin, an unreachable database,
a missing model) ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from bot.app.logs import configure_logging, secrets_of
from bot.config.settings import (
    ConfigError,
    Settings,
    check_data_dir,
    load_settings,
    setting_names,
    unknown_setting_warnings,
)
from bot.ops.permissions import owner_only

log = logging.getLogger(__name__)

EXIT_CONFIG = 2
EXIT_FAILED = 1


def _startup_errors() -> tuple[type[BaseException], ...]:
    from bot.domain.characters import CharacterError
    from bot.knowledge.embeddings import EmbedderError
    from bot.knowledge.vectors import VectorIndexError
    from bot.ops.backup import BackupError
    from bot.ops.migrations import MigrationError
    from bot.plugin.loading import PluginError
    from bot.privacy.ledger import LedgerFileError
    from bot.storage.bundled.server import EmbeddedMongoError
    from bot.storage.mongo import StorageUnavailable

    errors: list[type[BaseException]] = [
        ConfigError,
        CharacterError,
        PluginError,
        EmbeddedMongoError,
        EmbedderError,
        StorageUnavailable,
        VectorIndexError,
        MigrationError,
        BackupError,
        LedgerFileError,
    ]
    with contextlib.suppress(ImportError):
        from bot.app.platforms import PlatformStartupError

        errors.append(PlatformStartupError)
    return tuple(errors)


def _secrets(settings: Settings) -> list[str]:
    # From the settings model itself: every SecretStr field, whatever its name.
    return secrets_of(settings)


def shown_path(path: Path) -> str:
    """A path as the person typed it: relative when it lies under the working folder
    (settings hold absolute paths, see bot.config.settings)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def banner(app: object) -> str:
    from bot.app.composition import App

    assert isinstance(app, App)
    model = (
        "offline model (pattern-based, no API key set: set OPENAI_API_KEY for real replies)"
        if app.offline
        else f"{app.settings.model.large_model} / {app.settings.model.small_model}"
    )
    storage = (
        f"bundled MongoDB server in {shown_path(app.settings.storage.data_dir / 'mongo')}"
        if app.bundled_mongo
        else "MongoDB at MONGODB_URI"
    )
    plugins = app.registry.loaded_from()
    return (
        f"{app.character.name} — console chat\n"
        f"  model:   {model}\n"
        f"  storage: {storage}\n"
        f"  plugins: {plugins}\n"
        "Type /help for commands, /quit or Ctrl-D to leave."
    )


def warn_unknown_settings(app: object) -> None:
    """A mistyped MNEMO_* name keeps its setting at the default without a word; say so, once
    the plugins (whose settings are valid names too) are loaded."""
    from pydantic_settings import BaseSettings

    from bot.app.composition import App

    assert isinstance(app, App)
    models = [
        plugin.settings_model
        for plugin in app.registry.plugins
        if isinstance(plugin.settings_model, type)
        and issubclass(plugin.settings_model, BaseSettings)
    ]
    for warning in unknown_setting_warnings(app.settings.env_file, setting_names(models)):
        print(f"mnemo: warning: {warning}", file=sys.stderr, flush=True)


async def _chat(settings: Settings, name: str | None = None) -> None:
    from bot.adapters.console import ConsoleChat
    from bot.adapters.images import ImageLimits
    from bot.app.composition import open_app

    # The console is one trusted person at this machine: a piped script of any length gets
    # every reply, so the per-person reply limit (meant for public chats) is off here.
    platforms = settings.platforms.model_copy(update={"rate_limit_per_minute": 0})
    settings = dataclasses.replace(settings, platforms=platforms)
    async with open_app(settings) as app:
        warn_unknown_settings(app)
        print(banner(app), flush=True)
        exports = settings.storage.data_dir / "exports"
        images = ImageLimits.of(settings.platforms)  # /image sends the picture itself
        await ConsoleChat(
            display_name=name,
            exports_dir=exports,
            images=images,
            max_voice_mb=settings.platforms.max_voice_mb,
        ).run(app.adapter_services)


# `mnemo run` as a service with no token. Waiting rather than exiting: with `restart:
# unless-stopped` (compose.yaml) any exit, 0 or not, is started again, a loop that repeats this
# line forever; waiting says it once, and the container shows unhealthy (no /healthz).
NOTHING_TO_RUN = (
    "No DISCORD_TOKEN or TELEGRAM_TOKEN set, and no terminal or piped input for the console "
    "chat: nothing to run. Set DISCORD_TOKEN and/or TELEGRAM_TOKEN (docker compose: in .env, "
    "then `docker compose up -d`; systemd: in the --env-file, then `systemctl restart mnemo`). "
    "Waiting until stopped, so that a restart policy does not start this again and again."
)


def _console_at_hand() -> bool:
    """Whether the console chat has someone to talk to: a terminal, or input piped or read
    from a file. A service's standard input is /dev/null (systemd's default, docker compose
    and `docker run` without -i) or closed: the chat would end at once."""
    try:
        if sys.stdin.isatty():
            return True
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no stdin at all
        return False
    return not stat.S_ISCHR(mode)


async def _run(settings: Settings, name: str | None = None) -> None:
    from bot.app.composition import open_app

    platforms = settings.platforms
    if platforms.discord_token is None and platforms.telegram_token is None:
        if not _console_at_hand():
            log.error(NOTHING_TO_RUN)
            await asyncio.Event().wait()  # until SIGTERM or Ctrl-C; nothing else is started
            return
        print("No DISCORD_TOKEN or TELEGRAM_TOKEN set: starting the console chat.", flush=True)
        await _chat(settings, name)
        return
    from bot.app.platforms import run_platforms

    # The platforms connect once the database answers: waited for, not a reason to exit.
    async with open_app(settings, wait_for_database=True) as app:
        warn_unknown_settings(app)
        await run_platforms(app)


class DoctorFound(Exception):
    """At least one `mnemo doctor` check failed (each was reported on its own line)."""


async def _doctor(settings: Settings, name: str | None = None) -> None:
    from bot.app.doctor import Doctor

    doctor = Doctor(settings, env_file=settings.env_file, secrets=_secrets(settings))
    if not await doctor.run(sys.stdout):
        raise DoctorFound


# Published as `mnemo-bot` (`mnemo` is taken on PyPI); the command stays `mnemo`.
DISTRIBUTION = "mnemo-bot"


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _env_file_option(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--env-file",
        type=Path,
        default=default,
        metavar="FILE",
        help="read settings from FILE (default: .env in this folder, if there is one)",
    )


async def _reindex(settings: Settings, *, everything: bool) -> None:
    from bot.app.composition import open_app
    from bot.knowledge.reindex import reindex

    async with open_app(settings) as app:
        if app.vector_healing is not None:
            app.vector_healing.cancel()  # this command does the same work, with a progress bar
        done = await reindex(
            app.store,
            app.knowledge.vectors,
            app.embedder,
            agent_id=app.runtime.agent_id,
            everything=everything,
            stream=sys.stderr,
        )
        print(f"indexed {len(done.facts)} facts and {len(done.messages)} messages")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemo",
        description="A chat bot that gets to know people. With no command: `mnemo run`.",
        epilog="Settings come from the environment or .env; see .env.example for every one.",
    )
    parser.add_argument("--version", action="version", version=f"mnemo {_version()}")
    _env_file_option(parser, None)
    # Each subcommand takes --env-file too (`mnemo doctor --env-file prod.env`); SUPPRESS
    # keeps an absent one from overwriting a value given before the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    _env_file_option(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {
        "run": (
            "start every platform with a token set; with none, the console chat",
            "Start Discord and/or Telegram (DISCORD_TOKEN, TELEGRAM_TOKEN); with neither "
            "set, chat in this terminal.",
        ),
        "chat": (
            "talk to the bot in this terminal (standard input may be piped)",
            "Chat in this terminal, as one trusted person: /help lists the commands, "
            "/quit or Ctrl-D leaves. Piped input works: printf 'hi\\n/facts\\n' | mnemo chat",
        ),
        "doctor": (
            "check settings, storage, embedder, model and platform tokens",
            "Check every configured part for real (a tiny model call, Chroma, MongoDB, "
            "each platform token that is set, plugin settings); exit 1 if any fails.",
        ),
    }
    for name, (summary, description) in commands.items():
        command = sub.add_parser(name, help=summary, description=description, parents=[common])
        if name in ("run", "chat"):
            command.add_argument(
                "--name",
                help="how the bot calls you in the console chat (default: the name you tell "
                "it, else your login name)",
            )
    backup = sub.add_parser(
        "backup", help="dump every collection to DIR, with a manifest", parents=[common]
    )
    backup.add_argument("dir", type=Path, help="a new or empty folder")
    restore = sub.add_parser(
        "restore",
        help="load a backup into an empty database and rebuild the vectors",
        parents=[common],
    )
    restore.add_argument("dir", type=Path, help="a folder written by `mnemo backup`")
    restore.add_argument(
        "--forget-ledger",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a copy of forget_ledger.jsonl kept apart from the data folder: everyone it names "
        "is left out of the restored data too (repeatable)",
    )
    reindex = sub.add_parser(
        "reindex",
        help="rebuild the vectors Chroma lacks from MongoDB (with --all: every one)",
        parents=[common],
    )
    reindex.add_argument("--all", action="store_true", help="rebuild every vector")
    # No -h of its own: `mnemo bench --help` and `mnemo bench PART --help` reach the benchmarks.
    bench = sub.add_parser(
        "bench",
        help="measure cost, speed, scale and recall (`mnemo bench --help` for the parts)",
        add_help=False,
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _settings_file(given: Path | None) -> Path | None:
    """The settings file to read: the one given (which must exist), else `.env` if present."""
    if given is not None:
        if not given.is_file():
            raise ConfigError(f"settings file {given}: not found")
        return given
    default = Path(".env")
    return default if default.is_file() else None


def _stop_on_sigterm() -> None:
    """SIGTERM (systemd, docker stop, kill) shuts down as Ctrl-C does: the main task is
    cancelled, every component closes in order, and pending evaluations resume on the next
    start."""
    task = asyncio.current_task()
    if task is not None:
        from bot.app.platforms import ExitDeadline

        # Within the exit deadline, stuck or not (bot/app/platforms.py).
        deadline = ExitDeadline()

        def stop() -> None:
            deadline.signalled(signal.SIGTERM)
            task.cancel()

        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)


async def _until_stopped(runner: Callable[[Settings], Awaitable[None]], settings: Settings) -> None:
    _stop_on_sigterm()
    await runner(settings)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    # argparse leaves an option right after `bench` (`mnemo bench --help`) out of its
    # remainder; the benchmarks' own parser gets it.
    args, unknown = parser.parse_known_args(argv)
    command = args.command or "run"
    if unknown and command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if command == "bench":
        bench_main = _load_benchmarks()
        if bench_main is None:
            print(
                "mnemo bench: the benchmarks are not installed with Mnemo; run `mnemo bench` "
                "from a Mnemo checkout (git clone, then `make bench`)",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        return bench_main([*unknown, *args.rest])
    try:
        settings = load_settings(_settings_file(args.env_file))
    except ConfigError as error:
        print(f"mnemo: {error}", file=sys.stderr)
        return EXIT_CONFIG
    # Every command writes in the data folder (its log file first); `doctor` reports an
    # unusable one as one of its checks and logs to stderr only.
    data_dir_usable = True
    try:
        check_data_dir(settings.storage.data_dir)
    except ConfigError as error:
        if command != "doctor":
            print(f"mnemo: {error}", file=sys.stderr)
            return EXIT_CONFIG
        data_dir_usable = False
    if not data_dir_usable:
        return _run_command(command, args, settings, data_dir_usable=False)
    # Before the log file or anything else in the data folder is created; restored after, for
    # callers that run `main` in their own process (tests).
    previous_umask = owner_only(settings.storage.data_dir)
    try:
        return _run_command(command, args, settings, data_dir_usable=True)
    finally:
        os.umask(previous_umask)


def _run_command(
    command: str, args: argparse.Namespace, settings: Settings, *, data_dir_usable: bool
) -> int:
    configure_logging(
        settings.runtime.log_level,
        _secrets(settings),
        log_file=settings.storage.data_dir / "mnemo.log" if data_dir_usable else None,
        quiet=command in ("chat", "doctor", "backup", "restore")
        or (command == "run" and _no_platforms(settings)),
        log_format=settings.ops.log_format,
        max_bytes=int(settings.ops.log_max_mb * 1024 * 1024),
        backups=settings.ops.log_backups,
    )
    runner: Callable[[Settings], Awaitable[None]]
    if command in ("backup", "restore"):
        from bot.app.backup_commands import backup_command, restore_command

        if command == "backup":
            runner = functools.partial(backup_command, folder=args.dir)
        else:
            runner = functools.partial(
                restore_command, folder=args.dir, forget_ledgers=args.forget_ledger
            )
    elif command == "reindex":
        runner = functools.partial(_reindex, everything=args.all)
    else:
        chosen = {"run": _run, "chat": _chat, "doctor": _doctor}[command]
        runner = functools.partial(chosen, name=getattr(args, "name", None))
    try:
        asyncio.run(_until_stopped(runner, settings))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("\nbye", file=sys.stderr)
    except DoctorFound:
        return EXIT_FAILED
    except _startup_errors() as error:
        print(f"mnemo: {error}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def _load_benchmarks() -> Callable[[Sequence[str]], int] | None:
    """`benchmarks.cli.main`, or None when Mnemo runs from a wheel, which has no benchmarks.

    The benchmarks live beside `bot/` in a checkout and are not installed; an editable
    install's `mnemo` script does not put the checkout on the import path, so it is added.
    """
    try:
        from benchmarks.cli import main as bench_main
    except ModuleNotFoundError as error:
        if error.name != "benchmarks":
            raise
        checkout = Path(__file__).resolve().parents[2]
        if not (checkout / "benchmarks" / "cli.py").is_file():
            return None
        sys.path.insert(0, str(checkout))
        from benchmarks.cli import main as bench_main
    return bench_main


def _no_platforms(settings: Settings) -> bool:
    return settings.platforms.discord_token is None and settings.platforms.telegram_token is None

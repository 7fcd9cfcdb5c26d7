"""`mnemo` command line: run · chat · doctor · bench.

Every expected failure (a bad setting, a broken character or plugin, an unreachable database,
a missing model) ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from bot.config import ConfigError, Settings, load_settings
from bot.logs import configure_logging

log = logging.getLogger(__name__)

EXIT_CONFIG = 2


def _startup_errors() -> tuple[type[BaseException], ...]:
    from bot.characters import CharacterError
    from bot.ops.backup import BackupError
    from bot.ops.migrations import MigrationError
    from bot.plugins import PluginError
    from bot.storage.embedded import EmbeddedMongoError
    from bot.storage.embeddings import EmbedderError
    from bot.storage.mongo import StorageUnavailable
    from bot.storage.vectors import VectorIndexError

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
    ]
    with contextlib.suppress(ImportError):
        from bot.adapters.startup import PlatformStartupError

        errors.append(PlatformStartupError)
    return tuple(errors)


def _secrets(settings: Settings) -> list[str]:
    values = [
        settings.model.openai_api_key,
        settings.storage.mongodb_uri,
        settings.platforms.discord_token,
        settings.platforms.telegram_token,
    ]
    return [v.get_secret_value() for v in values if v is not None]


def shown_path(path: Path) -> str:
    """A path as the person typed it: relative when it lies under the working folder
    (settings hold absolute paths, see bot.config)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def banner(app: object) -> str:
    from bot.app import App

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
    plugins = ", ".join(p.name for p in app.registry.plugins) or "none"
    return (
        f"{app.character.name} — console chat\n"
        f"  model:   {model}\n"
        f"  storage: {storage}\n"
        f"  plugins: {plugins}\n"
        "Type /help for commands, /quit or Ctrl-D to leave."
    )


async def _chat(settings: Settings) -> None:
    from bot.adapters.console import ConsoleChat
    from bot.app import open_app

    async with open_app(settings) as app:
        print(banner(app), flush=True)
        await ConsoleChat(app.runtime).run()


async def _run(settings: Settings) -> None:
    from bot.app import open_app

    platforms = settings.platforms
    if platforms.discord_token is None and platforms.telegram_token is None:
        print("No DISCORD_TOKEN or TELEGRAM_TOKEN set: starting the console chat.", flush=True)
        await _chat(settings)
        return
    from bot.adapters.startup import run_platforms

    async with open_app(settings) as app:
        await run_platforms(app)


async def _doctor(settings: Settings) -> None:
    from bot.app import open_app

    async with open_app(settings) as app:
        [vector] = await app.embedder.embed(["doctor check"])
        print(f"character:  {app.character.name} ({settings.runtime.character})")
        print(f"plugins:    {', '.join(p.name for p in app.registry.plugins) or 'none'}")
        print(f"mongodb:    ok ({'bundled' if app.bundled_mongo else 'MONGODB_URI'})")
        print(f"embedder:   ok ({app.embedder.name}, {len(vector)} dimensions)")
        print(f"model:      {'offline' if app.offline else app.model.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemo", description="A chat bot that gets to know people."
    )
    parser.add_argument("--env-file", type=Path, default=Path(".env"), help="settings file")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="start every platform with a token, else the console chat")
    sub.add_parser("chat", help="talk to the bot in this terminal")
    sub.add_parser("doctor", help="check settings, storage, embedder and model")
    backup = sub.add_parser("backup", help="dump every collection to DIR, with a manifest")
    backup.add_argument("dir", type=Path, help="a new or empty folder")
    restore = sub.add_parser(
        "restore", help="load a backup into an empty database and rebuild the vectors"
    )
    restore.add_argument("dir", type=Path, help="a folder written by `mnemo backup`")
    # No -h of its own: `mnemo bench --help` and `mnemo bench PART --help` reach the benchmarks.
    bench = sub.add_parser(
        "bench", help="run benchmarks (see `mnemo bench --help`)", add_help=False
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


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
        settings = load_settings(args.env_file if args.env_file.exists() else None)
    except ConfigError as error:
        print(f"mnemo: {error}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(
        settings.runtime.log_level,
        _secrets(settings),
        log_file=settings.storage.data_dir / "mnemo.log",
        quiet=command in ("chat", "backup", "restore")
        or (command == "run" and _no_platforms(settings)),
        log_format=settings.ops.log_format,
        max_bytes=int(settings.ops.log_max_mb * 1024 * 1024),
        backups=settings.ops.log_backups,
    )
    runner: Callable[[Settings], Awaitable[None]]
    if command in ("backup", "restore"):
        from bot.ops.commands import backup_command, restore_command

        operation = backup_command if command == "backup" else restore_command
        runner = functools.partial(operation, folder=args.dir)
    else:
        runner = {"run": _run, "chat": _chat, "doctor": _doctor}[command]
    try:
        asyncio.run(runner(settings))
    except KeyboardInterrupt:
        print("\nbye", file=sys.stderr)
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
        checkout = Path(__file__).resolve().parents[1]
        if not (checkout / "benchmarks" / "cli.py").is_file():
            return None
        sys.path.insert(0, str(checkout))
        from benchmarks.cli import main as bench_main
    return bench_main


def _no_platforms(settings: Settings) -> bool:
    return settings.platforms.discord_token is None and settings.platforms.telegram_token is None

"""Running every configured platform in one event loop until told to stop.

One platform failing does not take the other down: a platform that cannot start is reported
in one line and the rest run; only when none can start does start-up fail
(`PlatformStartupError`, which `mnemo run` prints as one line). A platform that fails later is
logged and the others carry on. SIGINT/SIGTERM stop everything gracefully, in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from bot.adapters.errors import PlatformError, PlatformStartupError

if TYPE_CHECKING:
    from bot.adapters.base import Adapter, AdapterServices
    from bot.app.composition import App
    from bot.config.settings import PlatformSettings

__all__ = ["PlatformError", "PlatformStartupError", "build_adapters", "run_platforms"]

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0
# Seconds from a stop signal (SIGINT, SIGTERM) to the end of the process, stuck or not: above
# what a graceful stop takes (the platforms' grace for messages in flight, then closing).
EXIT_DEADLINE = 45.0


@runtime_checkable
class Supervised(Protocol):
    """An adapter that can tell when it stopped on its own (optional for adapters)."""

    async def wait_closed(self) -> None:
        """Return when the adapter has stopped; raise PlatformError if it stopped failing."""
        ...


async def run_platforms(
    app: App,
    *,
    adapters: Sequence[Adapter] | None = None,
    stop: asyncio.Event | None = None,
    handle_signals: bool = True,
) -> None:
    """Start the adapters (by default one per configured token) and run until `stop` is set,
    a signal arrives, the task is cancelled, or every platform has stopped.

    Raises PlatformStartupError when no platform can start, or once every one has failed.
    """
    if adapters is None:
        adapters, problems = build_adapters(
            app.settings.platforms, state_dir=app.settings.storage.data_dir
        )
    else:
        adapters, problems = list(adapters), []
    running = await _start_all(adapters, app.adapter_services, problems)
    stop = stop or asyncio.Event()
    # The scheduler (idle learning, re-indexing) belongs to the app: `open_app` runs it.
    try:
        with _signals(stop, enabled=handle_signals):
            await _supervise(running, stop)
    finally:
        await _stop_all(running)


def build_adapters(
    settings: PlatformSettings, *, state_dir: Path | None = None
) -> tuple[list[Adapter], list[str]]:
    """An adapter per platform with a token, and one line for each that cannot be built.
    `state_dir` (the data folder) keeps what was registered with Discord."""
    adapters: list[Adapter] = []
    problems: list[str] = []
    if settings.discord_token is not None:
        try:
            from bot.adapters.discord import DiscordAdapter
        except ImportError as error:
            problems.append(f"discord: the Discord adapter is unavailable ({error})")
        else:
            adapters.append(DiscordAdapter(settings, state_dir=state_dir))
    if settings.telegram_token is not None:
        from bot.adapters.telegram import TelegramAdapter

        adapters.append(TelegramAdapter(settings))
    if not adapters and not problems:
        problems.append("no platform configured: set DISCORD_TOKEN or TELEGRAM_TOKEN")
    return adapters, problems


async def _start_all(
    adapters: Sequence[Adapter], services: AdapterServices, problems: list[str]
) -> list[Adapter]:
    """Start every adapter at once (Discord's hand-shake takes seconds); keep those that run."""
    results: list[Any] = []
    try:
        results = await asyncio.gather(
            *(adapter.start(services) for adapter in adapters), return_exceptions=True
        )
    except BaseException:
        # Cancelled (Ctrl-C) while starting: whatever did start must still be stopped.
        await _stop_all(adapters)
        raise
    running: list[Adapter] = []
    for adapter, result in zip(adapters, results, strict=True):
        if isinstance(result, PlatformError):
            problems.append(str(result))
        elif isinstance(result, BaseException):
            log.error("%s failed to start", adapter.name, exc_info=result)
            problems.append(f"{adapter.name}: failed to start ({type(result).__name__})")
        else:
            running.append(adapter)
    if not running:
        raise PlatformStartupError("; ".join(problems) or "no platform could start")
    for problem in problems:
        # The other platforms run on; this one is reported and left off.
        log.error("%s (continuing with %s)", problem, ", ".join(a.name for a in running))
    return running


async def _supervise(running: Sequence[Adapter], stop: asyncio.Event) -> None:
    stopped = asyncio.create_task(stop.wait(), name="platforms:stop")
    watchers = {
        asyncio.create_task(adapter.wait_closed(), name=f"platforms:{adapter.name}"): adapter
        for adapter in running
        if isinstance(adapter, Supervised)
    }
    # Adapters that cannot report their end are assumed to run until stopped.
    unsupervised = len(running) - len(watchers)
    failures: list[str] = []
    try:
        while True:
            done, _ = await asyncio.wait({stopped, *watchers}, return_when=asyncio.FIRST_COMPLETED)
            if stopped in done:
                return
            for task in [watcher for watcher in watchers if watcher in done]:
                adapter = watchers.pop(task)
                failures.append(_ended(adapter, task))
                await _stop_all([adapter])  # release what it still holds; the rest run on
            if not watchers and not unsupervised:
                raise PlatformStartupError("every platform has stopped: " + "; ".join(failures))
    finally:
        for waiting in (stopped, *watchers):
            waiting.cancel()
        await asyncio.gather(stopped, *watchers, return_exceptions=True)


def _ended(adapter: Adapter, task: asyncio.Task[None]) -> str:
    """Log one line for a platform that stopped on its own; return that line."""
    error = None if task.cancelled() else task.exception()
    if isinstance(error, PlatformError):
        line = str(error)
    elif error is not None:
        line = f"{adapter.name}: stopped ({type(error).__name__})"
    else:
        line = f"{adapter.name}: stopped"
    log.error("%s; the other platforms keep running", line)
    return line


async def _stop_all(adapters: Sequence[Adapter]) -> None:
    """Stop in reverse order of starting; one adapter failing to stop does not block the rest."""
    for adapter in reversed(adapters):
        try:
            await asyncio.wait_for(adapter.stop(), STOP_TIMEOUT)
        except Exception as error:
            log.warning("%s did not stop cleanly (%s)", adapter.name, type(error).__name__)


@dataclass
class ExitDeadline:
    """After a stop signal, the process ends within `seconds` whatever is stuck.

    A graceful stop waits for what is in flight, and a call stuck for good (chromadb's compiled
    code after a full disk, a disk that does not answer) would make it wait for ever: the audit
    saw SIGINT ignored for 60 s, and a process that never exits is one no restart policy can
    help. So the first signal starts the graceful stop and a timer in a daemon thread (it runs
    whatever the event loop is doing); if the process is still there when the timer fires, it
    ends at once (`os._exit`, exit status 128 + the signal's number). A second signal ends it
    at once too: the operator insists."""

    seconds: float = EXIT_DEADLINE
    _timer: threading.Timer | None = None

    def signalled(self, signum: int) -> None:
        if self._timer is not None:
            exit_now(signum, "a second stop signal")
        self._timer = threading.Timer(
            self.seconds,
            exit_now,
            args=(signum, f"still running {self.seconds:g} s after the stop signal"),
        )
        self._timer.daemon = True  # never what keeps the process alive
        self._timer.start()


def exit_now(signum: int, why: str) -> None:
    """End the process now, without waiting for anything (what is stuck would never return).
    What was accepted is safe: kept before it was acknowledged, resumed at the next start."""
    log.error("stopping now: %s (something is stuck; the next start resumes what was left)", why)
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(128 + signum)


@contextlib.contextmanager
def _signals(stop: asyncio.Event, *, enabled: bool) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop`, so every platform is stopped gracefully, within the exit
    deadline (`ExitDeadline`)."""
    loop = asyncio.get_running_loop()
    installed: list[tuple[signal.Signals, Any]] = []
    deadline = ExitDeadline()

    def stop_on(signum: int) -> None:
        deadline.signalled(signum)
        stop.set()

    if enabled:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            try:
                loop.add_signal_handler(signum, stop_on, int(signum))
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread, or a platform without loop signal handlers
            installed.append((signum, previous))
    try:
        yield
    finally:
        for signum, previous in installed:
            loop.remove_signal_handler(signum)
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(signum, previous)

"""The zero-set-up MongoDB: the bundled nx-27017 server (wire-compatible, pure Python on SQLite)
run as a child process under the data folder when no MONGODB_URI is configured.

The server runs in `--data-dir` mode: one SQLite file per logical database
(`<data_dir>/mongo/<database>.db`, so `mnemo.db` for the default database). nx-27017's
single-file `--db` mode shares one connection between every logical database, so databases are
not isolated and `dropDatabase` on one wipes them all.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

from bot.storage.bundled.leftover import LeftoverServerError, clear_leftover_server

logger = logging.getLogger(__name__)

_MODULE = "nx_27017.nx_27017"
# `python -m nx_27017.nx_27017` warns on every start because the package imports the module
# first; harmless, and it would be the first line of every log.
_RUNPY_WARNING = "ignore:'nx_27017.nx_27017' found in sys.modules:RuntimeWarning"
_LOG_NAME = "nx-27017.log"
_PID_NAME = "nx-27017.pid"
# Which Mnemo process started the server now named in the pid file: a server whose parent is no
# longer that process was left behind by a Mnemo that died, and is stopped at the next start
# (bot/storage/bundled/leftover.py).
_OWNER_NAME = "nx-27017.owner"
_TAIL_LINES = 25
# nx-27017 logs a warning for every aggregation it cannot run in SQL (count_documents is one),
# so the log is rotated at start-up once it passes this size.
_LOG_ROTATE_BYTES = 5_000_000
_PR_SET_PDEATHSIG = 1


class EmbeddedMongoError(RuntimeError):
    """The bundled server could not be started (its log's tail is in the message)."""


class EmbeddedMongo:
    """Run nx-27017 on a free loopback port with its files under `data_dir/mongo/`.

    Use as `async with EmbeddedMongo(path) as server: ... server.uri`, or call `start()` and
    `stop()`. The child gets its own process group (a Ctrl-C meant for Mnemo does not kill the
    database mid-write; Mnemo stops it in order), is terminated at interpreter exit if still
    running, and on Linux also when the thread that started it dies (PR_SET_PDEATHSIG with
    SIGKILL: nx-27017 answers SIGTERM with `sys.exit`, which a uvloop callback can swallow, and
    the server then outlives Mnemo), which covers a SIGKILLed Mnemo. A server of this data
    folder left running by a Mnemo that died anyway (another OS, an older Mnemo) is stopped at
    the next start instead of blocking it. Start it from a long-lived thread such as the event
    loop's.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 20.0,
        stop_timeout: float = 5.0,
        python: str = sys.executable,
        module: str = _MODULE,
    ) -> None:
        # Absolute, because the child runs with its cwd in `folder`: a relative --data-dir or
        # --pid-file would then name a path under itself (the default `data` did exactly that).
        self.data_dir = Path(data_dir).expanduser().absolute()
        self.folder = self.data_dir / "mongo"
        self.log_path = self.folder / _LOG_NAME
        self.host = host
        self._requested_port = port
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._python = python
        self._module = module
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._atexit_hook: Callable[[], None] | None = None

    # public surface -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise EmbeddedMongoError("the embedded MongoDB is not running")
        return self._port

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/?directConnection=true"

    def database_file(self, database: str) -> Path:
        """The SQLite file of one logical database (`--data-dir` mode: `<database>.db`)."""
        return self.folder / f"{database}.db"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    async def start(self) -> None:
        if self.running:
            return
        await self.stop()  # forget a server that died on its own
        self.folder.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self._clear_leftover_server)
        # A port picked by us can be taken by someone else before the child binds it: retry
        # with a fresh one. An explicitly requested port is the caller's business.
        attempts = 1 if self._requested_port is not None else 3
        for attempt in range(1, attempts + 1):
            port = self._requested_port or _free_port(self.host)
            if self._requested_port is not None and not _port_is_free(self.host, port):
                raise EmbeddedMongoError(
                    f"cannot start the embedded MongoDB: {self.host}:{port} is already in use"
                )
            try:
                await self._start_on(port)
                return
            except EmbeddedMongoError as error:
                if attempt == attempts or "in use" not in str(error):
                    raise
                logger.warning("port %d was taken meanwhile; retrying on another", port)

    def exit_code(self) -> int | None:
        """The exit code of a server that died on its own; None while it runs (or was stopped)."""
        return self._process.poll() if self._process is not None else None

    async def restart(self) -> None:
        """Start a server that died again, on the same port (clients know only that one)."""
        port = self.port
        if self._atexit_hook is not None:
            atexit.unregister(self._atexit_hook)
        await asyncio.to_thread(self._clear_leftover_server)
        process, log_offset = self._spawn(self._command(port))
        self._process = process
        self._atexit_hook = functools.partial(_terminate_sync, process)
        atexit.register(self._atexit_hook)
        try:
            await self._wait_ready(process, port, log_offset)
        except EmbeddedMongoError:
            if process.poll() is None:
                process.kill()
            raise
        logger.info("embedded MongoDB restarted (pid %d) on %s:%d", process.pid, self.host, port)

    async def stop(self) -> None:
        process, self._process = self._process, None
        self._port = None
        if process is None:
            return
        if self._atexit_hook is not None:
            atexit.unregister(self._atexit_hook)
            self._atexit_hook = None
        if process.poll() is None:
            process.terminate()
            if not await _wait_exit(process, self._stop_timeout):
                logger.warning("embedded MongoDB (pid %d) ignored SIGTERM; killing it", process.pid)
                process.kill()
                await _wait_exit(process, self._stop_timeout)
        logger.info("embedded MongoDB stopped (exit code %s)", process.returncode)

    async def __aenter__(self) -> EmbeddedMongo:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # internals ------------------------------------------------------------------------------
    def _command(self, port: int) -> list[str]:
        return [
            self._python,
            "-W",
            _RUNPY_WARNING,
            "-m",
            self._module,
            "--data-dir",
            str(self.folder),
            "--host",
            self.host,
            "-p",
            str(port),
            # Everything the server says goes to stderr, which we send to our log file; its
            # own --log-file would duplicate every line and defaults to a shared /tmp path.
            "--log-file",
            os.devnull,
            # The default pid file is shared by every nx-27017 on the machine, and the server
            # refuses to start while it names a live process.
            "--pid-file",
            str(self.folder / _PID_NAME),
        ]

    async def _start_on(self, port: int) -> None:
        command = self._command(port)
        process, log_offset = self._spawn(command)
        self._process, self._port = process, port
        # A partial per process, so stop() unregisters this server's hook and no other's.
        self._atexit_hook = functools.partial(_terminate_sync, process)
        atexit.register(self._atexit_hook)
        try:
            await self._wait_ready(process, port, log_offset)
        except BaseException:
            await self.stop()
            raise
        logger.info(
            "embedded MongoDB (nx-27017, pid %d) on %s:%d; data in %s, log in %s",
            process.pid,
            self.host,
            port,
            self.folder,
            self.log_path,
        )

    def _spawn(self, command: list[str]) -> tuple[subprocess.Popen[bytes], int]:
        """Start the child, its output appended to the log; returns it and where its log starts.

        A plain Popen, not asyncio's: the server outlives any one event loop (tests start it in
        one loop and use it from many), and asyncio ties a child to the loop that spawned it.
        """
        with contextlib.suppress(OSError):
            if self.log_path.stat().st_size > _LOG_ROTATE_BYTES:
                self.log_path.replace(self.log_path.with_name(_LOG_NAME + ".1"))
        with self.log_path.open("ab") as log:
            log_offset = log.tell()
            log.write(f"--- mnemo: starting {' '.join(command)}\n".encode())
            log.flush()
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.folder,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                    preexec_fn=_parent_death_signal(),
                )
            except OSError as error:
                raise EmbeddedMongoError(
                    f"cannot run the embedded MongoDB ({command[0]}): {error}"
                ) from error
        with contextlib.suppress(OSError):
            (self.folder / _OWNER_NAME).write_text(f"{os.getpid()}\n")
        return process, log_offset

    async def _wait_ready(self, process: subprocess.Popen[bytes], port: int, offset: int) -> None:
        deadline = time.monotonic() + self._startup_timeout
        uri = f"mongodb://{self.host}:{port}/?directConnection=true"
        while True:
            if process.poll() is not None:
                raise EmbeddedMongoError(
                    f"the embedded MongoDB exited with code {process.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{self._log_tail(offset)}"
                )
            if time.monotonic() > deadline:
                raise EmbeddedMongoError(
                    f"the embedded MongoDB did not answer on {self.host}:{port} within "
                    f"{self._startup_timeout:g}s; last lines of {self.log_path}:\n"
                    f"{self._log_tail(offset)}"
                )
            # A cheap TCP probe first: PyMongo's own retry cadence (500 ms) would slow every
            # start-up, while the server binds within a few hundred milliseconds.
            if await _accepts(self.host, port) and await _pings(uri):
                return
            await asyncio.sleep(0.05)

    def _log_tail(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError as error:
            return f"(log unreadable: {error})"
        return "\n".join(text.splitlines()[-_TAIL_LINES:])

    def _clear_leftover_server(self) -> None:
        try:
            clear_leftover_server(self.folder, self.data_dir, _PID_NAME, _OWNER_NAME)
        except LeftoverServerError as error:
            raise EmbeddedMongoError(str(error)) from None


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option as the server's listener: ignores TIME_WAIT leftovers, not live listeners.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


async def _accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=0.5)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _pings(uri: str) -> bool:
    client: AsyncMongoClient = AsyncMongoClient(
        uri, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000, socketTimeoutMS=1000
    )
    try:
        await client.admin.command("ping")
    except PyMongoError:
        return False
    finally:
        await client.close()
    return True


async def _wait_exit(process: subprocess.Popen[bytes], seconds: float) -> bool:
    try:
        await asyncio.to_thread(process.wait, seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _terminate_sync(process: subprocess.Popen[bytes]) -> None:
    """atexit safety net for a server nobody stopped (an exception escaped, a forgotten stop)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()


def _parent_death_signal() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGKILL the child when its parent dies, or None.

    SIGKILL, not SIGTERM: nx-27017 turns SIGTERM into `sys.exit(0)`, and when that lands in a
    uvloop stream callback the SystemExit is logged as "Fatal error on transport" and the
    server keeps running. SQLite's journal makes a SIGKILL safe for the data.

    libc is looked up here, in the parent: loading a library between fork and exec can
    deadlock a process that has other threads.
    """
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return set_signal

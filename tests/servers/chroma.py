"""A real `chroma run` server from the installed chromadb package, on a free loopback port.

    with ChromaServer(tmp_path / "chroma") as server:
        vectors = VectorIndex.remote(server.host, server.port)

Started through chromadb's own command-line entry point with this interpreter, so it is the
same chromadb version as the client, and found whatever the venv's scripts folder is.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

_CLI = "import sys; from chromadb.cli.cli import app; sys.argv[0] = 'chroma'; sys.exit(app())"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ChromaServer:
    def __init__(self, path: Path, *, startup_timeout: float = 60.0) -> None:
        self.path = path
        self.host = "127.0.0.1"
        self.port = free_port()
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log = path.parent / f"{path.name}-chroma.log"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-c", _CLI, "run", "--host", self.host, "--port", str(self.port)]
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                [*command, "--path", str(self.path)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + self._startup_timeout
        while not self.answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = self._log.read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"chroma run did not start on port {self.port}:\n{tail}")
            time.sleep(0.1)

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> ChromaServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

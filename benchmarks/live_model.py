"""`make bench-live`: the memory bench against a small real model served on this machine.

It starts llama-cpp-python's OpenAI-compatible server (an already-built one: the Python of
its environment, `LLAMA_PYTHON`) on a GGUF file (`GGUF`), puts a recording proxy in front of
it, runs `mnemo bench memory` against the proxy with the settings docs/models.md gives for
llama.cpp, and stops the server. Mnemo never downloads a model: both paths are given.

Every request and raw answer goes to one JSON line of the recording (`--record`), in the
format of tests/data/real-model (seq, task, params, roles, prompt, content, finish_reason,
usage, seconds, status), so what a live run found can be replayed in `make test`.

    python -m benchmarks.live_model --llama-python ~/llama/bin/python --gguf qwen.gguf \\
        --only family-move-job-car,group-injection --record live.jsonl

`--bench cost --bench-args '--selection llm --pace 10'` runs `mnemo bench cost --live` the same
way (reply latency against a bare call, docs/performance-history.md).

The recipe (building the server, the weights used for the figures) is docs/live-model.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from benchmarks.live import read_event
from bot.runtime.reply_prompt import REPLY_TASK_MARK
from bot.testing.openai_server import FakeOpenAIServer
from bot.testing.recorded_model import RecordedModel

SERVE = Path(__file__).with_name("llama_serve.py")
ALIAS = "local-model"
# The first words of the facts reading's system text (plugins/facts/prompts.py: SYSTEM).
READING_STARTS = "You write down facts a person tells"
# The reply's task, in its system text (bot/runtime/reply_prompt.py), and the heading of a
# character's own one-message template.
REPLY_MARKS = (REPLY_TASK_MARK, "# Task")


def task_of(roles: Sequence[str], prompt: str) -> str:
    """Which of Mnemo's tasks a request is, from its prompt (the proxy sees no more)."""
    head = prompt.lstrip()
    if head.startswith(READING_STARTS):
        return "facts"  # the facts plugin's reading (its system text comes first)
    starts = {
        "TASK: Decide which evaluation": "evaluator_selection",
        "TASK: Extract Claims": "facts",
        "TASK: Update Goal": "goals",
        "TASK: Rate the emotional tone": "sentiment",
    }
    for start, task in starts.items():
        if start in head[:400]:
            return task
    if "stated a goal for themselves" in head[:200]:
        return "create_goal"
    if roles and roles[0] == "system" and any(mark in prompt for mark in REPLY_MARKS):
        return "reply"
    return "other"


@dataclass
class Recorder:
    """A forwarding proxy: every request to `upstream`, unchanged, and one line per call."""

    upstream: str
    path: Path
    seq: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seq += 1
        body = await request.read()
        record: dict[str, Any] = {"seq": self.seq, "path": request.path}
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
            prompt = "\n".join(str(m.get("content", "")) for m in messages)
            roles = [str(m.get("role")) for m in messages]
            record.update(
                task=task_of(roles, prompt),
                params={k: v for k, v in payload.items() if k != "messages"},
                roles=roles,
                prompt=prompt,
            )
        started = time.perf_counter()
        headers = {k: v for k, v in request.headers.items() if k.lower() == "content-type"}
        timeout = aiohttp.ClientTimeout(total=3600)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(
                request.method, self.upstream + request.path_qs, data=body, headers=headers
            ) as answer,
        ):
            kind = answer.headers.get("Content-Type", "application/json")
            if kind.startswith("text/event-stream"):
                # Passed on as it comes: a client that stops reading closes the request to
                # the model, which stops writing (a reply stopped early).
                try:
                    return await self._relay(request, answer, record)
                finally:
                    record.update(seconds=round(time.perf_counter() - started, 2))
                    self._write(record)
            status, data = answer.status, await answer.read()
        record.update(seconds=round(time.perf_counter() - started, 2), status=status)
        try:
            parsed = json.loads(data)
            choice = (parsed.get("choices") or [{}])[0]
            record.update(
                content=(choice.get("message") or {}).get("content"),
                finish_reason=choice.get("finish_reason"),
                usage=parsed.get("usage"),
            )
        except (ValueError, AttributeError, IndexError):
            record["response_text"] = data[:2000].decode("utf-8", "replace")
        self._write(record)
        return web.Response(body=data, status=status, content_type=kind.split(";")[0])

    async def _relay(
        self, request: web.Request, answer: aiohttp.ClientResponse, record: dict[str, Any]
    ) -> web.StreamResponse:
        """An event stream passed on line by line; the record gets the text it carried, and
        `stopped` when the client went before the end."""
        response = web.StreamResponse(
            status=answer.status, headers={"Content-Type": "text/event-stream"}
        )
        await response.prepare(request)
        pieces: list[str] = []
        record.update(status=answer.status, content="", finish_reason=None, usage=None)
        try:
            async for line in answer.content:
                await response.write(line)
                _read_event(line, pieces, record)
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientPayloadError):
            # The bot stopped reading (a reply stopped early), or the server cut this stream
            # when the bot's next request came (llama-cpp-python's interrupt_requests): the
            # request ended early, which is what the record says.
            record["stopped"] = True
        except asyncio.CancelledError:
            record["stopped"] = True
            raise
        finally:
            record["content"] = "".join(pieces)
        return response

    def _write(self, record: dict[str, Any]) -> None:
        if "prompt" in record:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _read_event(line: bytes, pieces: list[str], record: dict[str, Any]) -> None:
    """One line of a chat completion's event stream into the record: its text piece,
    finish reason, usage."""
    event = read_event(line)
    if event is None:
        return
    pieces.extend(event.pieces)
    record["usage"] = event.usage or record.get("usage")
    record["finish_reason"] = event.finish_reason or record.get("finish_reason")


async def _wait_for(url: str, server: subprocess.Popen[bytes], limit: float) -> None:
    deadline = time.monotonic() + limit
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"the model server exited ({server.returncode}); see its log")
            try:
                async with session.get(url) as answer:
                    if answer.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(2)
    raise SystemExit(f"the model server did not answer {url} within {limit:.0f} s")


def bench_environment(proxy_url: str, timeout: int) -> dict[str, str]:
    """docs/models.md's settings for llama.cpp: one model, one call at a time, long waits."""
    return {
        **os.environ,
        **endpoint_settings(f"{proxy_url}/v1"),
        "MNEMO_MODEL_TIMEOUT": str(timeout),
        "MNEMO_EVALUATOR_TIMEOUT": str(3 * timeout),
    }


def endpoint_settings(base_url: str) -> dict[str, str]:
    """The model settings of a live run, at `base_url`: the same for the run and its replay."""
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-local",  # the server checks none; the client needs one
        "MNEMO_SMALL_MODEL": ALIAS,
        "MNEMO_LARGE_MODEL": ALIAS,
        "MNEMO_MODEL_RETRIES": "0",
        "MNEMO_MODEL_CONCURRENCY": "1",
    }


@contextlib.asynccontextmanager
async def replaying(recording: Path) -> AsyncIterator[RecordedModel]:
    """A recorded live run's answers served by a local OpenAI-compatible server, and the
    environment pointed at it as the live run was configured, for the block: a run inside
    it (`mnemo bench memory --replay`, a test) gets every answer the live model gave."""
    recorded = RecordedModel.load(recording)
    async with FakeOpenAIServer(responder=recorded) as server:
        settings = endpoint_settings(server.base_url)
        before = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            yield recorded
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def start_server(args: argparse.Namespace, log: Path) -> subprocess.Popen[bytes]:
    command = [
        args.llama_python,
        str(SERVE),
        "--model",
        args.gguf,
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(args.port),
        "--n_ctx",
        str(args.ctx),
        "--n_threads",
        str(args.threads),
    ]
    print(f"bench-live: serving {args.gguf} on port {args.port}", flush=True)
    with log.open("ab") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)


async def run(args: argparse.Namespace, server: subprocess.Popen[bytes], record: Path) -> int:
    out = Path(args.out)
    runner: web.AppRunner | None = None
    try:
        upstream = f"http://127.0.0.1:{args.port}"
        await _wait_for(f"{upstream}/v1/models", server, args.start_timeout)
        recorder = Recorder(upstream, record)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", recorder.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", args.proxy_port)
        await site.start()
        mnemo = str(Path(sys.executable).with_name("mnemo"))
        bench = [mnemo, "bench", args.bench, "--out", str(out), "--no-charts"]
        if args.bench == "cost":
            bench += ["--live"]  # the cost bench asks the endpoint only when told
        # Conversations are the memory bench's (make bench-live passes its default list).
        bench += ["--only", args.only] if args.only and args.bench == "memory" else []
        bench += shlex.split(args.bench_args)
        if args.model_dir:
            bench += ["--model-dir", args.model_dir]
        env = bench_environment(f"http://127.0.0.1:{args.proxy_port}", args.timeout)
        print(f"bench-live: mnemo {' '.join(bench[1:])}; recording to {record}", flush=True)
        process = await asyncio.create_subprocess_exec(*bench, env=env)
        code = await process.wait()
        print(f"bench-live: {recorder.seq} model calls recorded in {record}", flush=True)
        return code
    finally:
        if runner is not None:
            await runner.cleanup()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-live", description=__doc__.splitlines()[0])
    parser.add_argument("--llama-python", required=True, help="Python of llama-cpp-python's env")
    parser.add_argument("--gguf", required=True, help="the model file (GGUF)")
    parser.add_argument(
        "--bench", choices=("memory", "cost"), default="memory", help="which bench to run"
    )
    parser.add_argument(
        "--bench-args", default="", help="more options for the bench, e.g. '--pace 10'"
    )
    parser.add_argument("--only", default="", help="conversations, by name, comma separated")
    parser.add_argument("--record", default="", help="JSONL of every request and answer")
    parser.add_argument("--out", default="bench-results/live", help="results folder")
    parser.add_argument("--model-dir", default=os.environ.get("MNEMO_TEST_MODEL_DIR", ""))
    parser.add_argument("--port", type=int, default=8088)
    parser.add_argument("--proxy-port", type=int, default=8089)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per model call")
    parser.add_argument("--start-timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    for path, what in ((args.llama_python, "LLAMA_PYTHON"), (args.gguf, "GGUF")):
        if not Path(path).is_file():
            parser.error(f"{what}: no file at {path}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = Path(args.record) if args.record else out / "live-model.jsonl"
    record.parent.mkdir(parents=True, exist_ok=True)
    server = start_server(args, out / "model-server.log")
    return asyncio.run(run(args, server, record))


if __name__ == "__main__":
    sys.exit(main())

"""The operator's HTTP endpoint: `/metrics` for Prometheus, `/healthz` for a load balancer or
an orchestrator's liveness check. aiohttp (already installed with discord.py) serves it on the
bot's own event loop, so a scrape sees the live process without threads."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.config.settings import ConfigError
from bot.ops.metrics import Metrics


class MetricsServer:
    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        app.router.add_get("/healthz", self._health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        try:
            await site.start()
        except OSError as error:
            await self.stop()
            raise ConfigError(
                f"setting MNEMO_METRICS_PORT: cannot listen on {self._host}:{self._port} "
                f"({error.strerror or error})"
            ) from None
        host, port = self._runner.addresses[0][:2]  # the real port when 0 asked for a free one
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _scrape(self, request: web.Request) -> web.Response:
        await self._metrics.refresh()
        body = generate_latest(self._metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, request: web.Request) -> web.Response:
        checks = await self._metrics.health()
        healthy = all(checks.values())
        body: dict[str, object] = {"status": "ok" if healthy else "unavailable", **checks}
        stuck = self._metrics.stuck()
        if stuck:  # which store, for how long: a stuck call is what an operator restarts for
            body["stuck_seconds"] = {name: round(seconds, 1) for name, seconds in stuck.items()}
        return web.json_response(body, status=200 if healthy else 503)

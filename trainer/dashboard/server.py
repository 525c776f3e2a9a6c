"""The dashboard's web server (aiohttp): the jobs page at ``/``, a job's page at
``/jobs/<namespace>/<trainjobs|mpijobs|optimizationjobs>/<name>``, both GET only; and the sampler that reads,
every ``sample_interval`` seconds, the TrainJobs whose pages were viewed recently, an OptimizationJob's
running trials when its page was (:class:`~trainer.dashboard.samples.Samples`).

Read-only: it sends the apiserver GET and list requests only (:mod:`trainer.dashboard.gather`), with
the user's kubeconfig and context, and Prometheus ``query_range`` GETs. It listens on 127.0.0.1 only;
every answer forbids scripts (``Content-Security-Policy``), so that even markup that escaped the
templates could not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import aiohttp
from aiohttp import web

from trainer.api.kinds import OPTIMIZATION_JOBS, TRAINJOBS
from trainer.client import AsyncTrainerClient, NotFoundError
from trainer.dashboard import gather, render
from trainer.dashboard.samples import Samples
from trainer.framework.kube.client import ApiError

HOST = "127.0.0.1"
"""Where the dashboard listens: this machine only."""
DEFAULT_PORT = 8765
DEFAULT_SAMPLE_INTERVAL = 5.0
"""Seconds between two samples of a viewed job's metrics."""
DEFAULT_REFRESH = 5
"""Seconds after which a page reloads itself."""
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
"""Headers of every page: no script, no other origin."""

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Dashboard:
    """The pages and the sampler over one client (its namespace, or every one with ``all_namespaces``).
    ``prometheus_url``: curves from that Prometheus instead of from :attr:`samples`, which by default
    take a job's sample at most once in half a ``sample_interval`` (a page view samples too, so that the
    first view shows the job's current metrics)."""

    def __init__(
        self,
        client: AsyncTrainerClient,
        *,
        all_namespaces: bool = False,
        prometheus_url: str | None = None,
        sample_interval: float = DEFAULT_SAMPLE_INTERVAL,
        refresh: int = DEFAULT_REFRESH,
        samples: Samples | None = None,
    ) -> None:
        self.client, self.all_namespaces = client, all_namespaces
        self.prometheus_url, self.sample_interval, self.refresh = prometheus_url, sample_interval, refresh
        self.samples = samples if samples is not None else Samples(gap=sample_interval / 2)

    @property
    def scope(self) -> str:
        """What the jobs page lists: ``all namespaces`` or ``namespace <name>``."""
        return "all namespaces" if self.all_namespaces else f"namespace {self.client.namespace}"

    def page(self, text: str, status: int = 200) -> web.Response:
        """An HTML answer with :data:`HEADERS`."""
        return web.Response(text=text, status=status, content_type="text/html", headers=HEADERS)

    def error_page(self, status: int, message: str) -> web.Response:
        """An HTML error answer; ``message`` is escaped."""
        return self.page(render.error_page(status, message), status)

    async def jobs(self, request: web.Request) -> web.Response:
        """``GET /``: the jobs page."""
        jobs = await gather.list_jobs(self.client, self.all_namespaces)
        searches = await gather.list_optimization_jobs(self.client, self.all_namespaces)
        now = datetime.now(UTC)
        return self.page(render.jobs_page(jobs, self.scope, self.all_namespaces, self.refresh, now, searches))

    async def job(self, request: web.Request) -> web.Response:
        """``GET /jobs/<namespace>/<plural>/<name>``: a job's page; 404 for an unknown kind, a job
        that does not exist, or one outside the namespace served."""
        namespace, plural, name = (request.match_info[k] for k in ("namespace", "plural", "name"))
        if plural == OPTIMIZATION_JOBS.plural and (self.all_namespaces or namespace == self.client.namespace):
            return await self.search(namespace, name)
        kind = gather.kind_of(plural)
        if kind is None or (not self.all_namespaces and namespace != self.client.namespace):
            return self.error_page(404, f"no {plural} {namespace}/{name} here ({self.scope})")
        try:
            detail = await gather.job_detail(self.client, kind, namespace, name)
        except NotFoundError as e:
            return self.error_page(404, str(e))
        now = datetime.now(UTC)
        key = (kind.resource.kind, namespace, name)
        error = ""
        if self.prometheus_url:
            source = f"From Prometheus at {self.prometheus_url} (kubeflow_trainer_trainjob_metric)."
            try:
                async with aiohttp.ClientSession() as session:
                    series = await gather.prometheus_curves(session, self.prometheus_url, detail.job, now)
            except (TimeoutError, aiohttp.ClientError, ValueError) as e:
                series, error = {}, f"Prometheus could not be read: {e or type(e).__name__}"
        else:
            self.samples.viewed(key, now.timestamp())
            if kind.resource == TRAINJOBS:
                self.samples.add(key, now.timestamp(), detail.job.to_dict())
            series = self.samples.curves(key)
            source = (
                f"Sampled by this dashboard every {self.sample_interval:g} s from status.trainerStatus.metrics "
                "while the page is viewed (no --prometheus-url)."
            )
        return self.page(render.job_page(detail, series, source, self.refresh, now, error))

    async def search(self, namespace: str, name: str) -> web.Response:
        """An OptimizationJob's page: its trials' objective curves from Prometheus
        (:func:`gather.prometheus_trial_curves`) or, without one, from the samples of its trials (each
        trial viewed, and sampled now, as a TrainJob page's job); 404 when it does not exist."""
        try:
            detail = await gather.optimization_detail(self.client, namespace, name)
        except NotFoundError as e:
            return self.error_page(404, str(e))
        now = datetime.now(UTC)
        metric = detail.job.spec.objectives[0].metric
        error = ""
        if self.prometheus_url:
            source = f"From Prometheus at {self.prometheus_url} (kubeflow_trainer_trainjob_metric of each trial)."
            try:
                async with aiohttp.ClientSession() as session:
                    series = await gather.prometheus_trial_curves(session, self.prometheus_url, detail.job, now)
            except (TimeoutError, aiohttp.ClientError, ValueError) as e:
                series, error = {}, f"Prometheus could not be read: {e or type(e).__name__}"
        else:
            series = {}
            for trial in detail.trials:
                key = (TRAINJOBS.kind, namespace, trial.name)
                if trial.trainjob is not None and trial.state == "Running":
                    self.samples.viewed(key, now.timestamp())
                    self.samples.add(key, now.timestamp(), trial.trainjob.to_dict())
                points = self.samples.curves(key).get(metric)
                if points:
                    series[trial.name] = points
            source = (
                f"Each trial's {metric} sampled by this dashboard every {self.sample_interval:g} s from "
                "status.trainerStatus.metrics while this page is viewed (no --prometheus-url): trials that ran "
                "while it was not have no series, only their final value by trial index."
            )
        return self.page(render.optimization_page(detail, series, source, self.refresh, now, error))

    async def sample_once(self) -> int:
        """Sample every TrainJob viewed recently (:meth:`Samples.watched`); returns the points added. A
        job that cannot be read is skipped until the next round."""
        added = 0
        now = time.time()
        for key in self.samples.watched(now):
            kind, namespace, name = key
            if kind != TRAINJOBS.kind:
                continue
            try:
                obj = await self.client.kube.get_or_none(TRAINJOBS, namespace, name)
            except (TimeoutError, ApiError, aiohttp.ClientError) as e:
                log.warning("cannot sample %s %s/%s: %s", kind, namespace, name, e)
                continue
            if obj is not None:
                added += self.samples.add(key, now, obj)
        return added

    async def sample_forever(self) -> None:
        """:meth:`sample_once` every ``sample_interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.sample_interval)
            await self.sample_once()

    def app(self) -> web.Application:
        """The web application: GET routes only (aiohttp answers HEAD for them too, 405 for others); an
        apiserver error becomes a 502 page that says it."""

        @web.middleware
        async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
            try:
                return await handler(request)
            except (ApiError, aiohttp.ClientError) as e:
                return self.error_page(502, f"the apiserver could not be read: {e}")

        app = web.Application(middlewares=[errors])
        app.router.add_get("/", self.jobs)
        app.router.add_get("/jobs/{namespace}/{plural}/{name}", self.job)
        return app


async def serve(dashboard: Dashboard, port: int = DEFAULT_PORT, ready: Callable[[str], None] | None = None) -> None:
    """Serve ``dashboard`` on ``http://127.0.0.1:<port>/`` and sample, until cancelled; ``ready`` is
    called with the URL once it listens. Raises ``OSError`` when the port is taken."""
    runner = web.AppRunner(dashboard.app(), access_log=None)
    await runner.setup()
    sampler: asyncio.Task[None] | None = None
    try:
        site = web.TCPSite(runner, HOST, port)
        await site.start()
        if not dashboard.prometheus_url:
            sampler = asyncio.ensure_future(dashboard.sample_forever())
        if ready is not None:
            ready(f"http://{HOST}:{port}/")
        await asyncio.Event().wait()
    finally:
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        await runner.cleanup()

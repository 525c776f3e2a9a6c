"""The status server's HTTP side: its one route, its answers, its TLS, and its place in the operator.

Follows kubeflow/trainer ``pkg/statusserver/server.go`` and ``middleware.go`` and KEP-2779
(``docs/proposals/2779-trainjob-progress/README.md``): aiohttp over TLS, one route,

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status``

with ``Authorization: Bearer <token>`` (:mod:`~trainer.statusserver.auth`) and a JSON body
``{"trainerStatus": {...}}`` (:mod:`~trainer.statusserver.payload`). Answers, each but 200 a
``metav1.Status`` JSON:

* 200 with the update as stored (``{"trainerStatus": {...}}``; ``{}`` for a body without one);
* 401 or 403 when the token may not update this TrainJob (see :mod:`~trainer.statusserver.auth`);
* 429 with ``Retry-After`` when its token would need a review while too many are running or waiting;
* 404 for another path or a TrainJob that does not exist; 413 for a body over 64 KiB; 422 for a body
  that is not such JSON; 500 when the apiserver could not be asked.

Writes go through :class:`~trainer.statusserver.rate_limit.WriteLimiter`.

**TLS** (:class:`StatusServer`): the webhook's certificate machinery
(:class:`~trainer.framework.tls.WebhookTLS`: CA, serving certificate, renewal, live reload) on a Secret
of its own, ``trainer-status-server-certs`` in ``--webhook-namespace``, with the SANs of the Service
``--webhook-service`` and of ``--status-server-host``. Its CA reaches the pods through the ConfigMap
``<trainjob>-tls-config`` (:class:`~trainer.statusserver.ca_publisher.CAPublisher`).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
import structlog
from aiohttp import web

from trainer.api.kinds import SECRETS, TRAINJOBS
from trainer.framework.bounded import BoundedDict
from trainer.framework.certs import VALIDITY
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key
from trainer.framework.kube.client import ApiError, KubeClient
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.framework.tls import KEEPER_VERBS, WebhookTLS, serving_names
from trainer.framework.tls import ROLE as CERTIFICATES_ROLE
from trainer.jobs.child_writer import ChildWriter
from trainer.jobs.features.own_writes import OwnWrites
from trainer.statusserver.auth import TokenAuthenticator
from trainer.statusserver.ca_publisher import CAPublisher
from trainer.statusserver.payload import CHECKPOINT, PayloadError, coalesce, parse_update, status_patch, stored
from trainer.statusserver.rate_limit import WriteLimiter
from trainer.statusserver.series import DEFAULT_MAX_SERIES, TrainingSeries
from trainer.trainjob.spec.injection import base_url, status_path

if TYPE_CHECKING:
    from trainer.framework.manager import Manager

log = structlog.get_logger("trainer.statusserver")

SECRET_NAME = "trainer-status-server-certs"
"""The Secret holding the status server's CA and serving certificate (in ``--webhook-namespace``)."""
MAX_BODY = 1 << 16
"""Largest request body accepted, in bytes (upstream ``maxBodySize``)."""
WRITE_TRIES = 3
PERMISSIONS = (
    Permission(TRAINJOBS, ("get",), "a progress report reads the TrainJob when its cache lacks it"),
    Permission(TRAINJOBS, ("patch",), "a progress report patches the TrainJob's trainerStatus", "status"),
    Permission(
        SECRETS,
        KEEPER_VERBS,
        "the status server's certificate: read, watch (by name), rotate",
        names=(SECRET_NAME,),
        role=CERTIFICATES_ROLE,
    ),
)
"""Tries of a conditional status write that meets a newer resourceVersion (another writer's)."""
MAX_WRITTEN = 100_000
"""TrainJobs whose last report this server remembers at most (the oldest go first)."""


# --------------------------------------------------------------------------- answers


def status_body(code: int, reason: str, message: str) -> JSON:
    """A ``metav1.Status`` failure: ``{kind, apiVersion, metadata, status, message, reason, code}``."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


def failure(code: int, message: str, retry_after: int | None = None) -> web.Response:
    """The HTTP answer ``code`` with its :func:`status_body` (401s carry ``WWW-Authenticate: Bearer``;
    ``retry_after`` seconds, when given, ``Retry-After``)."""
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return web.json_response(status_body(code, REASONS.get(code, "Unknown"), message), status=code, headers=headers)


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class StatusServerSettings:
    """Where the status server listens, how pods reach it, and how often it writes."""

    port: int
    """Port it listens on (0: any free port, for tests) and pods call."""
    host: str | None = None
    """Host in the URL pods call (``--status-server-host``); None: ``<service>.<namespace>.svc``."""
    namespace: str = "default"
    """Namespace of the Service and of the certificate Secret (``--webhook-namespace``)."""
    service: str = "trainer-webhook-service"
    """Service in front of the operator (``--webhook-service``); it must map :attr:`port`."""
    bind_address: str = "0.0.0.0"
    write_interval: float = 5.0
    """Seconds between two status writes of one TrainJob at least (``--status-write-interval``)."""
    cert_validity: float = VALIDITY.total_seconds()
    """Seconds a serving certificate is valid (``--webhook-cert-validity``)."""
    reuse_port: bool = False
    """Bind with SO_REUSEPORT (``--webhook-reuse-port``)."""
    secret_name: str = SECRET_NAME
    training_metrics: bool = True
    """Export what trainer pods report as series (``--training-metrics``, :mod:`~trainer.statusserver.series`)."""
    training_metrics_max_series: int = DEFAULT_MAX_SERIES
    """Those series at most (``--training-metrics-max-series``)."""

    @property
    def url(self) -> str:
        """``https://<host>:<port>`` as the pods call it."""
        return base_url(self.host or f"{self.service}.{self.namespace}.svc", self.port)


class StatusServer:
    """Serves the status endpoint (see the module docstring)."""

    def __init__(self, kube: KubeClient, settings: StatusServerSettings, publisher: CAPublisher | None = None) -> None:
        self.kube, self.settings = kube, settings
        self.auth = TokenAuthenticator(kube)
        """Decides who may post; :func:`setup` gives it the TrainJob controller's caches."""
        self.limiter = WriteLimiter(self._write, settings.write_interval, merge=coalesce)
        self._written: BoundedDict[Key, JSON] = BoundedDict(MAX_WRITTEN)
        """The last report this server wrote per TrainJob: its own, told from another replica's."""
        self.stale_reports = 0
        """Reports not written because the TrainJob already held a newer one (another replica's)."""
        self.publisher = publisher
        self.tls: WebhookTLS | None = None
        """The certificate keeper while :meth:`run` serves."""
        self.port: int | None = None
        """The port bound by :meth:`listen`."""
        self.problem: str | None = "not serving yet: no serving certificate or listener"
        """Why it does not accept connections now (:meth:`not_serving`)."""

    async def _write(self, key: Key, patch: JSON) -> None:
        """Write ``patch`` (a ``trainerStatus`` merge-patch, :func:`status_patch`) unless the TrainJob holds a
        newer report (``lastUpdatedTime``; within one second, which is all it keeps, another replica's
        report with a higher ``progressPercentage``, as a run's progress only grows, while this server's
        own last report is replaced by its later one whatever the progress): every replica serves posts
        and coalesces its own, so one replica's late write of an older report must not replace the newer
        one another replica wrote.
        The first read is the TrainJob cache's when there is one (no GET); the write is conditional on the
        resourceVersion read, so a cache behind the apiserver costs a 409, and a conflict reads again with
        a GET (3 tries). Raises :class:`ApiError` (404 when the TrainJob is gone)."""
        ns, name = key
        reported = parse_time(patch["trainerStatus"].get("lastUpdatedTime"))
        for attempt in range(WRITE_TRIES):
            cached = self.auth.cached(TRAINJOBS, ns, name) if attempt == 0 else None
            current = cached or await self.kube.get(TRAINJOBS, ns, name)
            held_status = (current.get("status") or {}).get("trainerStatus") or {}
            held_status = {k: v for k, v in held_status.items() if k != CHECKPOINT}  # kept across reports
            held = held_status.get("lastUpdatedTime")
            stored_at = parse_time(held)
            # Another writer's report of the same second: the lower progress is the older one. This
            # server's own last report is replaced by its later one whatever its progress (last post wins).
            tie = 0 if self._written.get(key) == held_status else 1
            if (
                stored_at is not None
                and reported is not None
                and (stored_at, tie * _progress(held_status)) > (reported, tie * _progress(patch["trainerStatus"]))
            ):
                self.stale_reports += 1
                log.debug("older report not written", trainjob=f"{ns}/{name}", held=held)
                return
            try:
                await self.kube.patch_status(TRAINJOBS, ns, name, patch, meta(current).resource_version)
                self._written[key] = {
                    k: v for k, v in patch["trainerStatus"].items() if v is not None and k != CHECKPOINT
                }
                return
            except ApiError as e:
                if not e.conflict or attempt == WRITE_TRIES - 1:
                    raise

    async def handle(self, request: web.Request) -> web.Response:
        """One post (upstream ``handleTrainJobRuntimeStatus``). Never raises."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        if (request.content_length or 0) > MAX_BODY:
            return failure(413, "Payload too large")
        try:
            verdict = await self.auth.authorize(request.headers.get("Authorization"), ns, name)
        except Exception:
            log.exception("token review failed", trainjob=f"{ns}/{name}")
            return failure(500, "Internal error")
        if not verdict.allowed:
            log.debug("status post refused", trainjob=f"{ns}/{name}", code=verdict.code, why=verdict.message)
            return failure(verdict.code, verdict.message, verdict.retry_after)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return failure(413, "Payload too large")
        try:
            status = parse_update(body)
        except PayloadError as e:
            return failure(422, str(e))
        if status is None:
            return web.json_response({})
        try:
            await self.limiter.submit((ns, name), status_patch(status))
        except ApiError as e:
            if e.not_found:
                return failure(404, "Train job not found")
            if e.invalid or e.status == 400:
                return failure(422, e.message)
            log.warning("trainer status not written", trainjob=f"{ns}/{name}", error=str(e))
            return failure(500, "Internal error")
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("trainer status not written", trainjob=f"{ns}/{name}", error=repr(e))
            return failure(500, "Internal error")
        return web.json_response({"trainerStatus": stored(status)})

    async def not_found(self, _request: web.Request) -> web.Response:
        """Any other path or method (upstream ``handleDefault``)."""
        return failure(404, "Not found")

    def app(self) -> web.Application:
        """The aiohttp application: the status route, and 404 for everything else."""
        app = web.Application(client_max_size=MAX_BODY)
        route = f"/apis/{TRAINJOBS.api_version}/namespaces/{{namespace}}/{TRAINJOBS.plural}/{{name}}/status"
        assert status_path("ns", "job") == route.format(namespace="ns", name="job")
        app.router.add_post(route, self.handle)
        app.router.add_route("*", "/{tail:.*}", self.not_found)
        return app

    def not_serving(self) -> str | None:
        """Why the status server does not accept connections now, None while it listens: the check
        ``status-server`` of ``/readyz`` and ``/healthz``, as kubeflow/trainer ``pkg/statusserver/setup.go``
        (``RegisterProbes``, one checker on both; upstream dials its port). ``not serving yet: ...`` until
        :meth:`listen` has bound its port (the certificate comes first, :meth:`run`), ``stopped`` after."""
        return self.problem

    async def listen(self, context: ssl.SSLContext) -> web.AppRunner:
        """Serve :meth:`app` over TLS with ``context`` on the configured address; sets :attr:`port`
        (the bound one, when configured 0). The caller cleans the runner up. Raises ``OSError``."""
        s = self.settings
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, s.bind_address, s.port, ssl_context=context, reuse_port=s.reuse_port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = next((a[1] for a in runner.addresses if isinstance(a, tuple)), s.port)
        self.problem = None
        return runner

    async def run(self) -> None:
        """Serve until cancelled: certificates from the Secret (created or renewed when due), their CA
        handed to the :class:`CAPublisher`, the listener, then keep the certificate current and the
        ConfigMaps written. Raises :class:`ApiError` when the Secret cannot be read or written at
        start, ``OSError`` when the port cannot be bound."""
        s = self.settings
        dns, ips = serving_names(s.service, s.namespace, s.host)
        publisher = self.publisher
        install = publisher.set_ca if publisher is not None else None
        tls = self.tls = WebhookTLS(
            self.kube, s.namespace, dns, ips, validity=s.cert_validity, secret_name=s.secret_name, install=install
        )
        try:
            await tls.start()
            await tls.install()
            runner = await self.listen(tls.context)
            try:
                log.info("status server serving", port=self.port, url=s.url, write_interval=s.write_interval)
                loops = [tls.run(), *([publisher.run()] if publisher is not None else [])]
                await asyncio.gather(*loops)
            finally:
                self.problem = "stopped"
                await self.limiter.close()
                await runner.cleanup()
        finally:
            tls.close()


def setup(kube: KubeClient, settings: StatusServerSettings, manager: Manager) -> StatusServer:
    """The status server for the operator run by ``manager`` (upstream ``SetupServer``), whose
    settings name the same URL (``Settings.status_server_url``, which injects it into trainer pods);
    feeds the CA publisher and, unless ``settings.training_metrics`` is off, the training series
    (:class:`~trainer.statusserver.series.TrainingSeries`, in ``manager.metrics``) from the manager's
    TrainJob informer. Call before the manager runs."""
    reader = manager.readers["trainjob"]
    writer = ChildWriter(kube, reader, manager.events, OwnWrites(), settles=False, announce=False)
    publisher = CAPublisher(writer, reader, kube, manager.settings.namespace)
    series = TrainingSeries(manager.metrics, settings.training_metrics_max_series)
    for informer in manager.informers:
        if informer.res == TRAINJOBS:
            informer.add_handler(publisher.on_trainjob)
            if settings.training_metrics:
                informer.add_handler(series.on_trainjob)
    server = StatusServer(kube, settings, publisher)
    server.auth.reader = reader  # the pods' Jobs and TrainJobs are read from the caches
    return server


def _progress(status: JSON) -> int:
    """A ``trainerStatus``'s ``progressPercentage`` (-1 when it has none)."""
    value = status.get("progressPercentage")
    return value if isinstance(value, int) else -1

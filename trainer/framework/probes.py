"""The operator's two small HTTP servers (aiohttp), as controller-runtime's manager runs them:

* metrics on ``--metrics-bind-address`` (default ``:8080``): ``GET /metrics``, the Prometheus text
  format of the operator's own registry (:class:`trainer.framework.metrics.Metrics`); with
  ``--metrics-secure`` over HTTPS (certificate in Secret :data:`METRICS_SECRET`) and only for bearer
  tokens the apiserver lets ``get /metrics`` (:mod:`trainer.framework.delegated_auth`), as
  controller-runtime's ``metricsserver.Options{SecureServing: true, FilterProvider:
  filters.WithAuthenticationAndAuthorization}``;
* probes on ``--health-probe-bind-address`` (default ``:8081``): ``GET /healthz`` answers 200 while
  the process serves at all (liveness; and its status server listens, when enabled), ``GET /readyz``
  200 while every cache has listed and is being watched, else 500 with the check that failed and why,
  as controller-runtime's ``healthz`` handler words it (``sigs.k8s.io/controller-runtime``
  ``pkg/healthz/healthz.go``), e.g.
  ``[-]informers-synced failed: not watching: trainjobs.trainer.kubeflow.org``; with the webhook also
  ``webhook-configurations`` (its configurations carry the served CA, see
  :meth:`trainer.webhook.server.WebhookServer.not_ready`); with the status server both ``/healthz``
  and ``/readyz`` check ``status-server`` (it listens, see
  :meth:`trainer.statusserver.server.StatusServer.not_serving`). A standby replica waiting for the leader
  Lease is ready: it would take over with warm caches.

A bind address is ``host:port``; ``:port`` listens on every interface, port ``0`` on a free port
(the one chosen is logged and returned), and the address ``0`` alone disables the server, as in
controller-runtime.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping

import structlog
from aiohttp import web

from trainer.framework.delegated_auth import DelegatedAuth
from trainer.framework.metrics import CONTENT_TYPE, Metrics

log = structlog.get_logger("trainer.framework.probes")


def parse_bind_address(value: str) -> tuple[str | None, int] | None:
    """``"host:port"`` as ``(host, port)``; host None for every interface (``":8080"``); None for
    ``"0"`` or "" (disabled). ``[::1]:8080`` names an IPv6 host. Raises ``ValueError`` otherwise."""
    value = value.strip()
    if value in ("", "0"):
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bind address {value!r} is not host:port, :port or 0")
    host = host.strip("[]")
    return (host or None, int(port))


METRICS_SECRET = "trainer-metrics-certs"
"""The Secret holding the CA and serving certificate of ``/metrics`` under ``--metrics-secure``."""


def metrics_app(metrics: Metrics, auth: DelegatedAuth | None = None) -> web.Application:
    """``GET /metrics``; with ``auth`` only for a bearer token it lets in (else its 401 or 403 with
    its message, as controller-runtime's secure metrics answer; 500 when the apiserver could not be
    asked)."""

    async def handle(request: web.Request) -> web.Response:
        if auth is not None:
            try:
                decision = await auth.decide(request.headers.get("Authorization"), "get", request.path)
            except Exception as e:  # the apiserver's answer or its absence
                log.warning("metrics request not authorized: the apiserver could not be asked", error=str(e))
                return web.Response(status=500, text=f"Internal Server Error: {e}\n")
            if not decision.allowed:
                return web.Response(status=decision.code, text=decision.message + "\n")
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    return app


READY_CHECK = "informers-synced"
"""The name of the readiness check, as controller-runtime's manager names its cache check."""


def probes_app(
    not_ready: Callable[[], str | None],
    more: Mapping[str, Callable[[], str | None]] | None = None,
    live: Mapping[str, Callable[[], str | None]] | None = None,
) -> web.Application:
    """``GET /healthz`` and ``GET /readyz``: 200 ``ok`` when every check answers None, else 500 with one
    line ``[-]<name> failed: <reason>`` per failed check and ``healthz check failed``, as
    controller-runtime answers failed checks. ``/readyz`` runs ``not_ready`` (named ``informers-synced``)
    and every check of ``more`` (by name, e.g. ``webhook-configurations``); ``/healthz`` the checks of
    ``live`` only (none: always 200). Both mappings are read at each request, so the caller may add
    checks later (e.g. ``status-server``, in both, as kubeflow/trainer ``pkg/statusserver/setup.go``
    ``RegisterProbes`` adds its checker to both)."""
    more = more if more is not None else {}
    live = live if live is not None else {}

    def answer(checks: list[tuple[str, Callable[[], str | None]]]) -> web.Response:
        failed = [(name, reason) for name, check in checks if (reason := check()) is not None]
        if not failed:
            return web.Response(text="ok")
        lines = "".join(f"[-]{name} failed: {reason}\n" for name, reason in failed)
        return web.Response(status=500, text=f"{lines}healthz check failed\n")

    async def healthz(request: web.Request) -> web.Response:
        return answer(list(live.items()))

    async def readyz(request: web.Request) -> web.Response:
        return answer([(READY_CHECK, not_ready), *more.items()])  # read now: checks may be added after the start

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def serve(
    app: web.Application, address: str, what: str, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, int] | None:
    """Serve ``app`` on ``address`` (see :func:`parse_bind_address`), over TLS with ``ssl_context``
    when given; returns the runner (``await runner.cleanup()`` stops it) and the port bound, or None
    when ``address`` disables it. Raises ``OSError`` when the address cannot be bound, ``ValueError``
    when it is malformed."""
    bind = parse_bind_address(address)
    if bind is None:
        log.info(f"{what} server disabled")
        return None
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, bind[0], bind[1], reuse_address=True, ssl_context=ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    port = int(runner.addresses[0][1])
    log.info(f"serving {what}", address=f"{bind[0] or ''}:{port}")
    return runner, port

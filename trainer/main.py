"""The operator's command line: ``trainer-operator [flags]`` (also ``python -m trainer``).

The flags are declared in :mod:`trainer.wiring.settings` (:func:`~trainer.wiring.settings.parse_args`); every flag can
also be given as an environment variable named ``TRAINER_<FLAG>`` (upper case, dashes as underscores);
the flag wins.

Exit codes: 0 after SIGTERM/SIGINT (in-flight reconciles finished or the shutdown timeout passed,
the leader Lease released), 1 when the leader Lease was lost or a write was refused for being past
the renew deadline (as controller-runtime exits, so the pod restarts as a fresh candidate). A second
signal cancels at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import structlog

from trainer.api.kinds import SECRETS
from trainer.framework.delegated_auth import DelegatedAuth
from trainer.framework.kube.cache import wait_synced
from trainer.framework.kube.client import Kube
from trainer.framework.kube.leader import LeaderElector, LeadershipLost, default_namespace
from trainer.framework.manager import Manager
from trainer.framework.metrics import Metrics
from trainer.framework.permissions import Permission
from trainer.framework.probes import METRICS_SECRET, metrics_app, parse_bind_address, probes_app, serve
from trainer.framework.tls import KEEPER_VERBS, ROLE, WebhookTLS, serving_names
from trainer.jobs.features.lifecycle import JobMetrics
from trainer.mpijob import crd as mpijob_crd
from trainer.statusserver import server as status_server
from trainer.statusserver.series import SeriesMetrics
from trainer.webhook.server import WebhookServer, cache_facts
from trainer.wiring import new_manager
from trainer.wiring.settings import EVENT_LOOPS, Settings, parse_args

PERMISSIONS = (
    Permission(
        SECRETS,
        KEEPER_VERBS,
        "--metrics-secure's certificate: read, watch (by name), rotate",
        names=(METRICS_SECRET,),
        role=ROLE,
    ),
)


def configure_logging(fmt: str, level: str) -> None:
    """Structured logs: JSON lines, or a readable console format on a terminal; the standard library's
    records (kubernetes_asyncio's, aiohttp's) at warning and above, in the same format."""
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    # Lines of libraries that log through the standard library: rendered the same way, one format.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(getattr(logging, level.upper(), logging.INFO), logging.WARNING))


def operator_metrics() -> Metrics:
    """The operator's registry, every family it exports registered before the first scrape: the generic
    ones, the jobs' (:class:`~trainer.jobs.features.lifecycle.JobMetrics`, which the controllers would
    register when built) and the trainer pods' reports' (:class:`~trainer.statusserver.series.SeriesMetrics`,
    which the status server would register, and without it nothing would)."""
    metrics = Metrics()
    JobMetrics.of(metrics)
    SeriesMetrics.of(metrics)
    return metrics


async def run(settings: Settings) -> int:
    """Connect, serve metrics and probes, run the manager (and the webhook, the status server) under
    ``settings`` until SIGTERM/SIGINT (graceful) or a lost Lease, then stop cleanly; returns the exit
    code (see the module docstring)."""
    log = structlog.get_logger("trainer")
    metrics = operator_metrics()
    kube = await Kube.connect(settings.kubeconfig)
    kube.observe = metrics.observe_request
    elector = _elector(kube, settings, metrics)
    manager = new_manager(kube, settings, metrics, elector)
    await mpijob_crd.check(kube)  # one error line when the MPIJob CRD does not serve v2beta1
    checks: dict[str, Callable[[], str | None]] = {}
    live: dict[str, Callable[[], str | None]] = {}
    parts: list[Coroutine[Any, Any, Any]] = []
    metrics_tls = await _metrics_tls(kube, settings)
    if metrics_tls is not None:
        parts.append(metrics_tls.run())  # renewed when due, reloaded on a change of its Secret
    servers = []
    for app, address, what, context in (
        (
            metrics_app(metrics, DelegatedAuth(kube) if metrics_tls is not None else None),
            settings.metrics_bind_address,
            "metrics",
            metrics_tls.context if metrics_tls is not None else None,
        ),
        (probes_app(manager.not_ready, checks, live), settings.health_probe_bind_address, "health probes", None),
    ):
        served = await serve(app, address, what, context)
        if served is not None:
            servers.append(served[0])
    log.info(
        "starting",
        namespace=settings.namespace or "(all)",
        max_concurrent_reconciles=settings.max_concurrent_reconciles,
        gang_scheduler_name=settings.gang_scheduler_name,
        max_nodes_per_job=settings.max_nodes_per_job,
        leader_elect=bool(elector),
        identity=elector.identity if elector else None,
    )
    parts += _webhook(kube, settings, manager, metrics, checks)
    parts += _status_server(kube, settings, manager, checks, live)
    try:
        code = await _until_stopped(manager, parts, log)
    finally:
        for runner in servers:
            await runner.cleanup()
        if metrics_tls is not None:
            metrics_tls.close()
        await kube.close()
    if code == 0:
        log.info("stopped")
    return code


def _elector(kube: Kube, settings: Settings, metrics: Metrics) -> LeaderElector | None:
    """The leader elector of ``--leader-elect`` (None without), its holding told to
    ``leader_election_master_status`` (0 until it leads)."""
    if not settings.leader_elect:
        return None
    lease_name = settings.leader_election_id

    def on_change(leading: bool) -> None:
        metrics.leading(lease_name, leading)

    elector = LeaderElector(
        kube, settings.leader_election_namespace or default_namespace(), lease_name, on_change=on_change
    )
    metrics.leading(lease_name, False)
    return elector


async def _metrics_tls(kube: Kube, settings: Settings) -> WebhookTLS | None:
    """The started serving certificate of ``/metrics`` under ``--metrics-secure`` (kubeflow/trainer#3912:
    HTTPS, and only for tokens the apiserver lets get ``/metrics``); None when it is plain HTTP or not
    served. Raises :class:`~trainer.framework.kube.client.ApiError` when its Secret cannot be kept."""
    if not settings.metrics_secure or parse_bind_address(settings.metrics_bind_address) is None:
        return None
    dns, ips = serving_names(settings.metrics_service, settings.webhook_namespace)
    tls = WebhookTLS(
        kube,
        settings.webhook_namespace,
        dns,
        ips,
        validity=settings.webhook_cert_validity,
        secret_name=METRICS_SECRET,
    )
    await tls.start()
    return tls


def _webhook(
    kube: Kube, settings: Settings, manager: Manager, metrics: Metrics, checks: dict[str, Callable[[], str | None]]
) -> list[Coroutine[Any, Any, Any]]:
    """The admission webhook's tasks (none when ``--webhook-port`` is 0): it answers once the caches
    are synced, and ``/readyz`` fails (``checks``) while its configurations lack its CA."""
    webhook_settings = settings.webhook
    if webhook_settings is None:
        return []
    webhook = WebhookServer(
        kube,
        webhook_settings,
        cache_facts(
            manager.readers,
            settings.gang_scheduler_name,
            settings.max_nodes_per_job,
            status_server=bool(settings.status_server_port),
        ),
        metrics,
    )
    checks["webhook-configurations"] = webhook.not_ready  # /readyz fails while they lack its CA
    synced = asyncio.Event()

    async def when_synced() -> None:
        await wait_synced(manager.informers)  # answers need the caches
        synced.set()

    return [when_synced(), webhook.run(synced)]


def _status_server(
    kube: Kube,
    settings: Settings,
    manager: Manager,
    checks: dict[str, Callable[[], str | None]],
    live: dict[str, Callable[[], str | None]],
) -> list[Coroutine[Any, Any, Any]]:
    """The status server's task (none when ``--status-server-port`` is 0), checked by ``/readyz`` and
    ``/livez`` (kubeflow/trainer#3338)."""
    status_settings = settings.status_server
    if status_settings is None:
        return []
    statuses = status_server.setup(kube, status_settings, manager)
    checks["status-server"] = live["status-server"] = statuses.not_serving  # kubeflow/trainer#3338
    return [statuses.run()]


async def _until_stopped(manager: Manager, parts: list[Coroutine[Any, Any, Any]], log: Any) -> int:
    """Run ``manager`` and ``parts`` until SIGTERM/SIGINT (the manager stopped gracefully; a second
    signal cancels it), a part failing (the manager stopped, then its error raised) or a lost Lease
    (1); the parts are cancelled before it returns. Returns the exit code."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(manager.run())
    # The webhook serves on every replica, leading or not; gather() of nothing would end at once.
    side = asyncio.ensure_future(asyncio.gather(*parts) if parts else loop.create_future())

    signals: list[int] = []

    def on_signal(sig: int) -> None:
        signals.append(sig)
        if len(signals) > 1:
            task.cancel()  # a second signal: no more waiting
        else:
            log.info("stopping", signal=signal.Signals(sig).name)
            manager.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await asyncio.wait([task, side], return_when=asyncio.FIRST_COMPLETED)
        if not task.done():  # the webhook failed: stop the manager too, then say why
            manager.stop()
            await task
            side.result()
        await task
    except LeadershipLost as e:
        log.error("leader election lost", error=str(e))
        return 1
    except asyncio.CancelledError:
        log.info("cancelled")
    finally:
        side.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await side
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    settings = parse_args(argv)
    configure_logging(settings.log_format, settings.log_level)
    with asyncio.Runner(loop_factory=EVENT_LOOPS[settings.event_loop]) as runner:
        return runner.run(run(settings))


if __name__ == "__main__":
    sys.exit(main())

"""The operator's command line: ``trainer-operator [flags]`` (also ``python -m trainer``).

Every flag can also be given as an environment variable named ``TRAINER_<FLAG>`` (upper case,
dashes as underscores); the flag wins.

Exit codes: 0 after SIGTERM/SIGINT (in-flight reconciles finished or the shutdown timeout passed,
the leader Lease released), 1 when the leader Lease was lost or a write was refused for being past
the renew deadline (as controller-runtime exits, so the pod restarts as a fresh candidate). A second
signal cancels at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import structlog
import uvloop

from trainer.framework.kube.cache import wait_synced
from trainer.framework.kube.client import Kube
from trainer.framework.kube.leader import LeaderElector, LeadershipLost, default_namespace
from trainer.framework.metrics import Metrics
from trainer.framework.probes import metrics_app, probes_app, serve
from trainer.jobs import gang
from trainer.jobs.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.statusserver import server as status_server
from trainer.statusserver.server import StatusServerSettings
from trainer.webhook.server import WebhookServer, WebhookSettings, cache_facts
from trainer.wiring import Settings, new_manager

EVENT_LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}
"""The event loops the operator can run on (``--event-loop``): uvloop (the default; libuv and its TLS
in C: the operator's CPU per TrainJob in a burst is about 0.6-0.8 of the standard library's loop, see
docs/benchmarks.md) and the standard library's, kept for diagnosis."""
DEFAULT_EVENT_LOOP = "uvloop"
"""The name in :data:`EVENT_LOOPS` the operator runs on unless ``--event-loop`` says otherwise."""


def _env(flag: str, default: str | None = None) -> str | None:
    return os.environ.get("TRAINER_" + flag.upper().replace("-", "_"), default)


def _seconds(p: argparse.ArgumentParser, flag: str, default: str, help: str) -> None:
    """Add ``flag``: a number of seconds (``SECONDS``), defaulting to the environment's ``TRAINER_<FLAG>``
    or else ``default``."""
    p.add_argument(flag, type=float, default=float(_env(flag[2:], default) or default), metavar="SECONDS", help=help)


def _bool(value: str) -> bool:
    """``true``/``false`` (also 1/0, yes/no), as Go's ``strconv.ParseBool`` reads a flag. Raises
    ``argparse.ArgumentTypeError`` otherwise."""
    low = value.strip().lower()
    if low in ("1", "t", "true", "yes", "y", "on"):
        return True
    if low in ("0", "f", "false", "no", "n", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the flags (see ``--help``)."""
    p = argparse.ArgumentParser(
        prog="trainer-operator",
        description="Run the trainer operator.",
        epilog="Every flag can also be set by the environment variable TRAINER_<FLAG> (upper case, dashes "
        "as underscores, e.g. TRAINER_LEADER_ELECT=true); the flag wins.",
    )
    p.add_argument(
        "--kubeconfig", default=_env("kubeconfig"), help="kubeconfig path; default: in-cluster or $KUBECONFIG"
    )
    p.add_argument("--namespace", default=_env("namespace"), help="watch only this namespace; default: all")
    p.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=int(_env("max-concurrent-reconciles", "4") or 4),
        help="reconciles running at once (default 4)",
    )
    p.add_argument(
        "--gang-scheduler-name",
        choices=sorted(gang.SCHEDULERS),
        default=_env("gang-scheduler-name", "none"),
        help="gang scheduler the pods are handed to: volcano, kueue, scheduler-plugins or none (default none)",
    )
    p.add_argument(
        "--max-nodes-per-job",
        type=int,
        default=int(_env("max-nodes-per-job", str(DEFAULT_MAX_NODES_PER_JOB)) or 0),
        metavar="N",
        help=f"the most nodes one job may have: a TrainJob's numNodes and the pods of any of its replicated jobs, "
        f"an MPIJob's workers; a larger job is refused by the webhook, or gets condition Failed with nothing "
        f"created (default {DEFAULT_MAX_NODES_PER_JOB}; 0: no limit)",
    )
    _seconds(
        p,
        "--status-coalesce-seconds",
        "1",
        "how long a change of only a job's progress counts (jobsStatus, replicaStatuses) may wait to be "
        "written together with the next ones; conditions are written at once (default 1; 0: every change at once)",
    )
    _seconds(
        p,
        "--children-batch-seconds",
        "1",
        "how long the changes of a job's children (its Jobs, Service, ConfigMaps...) are gathered before "
        "the job is reconciled for them, as the Job controller batches pod updates (default 1; 0: at once)",
    )
    p.add_argument(
        "--trainjob-running-condition",
        nargs="?",
        const=True,
        type=_bool,
        default=_bool(_env("trainjob-running-condition", "false") or "false"),
        metavar="BOOL",
        help="TrainJobs also carry a Running condition and Suspended=False once resumed (default false: only "
        "upstream's conditions, which the official kubeflow SDK reads correctly)",
    )
    p.add_argument(
        "--webhook-port",
        type=int,
        default=int(_env("webhook-port", "0") or 0),
        help="port of the admission webhook (TLS); 0 (default) disables it. The webhook configurations "
        "(trainer-webhook) come with the operator's manifests; it patches their caBundle and is not ready "
        "while one is missing",
    )
    p.add_argument(
        "--webhook-host",
        default=_env("webhook-host"),
        help="host the apiserver calls the webhook at, put in its serving certificate (e.g. 127.0.0.1 for an "
        "operator run out of the cluster); the webhook configurations must then call https://HOST:PORT: apply "
        "`python -m trainer.webhook.server --url https://HOST:PORT` (the operator never creates them, it only "
        "patches their caBundle); default: only through --webhook-service",
    )
    p.add_argument(
        "--webhook-service",
        default=_env("webhook-service", "trainer-webhook-service"),
        help="Service in front of the webhook (default trainer-webhook-service)",
    )
    p.add_argument(
        "--webhook-namespace",
        default=_env("webhook-namespace", "default"),
        help="namespace of the webhook Service and of its certificate Secrets, the operator's own: its Role "
        "grants those Secrets there (default default)",
    )
    _seconds(
        p,
        "--webhook-cert-validity",
        "31536000",
        "lifetime of the webhook's serving certificate in seconds (default 31536000, one year); it is "
        "renewed in its last third, checked every min(3600, validity/6) s and on every change of its Secret; "
        "the CA lives ten years, so at most 315360000",
    )
    p.add_argument(
        "--webhook-reuse-port",
        nargs="?",
        const=True,
        type=_bool,
        default=_bool(_env("webhook-reuse-port", "false") or "false"),
        metavar="BOOL",
        help="bind the webhook port with SO_REUSEPORT so that several replicas on one host share it, e.g. on "
        "a local cluster (default false; bare flag: true)",
    )
    p.add_argument(
        "--status-server-port",
        type=int,
        default=int(_env("status-server-port", "0") or 0),
        help="port of the status server trainer pods post progress to (TLS); 0 (default) disables it and the "
        "KUBEFLOW_TRAINER_SERVER_* injection",
    )
    p.add_argument(
        "--status-server-host",
        default=_env("status-server-host"),
        help="host in the status server URL the trainer pods get (e.g. 127.0.0.1 on a local cluster); default: "
        "<webhook-service>.<webhook-namespace>.svc",
    )
    _seconds(
        p,
        "--status-write-interval",
        "5",
        "at most one trainerStatus write per TrainJob per this many seconds; later posts are coalesced "
        "into the next write (default 5)",
    )
    p.add_argument(
        "--event-loop",
        choices=sorted(EVENT_LOOPS),
        default=_env("event-loop", DEFAULT_EVENT_LOOP),
        help=f"asyncio event loop: uvloop or asyncio, the standard library's (default {DEFAULT_EVENT_LOOP})",
    )
    p.add_argument(
        "--log-format",
        choices=["auto", "json", "console"],
        default=_env("log-format", "auto"),
        help="json, console, or auto: console on a terminal, json otherwise",
    )
    p.add_argument("--log-level", default=_env("log-level", "info"), help="debug, info, warning, error")
    p.add_argument(
        "--metrics-bind-address",
        default=_env("metrics-bind-address", ":8080"),
        help="host:port of the Prometheus /metrics endpoint; :port for every interface, 0 disables (default :8080)",
    )
    p.add_argument(
        "--health-probe-bind-address",
        default=_env("health-probe-bind-address", ":8081"),
        help="host:port of /healthz and /readyz; 0 disables (default :8081)",
    )
    p.add_argument(
        "--leader-elect",
        nargs="?",
        const=True,
        type=_bool,
        default=_bool(_env("leader-elect", "false") or "false"),
        metavar="BOOL",
        help="elect a leader on a Lease so that only one replica reconciles (default false; bare flag: true)",
    )
    p.add_argument(
        "--leader-election-namespace",
        default=_env("leader-election-namespace"),
        help="namespace of the Lease; default: the pod's namespace (service account), else default",
    )
    p.add_argument(
        "--leader-election-id",
        default=_env("leader-election-id", "trainer-operator"),
        help="name of the Lease (default trainer-operator)",
    )
    args = p.parse_args(argv)
    if not 0 < args.webhook_cert_validity <= 10 * 365 * 86400:  # at most the CA's ten years
        p.error(f"--webhook-cert-validity must be in (0, 315360000] seconds, not {args.webhook_cert_validity}")
    if args.max_nodes_per_job < 0:
        p.error(f"--max-nodes-per-job must be 0 (no limit) or positive, not {args.max_nodes_per_job}")
    if args.status_coalesce_seconds < 0:
        p.error(f"--status-coalesce-seconds must be 0 or positive, not {args.status_coalesce_seconds}")
    if args.children_batch_seconds < 0:
        p.error(f"--children-batch-seconds must be 0 or positive, not {args.children_batch_seconds}")
    if args.status_write_interval <= 0:
        p.error(f"--status-write-interval must be positive, not {args.status_write_interval}")
    return args


def configure_logging(fmt: str, level: str) -> None:
    """Structured logs: JSON lines, or a readable console format on a terminal."""
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


async def run(args: argparse.Namespace) -> int:
    """Connect, serve metrics and probes, run the manager (and the webhook) until SIGTERM/SIGINT
    (graceful) or a lost Lease, then stop cleanly; returns the exit code."""
    log = structlog.get_logger("trainer")
    metrics = Metrics()
    kube = await Kube.connect(args.kubeconfig)
    kube.observe = metrics.observe_request
    elector = None
    if args.leader_elect:
        lease_name = args.leader_election_id

        def on_change(leading: bool) -> None:
            metrics.leading(lease_name, leading)

        elector = LeaderElector(
            kube, args.leader_election_namespace or default_namespace(), lease_name, on_change=on_change
        )
        metrics.leading(lease_name, False)
    status_settings = None
    if args.status_server_port:
        status_settings = StatusServerSettings(
            port=args.status_server_port,
            host=args.status_server_host,
            namespace=args.webhook_namespace,
            service=args.webhook_service,
            write_interval=args.status_write_interval,
            cert_validity=args.webhook_cert_validity,
            reuse_port=args.webhook_reuse_port,
        )
    settings = Settings(
        namespace=args.namespace,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        gang_scheduler_name=args.gang_scheduler_name,
        trainjob_running_condition=args.trainjob_running_condition,
        max_nodes_per_job=args.max_nodes_per_job,
        status_coalesce_seconds=args.status_coalesce_seconds,
        children_batch_seconds=args.children_batch_seconds,
        status_server_url=status_settings.url if status_settings is not None else None,
    )
    manager = new_manager(kube, settings, metrics, elector)
    checks: dict[str, Callable[[], str | None]] = {}
    servers = []
    for app, address, what in (
        (metrics_app(metrics), args.metrics_bind_address, "metrics"),
        (probes_app(manager.not_ready, checks), args.health_probe_bind_address, "health probes"),
    ):
        served = await serve(app, address, what)
        if served is not None:
            servers.append(served[0])
    log.info(
        "starting",
        namespace=args.namespace or "(all)",
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        gang_scheduler_name=args.gang_scheduler_name,
        max_nodes_per_job=args.max_nodes_per_job,
        leader_elect=bool(elector),
        identity=elector.identity if elector else None,
    )
    parts: list[Coroutine[Any, Any, Any]] = []
    if args.webhook_port:
        webhook = WebhookServer(
            kube,
            WebhookSettings(
                port=args.webhook_port,
                host=args.webhook_host,
                namespace=args.webhook_namespace,
                service=args.webhook_service,
                cert_validity=args.webhook_cert_validity,
                reuse_port=args.webhook_reuse_port,
            ),
            cache_facts(manager.readers, args.gang_scheduler_name, args.max_nodes_per_job),
        )
        checks["webhook-configurations"] = webhook.not_ready  # /readyz fails while they lack its CA
        synced = asyncio.Event()

        async def when_synced() -> None:
            await wait_synced(manager.informers)  # answers need the caches
            synced.set()

        parts += [when_synced(), webhook.run(synced)]
    if status_settings is not None:
        parts.append(status_server.setup(kube, status_settings, manager).run())
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
        for runner in servers:
            await runner.cleanup()
        await kube.close()
    log.info("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    with asyncio.Runner(loop_factory=EVENT_LOOPS[args.event_loop]) as runner:
        return runner.run(run(args))


if __name__ == "__main__":
    sys.exit(main())

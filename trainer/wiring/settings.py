"""The operator's settings, each declared once: its flag, type, default, environment variable, help and
the consumers' options it feeds.

A field of :class:`Settings` is a flag (``--`` and the field's name, dashes for underscores), read also
from ``TRAINER_<FLAG>`` (upper case, dashes as underscores; the flag wins). :func:`parse_args` builds the
argparse parser from the fields, in their order, and returns a :class:`Settings`. Each consumer reads
its own typed options built from the same fields by :meth:`Settings.options`: the manager's
(:class:`~trainer.framework.manager.ManagerOptions`), each controller's
(:class:`~trainer.trainjob.options.TrainJobOptions`, :class:`~trainer.mpijob.controller.MPIJobOptions`),
the webhook's (:class:`~trainer.webhook.server.WebhookSettings`) and the status server's
(:class:`~trainer.statusserver.server.StatusServerSettings`); the entry point reads the rest (kubeconfig,
leader election, metrics and probe addresses, logs, event loop) from the :class:`Settings` itself.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import uvloop

from trainer.framework.manager import DEFAULT_MAX_CONCURRENT_RECONCILES, ManagerOptions
from trainer.jobs import gang
from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.mpijob.controller import MPIJobOptions
from trainer.statusserver.series import DEFAULT_MAX_SERIES
from trainer.statusserver.server import StatusServerSettings
from trainer.trainjob.options import TrainJobOptions
from trainer.webhook.server import WebhookSettings

T = TypeVar("T")

ENV_PREFIX = "TRAINER_"
"""A flag ``--some-flag`` is also read from the environment variable ``TRAINER_SOME_FLAG``."""
PROG = "trainer-operator"
DESCRIPTION = "Run the trainer operator."
EPILOG = (
    "Every flag can also be set by the environment variable TRAINER_<FLAG> (upper case, dashes "
    "as underscores, e.g. TRAINER_LEADER_ELECT=true); the flag wins."
)
MAX_CERT_VALIDITY = 10 * 365 * 86400
"""The most seconds ``--webhook-cert-validity`` may be: the CA's ten years."""

MPI_GANG_SCHEDULING = {"volcano": "volcano", "scheduler-plugins-scheduler": "scheduler-plugins"}
"""mpi-operator's ``--gang-scheduling`` values -> ``--gang-scheduler-name`` (kubeflow/mpi-operator
``pkg/controller/mpi_job_controller.go`` ``NewMPIJobController``: ``volcano`` is Volcano, any other name
scheduler-plugins' coscheduling with that scheduler; this operator's coscheduling pods go to
``scheduler-plugins-scheduler``, the only other name taken)."""

EVENT_LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}
"""The event loops the operator can run on (``--event-loop``): uvloop (the default; libuv and its TLS
in C: the operator's CPU per TrainJob in a burst is about 0.6-0.8 of the standard library's loop, see
docs/benchmarks.md) and the standard library's, kept for diagnosis."""
DEFAULT_EVENT_LOOP = "uvloop"
"""The name in :data:`EVENT_LOOPS` the operator runs on unless ``--event-loop`` says otherwise."""


def parse_bool(value: str) -> bool:
    """``true``/``false`` (also 1/0, yes/no, t/f, y/n, on/off, case-insensitive; empty is false), as Go's
    ``strconv.ParseBool`` reads a flag. Raises ``argparse.ArgumentTypeError`` otherwise."""
    low = value.strip().lower()
    if low in ("1", "t", "true", "yes", "y", "on"):
        return True
    if low in ("0", "f", "false", "no", "n", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


@dataclass(frozen=True)
class Flag:
    """How one field of :class:`Settings` is read from the command line and the environment, and which
    consumers' options it fills (the ``metadata["flag"]`` of the field)."""

    help: str
    """The ``--help`` text."""
    parse: Callable[[str], Any]
    """A command-line or environment string to the value (``str``, ``int``, ``float``, :func:`parse_bool`);
    raises ``ValueError`` or ``argparse.ArgumentTypeError`` for a bad one."""
    metavar: str | None = None
    """The value's name in ``--help``; None: argparse's (the choices, else the flag in upper case)."""
    choices: tuple[str, ...] | None = None
    """The only values allowed on the command line; None: any."""
    valid: tuple[Callable[[Any], bool], str] | None = None
    """A check of the parsed value and the rule it states (``--flag <rule>, not <value>`` when it fails)."""
    feeds: tuple[tuple[type, str], ...] = ()
    """``(options class, field name)``: the consumers' option fields this setting fills
    (:meth:`Settings.options`)."""

    @property
    def is_bool(self) -> bool:
        """A boolean flag: ``--flag`` alone is true, ``--flag=false`` false."""
        return self.parse is parse_bool


def setting(
    default: T,
    help: str,
    *,
    parse: Callable[[str], Any] = str,
    metavar: str | None = None,
    choices: Sequence[str] | None = None,
    valid: tuple[Callable[[Any], bool], str] | None = None,
    feeds: Sequence[type | tuple[type, str]] = (),
) -> T:
    """A field of :class:`Settings`: a flag with ``default`` (when neither the flag nor its environment
    variable is given) and ``help``; see :class:`Flag` for the rest. ``feeds`` names options classes
    (a field of the setting's own name) or ``(class, field name)`` pairs. Typed as ``default`` for the
    type checker; returns a ``dataclasses.Field``."""
    fed = tuple(f if isinstance(f, tuple) else (f, "") for f in feeds)
    flag = Flag(help, parse, metavar, tuple(choices) if choices is not None else None, valid, fed)
    return dataclasses.field(default=default, metadata={"flag": flag})


_NOT_NEGATIVE: tuple[Callable[[Any], bool], str] = (lambda v: v >= 0, "must be 0 or positive")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The operator's settings: one field per flag (see the module docstring); every field has its
    default, so a test builds one with only what it changes."""

    kubeconfig: str | None = setting(None, "kubeconfig path; default: in-cluster or $KUBECONFIG")
    namespace: str | None = setting(None, "watch only this namespace; default: all", feeds=[ManagerOptions])
    max_concurrent_reconciles: int = setting(
        DEFAULT_MAX_CONCURRENT_RECONCILES,
        "reconciles running at once, per controller, and Event writes at once "
        f"(default {DEFAULT_MAX_CONCURRENT_RECONCILES})",
        parse=int,
        feeds=[ManagerOptions],
    )
    gang_scheduler_name: str = setting(
        "none",
        "gang scheduler the pods are handed to: volcano, kueue, scheduler-plugins, workload (the kube-scheduler's "
        "own gangs through the Workload API, Kubernetes >= 1.37) or none (default none)",
        choices=sorted(gang.SCHEDULERS),
    )
    gang_scheduling: str = setting(
        "",
        "mpi-operator's flag, for its manifests and scripts: volcano (the gang scheduler volcano) or "
        "scheduler-plugins-scheduler (the gang scheduler scheduler-plugins); given, it sets the gang "
        "scheduler and must agree with --gang-scheduler-name unless that is none (default empty: "
        "--gang-scheduler-name decides)",
        metavar="NAME",
        valid=(lambda v: v in ("", *MPI_GANG_SCHEDULING), "must be volcano or scheduler-plugins-scheduler"),
    )
    max_nodes_per_job: int = setting(
        DEFAULT_MAX_NODES_PER_JOB,
        f"the most nodes one job may have: a TrainJob's numNodes and the pods of any of its replicated jobs, "
        f"an MPIJob's workers; a larger job is refused by the webhook, or gets condition Failed with nothing "
        f"created (default {DEFAULT_MAX_NODES_PER_JOB}; 0: no limit)",
        parse=int,
        metavar="N",
        valid=(lambda v: v >= 0, "must be 0 (no limit) or positive"),
        feeds=[TrainJobOptions, MPIJobOptions],
    )
    status_coalesce_seconds: float = setting(
        1.0,
        "how long a change of only a job's progress counts (jobsStatus, replicaStatuses) may wait to be "
        "written together with the next ones; conditions are written at once (default 1; 0: every change at once)",
        parse=float,
        metavar="SECONDS",
        valid=_NOT_NEGATIVE,
        feeds=[TrainJobOptions, MPIJobOptions],
    )
    children_batch_seconds: float = setting(
        1.0,
        "how long the changes of a job's children (its Jobs, Service, ConfigMaps...) are gathered before "
        "the job is reconciled for them, as the Job controller batches pod updates (default 1; 0: at once)",
        parse=float,
        metavar="SECONDS",
        valid=_NOT_NEGATIVE,
        feeds=[ManagerOptions],
    )
    trainjob_running_condition: bool = setting(
        False,
        "TrainJobs also carry a Running condition and Suspended=False once resumed (default false: only "
        "upstream's conditions, which the official kubeflow SDK reads correctly)",
        parse=parse_bool,
        metavar="BOOL",
        feeds=[(TrainJobOptions, "running_condition")],
    )
    trainjob_network_policy: bool = setting(
        False,
        "each TrainJob gets a NetworkPolicy (named like it) that lets into its pods only its own pods; its pods "
        "are labelled trainer.kubeflow.org/trainjob-name for it. Ingress only; a network plugin must enforce "
        "NetworkPolicy (default false: none, and the operator deletes those it made)",
        parse=parse_bool,
        metavar="BOOL",
        feeds=[(TrainJobOptions, "network_policy")],
    )
    webhook_port: int = setting(
        0,
        "port of the admission webhook (TLS); 0 (default) disables it. The webhook configurations "
        "(trainer-webhook) come with the operator's manifests; it patches their caBundle and is not ready "
        "while one is missing",
        parse=int,
        feeds=[(WebhookSettings, "port")],
    )
    webhook_host: str | None = setting(
        None,
        "host the apiserver calls the webhook at, put in its serving certificate (e.g. 127.0.0.1 for an "
        "operator run out of the cluster); the webhook configurations must then call https://HOST:PORT: apply "
        "`python -m trainer.webhook.server --url https://HOST:PORT` (the operator never creates them, it only "
        "patches their caBundle); default: only through --webhook-service",
        feeds=[(WebhookSettings, "host")],
    )
    webhook_service: str = setting(
        "trainer-webhook-service",
        "Service in front of the webhook (default trainer-webhook-service)",
        feeds=[(WebhookSettings, "service"), (StatusServerSettings, "service")],
    )
    webhook_namespace: str = setting(
        "default",
        "namespace of the webhook Service and of its certificate Secrets, the operator's own: its Role "
        "grants those Secrets there (default default)",
        feeds=[(WebhookSettings, "namespace"), (StatusServerSettings, "namespace")],
    )
    webhook_cert_validity: float = setting(
        31536000.0,
        "lifetime of the webhook's serving certificate in seconds (default 31536000, one year); it is "
        "renewed in its last third, checked every min(3600, validity/6) s and on every change of its Secret; "
        "the CA lives ten years, so at most 315360000",
        parse=float,
        metavar="SECONDS",
        valid=(lambda v: 0 < v <= MAX_CERT_VALIDITY, f"must be in (0, {MAX_CERT_VALIDITY}] seconds"),
        feeds=[(WebhookSettings, "cert_validity"), (StatusServerSettings, "cert_validity")],
    )
    webhook_reuse_port: bool = setting(
        False,
        "bind the webhook port with SO_REUSEPORT so that several replicas on one host share it, e.g. on "
        "a local cluster (default false; bare flag: true)",
        parse=parse_bool,
        metavar="BOOL",
        feeds=[(WebhookSettings, "reuse_port"), (StatusServerSettings, "reuse_port")],
    )
    status_server_port: int = setting(
        0,
        "port of the status server trainer pods post progress to (TLS); 0 (default) disables it and the "
        "KUBEFLOW_TRAINER_SERVER_* injection",
        parse=int,
        feeds=[(StatusServerSettings, "port")],
    )
    status_server_host: str | None = setting(
        None,
        "host in the status server URL the trainer pods get (e.g. 127.0.0.1 on a local cluster); default: "
        "<webhook-service>.<webhook-namespace>.svc",
        feeds=[(StatusServerSettings, "host")],
    )
    status_write_interval: float = setting(
        5.0,
        "at most one trainerStatus write per TrainJob per this many seconds; later posts are coalesced "
        "into the next write (default 5)",
        parse=float,
        metavar="SECONDS",
        valid=(lambda v: v > 0, "must be positive"),
        feeds=[(StatusServerSettings, "write_interval")],
    )
    training_metrics: bool = setting(
        True,
        "export what trainer pods report (progress, remaining seconds, numeric metrics) as Prometheus series "
        "by namespace and trainjob while the status server runs (default true)",
        parse=parse_bool,
        metavar="BOOL",
        feeds=[(StatusServerSettings, "training_metrics")],
    )
    training_metrics_max_series: int = setting(
        DEFAULT_MAX_SERIES,
        "the most series of --training-metrics at once; a job that would pass it is not exported and "
        f"kubeflow_trainer_training_series_dropped_total counts its series (default {DEFAULT_MAX_SERIES})",
        parse=int,
        valid=_NOT_NEGATIVE,
        feeds=[(StatusServerSettings, "training_metrics_max_series")],
    )
    event_loop: str = setting(
        DEFAULT_EVENT_LOOP,
        f"asyncio event loop: uvloop or asyncio, the standard library's (default {DEFAULT_EVENT_LOOP})",
        choices=sorted(EVENT_LOOPS),
    )
    log_format: str = setting(
        "auto", "json, console, or auto: console on a terminal, json otherwise", choices=["auto", "json", "console"]
    )
    log_level: str = setting("info", "debug, info, warning, error")
    metrics_bind_address: str = setting(
        ":8080",
        "host:port of the Prometheus /metrics endpoint; :port for every interface, 0 disables (default :8080)",
    )
    metrics_secure: bool = setting(
        False,
        "serve /metrics over HTTPS (certificate in Secret trainer-metrics-certs of --webhook-namespace, for "
        "--metrics-service) to bearer tokens a TokenReview authenticates and a SubjectAccessReview allows get "
        "on the non-resource URL /metrics, as controller-runtime's secure metrics (default false: plain HTTP, "
        "open to anyone who reaches the port)",
        parse=parse_bool,
        metavar="BOOL",
    )
    metrics_service: str = setting(
        "trainer-operator-metrics",
        "Service in front of /metrics, named in its certificate under --metrics-secure (default "
        "trainer-operator-metrics)",
    )
    health_probe_bind_address: str = setting(":8081", "host:port of /healthz and /readyz; 0 disables (default :8081)")
    leader_elect: bool = setting(
        False,
        "elect a leader on a Lease so that only one replica reconciles (default false; bare flag: true)",
        parse=parse_bool,
        metavar="BOOL",
    )
    leader_election_namespace: str | None = setting(
        None, "namespace of the Lease; default: the pod's namespace (service account), else default"
    )
    leader_election_id: str = setting("trainer-operator", "name of the Lease (default trainer-operator)")

    def options(self, cls: type[T], **derived: Any) -> T:
        """The consumer's options ``cls`` (a dataclass named in some setting's ``feeds``): each field a
        setting feeds holds that setting's value, ``derived`` gives any other (e.g. the TrainJob
        controller's ``injection``), the rest keep ``cls``'s defaults. Raises ``TypeError`` when
        ``derived`` names no field of ``cls``."""
        fed = {
            target or f.name: getattr(self, f.name)
            for f, flag in flags()
            for consumer, target in flag.feeds
            if consumer is cls
        }
        return cls(**fed, **derived)

    @property
    def status_server(self) -> StatusServerSettings | None:
        """The status server's settings; None when ``--status-server-port`` is 0 (no status server)."""
        return self.options(StatusServerSettings) if self.status_server_port else None

    @property
    def webhook(self) -> WebhookSettings | None:
        """The webhook's settings; None when ``--webhook-port`` is 0 (no webhook)."""
        return self.options(WebhookSettings) if self.webhook_port else None

    @property
    def status_server_url(self) -> str | None:
        """``https://<host>:<port>`` of the status server trainer pods report progress to (injected into
        their containers); None without a status server."""
        server = self.status_server
        return server.url if server is not None else None


def flags() -> list[tuple[dataclasses.Field[Any], Flag]]:
    """Every field of :class:`Settings` with its :class:`Flag`, in declaration order (the order of
    ``--help``)."""
    return [(f, f.metadata["flag"]) for f in dataclasses.fields(Settings)]


def flag_name(field: dataclasses.Field[Any]) -> str:
    """``max_nodes_per_job`` -> ``--max-nodes-per-job``."""
    return "--" + field.name.replace("_", "-")


def env_name(field: dataclasses.Field[Any]) -> str:
    """``max_nodes_per_job`` -> ``TRAINER_MAX_NODES_PER_JOB``."""
    return ENV_PREFIX + field.name.upper()


def _from_env(field: dataclasses.Field[Any], flag: Flag) -> Any:
    """The default of a flag: its environment variable parsed, else the declared default. An empty
    variable is the empty string for a string flag and the declared default for any other. Raises
    ``ValueError`` or ``argparse.ArgumentTypeError`` for a variable that does not parse."""
    raw = os.environ.get(env_name(field))
    if raw is None or (raw == "" and flag.parse is not str):
        return field.default
    return flag.parse(raw)


def parser() -> argparse.ArgumentParser:
    """The ``trainer-operator`` argument parser, one argument per field of :class:`Settings`, with the
    defaults of the current environment."""
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG)
    for field, flag in flags():
        kwargs: dict[str, Any] = {"default": _from_env(field, flag), "help": flag.help}
        if flag.is_bool:
            kwargs |= {"nargs": "?", "const": True}
        if flag.parse is not str:
            kwargs["type"] = flag.parse
        if flag.choices is not None:
            kwargs["choices"] = flag.choices
        if flag.metavar is not None:
            kwargs["metavar"] = flag.metavar
        p.add_argument(flag_name(field), **kwargs)
    return p


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    """The settings of the command line ``argv`` (default ``sys.argv[1:]``) and the environment (see
    ``--help``); ``--gang-scheduling`` given sets ``gang_scheduler_name`` (:data:`MPI_GANG_SCHEDULING`).
    Exits (``SystemExit``, status 2, with a usage message) on a bad flag, a value that breaks its rule or
    a ``--gang-scheduling`` that disagrees with ``--gang-scheduler-name``; raises ``ValueError`` for an
    environment variable that does not parse."""
    p = parser()
    args = vars(p.parse_args(argv))
    for field, flag in flags():
        if flag.valid is not None and not flag.valid[0](args[field.name]):
            p.error(f"{flag_name(field)} {flag.valid[1]}, not {args[field.name]}")
    mpi = MPI_GANG_SCHEDULING.get(args["gang_scheduling"])
    if mpi is not None:
        if args["gang_scheduler_name"] not in ("none", mpi):
            p.error(
                f"--gang-scheduling={args['gang_scheduling']} means --gang-scheduler-name={mpi}, not "
                f"--gang-scheduler-name={args['gang_scheduler_name']}; give one of them"
            )
        args["gang_scheduler_name"] = mpi
    return Settings(**args)

"""The ``trainer`` command line (typer + rich): submit, inspect, follow and delete TrainJobs, and run
the operator.

Every command is a thin layer over :class:`trainer.client.AsyncTrainerClient` and, for the :mod:`api`
objects it prints, :class:`trainer.client.AsyncJobClient`; what is pure here
(output formatting, exit codes) is tested without a cluster in ``tests/entry/test_cli.py``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import aiohttp
import typer
import yaml
from kubernetes_asyncio.config import ConfigException
from rich.console import Console
from rich.table import Table

from api.base import Model
from api.crd import CRDS
from api.kinds import CLUSTER_TRAINING_RUNTIMES, PODS, TRAINING_RUNTIMES, TRAINJOBS, Resource
from api.kubeflow_v2beta1 import MANAGED_BY_MPI_OPERATOR as MANAGED_BY_MPI
from api.kubeflow_v2beta1 import MPIJob
from api.trainer_v1alpha1 import MANAGED_BY_TRAINER as TRAINJOB_CONTROLLER
from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob, runtime_from_dict
from trainer.client import (
    COMPLETE,
    TRAINJOB,
    AsyncJobClient,
    AsyncTrainerClient,
    Event,
    JobKind,
    Manifest,
    ManifestError,
    NotFoundError,
    TrainerClientError,
    WaitTimeoutError,
    queue_of,
    runtime_framework,
)
from trainer.client.jobs import DEFAULT_POD_TIMEOUT, DEFAULT_WAIT_TIMEOUT, delete_object, pick_container, watch_objects
from trainer.client.manifest import (
    load_manifests,
    manifest_resource,
    parse_manifest,
    read_yaml,
    require_names,
    wire_dict,
    yaml_error_text,
)
from trainer.client.multicluster import WorkloadInfo, for_multicluster
from trainer.client.types import (
    MPIJOB,
    Holding,
    checkpoint_text,
    eta_text,
    holding_condition,
    in_queue,
    pod_selector,
    progress_text,
    trainer_status_of,
)
from trainer.dashboard import server as dashboard_server
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.meta import meta

T = TypeVar("T")

EXIT_OK = 0
EXIT_ERROR = 1
"""The job Failed (``wait``), or any error: bad manifest, API error, object not found."""
EXIT_USAGE = 2
"""Wrong command line (unknown option, missing argument, bad choice)."""
EXIT_TIMEOUT = 3
"""A wait ran out of time (``wait --timeout``, ``logs --pod-timeout``)."""
EXIT_INTERRUPTED = 130
NO_TERMINAL_WIDTH = 4096

HELP = """Submit, inspect, follow and delete Kubeflow TrainJobs (trainer.kubeflow.org/v1alpha1), and run
the operator.

Objects are named as kubectl names them: TYPE NAME or TYPE/NAME, TYPE a plural (trainjobs), singular
(trainjob), short name (tj) or one of these with the group (trainjobs.trainer.kubeflow.org); the
types: trainjobs, mpijobs, trainingruntimes, clustertrainingruntimes, and runtimes for both runtime
kinds. A NAME alone, where a name is expected and it is not a type, is a TrainJob.

Exit codes: 0 success; 1 the job Failed (wait) or an error (invalid manifest, unreadable file, API
error, not found); 2 usage error; 3 timeout (wait --timeout, logs --pod-timeout)."""

CRD_INSTALL = (
    "install with `helm install trainer charts/trainer -n trainer-system --create-namespace` "
    "or `kubectl apply --server-side -k config/default`"
)
NO_CONTROLLER_AFTER = 5
"""Seconds after which ``describe`` says that no controller has acted on a job without a status."""


class Output(StrEnum):
    """Output formats of ``--output``."""

    table = "table"
    wide = "wide"
    name = "name"
    json = "json"
    yaml = "yaml"


TABLES = (Output.table, Output.wide)
"""The formats printed as tables (``wide`` adds REASON and MESSAGE to the job tables)."""


class Status(StrEnum):
    """Statuses ``wait --status`` accepts: those of :data:`trainer.client.STATUSES`."""

    Created = "Created"
    Suspended = "Suspended"
    Running = "Running"
    Complete = "Complete"
    Failed = "Failed"


@dataclass
class Settings:
    """The global options."""

    kubeconfig: str | None = None
    namespace: str | None = None
    output: Output = Output.table


KubeconfigOpt = Annotated[
    str | None, typer.Option("--kubeconfig", help="kubeconfig path; default: $KUBECONFIG, ~/.kube/config, in-cluster")
]
NamespaceOpt = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="namespace; default: the kubeconfig context's; overrides manifests'"),
]
OutputOpt = Annotated[Output | None, typer.Option("--output", "-o", help="output format")]

app = typer.Typer(
    name="trainer",
    help=HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
operator_app = typer.Typer(help="The operator itself.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(operator_app, name="operator")


def print_version(value: bool) -> None:
    """``--version``: print ``trainer <version>`` and exit."""
    if value:
        typer.echo(f"trainer {importlib.metadata.version('trainjob-operator')}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="output format")] = Output.table,
    version: Annotated[
        bool, typer.Option("--version", callback=print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Submit, inspect, follow and delete TrainJobs; see the exit codes above."""
    logging.getLogger("kubernetes_asyncio").setLevel(logging.ERROR)  # its warnings would add lines to ours
    ctx.obj = Settings(kubeconfig, namespace, output)


def settings(ctx: typer.Context, kubeconfig: str | None, namespace: str | None, output: Output | None) -> Settings:
    """The global options, overridden by those given after the command."""
    root = ctx.find_root().obj if isinstance(ctx.find_root().obj, Settings) else Settings()
    return Settings(kubeconfig or root.kubeconfig, namespace or root.namespace, output or root.output)


# --------------------------------------------------------------------------- errors and running


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: <message>`` on one line to stderr and exit with ``code``."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def exit_code(error: BaseException) -> int:
    """The exit code an error ends the command with: :data:`EXIT_TIMEOUT` for a wait that ran
    out, :data:`EXIT_ERROR` for everything else (a Failed job included)."""
    return EXIT_TIMEOUT if isinstance(error, WaitTimeoutError) else EXIT_ERROR


def error_message(error: BaseException) -> str:
    """The one-line message of an error the CLI reports."""
    if isinstance(error, ApiError):
        return f"the apiserver refused: {error}"
    if isinstance(error, ConfigException):
        return f"cannot load a kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) or in-cluster config: {error}"
    if isinstance(error, aiohttp.ClientError):
        return f"cannot reach the apiserver: {error}"
    if isinstance(error, FileNotFoundError) and not isinstance(error, TrainerClientError):
        return f"{error.strerror}: {error.filename}"
    return str(error) or type(error).__name__


HANDLED: tuple[type[BaseException], ...] = (
    TrainerClientError,
    ApiError,
    ConfigException,
    aiohttp.ClientError,
    OSError,
    ValueError,
)


class KubeconfigError(TrainerClientError):
    """No configuration to connect with: the kubeconfig is missing or not YAML."""


class CRDNotInstalledError(TrainerClientError):
    """The apiserver does not serve a kind: its CustomResourceDefinition is not installed."""

    def __init__(self, res: Resource) -> None:
        super().__init__(f"{res.kind} CRD not installed; {CRD_INSTALL}")


def kubeconfig_problem(kubeconfig: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Why no configuration can be loaded, known before trying: ``$KUBECONFIG`` names no file that
    exists, or there is neither a kubeconfig nor a pod's in-cluster config. None when one may load
    (an explicit ``kubeconfig`` is checked by :meth:`AsyncTrainerClient.connect`)."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        return None
    paths = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if paths:
        if not any(Path(p).expanduser().is_file() for p in paths):
            return f"kubeconfig not found: {env['KUBECONFIG']} ($KUBECONFIG)"
        return None
    if Path("~/.kube/config").expanduser().is_file() or env.get("KUBERNETES_SERVICE_HOST"):
        return None
    return "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster"


async def connect(s: Settings) -> AsyncTrainerClient:
    """The client of the settings. Raises :class:`KubeconfigError` (one line) for a kubeconfig that
    is missing or not YAML, or what :meth:`AsyncTrainerClient.connect` raises."""
    problem = kubeconfig_problem(s.kubeconfig)
    if problem:
        raise KubeconfigError(problem)
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    kubeconfig = s.kubeconfig or (paths[0] if len(paths) == 1 else None)  # as set now, not at import
    try:
        return await AsyncTrainerClient.connect(kubeconfig, s.namespace)
    except yaml.YAMLError as e:
        where = s.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeconfigError(f"cannot read the kubeconfig {where}: {yaml_error_text(e)}") from None


async def crd_installed(client: AsyncTrainerClient, res: Resource) -> bool:
    """Whether the apiserver serves ``res`` (its group/version's discovery lists it). Raises
    :class:`ApiError` on failures other than 404."""
    try:
        found = await client.kube.request("GET", f"/apis/{res.group}/{res.version}")
    except ApiError as e:
        if e.not_found:
            return False
        raise
    return any(r.get("name") == res.plural for r in found.get("resources") or [])


def run(s: Settings, body: Callable[[AsyncTrainerClient], Awaitable[T]], crd: Resource | None = None) -> T:
    """Connect with the settings, run ``body`` and close; errors become one line and an exit code.
    When ``body`` finds nothing (404) and the apiserver does not serve ``crd``, the error says so
    (:class:`CRDNotInstalledError`)."""

    async def go() -> T:
        client = await connect(s)
        async with client:
            try:
                return await body(client)
            except (NotFoundError, ApiError) as e:
                if isinstance(e, ApiError) and not e.not_found:
                    raise
                if crd is not None and not await crd_installed(client, crd):
                    raise CRDNotInstalledError(crd) from None
                raise

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except HANDLED as e:
        fail(error_message(e), exit_code(e))


# --------------------------------------------------------------------------- formatting


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """Age of an RFC 3339 timestamp the way kubectl prints it: ``42s``, ``5m``, ``3h``, ``2d``."""
    if not timestamp:
        return "<unknown>"
    then = parse_time(timestamp) or EARLIEST
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def to_data(obj: Any) -> Any:
    """JSON-ready data of a model, or of lists and dicts of models."""
    if isinstance(obj, Model):
        return obj.to_dict()
    if isinstance(obj, list | tuple):
        return [to_data(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_data(v) for k, v in obj.items()}
    return obj


def dump(data: Any, output: Output) -> str:
    """``data`` as JSON (indented) or YAML (keys in order)."""
    if output == Output.yaml:
        return str(yaml.safe_dump(to_data(data), sort_keys=False, default_flow_style=False)).rstrip("\n")
    return json.dumps(to_data(data), indent=2)


def as_list(items: Sequence[Model]) -> JSON:
    """A kubectl-style ``List`` of objects."""
    return {"apiVersion": "v1", "kind": "List", "items": [to_data(i) for i in items]}


def table(*columns: str, title: str | None = None) -> Table:
    """A borderless kubectl-like table."""
    t = Table(*columns, box=None, title=title, title_justify="left", pad_edge=False, show_edge=False)
    return t


def jobs_summary(job: TrainJob) -> str:
    """The non-zero ``jobsStatus`` counts per step, e.g. ``node: 1 succeeded``; ``-`` before any."""
    parts = []
    for s in (job.status.jobs_status if job.status else None) or []:
        counts = (
            (s.ready, "ready"),
            (s.active, "active"),
            (s.succeeded, "succeeded"),
            (s.failed, "failed"),
            (s.suspended, "suspended"),
        )
        parts.append(f"{s.name}: {', '.join(f'{n} {label}' for n, label in counts if n) or 'no Jobs'}")
    return "; ".join(parts) or "-"


Job = TrainJob | MPIJob
"""A training job the CLI shows."""


def replicas_summary(job: MPIJob) -> str:
    """The non-zero ``replicaStatuses`` counts per replica type, e.g. ``Launcher: 1 active``; ``-``
    before any."""
    parts = []
    for name, r in sorted(((job.status.replica_statuses if job.status else None) or {}).items()):
        counts = ((r.active, "active"), (r.succeeded, "succeeded"), (r.failed, "failed"))
        parts.append(f"{name}: {', '.join(f'{n} {label}' for n, label in counts if n) or 'no pods'}")
    return "; ".join(parts) or "-"


def job_row(job: Job, now: datetime | None = None) -> list[str]:
    """The cells of a job's table row: :data:`JOB_COLUMNS` of a TrainJob, :data:`MPIJOB_COLUMNS` of
    an MPIJob. STATE is the condition that holds the job (:func:`holding_condition`)."""
    state = holding_condition(job).state
    created = age(job.metadata.creation_timestamp, now)
    if isinstance(job, MPIJob):
        worker = job.spec.mpi_replica_specs.worker
        workers = worker.replicas if worker and worker.replicas is not None else None
        count = str(workers) if workers is not None else "-"
        return [job.metadata.name or "", state, count, replicas_summary(job), queue_of(job) or "-", created]
    nodes = job.spec.trainer.num_nodes if job.spec.trainer and job.spec.trainer.num_nodes else None
    return [
        job.metadata.name or "",
        state,
        job.spec.runtime_ref.name,
        str(nodes) if nodes else "-",
        jobs_summary(job),
        queue_of(job) or "-",
        created,
    ]


JOB_COLUMNS = ("NAME", "STATE", "RUNTIME", "NODES", "JOBS", "QUEUE", "AGE")
MPIJOB_COLUMNS = ("NAME", "STATE", "WORKERS", "REPLICAS", "QUEUE", "AGE")
WIDE_COLUMNS = ("REASON", "MESSAGE")
"""Added after AGE by ``-o wide``: the reason and message of the condition STATE names."""


PROGRESS_COLUMNS = ("PROGRESS", "ETA")
"""Added before AGE when some job of the table reported progress (``status.trainerStatus``)."""


def job_rows(
    jobs: Iterable[Job],
    now: datetime | None = None,
    *,
    wide: bool = False,
    namespaces: bool = False,
    progress: bool | None = None,
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a table of jobs of one kind: :data:`JOB_COLUMNS` (TrainJobs) or
    :data:`MPIJOB_COLUMNS` (MPIJobs); NAMESPACE first with ``namespaces``; :data:`PROGRESS_COLUMNS`
    (e.g. ``45%``, ``3h12m``) before AGE of TrainJobs when ``progress``, by default when one of them
    reported progress; :data:`WIDE_COLUMNS` last with ``wide``."""
    jobs = list(jobs)
    mpi = any(isinstance(j, MPIJob) for j in jobs)
    if progress is None:
        progress = any(isinstance(j, TrainJob) and trainer_status_of(j) is not None for j in jobs)
    progress = progress and not mpi
    columns = list(MPIJOB_COLUMNS if mpi else JOB_COLUMNS)
    if progress:
        columns[-1:-1] = PROGRESS_COLUMNS
    header = [*(["NAMESPACE"] if namespaces else []), *columns, *(WIDE_COLUMNS if wide else ())]
    rows = []
    for job in jobs:
        row = job_row(job, now)
        if progress and isinstance(job, TrainJob):
            row[-1:-1] = [progress_text(job), eta_text(job)]
        held = holding_condition(job)
        rows.append(
            [
                *([job.metadata.namespace or ""] if namespaces else []),
                *row,
                *([held.reason, held.message] if wide else []),
            ]
        )
    return header, rows


def jobs_table(
    jobs: Iterable[Job], now: datetime | None = None, *, wide: bool = False, namespaces: bool = False
) -> Table:
    """The table ``get`` and ``list`` print: see :func:`job_rows`."""
    header, rows = job_rows(jobs, now, wide=wide, namespaces=namespaces)
    t = table(*header)
    for row in rows:
        t.add_row(*row)
    return t


def object_name(obj: Manifest) -> str:
    """``<kind>.<group>/<name>`` as ``kubectl get -o name`` prints it."""
    return f"{obj.kind.lower()}.{obj.api_version.split('/')[0]}/{obj.metadata.name}"


def runtimes_table(runtimes: Iterable[TrainingRuntime | ClusterTrainingRuntime], namespaces: bool = False) -> Table:
    """NAME, KIND, FRAMEWORK, NODES of runtimes; NAMESPACE first with ``namespaces`` (empty for a
    ClusterTrainingRuntime)."""
    t = table(*(["NAMESPACE"] if namespaces else []), "NAME", "KIND", "FRAMEWORK", "NODES")
    for r in runtimes:
        nodes = r.spec.ml_policy.num_nodes if r.spec.ml_policy else None
        row = [r.metadata.name or "", r.kind, runtime_framework(r) or "-", str(nodes or "-")]
        t.add_row(*([r.metadata.namespace or ""] if namespaces else []), *row)
    return t


def events_table(events: Iterable[Event], now: datetime | None = None) -> Table:
    """LAST SEEN, TYPE, REASON, OBJECT, MESSAGE of events."""
    t = table("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", title="Events:")
    for e in events:
        t.add_row(age(e.time, now), e.type, e.reason, f"{e.involved_object_kind}/{e.involved_object_name}", e.message)
    return t


def pod_waiting(pod: JSON) -> str:
    """Why a pod is not (or no longer) running, as ``kubectl get pods`` shows it: a container's
    waiting or terminated reason (``ImagePullBackOff``, ``CrashLoopBackOff``, ``Error``), else the
    reason of ``PodScheduled=False`` with its message (``Unschedulable: 0/3 nodes are available:
    ...``); "" when nothing holds it."""
    status = pod.get("status") or {}
    for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        state = c.get("state") or {}
        for key in ("waiting", "terminated"):
            reason = (state.get(key) or {}).get("reason")
            if reason and not (key == "terminated" and reason == "Completed"):
                return str(reason)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return " ".join(f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message') or ''}".split())
    return ""


def pod_row(pod: JSON, now: datetime | None = None) -> list[str]:
    """NAME, PHASE, NODE, READY (``1/1``), RESTARTS, WAITING (:func:`pod_waiting`), AGE of a pod."""
    m, spec, status = meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    return [
        str(m.name or ""),
        str(status.get("phase") or "Pending"),
        str(spec.get("nodeName") or "<none>"),
        f"{ready}/{len(spec.get('containers') or [])}",
        str(restarts),
        pod_waiting(pod) or "-",
        age(m.creation_timestamp, now),
    ]


POD_COLUMNS = ("NAME", "PHASE", "NODE", "READY", "RESTARTS", "WAITING", "AGE")


def pods_table(pods: Iterable[JSON], now: datetime | None = None) -> Table:
    """The ``Pods:`` section of ``describe``: :data:`POD_COLUMNS`, by name; ``<none>`` without pods."""
    t = table(*POD_COLUMNS, title="Pods:")
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        t.add_row(*pod_row(pod, now))
    if not t.row_count:
        t.add_row("<none>", *[""] * (len(POD_COLUMNS) - 1))
    return t


def managed_by_of(job: Job) -> str | None:
    """The job's ``managedBy`` (``spec.runPolicy.managedBy`` of an MPIJob), None when unset."""
    if isinstance(job, MPIJob):
        return job.spec.run_policy.managed_by if job.spec.run_policy else None
    return job.spec.managed_by


def unattended(job: Job, now: datetime | None = None) -> str | None:
    """``no controller has acted on this <Kind> yet: is the operator running?`` when the job, older
    than :data:`NO_CONTROLLER_AFTER` seconds and meant for this operator, has no status at all; else
    None."""
    created = job.metadata.creation_timestamp
    seconds = ((now or datetime.now(UTC)) - (parse_time(created) or EARLIEST)).total_seconds() if created else 0
    status = job.status.model_dump(exclude_none=True, exclude_defaults=True) if job.status else {}
    managed_by = managed_by_of(job)
    if status or seconds < NO_CONTROLLER_AFTER or managed_by not in (None, TRAINJOB_CONTROLLER, MANAGED_BY_MPI):
        return None
    return f"no controller has acted on this {job.kind} yet: is the operator running?"


def describe_data(
    job: Job,
    podgroup: JSON | None,
    events: list[Event],
    workload: WorkloadInfo | None = None,
    pods: Sequence[JSON] = (),
    now: datetime | None = None,
) -> JSON:
    """What ``describe -o json|yaml`` prints: the job (under ``trainJob`` or ``mpiJob``), its state
    (the condition that holds it) with that condition's reason and message, queue, PodGroup, Kueue
    Workload (with ``clusterName``, the MultiKueue worker it runs on), pods (name, phase, node,
    ready, restarts, waiting reason), events and ``warning`` (:func:`unattended`, or null)."""
    held = holding_condition(job)
    keys = ("name", "phase", "node", "ready", "restarts", "waiting")
    return {
        ("mpiJob" if isinstance(job, MPIJob) else "trainJob"): job.to_dict(),
        "state": held.state,
        "reason": held.reason,
        "message": held.message,
        "queue": queue_of(job),
        "managedBy": managed_by_of(job),
        "podGroup": podgroup,
        "workload": workload.to_dict() if workload else None,
        "pods": [dict(zip(keys, pod_row(p, now), strict=False)) for p in pods],
        "events": [e.to_dict() for e in events],
        "warning": unattended(job, now),
    }


def workload_tables(workload: WorkloadInfo | None) -> list[Table]:
    """The Workload, its admission checks and its conditions (only the Workload row when it has none)."""
    head = table("NAME", "QUEUE", "CLUSTER QUEUE", "ADMITTED", "CLUSTER", title="Workload:")
    if workload is None:
        head.add_row("<none>", "", "", "", "")
        return [head]
    head.add_row(
        workload.name,
        workload.queue or "",
        workload.cluster_queue or "",
        str(workload.admitted).lower(),
        workload.where(),
    )
    out = [head]
    if workload.admission_checks:
        checks = table("NAME", "STATE", "MESSAGE", title="Admission checks:")
        for c in workload.admission_checks:
            checks.add_row(c.name, c.state, c.message)
        out.append(checks)
    if workload.conditions:
        conditions = table("TYPE", "STATUS", "REASON", "MESSAGE", title="Workload conditions:")
        for wc in workload.conditions:
            conditions.add_row(wc.type, wc.status, wc.reason, wc.message)
        out.append(conditions)
    return out


def describe_tables(
    job: Job,
    podgroup: JSON | None,
    events: list[Event],
    now: datetime | None = None,
    workload: WorkloadInfo | None = None,
    pods: Sequence[JSON] = (),
) -> list[Table]:
    """The sections ``describe`` prints as tables: the job (with ``Warning:`` when
    :func:`unattended`), conditions, Jobs status (replica statuses of an MPIJob), PodGroup, the
    Workload ones only when Kueue made one, metrics when reported, pods and events."""
    meta = job.metadata
    held = holding_condition(job)
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column()
    head.add_column()
    rows = [
        ("Name:", meta.name or ""),
        ("Namespace:", meta.namespace or ""),
        ("Kind:", job.kind),
        ("State:", f"{held.state} ({held.reason}: {held.message})" if held.reason else held.state),
    ]
    if isinstance(job, TrainJob):
        ref = job.spec.runtime_ref
        rows.append(("Runtime:", f"{ref.kind or ClusterTrainingRuntime.KIND}/{ref.name}"))
        suspend = bool(job.spec.suspend)
    else:
        worker = job.spec.mpi_replica_specs.worker
        rows.append(("Workers:", str(worker.replicas if worker and worker.replicas is not None else 0)))
        suspend = bool(job.spec.run_policy and job.spec.run_policy.suspend)
    rows += [("Queue:", queue_of(job) or "<none>"), ("Suspend:", str(suspend).lower())]
    managed_by = managed_by_of(job)
    if managed_by and managed_by not in (TRAINJOB_CONTROLLER, MANAGED_BY_MPI):
        rows.append(("Managed by:", managed_by))
    if workload is not None:
        rows.append(("Cluster:", workload.where()))
    rows.append(("Created:", f"{meta.creation_timestamp or ''} ({age(meta.creation_timestamp, now)} ago)"))
    reported = trainer_status_of(job) if isinstance(job, TrainJob) else None
    if reported is not None and isinstance(job, TrainJob):
        rows.append(("Progress:", f"{progress_text(job)} (reported {age(reported.last_updated_time, now)} ago)"))
        rows.append(("ETA:", eta_text(job)))
        if reported.last_checkpoint is not None:
            rows.append(("Checkpoint:", checkpoint_text(job)))
    warning = unattended(job, now)
    if warning:
        rows.append(("Warning:", warning))
    for key, value in rows:
        head.add_row(key, value)
    conditions = table("TYPE", "STATUS", "REASON", "MESSAGE", "LAST TRANSITION", title="Conditions:")
    for c in (job.status.conditions if job.status else None) or []:
        conditions.add_row(c.type, c.status, c.reason or "", c.message or "", c.last_transition_time or "")
    if isinstance(job, TrainJob):
        jobs = table("STEP", "READY", "SUCCEEDED", "FAILED", "ACTIVE", "SUSPENDED", title="Jobs status:")
        for s in (job.status.jobs_status if job.status else None) or []:
            jobs.add_row(s.name, *(str(n) for n in (s.ready, s.succeeded, s.failed, s.active, s.suspended)))
    else:
        jobs = table("REPLICA TYPE", "ACTIVE", "SUCCEEDED", "FAILED", title="Replica statuses:")
        for name, r in sorted(((job.status.replica_statuses if job.status else None) or {}).items()):
            jobs.add_row(name, str(r.active), str(r.succeeded), str(r.failed))
    group = table("NAME", "PHASE", "MIN MEMBER", "QUEUE", title="PodGroup:")
    if podgroup is not None:
        spec, status = podgroup.get("spec") or {}, podgroup.get("status") or {}
        group.add_row(
            str(podgroup["metadata"]["name"]),
            str(status.get("phase", "")),
            str(spec.get("minMember", "")),
            str(spec.get("queue", "")),
        )
    else:
        group.add_row("<none>", "", "", "")
    kueue = workload_tables(workload) if workload is not None else []
    metrics = table("NAME", "VALUE", title="Metrics:")
    for m in (reported.metrics if reported else None) or []:
        metrics.add_row(m.name, m.value)
    reports = [metrics] if metrics.row_count else []
    return [head, conditions, jobs, group, *kueue, *reports, pods_table(pods, now), events_table(events, now)]


def console(stderr: bool = False) -> Console:
    """A console without markup or highlighting (names and messages are printed as they are);
    when the output is not a terminal, wide enough that no cell is wrapped or cut."""
    out = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False, width=NO_TERMINAL_WIDTH)
    return out


def show(data: Any, output: Output, tables: Callable[[], Iterable[Table]], names: Iterable[Manifest] = ()) -> None:
    """Print ``data`` as JSON/YAML, the tables ``tables`` makes, or (``-o name``) the names of
    ``names``."""
    if output in TABLES:
        out = console()
        for i, t in enumerate(tables()):
            if i:
                out.print()
            out.print(t)
    elif output == Output.name:
        for obj in names:
            typer.echo(object_name(obj))
    else:
        typer.echo(dump(data, output))


def resource_name(res: Resource, name: str) -> str:
    """``<plural>.<group>/<name>``, as ``apply``, ``delete``, ``suspend`` and ``resume`` name what
    they changed."""
    return f"{res.plural}.{res.group}/{name}"


# --------------------------------------------------------------------------- jobs by kind


@dataclass(frozen=True)
class ObjectType:
    """A TYPE of ``get``, ``list`` and ``delete``: the kinds it covers and, for a job type, its
    :class:`JobKind`."""

    name: str
    """The plural, as kubectl names the type: ``trainjobs``, ``runtimes``..."""
    resources: tuple[Resource, ...]
    job: JobKind[Any] | None = None

    @property
    def label(self) -> str:
        """What ``No <label> found.`` says: ``TrainJobs``, ``ClusterTrainingRuntimes``, ``runtimes``."""
        return f"{self.resources[0].kind}s" if len(self.resources) == 1 else self.name


RUNTIMES = ObjectType("runtimes", (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES))
"""The namespace's TrainingRuntimes and the ClusterTrainingRuntimes together."""


def object_types() -> dict[str, ObjectType]:
    """Every name of every type, as kubectl takes them: the plural, the singular, the short names
    of the CRD (:data:`api.crd.CRDS`: ``tj``, ``tr``, ``ctr``, ``mpij``), and the first two with
    the group (``trainjobs.trainer.kubeflow.org``); then ``runtimes`` and ``runtime``
    (:data:`RUNTIMES`)."""
    jobs = {kind.resource: kind for kind in (TRAINJOB, MPIJOB)}
    types: dict[str, ObjectType] = {}
    for crd in CRDS:
        res, singular = crd.resource, crd.resource.kind.lower()
        t = ObjectType(res.plural, (res,), jobs.get(res))
        for name in (res.plural, singular, *crd.short_names, f"{res.plural}.{res.group}", f"{singular}.{res.group}"):
            types[name] = t
    return types | {"runtimes": RUNTIMES, "runtime": RUNTIMES}


TYPES = object_types()


def type_names() -> str:
    """The types and their other names without the group, for help and errors:
    ``trainjobs (trainjob, tj), ...``."""
    names: dict[str, list[str]] = {}
    for name, t in TYPES.items():
        if name != t.name and "." not in name:
            names.setdefault(t.name, []).append(name)
        names.setdefault(t.name, [])
    return ", ".join(f"{t} ({', '.join(others)})" if others else t for t, others in names.items())


def object_type(text: str) -> ObjectType:
    """The type a name means (:data:`TYPES`, any case). Raises ``typer.BadParameter`` (exit 2)
    naming the types."""
    found = TYPES.get(text.lower())
    if found is None:
        raise typer.BadParameter(f"unknown resource type {text!r}; the types are {type_names()}")
    return found


def parse_target(args: Sequence[str]) -> tuple[ObjectType, str | None]:
    """The type and name of ``TYPE NAME`` or ``TYPE/NAME``, of ``TYPE`` (name None: every object of
    the type), or of ``NAME`` alone, when it names no type: a TrainJob (the form before TYPE). Raises
    ``typer.BadParameter`` (exit 2) for an unknown type or more words."""
    if len(args) == 1 and "/" not in args[0]:
        found = TYPES.get(args[0].lower())
        return (found, None) if found else (TYPES[TRAINJOBS.plural], args[0])
    if len(args) == 1:
        text, name = args[0].split("/", 1)
    elif len(args) == 2:
        text, name = args
    else:
        raise typer.BadParameter(f"expected TYPE, TYPE NAME or TYPE/NAME, got {' '.join(args)!r}")
    if not name:
        raise typer.BadParameter(f"no NAME after {text!r}")
    return object_type(text), name


def target(args: Sequence[str]) -> tuple[JobKind[Any], str]:
    """The job kind and name of ``TYPE NAME``, ``TYPE/NAME`` or ``NAME`` (a TrainJob), TYPE a job
    type (:func:`parse_target`). Raises ``typer.BadParameter`` (exit 2) for anything else."""
    t, name = parse_target(args)
    if t.job is None:
        raise typer.BadParameter(f"{t.name} are not jobs; expected trainjobs or mpijobs (or their other names)")
    if name is None:
        raise typer.BadParameter(f"expected {args[0]} NAME: {args[0]!r} is a type, not a job's name")
    return t.job, name


def job_client(c: AsyncTrainerClient, kind: JobKind[Any]) -> AsyncJobClient[Any]:
    """The client of the :mod:`api` objects of ``kind`` (what the CLI prints) on ``c``'s connection
    and namespace."""
    return AsyncJobClient(c.kube, c.namespace, kind)


def show_jobs(jobs: Sequence[Job], data: Any, output: Output, namespaces: bool = False) -> None:
    """Print jobs as ``get`` and ``list`` do: a table (``wide``: with REASON and MESSAGE), names,
    or ``data`` as JSON/YAML."""
    show(data, output, lambda: [jobs_table(jobs, wide=output == Output.wide, namespaces=namespaces)], jobs)


async def watch_jobs(
    c: AsyncTrainerClient,
    kind: JobKind[Any],
    output: Output,
    *,
    name: str | None = None,
    label_selector: str | None = None,
    all_namespaces: bool = False,
    keep: Callable[[Any], bool] = lambda _: True,
) -> None:
    """``-w``: print the jobs (the one named ``name``, or those ``label_selector`` selects and
    ``keep`` keeps), then each one again whenever it changes, until interrupted; as a table whose
    header is printed once, as names, or as one JSON/YAML object each. Raises
    :class:`NotFoundError` when the job ``name`` does not exist when the watch starts (as ``kubectl
    get NAME -w``; a deletion later does not end it), :class:`ApiError`."""
    out = console()
    namespace = None if all_namespaces else c.namespace
    field_selector = f"metadata.name={name}" if name else None
    seen: dict[tuple[str, str], str] = {}
    widths: list[int] = []

    def emit(objs: Iterable[JSON]) -> None:
        jobs = []
        for obj in objs:
            m = meta(obj)
            key = (str(m.namespace or ""), str(m.name or ""))
            if seen.get(key) == m.resource_version:
                continue
            seen[key] = str(m.resource_version)
            job = kind.model.model_validate(obj)
            if keep(job):
                jobs.append(job)
        if output not in TABLES:
            for job in jobs:
                typer.echo(object_name(job) if output == Output.name else dump(job, output))
            return
        header, rows = job_rows(jobs, wide=output == Output.wide, namespaces=all_namespaces, progress=True)
        first = not widths
        if first:
            widths[:] = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
        elif not rows:
            return
        t = Table(box=None, show_header=first, pad_edge=False, show_edge=False)
        for column, width in zip(header, widths, strict=True):
            t.add_column(column, min_width=width)
        for row in rows:
            t.add_row(*row)
        out.print(t)

    while True:
        items, version = await c.kube.list(kind.resource, namespace, label_selector, field_selector=field_selector)
        if name and not items and not seen:
            raise NotFoundError(kind.resource.kind, c.namespace, name)
        emit(items)
        try:
            async for type_, obj in watch_objects(
                c.kube, kind.resource, namespace, version, field_selector=field_selector, label_selector=label_selector
            ):
                if type_ != "BOOKMARK":
                    emit([obj])
        except ApiError as e:
            if not e.gone:
                raise


# --------------------------------------------------------------------------- commands

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files ``apply -f DIR`` reads, as kubectl."""


def manifest_files(path: Path, recursive: bool = False) -> list[Path]:
    """``path`` itself, or the :data:`MANIFEST_SUFFIXES` files of a directory by name (of its
    subdirectories too when ``recursive``). Raises :class:`trainer.client.ManifestError` for a
    directory without any."""
    if not path.is_dir():
        return [path]
    found = sorted(p for p in (path.rglob("*") if recursive else path.iterdir()) if p.is_file())
    files = [p for p in found if p.suffix in MANIFEST_SUFFIXES]
    if not files:
        raise ManifestError(f"{path}: no {', '.join(MANIFEST_SUFFIXES)} file in this directory")
    return files


def read_manifests(files: Sequence[str], recursive: bool = False) -> list[Manifest]:
    """Every object of ``files`` (``-`` is stdin; a directory is read as :func:`manifest_files`),
    validated before anything is sent. Raises :class:`trainer.client.ManifestError`."""
    objs: list[Manifest] = []
    for f in files:
        if f == "-":
            objs += [parse_manifest(doc, where) for where, doc in read_yaml(sys.stdin.read(), "<stdin>")]
        else:
            for path in manifest_files(Path(f), recursive):
                objs += load_manifests(path)
    return objs


JobArgs = Annotated[
    list[str],
    typer.Argument(
        metavar="[TYPE] NAME",
        help="job: TYPE NAME or TYPE/NAME (TYPE trainjobs, tj, mpijobs, mpij...), or NAME alone: a TrainJob",
    ),
]
WatchOpt = Annotated[bool, typer.Option("--watch", "-w", help="after listing, print each change until interrupted")]
FILENAME_HELP = "YAML/JSON file or directory of TrainJobs, MPIJobs and runtimes; - for stdin"
FilenameOpt = Annotated[list[str], typer.Option("--filename", "-f", help=FILENAME_HELP)]
RecursiveOpt = Annotated[bool, typer.Option("--recursive", "-R", help="read the directories of -f recursively")]
QueueOpt = Annotated[
    str | None, typer.Option(help="Kueue LocalQueue of the TrainJobs (label kueue.x-k8s.io/queue-name)")
]
MulticlusterOpt = Annotated[
    bool,
    typer.Option(
        help="submit the TrainJobs to a MultiKueue manager cluster: managedBy kueue.x-k8s.io/multikueue, "
        "the queue label (--queue or the manifest's) and suspend; Kueue runs each on a worker cluster"
    ),
]
SelectorOpt = Annotated[str | None, typer.Option("--selector", "-l", help="label selector")]
AllNamespacesOpt = Annotated[bool, typer.Option("--all-namespaces", "-A", help="every namespace")]
RuntimeOpt = Annotated[str | None, typer.Option(help="only TrainJobs of this runtime")]
QueueFilterOpt = Annotated[
    str | None, typer.Option(help="only jobs naming this Kueue (label) or Volcano (annotation) queue")
]
TYPE_HELP = f"one of {type_names()}"


def read_files(
    files: Sequence[str], recursive: bool, verb: str, queue: str | None = None, multicluster: bool = False
) -> list[Manifest]:
    """The objects of ``-f`` (:func:`read_manifests`), checked before the cluster is contacted: each
    has a ``metadata.name`` unless ``verb`` is ``create`` (which completes a
    ``metadata.generateName``), and ``multicluster`` can mark each TrainJob. Prints the error and
    exits 1 otherwise."""
    try:
        objs = read_manifests(files, recursive)
        if verb != "create":
            require_names(objs, verb)
        if multicluster:
            for obj in objs:
                if isinstance(obj, TrainJob):
                    for_multicluster(wire_dict(obj), queue)
    except TrainerClientError as e:
        fail(str(e))
    return objs


def submit(
    s: Settings,
    objs: Sequence[Manifest],
    send: Callable[[AsyncTrainerClient, Manifest], Awaitable[list[Manifest]]],
    line: Callable[[Manifest], str],
) -> None:
    """Send the objects one by one; as tables, print the ``line`` of each stored object as it is
    done (those before an error stay printed), else all stored objects at the end."""

    async def each(c: AsyncTrainerClient) -> list[Manifest]:
        stored: list[Manifest] = []
        for obj in objs:
            done = await send(c, obj)
            if s.output in TABLES:
                for d in done:
                    typer.echo(line(d))
            stored += done
        return stored

    stored = run(s, each)
    if s.output not in TABLES:
        show(stored[0] if len(stored) == 1 else as_list(stored), s.output, list, stored)


@app.command()
def apply(
    ctx: typer.Context,
    filename: FilenameOpt,
    recursive: RecursiveOpt = False,
    force_conflicts: Annotated[bool, typer.Option(help="take over fields other managers own")] = False,
    queue: QueueOpt = None,
    multicluster: MulticlusterOpt = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Create or update TrainJobs, MPIJobs, TrainingRuntimes and ClusterTrainingRuntimes (server-side apply)."""
    s = settings(ctx, kubeconfig, namespace, output)
    objs = read_files(filename, recursive, "apply", queue, multicluster)
    submit(
        s,
        objs,
        lambda c, o: c.apply(o, s.namespace, force=force_conflicts, queue=queue, multicluster=multicluster),
        lambda o: f"{resource_name(manifest_resource(o), o.metadata.name or '')} applied",
    )


@app.command()
def create(
    ctx: typer.Context,
    filename: FilenameOpt,
    recursive: RecursiveOpt = False,
    queue: QueueOpt = None,
    multicluster: MulticlusterOpt = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Create TrainJobs, MPIJobs, TrainingRuntimes and ClusterTrainingRuntimes, as kubectl create: an
    object named by metadata.generateName gets its name from the apiserver, and the line printed
    (<kind>.<group>/<name> created) says which; one that exists already is an error."""
    s = settings(ctx, kubeconfig, namespace, output)
    objs = read_files(filename, recursive, "create", queue, multicluster)
    submit(
        s,
        objs,
        lambda c, o: c.create(o, s.namespace, queue=queue, multicluster=multicluster),
        lambda o: f"{object_name(o)} created",
    )


async def named_runtimes(
    c: AsyncTrainerClient, t: ObjectType, name: str
) -> list[TrainingRuntime | ClusterTrainingRuntime]:
    """The runtimes of type ``t`` named ``name`` (a TrainingRuntime and a ClusterTrainingRuntime for
    ``runtimes``). Raises :class:`NotFoundError` when there is none, :class:`ApiError`."""
    found = []
    for res in t.resources:
        obj = await c.kube.get_or_none(res, c.namespace if res.namespaced else None, name)
        if obj is not None:
            found.append(runtime_from_dict(obj))
    if not found:
        namespaced = any(res.namespaced for res in t.resources)
        raise NotFoundError(" or ".join(res.kind for res in t.resources), c.namespace if namespaced else None, name)
    return found


def list_objects(
    s: Settings,
    t: ObjectType,
    *,
    selector: str | None = None,
    all_namespaces: bool = False,
    watch: bool = False,
    runtime: str | None = None,
    queue: str | None = None,
) -> None:
    """What ``list TYPE`` and ``get TYPE`` print: the objects of ``t``, jobs oldest first, runtimes
    by name; ``No <TYPE> found.`` on stderr when there is none. Raises ``typer.BadParameter``
    (exit 2) for options the type does not take."""
    if t.job is None:
        if watch or runtime is not None or queue is not None:
            raise typer.BadParameter(f"--watch, --runtime and --queue are for jobs, not {t.name}")

        async def listed(c: AsyncTrainerClient) -> list[TrainingRuntime | ClusterTrainingRuntime]:
            found = await c._runtime_objects(t.resources, label_selector=selector, all_namespaces=all_namespaces)
            for res in t.resources:
                if not found and not await crd_installed(c, res):
                    raise CRDNotInstalledError(res)
            return found

        runtimes = run(s, listed)
        if not runtimes and s.output in TABLES:
            typer.echo(f"No {t.label} found.", err=True)
            return
        show(as_list(runtimes), s.output, lambda: [runtimes_table(runtimes, namespaces=all_namespaces)], runtimes)
        return
    kind = t.job
    if runtime is not None and kind is not TRAINJOB:
        raise typer.BadParameter("--runtime selects TrainJobs only")

    def keep(job: Job) -> bool:
        by_runtime = runtime is None or (isinstance(job, TrainJob) and job.spec.runtime_ref.name == runtime)
        return by_runtime and (queue is None or in_queue(job, queue))

    if watch:
        run(
            s,
            lambda c: watch_jobs(c, kind, s.output, label_selector=selector, all_namespaces=all_namespaces, keep=keep),
            crd=kind.resource,
        )
        return
    jobs = run(
        s,
        lambda c: job_client(c, kind).list_jobs(label_selector=selector, queue=queue, all_namespaces=all_namespaces),
        crd=kind.resource,
    )
    jobs = [j for j in jobs if keep(j)]
    if not jobs and s.output in TABLES:
        typer.echo(f"No {t.label} found.", err=True)
        return
    show_jobs(jobs, as_list(jobs), s.output, namespaces=all_namespaces)


@app.command()
def get(
    ctx: typer.Context,
    args: Annotated[list[str], typer.Argument(metavar="TYPE [NAME]", help=TYPE_HELP)],
    watch: WatchOpt = False,
    selector: SelectorOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    runtime: RuntimeOpt = None,
    queue: QueueFilterOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Show the objects of a TYPE (as list does) or the one named NAME; a job's STATE is the
    condition that holds it (e.g. WaitingForGang, RuntimeNotFound). TYPE/NAME works too, and NAME
    alone, when it names no type, is a TrainJob."""
    s = settings(ctx, kubeconfig, namespace, output)
    t, name = parse_target(args)
    if name is None:
        list_objects(s, t, selector=selector, all_namespaces=all_namespaces, watch=watch, runtime=runtime, queue=queue)
        return
    if selector is not None or all_namespaces or runtime is not None or queue is not None:
        raise typer.BadParameter("-l, -A, --runtime and --queue select what a TYPE lists; not with a NAME")
    if t.job is None:
        if watch:
            raise typer.BadParameter(f"--watch is for jobs, not {t.name}")
        found = run(s, lambda c: named_runtimes(c, t, name), crd=t.resources[0])
        show(found[0] if len(found) == 1 else as_list(found), s.output, lambda: [runtimes_table(found)], found)
        return
    kind = t.job
    if watch:
        run(s, lambda c: watch_jobs(c, kind, s.output, name=name), crd=kind.resource)
        return
    job = run(s, lambda c: job_client(c, kind).get_job(name), crd=kind.resource)
    show_jobs([job], job, s.output)


@app.command("list")
def list_(
    ctx: typer.Context,
    type_: Annotated[str, typer.Argument(metavar="[TYPE]", help=f"{TYPE_HELP}; default trainjobs")] = "trainjobs",
    runtime: RuntimeOpt = None,
    selector: SelectorOpt = None,
    queue: QueueFilterOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    watch: WatchOpt = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """List the objects of a TYPE (default TrainJobs): jobs oldest first, STATE being the condition
    that holds each (-o wide: with its reason and message); runtimes by name."""
    s = settings(ctx, kubeconfig, namespace, output)
    t = object_type(type_)
    list_objects(s, t, selector=selector, all_namespaces=all_namespaces, watch=watch, runtime=runtime, queue=queue)


@app.command(hidden=True)
def runtimes(
    ctx: typer.Context, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None, output: OutputOpt = None
) -> None:
    """``get runtimes``, by its name before TYPE (kept for scripts)."""
    list_objects(settings(ctx, kubeconfig, namespace, output), RUNTIMES)


@app.command()
def describe(
    ctx: typer.Context,
    args: JobArgs,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Show a job's state (the condition that holds it, and a warning when no controller has acted
    on it), conditions, Job counts, Volcano PodGroup and queue, Kueue Workload (where MultiKueue
    runs it, admission checks and their messages), pods (phase, node, ready, restarts, why waiting:
    ImagePullBackOff, Unschedulable...) and events."""
    s = settings(ctx, kubeconfig, namespace, output)
    kind, name = target(args)

    async def gather(c: AsyncTrainerClient) -> tuple[Job, JSON | None, WorkloadInfo | None, list[Event], list[JSON]]:
        jc = job_client(c, kind)
        job = await jc.get_job(name)
        pods, _ = await c.kube.list(PODS, c.namespace, pod_selector(kind, name))
        return job, await jc.get_podgroup(name), await jc.get_workload(name), await jc.get_job_events(name), pods

    job, podgroup, workload, events, pods = run(s, gather, crd=kind.resource)
    show(
        describe_data(job, podgroup, events, workload, pods),
        s.output,
        lambda: describe_tables(job, podgroup, events, workload=workload, pods=pods),
        [job],
    )


DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str) -> int:
    """Seconds of a duration as kubectl's ``--since`` takes it: ``30s``, ``5m``, ``2h``, ``1h30m``.
    Raises ``typer.BadParameter`` (exit 2)."""
    match = DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise typer.BadParameter(f"invalid duration {text!r}; e.g. 30s, 5m, 1h30m")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


@app.command()
def logs(
    ctx: typer.Context,
    args: JobArgs,
    step: Annotated[
        str | None,
        typer.Option(
            help="replicated job (step), e.g. node, dataset-initializer; default: node, or an MPIJob's launcher"
        ),
    ] = None,
    node: Annotated[int | None, typer.Option(min=0, help="node index within the step; default 0")] = None,
    all_pods: Annotated[bool, typer.Option("--all-pods", help="every node (rank) of the step")] = False,
    prefix: Annotated[bool, typer.Option("--prefix", help="start each line with [pod/NAME/CONTAINER]")] = False,
    tail: Annotated[int, typer.Option("--tail", help="only the last lines of each log; -1 all")] = -1,
    since: Annotated[str | None, typer.Option("--since", help="only lines newer than this, e.g. 5m, 1h")] = None,
    previous: Annotated[
        bool, typer.Option("--previous", "-p", help="the log of the container's previous instance")
    ] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="stream until the container ends")] = False,
    container: Annotated[
        str | None, typer.Option("--container", "-c", help="container; default: node, or the step's")
    ] = None,
    pod_timeout: Annotated[
        float, typer.Option(min=0.001, help="seconds to wait for the pod to start")
    ] = DEFAULT_POD_TIMEOUT,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Print the log of one node of a step (default: the step that trains, node 0), or of every node
    with --all-pods, waiting for the pods to start."""
    s = settings(ctx, kubeconfig, namespace, None)
    kind, name = target(args)
    since_seconds = parse_duration(since) if since is not None else None

    async def stream(c: AsyncTrainerClient) -> None:
        jc = job_client(c, kind)
        pods = await jc.wait_for_pods(name, step, node, pod_timeout, all_nodes=all_pods)

        async def one(pod: JSON) -> None:
            labels = meta(pod).labels
            chosen = container or pick_container(pod, str(labels.get(kind.step_label, "")), kind.default_container)
            tag = f"[pod/{pod['metadata']['name']}/{chosen}] " if prefix else ""
            async for line in jc.read_pod_logs(
                pod,
                chosen,
                follow,
                tail_lines=tail if tail >= 0 else None,
                since_seconds=since_seconds,
                previous=previous,
            ):
                typer.echo(f"{tag}{line}")

        if follow:
            await asyncio.gather(*(one(p) for p in pods))
        else:
            for pod in pods:
                await one(pod)

    run(s, stream, crd=kind.resource)


def holding_text(name: str, held: Holding) -> str:
    """``<name>: <state>``, with `` (<reason>: <message>)`` when the condition gives them."""
    detail = f"{held.reason}: {held.message}" if held.message else held.reason
    return f"{name}: {held.state}" + (f" ({detail})" if detail else "")


@app.command()
def wait(
    ctx: typer.Context,
    args: JobArgs,
    status: Annotated[
        list[Status] | None, typer.Option("--status", help="status to wait for (repeatable); default Complete")
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.001, help="seconds")] = DEFAULT_WAIT_TIMEOUT,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Wait until the job reaches a status (exit 1 if it Fails instead, 3 on timeout); meanwhile
    show the condition that holds it."""
    s = settings(ctx, kubeconfig, namespace, output)
    kind, name = target(args)
    wanted = {str(x) for x in status} if status else {COMPLETE}
    err = console(stderr=True)
    seen: list[str] = []

    async def watch(c: AsyncTrainerClient) -> Job:
        with err.status(f"waiting for {name} to be {' or '.join(sorted(wanted))}") as spinner:

            def progress(job: Job) -> None:
                text = holding_text(name, holding_condition(job))
                summary = jobs_summary(job) if isinstance(job, TrainJob) else replicas_summary(job)
                spinner.update(f"{text}  {'jobs' if isinstance(job, TrainJob) else 'replicas'}: {summary}")
                if not seen or seen[-1] != text:
                    seen.append(text)
                    if not err.is_terminal:
                        err.print(text)

            job: Job = await job_client(c, kind).wait_for_job_status(name, wanted, timeout, callbacks=[progress])
            return job

    job = run(s, watch, crd=kind.resource)
    if s.output in TABLES:
        typer.echo(f"{name} {kind.status_of(job)}")
    else:
        show(job, s.output, list, [job])


@app.command()
def delete(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[TYPE] [NAME]",
            help="TYPE NAME or TYPE/NAME (TYPE a job or runtime type, e.g. tj, mpij, tr, ctr), or NAME alone: "
            "a TrainJob",
        ),
    ] = None,
    filename: Annotated[list[str] | None, typer.Option("--filename", "-f", help=FILENAME_HELP)] = None,
    recursive: RecursiveOpt = False,
    wait_: Annotated[bool, typer.Option("--wait", help="return once it is gone")] = False,
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="succeed, printing nothing, when it does not exist")
    ] = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Delete a job (its Jobs, pods and Service go with it) or a runtime by name, or every object the
    files of -f name, in order; one that does not exist is an error once the others are deleted."""
    s = settings(ctx, kubeconfig, namespace, None)
    if bool(args) == bool(filename):
        raise typer.BadParameter("expected TYPE NAME, NAME or -f FILE (one of them)")
    deletions: list[tuple[Resource, str, Manifest | None]] = []  # an object of -f, deleted where the client says
    if filename:
        deletions += [
            (manifest_resource(o), o.metadata.name or "", o) for o in read_files(filename, recursive, "delete")
        ]
    else:
        t, name = parse_target(args or [])
        if name is None:
            raise typer.BadParameter(f"expected {t.name} NAME: which one?")
        if len(t.resources) != 1:
            raise typer.BadParameter(
                f"{t.name} are of two kinds: delete trainingruntime NAME or clustertrainingruntime NAME"
            )
        deletions.append((t.resources[0], name, None))

    async def go(c: AsyncTrainerClient) -> None:
        missing: NotFoundError | None = None
        for res, name, obj in deletions:
            try:
                if obj is None:
                    await delete_object(c.kube, res, c.namespace, name, wait=wait_)
                else:
                    await c.delete(obj, s.namespace, wait=wait_)
            except NotFoundError as e:
                if not await crd_installed(c, res):
                    raise CRDNotInstalledError(res) from None
                if not ignore_not_found:
                    missing = missing or e
                continue
            typer.echo(f"{resource_name(res, name)} deleted")
        if missing is not None:
            raise missing

    run(s, go)


def set_suspend(
    ctx: typer.Context, args: list[str], suspend: bool, kubeconfig: str | None, namespace: str | None
) -> None:
    """Set ``spec.suspend`` (an MPIJob's ``spec.runPolicy.suspend``) with a merge patch."""
    s = settings(ctx, kubeconfig, namespace, None)
    kind, name = target(args)
    patch: JSON = {"spec": {"runPolicy": {"suspend": suspend}}} if kind is MPIJOB else {"spec": {"suspend": suspend}}

    async def go(c: AsyncTrainerClient) -> None:
        try:
            await c.kube.merge_patch(kind.resource, c.namespace, name, patch)
        except ApiError as e:
            if e.not_found:
                raise NotFoundError(kind.resource.kind, c.namespace, name) from None
            raise

    run(s, go, crd=kind.resource)
    typer.echo(f"{resource_name(kind.resource, name)} {'suspended' if suspend else 'resumed'}")


@app.command()
def suspend(
    ctx: typer.Context, args: JobArgs, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None
) -> None:
    """Suspend a job: its pods go; it keeps its place and resumes with ``resume``."""
    set_suspend(ctx, args, True, kubeconfig, namespace)


@app.command()
def resume(ctx: typer.Context, args: JobArgs, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None) -> None:
    """Resume a suspended job."""
    set_suspend(ctx, args, False, kubeconfig, namespace)


@app.command()
def dashboard(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(min=1, max=65535, help="port on 127.0.0.1")] = dashboard_server.DEFAULT_PORT,
    all_namespaces: AllNamespacesOpt = False,
    prometheus_url: Annotated[
        str | None,
        typer.Option(help="Prometheus base URL (e.g. http://127.0.0.1:9090) to draw the curves from"),
    ] = None,
    sample_interval: Annotated[
        float, typer.Option(min=0.1, help="seconds between samples of a viewed job's metrics (no Prometheus)")
    ] = dashboard_server.DEFAULT_SAMPLE_INTERVAL,
    refresh: Annotated[int, typer.Option(min=1, help="seconds after which a page reloads")] = (
        dashboard_server.DEFAULT_REFRESH
    ),
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Serve a read-only web page of the jobs on http://127.0.0.1:PORT/ until Ctrl-C: every TrainJob and
    MPIJob of the namespace (or all, -A) with state, queue, progress and ETA; a job's page with its
    conditions, pods, events, last log lines and loss/accuracy curves (from --prometheus-url, else
    sampled while the page is viewed). Only GET, list and log reads reach the apiserver."""
    s = settings(ctx, kubeconfig, namespace, None)

    async def go(c: AsyncTrainerClient) -> None:
        board = dashboard_server.Dashboard(
            c,
            all_namespaces=all_namespaces,
            prometheus_url=prometheus_url,
            sample_interval=sample_interval,
            refresh=refresh,
        )
        await dashboard_server.serve(board, port, lambda url: typer.echo(f"serving {board.scope} on {url}", err=True))

    run(s, go)


@operator_app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def operator_run(ctx: typer.Context) -> None:
    """Run the operator; every argument goes to it (see trainer operator run --help). The global
    --kubeconfig and --namespace are passed on unless given here."""
    from trainer.main import main as operator_main

    argv = list(ctx.args)
    root = ctx.find_root().obj if isinstance(ctx.find_root().obj, Settings) else Settings()
    given = {a.split("=", 1)[0] for a in argv}
    if root.kubeconfig and "--kubeconfig" not in given:
        argv = ["--kubeconfig", root.kubeconfig, *argv]
    if root.namespace and "--namespace" not in given:
        argv = ["--namespace", root.namespace, *argv]
    raise typer.Exit(operator_main(argv))


def entrypoint() -> None:
    """``python -m trainer.cli``."""
    app()


if __name__ == "__main__":
    entrypoint()

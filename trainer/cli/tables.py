"""What the CLI prints: kubectl-like tables (rich) of jobs, runtimes, pods and events, ages, and
JSON/YAML or names for ``-o``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import typer
import yaml
from rich.console import Console, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table

from trainer.api.base import Model
from trainer.api.kinds import Resource
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.api.waiting import Waiting
from trainer.cli.root import TABLES, Output
from trainer.client import Event, Manifest, queue_of, runtime_framework
from trainer.client.types import eta_text, holding_condition, progress_text, trainer_status_of, trainjob_num_nodes
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

NO_TERMINAL_WIDTH = 4096


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


def without_managed_fields(data: Any) -> Any:
    """``data`` without the ``metadata.managedFields`` of any object in it, as kubectl prints
    objects (``--show-managed-fields=false``, kubectl's default)."""
    if isinstance(data, list):
        return [without_managed_fields(d) for d in data]
    if not isinstance(data, dict):
        return data
    out = {k: without_managed_fields(v) for k, v in data.items()}
    if isinstance(out.get("metadata"), dict) and "managedFields" in out["metadata"]:
        out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "managedFields"}
    return out


def dump(data: Any, output: Output) -> str:
    """``data`` as JSON (indented) or YAML (keys in order), without ``metadata.managedFields``
    (:func:`without_managed_fields`)."""
    plain = without_managed_fields(to_data(data))
    if output == Output.yaml:
        return str(yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)).rstrip("\n")
    return json.dumps(plain, indent=2)


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


Runtimes = Mapping[tuple[str, str, str], TrainingRuntime | ClusterTrainingRuntime]
"""Runtimes by ``(kind, namespace, name)`` (namespace ``""`` for a ClusterTrainingRuntime): see
:func:`runtime_key`."""


def runtime_key(job: TrainJob) -> tuple[str, str, str]:
    """The key of ``job``'s runtime in :data:`Runtimes`: ``spec.runtimeRef`` (kind defaulting to
    ClusterTrainingRuntime, as the operator reads it), in the job's namespace for a TrainingRuntime."""
    kind = job.spec.runtime_ref.kind or ClusterTrainingRuntime.KIND
    namespace = (job.metadata.namespace or "") if kind == TrainingRuntime.KIND else ""
    return (kind, namespace, job.spec.runtime_ref.name)


def runtimes_by_key(
    runtimes: Iterable[TrainingRuntime | ClusterTrainingRuntime],
) -> dict[tuple[str, str, str], TrainingRuntime | ClusterTrainingRuntime]:
    """:data:`Runtimes` of ``runtimes``."""
    return {(r.kind, r.metadata.namespace or "", r.metadata.name or ""): r for r in runtimes}


def nodes_cell(job: TrainJob, runtimes: Runtimes | None) -> str:
    """NODES of a TrainJob, by the SDK's rule (:func:`trainjob_num_nodes`): its ``numNodes``, else its
    runtime's ``mlPolicy.numNodes`` (else 1) when ``runtimes`` has the runtime; ``-`` when the job sets
    none and the runtime is not known (not read, or not found)."""
    own = job.spec.trainer.num_nodes if job.spec.trainer else None
    runtime = (runtimes or {}).get(runtime_key(job))
    if not own and runtime is None:
        return "-"
    policy = runtime.spec.ml_policy if runtime is not None else None
    return str(trainjob_num_nodes(job, policy.num_nodes if policy else None))


def job_row(job: Job, now: datetime | None = None, runtimes: Runtimes | None = None) -> list[str]:
    """The cells of a job's table row: :data:`JOB_COLUMNS` of a TrainJob, :data:`MPIJOB_COLUMNS` of
    an MPIJob. STATE is the condition that holds the job (:func:`holding_condition`); NODES
    :func:`nodes_cell` (``runtimes``: those the jobs' runtimes are looked up in)."""
    state = holding_condition(job).state
    created = age(job.metadata.creation_timestamp, now)
    if isinstance(job, MPIJob):
        worker = job.spec.mpi_replica_specs.worker
        workers = worker.replicas if worker and worker.replicas is not None else None
        count = str(workers) if workers is not None else "-"
        return [job.metadata.name or "", state, count, replicas_summary(job), queue_of(job) or "-", created]
    return [
        job.metadata.name or "",
        state,
        job.spec.runtime_ref.name,
        nodes_cell(job, runtimes),
        jobs_summary(job),
        queue_of(job) or "-",
        created,
    ]


JOB_COLUMNS = ("NAME", "STATE", "RUNTIME", "NODES", "JOBS", "QUEUE", "AGE")


MPIJOB_COLUMNS = ("NAME", "STATE", "WORKERS", "REPLICAS", "QUEUE", "AGE")


WIDE_COLUMNS = ("REASON", "MESSAGE")
"""Added after AGE by ``-o wide``: why the job waits (:func:`trainer.api.waiting.why_waiting`: a condition that
holds it, an image pull, the scheduler's message...), else the reason and message of the condition
STATE names."""


PROGRESS_COLUMNS = ("PROGRESS", "ETA")
"""Added before AGE when some job of the table reported progress (``status.trainerStatus``)."""


def job_rows(
    jobs: Iterable[Job],
    now: datetime | None = None,
    *,
    wide: bool = False,
    namespaces: bool = False,
    progress: bool | None = None,
    waiting: Mapping[tuple[str, str], Waiting] | None = None,
    runtimes: Runtimes | None = None,
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a table of jobs of one kind: :data:`JOB_COLUMNS` (TrainJobs) or
    :data:`MPIJOB_COLUMNS` (MPIJobs); NAMESPACE first with ``namespaces``; :data:`PROGRESS_COLUMNS`
    (e.g. ``45%``, ``3h12m``) before AGE of TrainJobs when ``progress``, by default when one of them
    reported progress; :data:`WIDE_COLUMNS` last with ``wide``, from ``waiting`` (``(namespace,
    name)`` -> why the job waits) where it has the job, else from the condition STATE names; NODES
    from ``runtimes`` for a TrainJob that sets no ``numNodes`` (:func:`nodes_cell`)."""
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
        row = job_row(job, now, runtimes)
        if progress and isinstance(job, TrainJob):
            row[-1:-1] = [progress_text(job), eta_text(job)]
        held = holding_condition(job)
        why = (waiting or {}).get((job.metadata.namespace or "", job.metadata.name or ""))
        reason, message = (why.reason, why.message) if why is not None else (held.reason, held.message)
        rows.append(
            [
                *([job.metadata.namespace or ""] if namespaces else []),
                *row,
                *([reason, message] if wide else []),
            ]
        )
    return header, rows


def jobs_table(
    jobs: Iterable[Job],
    now: datetime | None = None,
    *,
    wide: bool = False,
    namespaces: bool = False,
    waiting: Mapping[tuple[str, str], Waiting] | None = None,
    runtimes: Runtimes | None = None,
) -> Table:
    """The table ``get`` and ``list`` print: see :func:`job_rows`."""
    header, rows = job_rows(jobs, now, wide=wide, namespaces=namespaces, waiting=waiting, runtimes=runtimes)
    t = table(*header)
    for row in rows:
        t.add_row(*row)
    return t


def object_name(obj: Manifest | OptimizationJob) -> str:
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


def console(stderr: bool = False) -> Console:
    """A console without markup or highlighting (names and messages are printed as they are);
    when the output is not a terminal, wide enough that no cell is wrapped or cut."""
    out = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False, width=NO_TERMINAL_WIDTH)
    return out


def print_trimmed(out: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` (a table) on ``out`` without the spaces rich pads each line with to the
    table's width: a line ends with its last character, so a long cell in one row (an event's message)
    does not pad every other row out to its length, on a terminal or off it."""
    lines = out.render_lines(renderable, out.options, pad=False)
    segments: list[Segment] = []
    for line in lines:
        while line and not line[-1].control and not line[-1].text.rstrip():
            line.pop()
        if line:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
        segments += [*line, Segment.line()]
    out.print(Segments(segments), end="")


def show(
    data: Any, output: Output, tables: Callable[[], Iterable[Table]], names: Iterable[Manifest | OptimizationJob] = ()
) -> None:
    """Print ``data`` as JSON/YAML, the tables ``tables`` makes, or (``-o name``) the names of
    ``names``."""
    if output in TABLES:
        out = console()
        for i, t in enumerate(tables()):
            if i:
                out.print()
            print_trimmed(out, t)
    elif output == Output.name:
        for obj in names:
            typer.echo(object_name(obj))
    else:
        typer.echo(dump(data, output))


def resource_name(res: Resource, name: str) -> str:
    """``<plural>.<group>/<name>``, as ``apply``, ``delete``, ``suspend`` and ``resume`` name what
    they changed."""
    return f"{res.plural}.{res.group}/{name}"


def show_jobs(
    jobs: Sequence[Job],
    data: Any,
    output: Output,
    namespaces: bool = False,
    waiting: Mapping[tuple[str, str], Waiting] | None = None,
    runtimes: Runtimes | None = None,
) -> None:
    """Print jobs as ``get`` and ``list`` do: a table (``wide``: with REASON and MESSAGE, see
    :func:`job_rows`), names, or ``data`` as JSON/YAML."""
    wide = output == Output.wide
    show(
        data,
        output,
        lambda: [jobs_table(jobs, wide=wide, namespaces=namespaces, waiting=waiting, runtimes=runtimes)],
        jobs,
    )

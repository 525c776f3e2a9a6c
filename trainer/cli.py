"""The ``trainer`` command line (typer + rich): submit, inspect, follow and delete TrainJobs, and run
the operator.

Every command is a thin layer over :class:`trainer.client.AsyncTrainerClient`; what is pure here
(output formatting, exit codes) is tested without a cluster in ``tests/test_cli.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
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
from api.trainer_v1alpha1 import MANAGED_BY_TRAINER as TRAINJOB_CONTROLLER
from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.client import (
    COMPLETE,
    AsyncTrainerClient,
    Event,
    Manifest,
    TrainerClientError,
    WaitTimeoutError,
    queue_of,
    runtime_framework,
    trainjob_status,
)
from trainer.client.aio import DEFAULT_POD_TIMEOUT, DEFAULT_WAIT_TIMEOUT
from trainer.client.manifest import load_manifests, parse_manifest, read_yaml, wire_dict
from trainer.client.multicluster import WorkloadInfo, for_multicluster
from trainer.client.types import eta_text, parse_time, progress_text, trainer_status_of
from trainer.json_codec import JSON
from trainer.kube.client import ApiError

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

Exit codes: 0 success; 1 the job Failed (wait) or an error (invalid manifest, unreadable file, API
error, not found); 2 usage error; 3 timeout (wait --timeout, logs --pod-timeout)."""


class Output(StrEnum):
    """Output formats of ``--output``."""

    table = "table"
    json = "json"
    yaml = "yaml"


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
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
operator_app = typer.Typer(help="The operator itself.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(operator_app, name="operator")


@app.callback()
def main(
    ctx: typer.Context,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="output format")] = Output.table,
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


def run(s: Settings, body: Callable[[AsyncTrainerClient], Awaitable[T]]) -> T:
    """Connect with the settings, run ``body`` and close; errors become one line and an exit code."""

    async def go() -> T:
        client = await AsyncTrainerClient.connect(s.kubeconfig, s.namespace)
        async with client:
            return await body(client)

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
    then = parse_time(timestamp)
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


def job_row(job: TrainJob, now: datetime | None = None) -> list[str]:
    """The cells of a job's table row: NAME, STATE, RUNTIME, NODES, JOBS, QUEUE, AGE."""
    nodes = job.spec.trainer.num_nodes if job.spec.trainer and job.spec.trainer.num_nodes else None
    return [
        job.metadata.name or "",
        trainjob_status(job),
        job.spec.runtime_ref.name,
        str(nodes) if nodes else "-",
        jobs_summary(job),
        queue_of(job) or "-",
        age(job.metadata.creation_timestamp, now),
    ]


JOB_COLUMNS = ("NAME", "STATE", "RUNTIME", "NODES", "JOBS", "QUEUE", "AGE")


PROGRESS_COLUMNS = ("PROGRESS", "ETA")
"""Added before AGE when some job of the table reported progress (``status.trainerStatus``)."""


def jobs_table(jobs: Iterable[TrainJob], now: datetime | None = None) -> Table:
    """The table ``get`` and ``list`` print: :data:`JOB_COLUMNS`, plus :data:`PROGRESS_COLUMNS` (e.g.
    ``45%``, ``3h12m``) before AGE when a job reported progress."""
    jobs = list(jobs)
    progress = any(trainer_status_of(j) is not None for j in jobs)
    t = table(*((*JOB_COLUMNS[:-1], *PROGRESS_COLUMNS, JOB_COLUMNS[-1]) if progress else JOB_COLUMNS))
    for job in jobs:
        row = job_row(job, now)
        t.add_row(*([*row[:-1], progress_text(job), eta_text(job), row[-1]] if progress else row))
    return t


def runtimes_table(runtimes: Iterable[TrainingRuntime | ClusterTrainingRuntime]) -> Table:
    """NAME, KIND, FRAMEWORK, NODES of runtimes."""
    t = table("NAME", "KIND", "FRAMEWORK", "NODES")
    for r in runtimes:
        nodes = r.spec.ml_policy.num_nodes if r.spec.ml_policy else None
        t.add_row(r.metadata.name or "", r.kind, runtime_framework(r) or "-", str(nodes or "-"))
    return t


def events_table(events: Iterable[Event], now: datetime | None = None) -> Table:
    """LAST SEEN, TYPE, REASON, OBJECT, MESSAGE of events."""
    t = table("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", title="Events:")
    for e in events:
        t.add_row(age(e.time, now), e.type, e.reason, f"{e.involved_object_kind}/{e.involved_object_name}", e.message)
    return t


def describe_data(
    job: TrainJob, podgroup: JSON | None, events: list[Event], workload: WorkloadInfo | None = None
) -> JSON:
    """What ``describe -o json|yaml`` prints: the job, its status and queue, PodGroup, Kueue
    Workload (with ``clusterName``, the MultiKueue worker it runs on) and events."""
    return {
        "trainJob": job.to_dict(),
        "state": trainjob_status(job),
        "queue": queue_of(job),
        "managedBy": job.spec.managed_by,
        "podGroup": podgroup,
        "workload": workload.to_dict() if workload else None,
        "events": [e.to_dict() for e in events],
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
    job: TrainJob,
    podgroup: JSON | None,
    events: list[Event],
    now: datetime | None = None,
    workload: WorkloadInfo | None = None,
) -> list[Table]:
    """The sections ``describe`` prints as tables; the Workload ones only when Kueue made one."""
    meta = job.metadata
    ref = job.spec.runtime_ref
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column()
    head.add_column()
    rows = [
        ("Name:", meta.name or ""),
        ("Namespace:", meta.namespace or ""),
        ("State:", trainjob_status(job)),
        ("Runtime:", f"{ref.kind or ClusterTrainingRuntime.KIND}/{ref.name}"),
        ("Queue:", queue_of(job) or "<none>"),
        ("Suspend:", str(bool(job.spec.suspend)).lower()),
    ]
    if job.spec.managed_by and job.spec.managed_by != TRAINJOB_CONTROLLER:
        rows.append(("Managed by:", job.spec.managed_by))
    if workload is not None:
        rows.append(("Cluster:", workload.where()))
    rows.append(("Created:", f"{meta.creation_timestamp or ''} ({age(meta.creation_timestamp, now)} ago)"))
    reported = trainer_status_of(job)
    if reported is not None:
        rows.append(("Progress:", f"{progress_text(job)} (reported {age(reported.last_updated_time, now)} ago)"))
        rows.append(("ETA:", eta_text(job)))
    for key, value in rows:
        head.add_row(key, value)
    conditions = table("TYPE", "STATUS", "REASON", "MESSAGE", "LAST TRANSITION", title="Conditions:")
    for c in (job.status.conditions if job.status else None) or []:
        conditions.add_row(c.type, c.status, c.reason, c.message, c.last_transition_time or "")
    jobs = table("STEP", "READY", "SUCCEEDED", "FAILED", "ACTIVE", "SUSPENDED", title="Jobs status:")
    for s in (job.status.jobs_status if job.status else None) or []:
        jobs.add_row(s.name, *(str(n) for n in (s.ready, s.succeeded, s.failed, s.active, s.suspended)))
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
    return [head, conditions, jobs, group, *kueue, *reports, events_table(events, now)]


def console(stderr: bool = False) -> Console:
    """A console without markup or highlighting (names and messages are printed as they are);
    when the output is not a terminal, wide enough that no cell is wrapped or cut."""
    out = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, markup=False, highlight=False, soft_wrap=False, width=NO_TERMINAL_WIDTH)
    return out


def show(data: Any, output: Output, tables: Callable[[], Iterable[Table]]) -> None:
    """Print ``data`` as JSON/YAML, or the tables ``tables`` makes."""
    if output == Output.table:
        out = console()
        for i, t in enumerate(tables()):
            if i:
                out.print()
            out.print(t)
    else:
        typer.echo(dump(data, output))


def applied_line(obj: Manifest) -> str:
    """``<plural>.<group>/<name> applied`` as kubectl prints it."""
    group = obj.api_version.split("/")[0]
    return f"{type(obj).PLURAL}.{group}/{obj.metadata.name} applied"


# --------------------------------------------------------------------------- commands


def read_manifests(files: Sequence[str]) -> list[Manifest]:
    """Every object of ``files`` (``-`` is stdin), validated before anything is sent. Raises
    :class:`trainer.client.ManifestError`."""
    objs: list[Manifest] = []
    for f in files:
        if f == "-":
            objs += [parse_manifest(doc, where) for where, doc in read_yaml(sys.stdin.read(), "<stdin>")]
        else:
            objs += load_manifests(Path(f))
    return objs


@app.command()
def apply(
    ctx: typer.Context,
    filename: Annotated[
        list[str], typer.Option("--filename", "-f", help="YAML/JSON file of TrainJobs and runtimes; - for stdin")
    ],
    force_conflicts: Annotated[bool, typer.Option(help="take over fields other managers own")] = False,
    queue: Annotated[
        str | None, typer.Option(help="Kueue LocalQueue of the TrainJobs (label kueue.x-k8s.io/queue-name)")
    ] = None,
    multicluster: Annotated[
        bool,
        typer.Option(
            help="submit the TrainJobs to a MultiKueue manager cluster: managedBy kueue.x-k8s.io/multikueue, "
            "the queue label (--queue or the manifest's) and suspend; Kueue runs each on a worker cluster"
        ),
    ] = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Create or update TrainJobs, TrainingRuntimes and ClusterTrainingRuntimes (server-side apply)."""
    s = settings(ctx, kubeconfig, namespace, output)
    try:
        objs = read_manifests(filename)
        if multicluster:  # refuse before contacting the cluster
            for obj in objs:
                if isinstance(obj, TrainJob):
                    for_multicluster(wire_dict(obj), queue)
    except TrainerClientError as e:
        fail(str(e))
    stored = run(s, lambda c: c.apply(objs, s.namespace, force=force_conflicts, queue=queue, multicluster=multicluster))
    if s.output == Output.table:
        for obj in stored:
            typer.echo(applied_line(obj))
    else:
        typer.echo(dump(stored[0] if len(stored) == 1 else as_list(stored), s.output))


@app.command()
def get(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="TrainJob name")],
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Show one TrainJob."""
    s = settings(ctx, kubeconfig, namespace, output)
    job = run(s, lambda c: c.get_job(name))
    show(job, s.output, lambda: [jobs_table([job])])


@app.command("list")
def list_(
    ctx: typer.Context,
    runtime: Annotated[str | None, typer.Option(help="only jobs of this runtime")] = None,
    selector: Annotated[str | None, typer.Option("--selector", "-l", help="label selector")] = None,
    queue: Annotated[
        str | None, typer.Option(help="only jobs naming this Kueue (label) or Volcano (annotation) queue")
    ] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="every namespace")] = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """List TrainJobs, oldest first."""
    s = settings(ctx, kubeconfig, namespace, output)
    jobs = run(s, lambda c: c.list_jobs(runtime, label_selector=selector, queue=queue, all_namespaces=all_namespaces))
    if not jobs and s.output == Output.table:
        typer.echo("No TrainJobs found.", err=True)
        return
    show(as_list(jobs), s.output, lambda: [jobs_table(jobs)])


@app.command()
def runtimes(
    ctx: typer.Context, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None, output: OutputOpt = None
) -> None:
    """List the TrainingRuntimes of the namespace and the ClusterTrainingRuntimes."""
    s = settings(ctx, kubeconfig, namespace, output)
    found = run(s, lambda c: c.list_runtimes())
    if not found and s.output == Output.table:
        typer.echo("No runtimes found.", err=True)
        return
    show(as_list(found), s.output, lambda: [runtimes_table(found)])


@app.command()
def describe(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="TrainJob name")],
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Show a TrainJob's state, conditions, Job counts, Volcano PodGroup and queue, Kueue Workload
    (where MultiKueue runs it, admission checks and their messages) and events."""
    s = settings(ctx, kubeconfig, namespace, output)

    async def gather(c: AsyncTrainerClient) -> tuple[TrainJob, JSON | None, WorkloadInfo | None, list[Event]]:
        job = await c.get_job(name)
        return job, await c.get_podgroup(name), await c.get_workload(name), await c.get_job_events(name)

    job, podgroup, workload, events = run(s, gather)
    show(
        describe_data(job, podgroup, events, workload),
        s.output,
        lambda: describe_tables(job, podgroup, events, workload=workload),
    )


@app.command()
def logs(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="TrainJob name")],
    step: Annotated[str, typer.Option(help="replicated job (step), e.g. node, dataset-initializer")] = "node",
    node: Annotated[int, typer.Option(min=0, help="node index within the step")] = 0,
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
    """Print the log of one node of one step, waiting for its pod to start."""
    s = settings(ctx, kubeconfig, namespace, None)

    async def stream(c: AsyncTrainerClient) -> None:
        async for line in c.get_job_logs(name, step, node, follow, container=container, pod_timeout=pod_timeout):
            typer.echo(line)

    run(s, stream)


@app.command()
def wait(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="TrainJob name")],
    status: Annotated[
        list[Status] | None, typer.Option("--status", help="status to wait for (repeatable); default Complete")
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.001, help="seconds")] = DEFAULT_WAIT_TIMEOUT,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Wait until the TrainJob reaches a status (exit 1 if it Fails instead, 3 on timeout)."""
    s = settings(ctx, kubeconfig, namespace, output)
    wanted = {str(x) for x in status} if status else {COMPLETE}
    err = console(stderr=True)
    seen: list[str] = []

    async def watch(c: AsyncTrainerClient) -> TrainJob:
        with err.status(f"waiting for {name} to be {' or '.join(sorted(wanted))}") as spinner:

            def progress(job: TrainJob) -> None:
                state = trainjob_status(job)
                text = f"{name}: {state}  jobs: {jobs_summary(job)}"
                spinner.update(text)
                if not seen or seen[-1] != state:
                    seen.append(state)
                    if not err.is_terminal:
                        err.print(text)

            return await c.wait_for_job_status(name, wanted, timeout, [progress])

    job = run(s, watch)
    if s.output == Output.table:
        typer.echo(f"{name} {trainjob_status(job)}")
    else:
        typer.echo(dump(job, s.output))


@app.command()
def delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="TrainJob name")],
    wait_: Annotated[bool, typer.Option("--wait", help="return once it is gone")] = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Delete a TrainJob (its Jobs, pods and Service go with it)."""
    s = settings(ctx, kubeconfig, namespace, None)
    run(s, lambda c: c.delete_job(name, wait=wait_))
    typer.echo(f"trainjobs.trainer.kubeflow.org/{name} deleted")


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

"""``describe``: a job's state, conditions, children, PodGroup, Kueue Workload, pods and events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import typer
from rich.table import Table

from trainer.api.kinds import PODS
from trainer.api.kubeflow_v2beta1 import MANAGED_BY_MPI_OPERATOR as MANAGED_BY_MPI
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.trainer_v1alpha1 import MANAGED_BY_TRAINER as TRAINJOB_CONTROLLER
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.api.waiting import Waiting
from trainer.cli.describe_runtime import describe_runtimes
from trainer.cli.errors import run
from trainer.cli.optimization import describe_optimization_job
from trainer.cli.root import JobArgs, KubeconfigOpt, NamespaceOpt, OutputOpt, app, settings
from trainer.cli.tables import Job, age, events_table, pod_row, pods_table, show, table
from trainer.cli.targets import job_client, parse_target, target
from trainer.client import AsyncTrainerClient, Event, queue_of
from trainer.client.jobs import job_waiting
from trainer.client.multicluster import WorkloadInfo
from trainer.client.types import (
    checkpoint_text,
    eta_text,
    holding_condition,
    pod_selector,
    progress_text,
    trainer_status_of,
)
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON

NO_CONTROLLER_AFTER = 5
"""Seconds after which ``describe`` says that no controller has acted on a job without a status."""


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
    why: Waiting | None = None,
) -> JSON:
    """What ``describe -o json|yaml`` prints: the job (under ``trainJob`` or ``mpiJob``), its state
    (the condition that holds it) with that condition's reason and message, queue, PodGroup, Kueue
    Workload (with ``clusterName``, the MultiKueue worker it runs on), pods (name, phase, node,
    ready, restarts, waiting reason), events, ``warning`` (:func:`unattended`, or null) and ``why``
    (why the job waits: reason, message, nextStep, doc; null when nothing holds it)."""
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
        "why": (
            {"reason": why.reason, "message": why.message, "nextStep": why.next_step, "doc": why.doc}
            if why is not None
            else None
        ),
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


def head_rows(
    job: Job, now: datetime | None = None, workload: WorkloadInfo | None = None, why: Waiting | None = None
) -> list[tuple[str, str]]:
    """The ``key: value`` lines of the first section of ``describe``: name, namespace, kind, state,
    ``Why:`` and ``Next:`` when something holds the job (``why``: :func:`trainer.api.waiting.why_waiting`),
    runtime (workers of an MPIJob), queue, suspend, ``managedBy`` when another controller's, the
    MultiKueue cluster, creation, progress when reported, and ``Warning:`` when :func:`unattended`."""
    meta = job.metadata
    held = holding_condition(job)
    rows = [
        ("Name:", meta.name or ""),
        ("Namespace:", meta.namespace or ""),
        ("Kind:", job.kind),
        ("State:", f"{held.state} ({held.reason}: {held.message})" if held.reason else held.state),
    ]
    if why is not None:
        rows.append(("Why:", f"{why.reason}: {why.message}" if why.message else why.reason))
        rows.append(("Next:", f"{why.next_step} (see {why.doc})"))
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
    return rows


def status_tables(job: Job) -> list[Table]:
    """The conditions of a job and its Jobs status (the replica statuses of an MPIJob)."""
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
    return [conditions, jobs]


def podgroup_table(podgroup: JSON | None) -> Table:
    """NAME, PHASE, MIN MEMBER, QUEUE of the job's PodGroup; ``<none>`` without one."""
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
    return group


def describe_tables(
    job: Job,
    podgroup: JSON | None,
    events: list[Event],
    now: datetime | None = None,
    workload: WorkloadInfo | None = None,
    pods: Sequence[JSON] = (),
    why: Waiting | None = None,
) -> list[Table]:
    """The sections ``describe`` prints as tables: the job (:func:`head_rows`), conditions, Jobs status
    (replica statuses of an MPIJob), PodGroup, the Workload ones only when Kueue made one, metrics
    when reported, pods and events."""
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column()
    head.add_column()
    for key, value in head_rows(job, now, workload, why):
        head.add_row(key, value)
    kueue = workload_tables(workload) if workload is not None else []
    reported = trainer_status_of(job) if isinstance(job, TrainJob) else None
    metrics = table("NAME", "VALUE", title="Metrics:")
    for m in (reported.metrics if reported else None) or []:
        metrics.add_row(m.name, m.value)
    reports = [metrics] if metrics.row_count else []
    tables = [head, *status_tables(job), podgroup_table(podgroup), *kueue, *reports]
    return [*tables, pods_table(pods, now), events_table(events, now)]


@app.command()
def describe(
    ctx: typer.Context,
    args: JobArgs,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Show a job's state (the condition that holds it, why it waits and the next step, and a
    warning when no controller has acted on it), conditions, Job counts, Volcano PodGroup and
    queue, Kueue Workload (where MultiKueue runs it, admission checks and their messages), pods
    (phase, node, ready, restarts, why waiting: ImagePullBackOff, Unschedulable...) and events. Of a
    runtime (tr NAME, ctr NAME, runtime NAME): its framework, ML and gang policies, steps with their
    containers, and events. Of an OptimizationJob (optj NAME): its state, objective, best trial and
    conditions, and its trials (index, name, state, parameters, objective)."""
    s = settings(ctx, kubeconfig, namespace, output)
    runtime_type, runtime_name = parse_target(args)
    if runtime_type.optimization and runtime_name is not None:
        describe_optimization_job(s, runtime_name)
        return
    if runtime_type.job is None and runtime_name is not None:
        describe_runtimes(s, runtime_type, runtime_name)
        return
    kind, name = target(args)

    async def gather(c: AsyncTrainerClient) -> tuple[Job, JSON | None, WorkloadInfo | None, list[Event], list[JSON]]:
        jc = job_client(c, kind)
        job = await jc.get_job(name)
        pods, _ = await c.kube.list(PODS, c.namespace, pod_selector(kind, name))
        return job, await jc.get_podgroup(name), await jc.get_workload(name), await jc.get_job_events(name), pods

    job, podgroup, workload, events, pods = run(s, gather, crd=kind.resource)
    why = job_waiting(job, pods, podgroup, workload)
    show(
        describe_data(job, podgroup, events, workload, pods, why=why),
        s.output,
        lambda: describe_tables(job, podgroup, events, workload=workload, pods=pods, why=why),
        [job],
    )

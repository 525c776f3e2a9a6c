"""``describe`` of a runtime (``describe tr NAME``, ``ctr NAME``, ``runtime NAME``): its kind,
framework, ML policy, gang policy, steps (the JobSet template's replicated jobs and their
containers) and events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.table import Table

from trainer.api.kinds import EVENTS
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime
from trainer.cli.errors import run
from trainer.cli.get import named_runtimes
from trainer.cli.root import Settings
from trainer.cli.tables import age, events_table, show, table
from trainer.cli.targets import ObjectType
from trainer.client import AsyncTrainerClient, Event, runtime_framework
from trainer.framework.json_codec import JSON

Runtime = TrainingRuntime | ClusterTrainingRuntime

EVENTS_OF_CLUSTER_OBJECTS = "default"
"""The namespace where the apiserver keeps the events of cluster-scoped objects (kubectl describe reads them there)."""


def policy_text(runtime: Runtime) -> tuple[str, str]:
    """The ML policy (``torch (numProcPerNode: auto)``, ``mpi (OpenMPI, numProcPerNode: 1)``,
    ``<none>``) and the gang policy (``coscheduling``, ``volcano``, ``<none>``) of a runtime."""
    ml = runtime.spec.ml_policy
    if ml is not None and ml.torch is not None:
        policy = f"torch (numProcPerNode: {ml.torch.num_proc_per_node})"
    elif ml is not None and ml.mpi is not None:
        policy = f"mpi ({ml.mpi.mpi_implementation}, numProcPerNode: {ml.mpi.num_proc_per_node})"
    else:
        policy = "<none>"
    gang = runtime.spec.pod_group_policy
    kinds = [k for k in ("coscheduling", "volcano") if gang is not None and getattr(gang, k) is not None]
    return policy, ", ".join(kinds) or "<none>"


def runtime_rows(runtime: Runtime, now: datetime | None = None) -> list[tuple[str, str]]:
    """The ``key: value`` lines of a runtime: name, namespace (a TrainingRuntime's), kind,
    framework (label ``trainer.kubeflow.org/framework``), nodes, ML policy, gang policy, creation."""
    meta = runtime.metadata
    policy, gang = policy_text(runtime)
    ml = runtime.spec.ml_policy
    rows = [("Name:", meta.name or "")]
    if isinstance(runtime, TrainingRuntime):
        rows.append(("Namespace:", meta.namespace or ""))
    return [
        *rows,
        ("Kind:", runtime.kind),
        ("Framework:", runtime_framework(runtime) or "<none>"),
        ("Nodes:", str(ml.num_nodes if ml is not None and ml.num_nodes is not None else "-")),
        ("ML policy:", policy),
        ("Gang policy:", gang),
        ("Created:", f"{meta.creation_timestamp or ''} ({age(meta.creation_timestamp, now)} ago)"),
    ]


def steps_table(runtime: Runtime) -> Table:
    """STEP, REPLICAS, DEPENDS ON, CONTAINERS (``name=image``) of the template's replicated jobs."""
    t = table("STEP", "REPLICAS", "DEPENDS ON", "CONTAINERS", title="Steps:")
    spec = runtime.spec.template.spec
    for job in (spec.replicated_jobs if spec is not None else None) or []:
        pod = ((job.template.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = ", ".join(f"{c.get('name', '')}={c.get('image', '')}" for c in pod.get("containers") or [])
        depends = ", ".join(f"{d.name} {d.status}" for d in job.depends_on or []) or "-"
        t.add_row(job.name, str(job.replicas), depends, containers or "-")
    return t


def runtime_tables(runtime: Runtime, events: Sequence[Event], now: datetime | None = None) -> list[Table]:
    """What ``describe`` prints of a runtime: :func:`runtime_rows`, :func:`steps_table`, events."""
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column()
    head.add_column()
    for key, value in runtime_rows(runtime, now):
        head.add_row(key, value)
    return [head, steps_table(runtime), events_table(events, now)]


def runtime_data(runtime: Runtime, events: Sequence[Event]) -> JSON:
    """What ``describe -o json|yaml`` prints of a runtime: the object (under ``trainingRuntime`` or
    ``clusterTrainingRuntime``) and its events."""
    key = "trainingRuntime" if isinstance(runtime, TrainingRuntime) else "clusterTrainingRuntime"
    return {key: runtime.to_dict(), "events": [e.to_dict() for e in events]}


async def runtime_events(c: AsyncTrainerClient, runtime: Runtime) -> list[Event]:
    """The events about the runtime (by kind, name and uid), oldest first. Raises :class:`ApiError`."""
    meta = runtime.metadata
    namespace = meta.namespace if isinstance(runtime, TrainingRuntime) else EVENTS_OF_CLUSTER_OBJECTS
    selector = f"involvedObject.kind={runtime.kind},involvedObject.name={meta.name}"
    items, _ = await c.kube.list(EVENTS, namespace, field_selector=selector)
    events = [Event.from_dict(i) for i in items]
    return sorted(
        (e for e in events if not meta.uid or not e.involved_object_uid or e.involved_object_uid == meta.uid),
        key=lambda e: e.time or "",
    )


def describe_runtimes(s: Settings, t: ObjectType, name: str) -> None:
    """``describe`` of the runtimes of type ``t`` named ``name`` (both kinds for ``runtimes``), one
    after the other. Prints ``error: ... not found`` and exits 1 when there is none."""

    async def gather(c: AsyncTrainerClient) -> list[tuple[Runtime, list[Event]]]:
        return [(r, await runtime_events(c, r)) for r in await named_runtimes(c, t, name)]

    found = run(s, gather, crd=t.resources[0])
    data = [runtime_data(r, events) for r, events in found]
    show(
        data[0] if len(data) == 1 else data,
        s.output,
        lambda: [t for r, events in found for t in runtime_tables(r, events)],
        [r for r, _ in found],
    )

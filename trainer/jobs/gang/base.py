"""What every gang scheduler module shares: its interface, its inputs and its plan.

:func:`decorate` and :func:`gang_conditions` apply a plan to a job's desired Jobs and conditions.

A gang scheduler module is pure: ``plan(GangInput, Facts) -> GangPlan``. The reconciler builds the
input from the job's derived data (TrainJob runtime info or MPIJob), passes its cache
:class:`~trainer.framework.controller.Reader` as ``Facts``, then
applies the plan: the PodGroup objects, the pod template decorations, and the hold (Jobs stay
suspended) with the conditions that explain it. Adding a scheduler is one module that registers
itself in :mod:`trainer.jobs.gang`; the reconcilers do not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import ClassVar, Protocol

from trainer.api.base import Condition
from trainer.api.conditions import COND_MISCONFIGURED
from trainer.api.kinds import Resource
from trainer.api.labels import JOB_INDEX, REPLICATED_JOB_NAME
from trainer.api.queues import NO_QUEUE, QueueChoice
from trainer.api.trainer_v1alpha1 import PodGroupPolicy
from trainer.framework.controller import Owns
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.owner import owner_reference
from trainer.framework.resources import ResourceList, binary_resources, format_quantity, pod_requests
from trainer.jobs.child_writer import Once
from trainer.jobs.conditions import fold_problems, problem


@dataclass(frozen=True)
class PodSet:
    """The Pods of one replicated job as the gang sees them: ``jobs`` Jobs of ``pods_per_job`` Pods
    each, all from ``template`` (after overrides)."""

    name: str
    jobs: int
    pods_per_job: int
    template: JSON

    @property
    def count(self) -> int:
        """Pods in the set."""
        return self.jobs * self.pods_per_job

    @cached_property
    def requests(self) -> ResourceList:
        """Requests of one Pod of the set, as kube-scheduler counts them
        (:func:`trainer.framework.resources.pod_requests`), computed once. Raises ``ValueError`` for a value
        that is not a quantity."""
        return pod_requests(self.template)


@dataclass(frozen=True)
class GangInput:
    """Everything about one job that a gang scheduler needs."""

    owner: JSON
    """The job object (TrainJob or MPIJob), for owner references and metadata."""
    pod_sets: list[PodSet]
    """The Pods that must run together."""
    queue: QueueChoice = NO_QUEUE
    priority_class: str | None = None
    min_available: int | None = None
    min_resources: dict[str, str] | None = None
    schedule_timeout_seconds: int | None = None
    pod_group_policy: PodGroupPolicy | None = None
    """The runtime's ``podGroupPolicy`` as typed (each scheduler reads its own source: Volcano's
    ``networkTopology``), None for a job without one."""
    runtime_policy: str | None = None
    """The scheduler the runtime's ``podGroupPolicy`` names (``volcano``/``coscheduling``), or ``workload``
    when it sets ``spec.scheduling``; None: neither."""
    finished: bool = False
    started: bool = False
    """True once the job's Jobs have been released (unsuspended) at least once."""
    scheduling: JSON | None = None
    """The Workload API groups the job asks for: its runtime's ``spec.scheduling`` (kubeflow/trainer
    KEP-3015's ``Scheduling``), None when it asks for none (:mod:`trainer.jobs.gang.workload`)."""
    all_pod_sets: tuple[PodSet, ...] = ()
    """Every pod set of the job in order, those completed first (initializers) included: ``scheduling``
    names them."""
    sequenced: bool = False
    """The job starts its replicated jobs in an order (``dependsOn``, ``startupPolicy: InOrder``)."""

    @property
    def name(self) -> str:
        return str(self.owner["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.owner["metadata"].get("namespace") or "")


class Facts(Protocol):
    """A read-only view of the caches (the controller's :class:`~trainer.framework.controller.Reader`)."""

    def get(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        """The cached object, or None."""
        ...

    def items(self, res: Resource) -> list[JSON]:
        """Every cached object of ``res``."""
        ...

    def served(self, res: Resource) -> bool:
        """Whether the apiserver serves ``res`` (False: its API is not installed)."""
        ...


@dataclass
class GangPlan:
    """What the reconciler applies for the gang scheduler."""

    apply: list[JSON] = field(default_factory=list)
    """Objects to server-side apply (e.g. the PodGroup)."""
    create: list[Once] = field(default_factory=list)
    """Objects created once when absent and never changed (the Workload and its PodGroups)."""
    delete: list[tuple[Resource, str, str]] = field(default_factory=list)
    """Objects to delete: (resource, namespace, name)."""
    scheduler_name: str | None = None
    """``spec.schedulerName`` for pods that do not set one."""
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    """Annotations per pod set name (``"*"`` for every set)."""
    scheduling_groups: dict[tuple[str, int | None], str] = field(default_factory=dict)
    """``spec.schedulingGroup.podGroupName`` of the Pods of ``(pod set, Job index)`` (index None: every Job
    of the set)."""
    hold: bool = False
    """Keep every Job suspended (no Pods) for now."""
    conditions: list[Condition] = field(default_factory=list)
    """Conditions to set on the job (Misconfigured, WaitingForGang)."""


class GangScheduler(Protocol):
    """One gang scheduler. ``name`` is the ``--gang-scheduler-name`` value that selects it."""

    name: ClassVar[str]
    owns: ClassVar[list[Owns]]
    """Objects of the plan that the job owns (e.g. its PodGroup) and the verbs the plan's writes ask of
    them (:attr:`~trainer.framework.controller.Owns.verbs`); the controller caches them."""
    watches: ClassVar[list[Resource]]
    """Cluster-wide objects :meth:`plan` reads (e.g. Volcano Queues); a change re-plans every job."""

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        """The gang plan for ``job``. Pure; never raises for bad input (it reports a condition)."""
        ...


# ----------------------------------------------------------------------------- resources


def gang_resources(pod_sets: list[PodSet]) -> dict[str, str]:
    """minResources of a gang: resource name -> Quantity string (``{"cpu": "4", "memory": "8Gi"}``),
    the sum over every Pod of its requests as kube-scheduler counts them
    (:func:`trainer.framework.resources.pod_requests`: native sidecars included), printed as upstream's
    plugins print their sum of ``resource.Quantity`` (kubeflow/trainer
    ``pkg/runtime/framework/plugins/volcano/volcano.go``): in the format of the first Pod set's
    first non-zero quantity (:func:`trainer.framework.resources.binary_resources`). Raises ``ValueError``
    for a resource value that is not a quantity."""
    total: dict[str, Decimal] = {}
    binary: dict[str, bool] = {}
    for ps in pod_sets:
        for name, qty in ps.requests.items():
            total[name] = total.get(name, Decimal(0)) + qty * ps.count
            if qty and name not in binary:
                binary[name] = name in binary_resources(ps.template)
    return {k: format_quantity(v, binary.get(k, False)) for k, v in sorted(total.items())}


def min_member(job: GangInput) -> int:
    """minMember: ``minAvailable`` if set, else every Pod of the gang."""
    return job.min_available if job.min_available is not None else sum(ps.count for ps in job.pod_sets)


def scheduler_name_problems(job: GangInput, expected: str | None, flag: str) -> list[Condition]:
    """Pod sets whose ``schedulerName`` disagrees with the running gang scheduler.

    ``expected`` None means the default scheduler: a pod naming ``volcano`` would then be gang
    scheduled by nobody (Volcano gives each pod a PodGroup of its own, minMember 1, queue default).
    """
    out = []
    for ps in job.pod_sets:
        name = (ps.template.get("spec") or {}).get("schedulerName")
        if not name or name == expected or (expected is None and name == "default-scheduler"):
            continue
        if expected is None:
            msg = (
                f"pods of replicated job {ps.name!r} set schedulerName {name!r}, but the operator runs with "
                f"--gang-scheduler-name={flag}: no PodGroup is made for them, so they are not gang scheduled "
                f"and any queue is ignored; start the operator with --gang-scheduler-name="
                f"{'volcano' if name == 'volcano' else 'scheduler-plugins'} or remove schedulerName"
            )
        else:
            msg = (
                f"pods of replicated job {ps.name!r} set schedulerName {name!r}, but the operator runs with "
                f"--gang-scheduler-name={flag}, whose pods use {expected!r}; remove schedulerName from the "
                f"pod template or change --gang-scheduler-name"
            )
        out.append(problem("SchedulerNameMismatch", msg))
    return out


RUNTIME_POLICY_FLAGS = {"volcano": "volcano", "coscheduling": "scheduler-plugins", "workload": "workload"}
"""The ``--gang-scheduler-name`` that serves each runtime gang setting of :attr:`GangInput.runtime_policy`."""


def runtime_policy_problem(job: GangInput, accepted: str | None, flag: str) -> list[Condition]:
    """A runtime ``podGroupPolicy`` (or ``spec.scheduling``: ``workload``) naming a scheduler other than the
    running one."""
    if job.runtime_policy is None or job.runtime_policy == accepted:
        return []
    field = "spec.scheduling" if job.runtime_policy == "workload" else "spec.podGroupPolicy"
    what = "spec.scheduling (the Workload API)" if job.runtime_policy == "workload" else "podGroupPolicy"
    value = "" if job.runtime_policy == "workload" else f" is {job.runtime_policy!r}"
    return [
        problem(
            "PodGroupPolicyMismatch",
            f"the runtime's {what}{value}, but the operator runs with --gang-scheduler-name={flag}; its gang "
            f"settings are ignored. Start the operator with "
            f"--gang-scheduler-name={RUNTIME_POLICY_FLAGS.get(job.runtime_policy, job.runtime_policy)} "
            f"or change {field} of the runtime",
        )
    ]


def queue_problem(job: GangInput, carried_by: set[str], flag: str) -> list[Condition]:
    """A queue named in a convention the running gang scheduler does not read."""
    q = job.queue
    if q.name is None or not q.scheduler or q.scheduler in carried_by:
        return []
    return [
        problem(
            "QueueIgnored",
            f"queue {q.name!r} ({q.source}) is for {q.scheduler}, but the operator runs with "
            f"--gang-scheduler-name={flag}, which cannot carry it: the job would run outside that queue. "
            f"Start the operator with --gang-scheduler-name={q.scheduler}, or remove {q.source}",
        )
    ]


def reports_only(job: GangInput, carried_by: set[str], flag: str, accepted: str | None = None) -> GangPlan:
    """The plan of a scheduler that creates nothing (none, kueue): only what it cannot carry, said
    loudly (a queue of another convention, pods naming another scheduler, a runtime gang setting other
    than ``accepted``: :func:`runtime_policy_problem`)."""
    plan = GangPlan()
    if job.finished:
        return plan
    plan.conditions += queue_problem(job, carried_by, flag)
    plan.conditions += scheduler_name_problems(job, None, flag)
    plan.conditions += runtime_policy_problem(job, accepted, flag)
    return plan


def pod_group_metadata(job: GangInput) -> JSON:
    """Metadata of the job's PodGroup: named after the job, in its namespace, owned by it."""
    return {"name": job.name, "namespace": job.namespace, "ownerReferences": [owner_reference(job.owner)]}


# ----------------------------------------------------------------------------- applying a plan


def decorate(
    jobs: list[JSON], plan: GangPlan, skip: frozenset[str] | set[str], set_label: str = REPLICATED_JOB_NAME
) -> list[JSON]:
    """Copies of ``jobs`` whose pod templates carry the plan's schedulerName (where unset), labels,
    annotations and scheduling group (``spec.schedulingGroup``). A Job's pod set is named by its label
    ``set_label``, its index by ``jobset.sigs.k8s.io/job-index``; Jobs of sets in ``skip`` (not in the gang)
    get only their scheduling group."""
    out = []
    for job in jobs:
        labels = job["metadata"]["labels"]
        rjob = labels.get(set_label, "")
        index = labels.get(JOB_INDEX)
        group = plan.scheduling_groups.get((rjob, int(index) if str(index).isdigit() else None))
        group = group or plan.scheduling_groups.get((rjob, None))
        if rjob in skip:
            out.append(job if group is None else _with_scheduling_group(job, group))
            continue
        # Copies along the path that changes only: the rest of the Job is shared with ``jobs``.
        pod = dict(job["spec"]["template"])
        was = meta(pod)
        pod_meta = dict(was.data)
        if plan.pod_labels:
            pod_meta["labels"] = {**was.labels, **plan.pod_labels}
        extra = {**plan.pod_annotations.get("*", {}), **plan.pod_annotations.get(rjob, {})}
        if extra:
            pod_meta["annotations"] = {**was.annotations, **extra}
        pod["metadata"] = pod_meta
        spec = dict(pod.get("spec") or {})
        if plan.scheduler_name and not spec.get("schedulerName"):
            spec["schedulerName"] = plan.scheduler_name
        if group is not None:
            spec["schedulingGroup"] = {"podGroupName": group}
        pod["spec"] = spec
        out.append({**job, "spec": {**job["spec"], "template": pod}})
    return out


def _with_scheduling_group(job: JSON, group: str) -> JSON:
    """A copy of ``job`` whose Pods join PodGroup ``group`` (``spec.schedulingGroup.podGroupName``)."""
    pod = dict(job["spec"]["template"])
    pod["spec"] = {**(pod.get("spec") or {}), "schedulingGroup": {"podGroupName": group}}
    return {**job, "spec": {**job["spec"], "template": pod}}


def gang_conditions(plan: GangPlan) -> list[Condition]:
    """The plan's conditions, every ``Misconfigured`` problem folded into one condition that comes first
    (:func:`~trainer.jobs.conditions.fold_problems`: reason of the first, messages of all)."""
    return fold_problems(sorted(plan.conditions, key=lambda c: c.type != COND_MISCONFIGURED))

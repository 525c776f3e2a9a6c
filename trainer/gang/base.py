"""What every gang scheduler module shares: its interface, its inputs and its plan.

A gang scheduler module is pure: ``plan(GangInput, Facts) -> GangPlan``. The reconciler builds the
input from the job (TrainJob or MPIJob), passes a read-only view of its caches as ``Facts``, then
applies the plan: the PodGroup objects, the pod template decorations, and the hold (Jobs stay
suspended) with the conditions that explain it. Adding a scheduler is one module that registers
itself in :mod:`trainer.gang`; the reconcilers do not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar, Protocol

from api.base import Condition
from trainer.builders.labels import owner_reference
from trainer.kube.client import Resource

JSON = dict[str, Any]

# Condition types a gang plan may set on the job.
COND_MISCONFIGURED = "Misconfigured"
COND_WAITING_FOR_GANG = "WaitingForGang"

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


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


@dataclass(frozen=True)
class QueueChoice:
    """The queue a job asks for and where that came from (a field path, for messages)."""

    name: str | None
    source: str = ""
    scheduler: str = ""
    """Which scheduler's convention named it: ``volcano``, ``kueue`` or "" (neutral, e.g. MPIJob
    ``schedulingPolicy.queue``)."""


@dataclass(frozen=True)
class GangInput:
    """Everything about one job that a gang scheduler needs."""

    owner: JSON
    """The job object (TrainJob or MPIJob), for owner references and metadata."""
    pod_sets: list[PodSet]
    """The Pods that must run together."""
    queue: QueueChoice = QueueChoice(None)
    priority_class: str | None = None
    min_available: int | None = None
    min_resources: dict[str, str] | None = None
    schedule_timeout_seconds: int | None = None
    network_topology: JSON | None = None
    runtime_policy: str | None = None
    """The scheduler the runtime's ``podGroupPolicy`` names (``volcano``/``coscheduling``), if any."""
    finished: bool = False
    started: bool = False
    """True once the job's Jobs have been released (unsuspended) at least once."""

    @property
    def name(self) -> str:
        return str(self.owner["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.owner["metadata"].get("namespace") or "")


@dataclass(frozen=True)
class Facts:
    """A read-only view of the caches: ``get(resource, namespace, name)`` and ``items(resource)``."""

    get: Callable[[Resource, str | None, str], JSON | None]
    items: Callable[[Resource], list[JSON]]


@dataclass
class GangPlan:
    """What the reconciler applies for the gang scheduler."""

    apply: list[JSON] = field(default_factory=list)
    """Objects to server-side apply (e.g. the PodGroup)."""
    delete: list[tuple[Resource, str, str]] = field(default_factory=list)
    """Objects to delete: (resource, namespace, name)."""
    scheduler_name: str | None = None
    """``spec.schedulerName`` for pods that do not set one."""
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    """Annotations per pod set name (``"*"`` for every set)."""
    hold: bool = False
    """Keep every Job suspended (no Pods) for now."""
    conditions: list[Condition] = field(default_factory=list)
    """Conditions to set on the job (Misconfigured, WaitingForGang)."""


class GangScheduler(Protocol):
    """One gang scheduler. ``name`` is the ``--gang-scheduler-name`` value that selects it."""

    name: ClassVar[str]
    watches: ClassVar[list[Resource]]
    """Resources the reconciler must cache for :meth:`plan` (read through ``Facts``)."""

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        """The gang plan for ``job``. Pure; never raises for bad input (it reports a condition)."""
        ...


# ----------------------------------------------------------------------------- resources

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(value: str | int | float) -> Decimal:
    """A ``resource.Quantity`` string (``"500m"``, ``"4Gi"``, ``"1e3"``) as a number. Raises
    ``ValueError`` for anything else."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number = text[: -len(suffix)]
            break
    else:
        suffix, number = "", text
    try:
        return Decimal(number) * _SUFFIX[suffix]
    except ArithmeticError as e:
        raise ValueError(f"not a quantity: {value!r}") from e


def format_quantity(value: Decimal) -> str:
    """A number as a Quantity string: an integer when whole, else millis (rounded up)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value(rounding='ROUND_CEILING'))}m"


def _add(into: dict[str, Decimal], resources: dict[str, Any] | None, times: int = 1) -> None:
    for name, qty in (resources or {}).items():
        into[name] = into.get(name, Decimal(0)) + parse_quantity(qty) * times


def _requests(container: JSON) -> dict[str, Any]:
    res = container.get("resources") or {}
    return {**(res.get("limits") or {}), **(res.get("requests") or {})}  # requests default to limits


def pod_requests(template: JSON) -> dict[str, Decimal]:
    """Requests of one Pod: max(sum of containers, largest init container) + overhead, per resource
    (as the scheduler computes a Pod's effective request)."""
    spec = template.get("spec") or {}
    total: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        _add(total, _requests(c))
    for c in spec.get("initContainers") or []:
        one: dict[str, Decimal] = {}
        _add(one, _requests(c))
        for name, qty in one.items():
            total[name] = max(total.get(name, Decimal(0)), qty)
    _add(total, spec.get("overhead"))
    return total


def gang_resources(pod_sets: list[PodSet]) -> dict[str, str]:
    """minResources of a gang: the sum of every Pod's requests."""
    total: dict[str, Decimal] = {}
    for ps in pod_sets:
        for name, qty in pod_requests(ps.template).items():
            total[name] = total.get(name, Decimal(0)) + qty * ps.count
    return {k: format_quantity(v) for k, v in sorted(total.items())}


def min_member(job: GangInput) -> int:
    """minMember: ``minAvailable`` if set, else every Pod of the gang."""
    return job.min_available if job.min_available is not None else sum(ps.count for ps in job.pod_sets)


def problem(reason: str, message: str) -> Condition:
    """A ``Misconfigured`` condition."""
    return Condition(type=COND_MISCONFIGURED, status="True", reason=reason, message=message)


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


def runtime_policy_problem(job: GangInput, accepted: str | None, flag: str) -> list[Condition]:
    """A runtime ``podGroupPolicy`` naming a scheduler other than the running one."""
    if job.runtime_policy is None or job.runtime_policy == accepted:
        return []
    return [
        problem(
            "PodGroupPolicyMismatch",
            f"the runtime's podGroupPolicy is {job.runtime_policy!r}, but the operator runs with "
            f"--gang-scheduler-name={flag}; its gang settings are ignored. Start the operator with "
            f"--gang-scheduler-name={'volcano' if job.runtime_policy == 'volcano' else 'scheduler-plugins'} "
            "or change spec.podGroupPolicy of the runtime",
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


def reports_only(job: GangInput, carried_by: set[str], flag: str) -> GangPlan:
    """The plan of a scheduler that creates nothing (none, kueue): only what it cannot carry, said
    loudly (a queue of another convention, pods naming another scheduler, a runtime podGroupPolicy)."""
    plan = GangPlan()
    if job.finished:
        return plan
    plan.conditions += queue_problem(job, carried_by, flag)
    plan.conditions += scheduler_name_problems(job, None, flag)
    plan.conditions += runtime_policy_problem(job, None, flag)
    return plan


def pod_group_metadata(job: GangInput) -> JSON:
    """Metadata of the job's PodGroup: named after the job, in its namespace, owned by it."""
    return {"name": job.name, "namespace": job.namespace, "ownerReferences": [owner_reference(job.owner)]}

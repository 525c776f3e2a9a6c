"""Pure pieces of the client: job statuses, job kinds, events, queues and runtimes.

Statuses follow the kubeflow SDK (``kubeflow/trainer/constants/constants.py``: ``Created``,
``Running``, ``Complete``, ``Failed``) plus ``Suspended``, which the SDK does not report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from trainer.api import jobkinds
from trainer.api.base import Condition, Model
from trainer.api.conditions import is_true, true_condition
from trainer.api.jobkinds import KindFacts
from trainer.api.kinds import Resource
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.labels import JOB_INDEX, KUEUE_QUEUE_LABEL, VOLCANO_QUEUE_ANNOTATION
from trainer.api.queues import resolve_queue
from trainer.api.trainer_v1alpha1 import (
    COND_FAILED,
    COND_RUNNING,
    FRAMEWORK_LABEL,
    NODE_CONTAINER,
    ClusterTrainingRuntime,
    TrainerStatus,
    TrainingRuntime,
    TrainJob,
)
from trainer.api.waiting import FINISHED, HOLDING
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

J = TypeVar("J", bound=Model)

CREATED = "Created"
SUSPENDED = "Suspended"
RUNNING = "Running"
COMPLETE = "Complete"
FAILED = "Failed"
STATUSES: tuple[str, ...] = (CREATED, SUSPENDED, RUNNING, COMPLETE, FAILED)
"""Every status :func:`trainjob_status` returns; a wait may ask for any subset."""

COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
"""Label Kubernetes puts on the pods of Indexed Jobs: the pod's index (the SDK's ``node-<i>``)."""


def conditions_of(job: TrainJob) -> list[Condition]:
    """The job's conditions (empty when it has no status yet)."""
    return list((job.status.conditions if job.status else None) or [])


class TrainJobShape(Protocol):
    """A TrainJob in the kubeflow SDK's shape (:class:`trainer.client.shapes.TrainJob`)."""

    @property
    def status(self) -> str: ...
    @property
    def trainjob(self) -> TrainJob | None: ...


def trainjob_status(job: TrainJob | TrainJobShape) -> str:
    """One of :data:`STATUSES`, from the TrainJob's conditions (of an :mod:`trainer.api` TrainJob, or of the
    one a :class:`trainer.client.shapes.TrainJob` was read from).

    ``Failed`` or ``Complete`` when that condition is True (as the SDK); else ``Suspended`` when
    ``Suspended`` is True; else ``Running`` when this operator's ``Running`` condition is True, or,
    for operators that have no such condition (upstream), when ``jobsStatus`` counts a ready or a
    succeeded Job (a started job stays ``Running`` after its Jobs finished until the ``Complete``
    condition is written, as the kubeflow SDK counts succeeded nodes as running); else ``Created``.
    """
    if not isinstance(job, TrainJob):
        if job.trainjob is None:
            return job.status
        job = job.trainjob
    conditions = conditions_of(job)
    for status in (FAILED, COMPLETE, SUSPENDED, RUNNING):
        if is_true(conditions, status):
            return status
    if all(c.type != COND_RUNNING for c in conditions) and any(
        s.ready > 0 or s.succeeded > 0 for s in (job.status.jobs_status if job.status else None) or []
    ):
        return RUNNING
    return CREATED


def trainjob_num_nodes(job: TrainJob, runtime_num_nodes: int | None) -> int:
    """How many nodes ``job`` runs on, as the kubeflow SDK counts them (``TrainJob.num_nodes``):
    ``spec.trainer.numNodes``, else its runtime's ``mlPolicy.numNodes`` (``runtime_num_nodes``, None
    when the runtime is not known or sets none), else 1."""
    own = job.spec.trainer.num_nodes if job.spec.trainer else None
    return own or runtime_num_nodes or 1


HOLDING_CONDITIONS: tuple[str, ...] = (*FINISHED, *HOLDING, "RestartingJobSet", "Restarting", RUNNING)
"""Condition types that say why a job is where it is, the first True one winning: finished, held
(suspended, no runtime, misconfigured, waiting for its gang, its pods refused: the holding conditions
of :data:`trainer.api.waiting.HOLDING`, in its order), restarting, running."""


@dataclass(frozen=True)
class Holding:
    """What holds a job: :func:`holding_condition`'s answer."""

    state: str
    """The first True condition of :data:`HOLDING_CONDITIONS` (e.g. ``WaitingForGang``), ``Running``
    for a TrainJob whose operator writes no ``Running`` condition but counts a ready or succeeded Job, else
    ``Created``."""
    reason: str = ""
    """That condition's reason (empty without one)."""
    message: str = ""
    """That condition's message, on one line (empty without one)."""


def holding_condition(job: TrainJob | MPIJob) -> Holding:
    """The condition that holds ``job`` (a TrainJob or an MPIJob), as ``kubectl`` users read a
    STATUS column: see :class:`Holding`."""
    conditions = (job.status.conditions if job.status else None) or []
    for type_ in HOLDING_CONDITIONS:
        c = true_condition(conditions, type_)
        if c is not None:
            return Holding(type_, c.reason or "", " ".join((c.message or "").split()))
    if isinstance(job, TrainJob) and trainjob_status(job) == RUNNING:
        return Holding(RUNNING)
    return Holding(CREATED)


def failure_message(job: TrainJob) -> str:
    """``reason: message`` of the True ``Failed`` condition ("" when there is none)."""
    c = true_condition(conditions_of(job), COND_FAILED)
    if c is None:
        return ""
    return f"{c.reason}: {c.message}" if c.reason else c.message


def trainjob_steps(job: TrainJob) -> list[str]:
    """Names of the job's replicated jobs as its ``jobsStatus`` lists them (empty before the
    operator first reported)."""
    return [s.name for s in (job.status.jobs_status if job.status else None) or []]


def trainer_status_of(job: TrainJob) -> TrainerStatus | None:
    """The progress the job's trainer last reported (``status.trainerStatus``), None before any."""
    return job.status.trainer_status if job.status else None


def duration_text(seconds: int) -> str:
    """A duration the way kubectl prints ages: ``45s``, ``12m``, ``3h12m``, ``2d4h``."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"


def progress_text(job: TrainJob) -> str:
    """``45%`` from ``trainerStatus.progressPercentage``; ``-`` when not reported."""
    status = trainer_status_of(job)
    return f"{status.progress_percentage}%" if status and status.progress_percentage is not None else "-"


def eta_text(job: TrainJob) -> str:
    """``trainerStatus.estimatedRemainingSeconds`` as :func:`duration_text` (counted from the report's
    ``lastUpdatedTime``); ``-`` when not reported."""
    status = trainer_status_of(job)
    seconds = status.estimated_remaining_seconds if status else None
    return duration_text(seconds) if seconds is not None else "-"


def checkpoint_text(job: TrainJob) -> str:
    """The last checkpoint the trainer reported (``trainerStatus.lastCheckpoint``), e.g. ``epoch 7, step
    1400 at /ckpt/epoch-7.pt, saved 2026-01-01T00:08:00Z``; "" when none."""
    status = trainer_status_of(job)
    c = status.last_checkpoint if status else None
    if c is None:
        return ""
    said = [f"epoch {c.epoch}" if c.epoch is not None else "", f"step {c.step}" if c.step is not None else ""]
    where = f" at {c.path}" if c.path else ""
    return f"{', '.join(s for s in said if s) or 'saved'}{where}, saved {c.saved_time}"


def metrics_text(job: TrainJob) -> str:
    """The reported metrics as ``name=value`` pairs, e.g. ``loss=0.23, accuracy=0.98``; "" when none."""
    status = trainer_status_of(job)
    return ", ".join(f"{m.name}={m.value}" for m in (status.metrics if status else None) or [])


@dataclass(frozen=True)
class JobKind(Generic[J]):
    """What the client needs to know about one kind of training job: its facts as the operator declares
    them (:class:`trainer.api.jobkinds.KindFacts`: where it lives, its model, how its pods are labelled) and how
    the client shows it: :data:`TRAINJOB` and :data:`MPIJOB`."""

    facts: KindFacts
    """The kind's facts, the same declaration the reconciler and admission read."""
    status_of: Callable[[J], str]
    """The object's status, one of ``statuses``."""
    failure_of: Callable[[J], str]
    """Why the object Failed (its condition's ``reason: message``)."""
    steps_of: Callable[[J], list[str]]
    """Step names the object reports (empty when unknown yet)."""
    default_step: str
    """Step whose logs are read when none is named."""
    default_container: str
    """Container whose logs are read when the pod has several and none is named."""
    statuses: tuple[str, ...] = STATUSES
    """Statuses ``status_of`` returns."""
    node_label: str = COMPLETION_INDEX_LABEL
    """Pod label holding the node index within the step (Indexed Jobs' completion index)."""
    group_label: str | None = None
    """Pod label of the Job index inside a step with several Jobs (``job-index``), if any."""
    related_kinds: tuple[str, ...] = field(default=("Job", "Pod", "PodGroup"))
    """Kinds of the job's children whose events belong to the job."""

    @property
    def resource(self) -> Resource:
        """REST collection of the kind (its facts')."""
        return self.facts.resource

    @property
    def model(self) -> type[J]:
        """The pydantic model objects are parsed into (its facts')."""
        model: type[J] = self.facts.model  # type: ignore[assignment]
        return model

    @property
    def job_label(self) -> str:
        """Pod label holding the job's name (its facts' child label)."""
        return self.facts.child_label

    @property
    def step_label(self) -> str:
        """Pod label holding the step (replicated job / replica type) name (its facts')."""
        return self.facts.step_label


TRAINJOB: JobKind[TrainJob] = JobKind(
    facts=jobkinds.TRAINJOB,
    status_of=trainjob_status,
    failure_of=failure_message,
    steps_of=trainjob_steps,
    default_step="node",
    default_container=NODE_CONTAINER,
    group_label=JOB_INDEX,
)
"""TrainJob (``trainer.kubeflow.org/v1alpha1``): pods labelled as JobSet labels them."""


def mpijob_status(job: MPIJob) -> str:
    """One of :data:`STATUSES` from an MPIJob's conditions: ``Succeeded`` reads as ``Complete``."""
    state = holding_condition(job).state
    return {"Succeeded": COMPLETE, "Restarting": RUNNING}.get(state, state if state in STATUSES else CREATED)


def mpijob_failure(job: MPIJob) -> str:
    """``reason: message`` of the MPIJob's True ``Failed`` condition ("" when there is none)."""
    held = holding_condition(job)
    if held.state != FAILED:
        return ""
    return f"{held.reason}: {held.message}" if held.reason else held.message


def mpijob_steps(job: MPIJob) -> list[str]:
    """The MPIJob's replica types, lower case as its pods' ``training.kubeflow.org/replica-type``."""
    specs = job.spec.mpi_replica_specs
    return [name for name, spec in (("launcher", specs.launcher), ("worker", specs.worker)) if spec is not None]


MPIJOB: JobKind[MPIJob] = JobKind(
    facts=jobkinds.MPIJOB,
    status_of=mpijob_status,
    failure_of=mpijob_failure,
    steps_of=mpijob_steps,
    default_step="launcher",
    default_container="launcher",
)
"""MPIJob (``kubeflow.org/v2beta1``): pods labelled as mpi-operator labels them; the launcher's Job
is not Indexed, so its one pod has no index label and counts as node 0."""

JOB_KINDS: tuple[JobKind[Any], ...] = (TRAINJOB, MPIJOB)
"""Every kind of training job the client knows."""


def pod_selector(kind: JobKind[Any], name: str, step: str | None = None, node: int | None = None) -> str:
    """Label selector of the pods of job ``name``, optionally of one step and node index."""
    parts = [f"{kind.job_label}={name}"]
    if step is not None:
        parts.append(f"{kind.step_label}={step}")
    if node is not None:
        parts.append(f"{kind.node_label}={node}")
    return ",".join(parts)


def queue_of(obj: Model, gang: str = "") -> str | None:
    """The queue a job asks for, by the operator's one rule (:func:`trainer.api.queues.resolve_queue`);
    ``gang`` is the operator's ``--gang-scheduler-name`` when known (it decides between a Kueue
    label and a Volcano annotation set together). None when the job names none; a default queue
    its runtime's template may carry is not looked up here."""
    return resolve_queue(obj.to_dict(), gang).name


def in_queue(obj: Model, queue: str) -> bool:
    """Whether ``obj`` names ``queue`` in the Kueue label or in the Volcano annotation."""
    meta = getattr(obj, "metadata", None)
    labels = (getattr(meta, "labels", None) or {}) if meta else {}
    annotations = (getattr(meta, "annotations", None) or {}) if meta else {}
    return queue in (labels.get(KUEUE_QUEUE_LABEL), annotations.get(VOLCANO_QUEUE_ANNOTATION))


def runtime_framework(runtime: TrainingRuntime | ClusterTrainingRuntime) -> str | None:
    """The runtime's ``trainer.kubeflow.org/framework`` label (the SDK skips runtimes without it)."""
    return (runtime.metadata.labels or {}).get(FRAMEWORK_LABEL)


class Event(Model):
    """A ``core/v1`` Event about a job or one of its children, as :meth:`from_dict` reads it."""

    type: str = ""
    """``Normal`` or ``Warning``."""
    reason: str = ""
    """CamelCase reason, e.g. ``SuccessfulCreate``."""
    message: str = ""
    """Human-readable description."""
    involved_object_kind: str = ""
    """Kind of the object the event is about (``TrainJob``, ``Job``, ``Pod``, ``PodGroup``)."""
    involved_object_name: str = ""
    """Name of the object the event is about."""
    involved_object_uid: str = ""
    """UID of the object the event is about (tells apart objects that reused a name)."""
    count: int = 1
    """How many times it happened."""
    time: str | None = None
    """When it last happened (RFC 3339): lastTimestamp, eventTime, firstTimestamp or creation time."""
    source: str = ""
    """Component that reported it."""

    @property
    def event_time(self) -> datetime:
        """:attr:`time` as a datetime (the kubeflow SDK's ``Event.event_time``; the earliest datetime
        when the event has no time or one that is not RFC 3339, :data:`~trainer.framework.clock.EARLIEST`)."""
        return parse_time(self.time) or EARLIEST

    @classmethod
    def from_dict(cls, obj: JSON) -> Event:
        """Read a ``core/v1`` Event object (an ``events.k8s.io/v1`` one read as core/v1 counts its
        repeats in ``series``)."""
        involved = obj.get("involvedObject") or {}
        source = obj.get("source") or {}
        series = obj.get("series") or {}
        when = (
            obj.get("lastTimestamp")
            or series.get("lastObservedTime")
            or obj.get("eventTime")
            or obj.get("firstTimestamp")
            or meta(obj).creation_timestamp
        )
        return cls(
            type=str(obj.get("type") or ""),
            reason=str(obj.get("reason") or ""),
            message=str(obj.get("message") or ""),
            involved_object_kind=str(involved.get("kind") or ""),
            involved_object_name=str(involved.get("name") or ""),
            involved_object_uid=str(involved.get("uid") or ""),
            count=int(obj.get("count") or series.get("count") or 1),
            time=str(when) if when else None,
            source=str(source.get("component") or obj.get("reportingComponent") or ""),
        )


def related_events(events: Iterable[JSON], objects: dict[tuple[str, str], str | None]) -> list[Event]:
    """The events about ``objects`` (``(kind, name)`` -> uid, or None when the uid is unknown),
    oldest first. An event about a known uid must name that uid, so events of an earlier object of
    the same name (deleted and created again) are left out, as ``kubectl describe`` does."""
    out = []
    for event in (Event.from_dict(e) for e in events):
        key = (event.involved_object_kind, event.involved_object_name)
        if key not in objects:
            continue
        uid = objects[key]
        if uid and event.involved_object_uid and event.involved_object_uid != uid:
            continue
        out.append(event)
    return sorted(out, key=lambda e: e.event_time)

"""Everything derived from one TrainJob and its runtime, computed once per reconcile: the data.

Mirrors kubeflow/trainer ``pkg/runtime/runtime.go`` (``Info``: the runtime's replicated jobs as pod
sets with counts, pod templates and per-pod requests, plus scheduling facts). Built by
:func:`trainer.trainjob.runtime.expand.runtime_info`; the builders, the gang modules (through
:attr:`RuntimeInfo.gang`), the status logic and admission read it and derive nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from api.jobset_v1alpha2 import JobSetSpec, ReplicatedJob
from api.trainer_v1alpha1 import JobStatus, TorchElasticPolicy, TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.jobs.facts import pod_ready
from trainer.jobs.features.queues import QueueChoice
from trainer.jobs.gang.base import GangInput, PodSet
from trainer.jobs.gang.volcano import network_topology
from trainer.trainjob.features.devices import Devices
from trainer.trainjob.features.failure_policy import Decision
from trainer.trainjob.policies.base import Policy
from trainer.trainjob.policies.torch import elastic_policy
from trainer.trainjob.runtime.shape import sequenced


@dataclass(frozen=True)
class RuntimeInfo:
    """One TrainJob with its runtime, as this reconcile sees them."""

    obj: JSON
    """The TrainJob as stored (for owner references and status)."""
    job: TrainJob
    runtime: TrainingRuntimeSpec
    runtime_obj: JSON | None
    """The runtime as JSON (from the job's snapshot once it has one)."""
    rjobs: list[ReplicatedJob]
    """The runtime's replicated jobs, in order."""
    pod_sets: list[PodSet]
    """One per replicated job, in order: ``replicas`` Jobs of pods per Job, the pod template with
    settings, ML policy and overrides applied, and per-pod requests."""
    template_metadata: JSON
    """``{labels, annotations}`` of the runtime template with the ``runtimePatches`` merged in; every
    child Job carries them."""
    job_metadata: dict[str, JSON]
    """Replicated job name -> ``{labels, annotations}`` of its Job template with the
    ``runtimePatches`` merged in."""
    policy_sized: frozenset[str]
    """Replicated jobs whose pods per Job the ML policy sets (parallelism = completions)."""
    policy: Policy
    """The ML policy that expanded the runtime (:func:`trainer.trainjob.policies.policy_of`)."""
    trainer: str | None
    """The trainer's replicated job, if any."""
    num_nodes: int | None
    node_resources: JSON | None
    """One training node's ``{requests, limits}`` as the ML policies read them
    (:func:`trainer.trainjob.runtime.shape.node_resources`)."""
    node_gpus: int
    """GPUs of one training node (:attr:`trainer.trainjob.policies.base.Expansion.gpus`): extended
    resources, else the DRA devices its ``node`` container claims."""
    devices: Devices
    """What the cluster tells of DRA for this TrainJob (:class:`trainer.trainjob.features.devices.Devices`)."""
    subdomain: str | None
    """The headless Service and Pod subdomain, or None when DNS hostnames are disabled."""
    not_in_gang: frozenset[str]
    """Replicated jobs completed before the rest start (see :func:`trainer.trainjob.runtime.shape.completed_first`)."""
    queue: QueueChoice
    observed: list[JSON]
    """The TrainJob's Jobs of the current restart attempt, as cached (without those ``replaced``)."""
    previous: list[JSON]
    """Jobs of earlier restart attempts, to be deleted before the current attempt's are created."""
    replaced: list[JSON]
    """Jobs of the current attempt restarted alone (their ``jobset.sigs.k8s.io/job-restart-attempt``
    behind their index's ``jobRestarts``), to be deleted before each is created again."""
    statuses: list[JobStatus]
    """``jobsStatus`` of the observed Jobs, in runtime order."""
    finished: bool
    """The TrainJob already has Complete or Failed True."""
    started: bool
    """Some Job of the TrainJob is not suspended (it was released at least once)."""
    restarts: int
    """``status.restarts``: the current restart attempt."""
    counted_restarts: int
    """``status.restartsCountTowardsMax``."""
    job_restarts: dict[str, list[int]]
    """Replicated job -> ``jobRestarts`` (``status.replicatedJobsStatus``): per index, its restarts alone."""
    job_restarts_counted: dict[str, list[int]]
    """Replicated job -> ``jobRestartsCountTowardsMax``: per index, its restarts alone that count."""
    restarts_alone: bool
    """The runtime's failurePolicy has a ``RestartJob`` or ``RestartJobAndIgnoreMaxRestarts`` rule: its
    Jobs and Pods carry ``jobset.sigs.k8s.io/job-restart-attempt``."""
    decision: Decision | None
    """What the current attempt's failed Jobs call for (failurePolicy), None when none failed."""
    deadline_left: float | None
    """Seconds left of ``spec.activeDeadlineSeconds`` (counted from creation or the last resume;
    <= 0: exceeded), None when it does not apply (unset, suspended or finished)."""
    deadline_seconds: int | None
    """The ``activeDeadlineSeconds`` that holds: the TrainJob's own, else its runtime's ``runPolicy``'s."""
    ttl_left: float | None
    """Seconds until ``ttlSecondsAfterFinished`` deletes (<= 0: due), None when it does not apply."""
    ttl_deletes_job: bool
    """The TTL that holds is the TrainJob's own or its runtime's ``runPolicy``'s: it deletes the TrainJob
    itself; else (the runtime template's JobSet TTL) it deletes the children and the TrainJob stays."""
    now: str
    """The time of this reconcile (RFC 3339): ``status.startTime`` when the job becomes active now."""

    @property
    def template(self) -> JobSetSpec:
        """The runtime's JobSet spec."""
        return self.runtime.template.spec or JobSetSpec()

    def job_restart_attempt(self, rjob: str, index: int) -> int:
        """``jobRestarts[index]`` of replicated job ``rjob`` (0 when none was recorded)."""
        counts = self.job_restarts.get(rjob, [])
        return counts[index] if index < len(counts) else 0

    @property
    def suspended(self) -> bool:
        """``spec.suspend`` of the TrainJob."""
        return bool(self.job.spec.suspend)

    def pod_set(self, rjob: str) -> PodSet:
        """The pod set of replicated job ``rjob``. Raises ``KeyError``."""
        for ps in self.pod_sets:
            if ps.name == rjob:
                return ps
        raise KeyError(rjob)

    @property
    def requeue_after(self) -> float | None:
        """Seconds until the active deadline or the TTL passes, whichever comes first; None: neither."""
        waits = [t for t in (self.deadline_left, self.ttl_left) if t is not None and t > 0]
        return min(waits) if waits else None

    @property
    def pod_ready(self) -> bool:
        """Whether a pod of the current attempt's Jobs runs (:func:`trainer.jobs.facts.pod_ready`)."""
        return pod_ready(self.observed)

    @cached_property
    def elastic(self) -> TorchElasticPolicy | None:
        """The runtime's ``mlPolicy.torch.elasticPolicy`` (an elastic job), None when it has none."""
        return elastic_policy(self.runtime)

    def elastic_min_member(self, pod_sets: list[PodSet]) -> int | None:
        """The gang's ``minMember`` of an elastic job: every Pod of ``pod_sets`` but the trainer's, and
        ``minNodes`` of the trainer's (at most as many as it has); None when the job is not elastic."""
        elastic = self.elastic
        if elastic is None:
            return None
        pods = sum(ps.count for ps in pod_sets)
        trainer = sum(ps.count for ps in pod_sets if ps.name == self.trainer)
        return pods - trainer + min(trainer, elastic.lowest)

    @property
    def gang(self) -> GangInput:
        """The gang a scheduler sees: every pod set but those completed first."""
        pgp = self.runtime.pod_group_policy
        volcano = pgp.volcano if pgp is not None else None
        cosched = pgp.coscheduling if pgp is not None else None
        pod_sets = [ps for ps in self.pod_sets if ps.name not in self.not_in_gang]
        return GangInput(
            owner=self.obj,
            pod_sets=pod_sets,
            min_available=self.elastic_min_member(pod_sets),
            queue=self.queue,
            schedule_timeout_seconds=cosched.schedule_timeout_seconds if cosched else None,
            network_topology=network_topology(volcano.network_topology) if volcano else None,
            runtime_policy=(
                "volcano"
                if volcano is not None
                else "coscheduling"
                if cosched is not None
                else "workload"
                if self.runtime.scheduling is not None
                else None
            ),
            finished=self.finished,
            started=self.started,
            scheduling=self.runtime.scheduling.to_dict() if self.runtime.scheduling is not None else None,
            all_pod_sets=tuple(self.pod_sets),
            sequenced=sequenced(self.rjobs, self.template),
        )

"""What the runtime says of one TrainJob, derived once per reconcile: the data.

Mirrors kubeflow/trainer ``pkg/runtime/runtime.go`` (``Info``: the runtime's replicated jobs as pod
sets with counts, pod templates and per-pod requests, plus scheduling facts). Built by
:func:`trainer.trainjob.runtime.expand.runtime_info`; the builders, the gang modules (through
:meth:`RuntimeInfo.gang_input`), the status logic and admission read it and derive nothing again. What the
TrainJob's child Jobs are doing is another object (:class:`trainer.trainjob.runtime.attempt.Attempt`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.api.jobset_v1alpha2 import RESTART_JOB, RESTART_JOB_IGNORE_MAX, JobSetSpec, ReplicatedJob
from trainer.api.queues import QueueChoice
from trainer.api.trainer_v1alpha1 import TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.jobs.gang.base import GangInput, PodSet
from trainer.trainjob.policies.base import Policy
from trainer.trainjob.spec.devices import Devices
from trainer.trainjob.spec.run_policy import deadline_seconds, ttl_of
from trainer.trainjob.spec.shape import sequenced


@dataclass(frozen=True, kw_only=True)
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
    node_gpus: int
    """GPUs of one training node (:attr:`trainer.trainjob.policies.base.Expansion.gpus`): extended
    resources, else the DRA devices its ``node`` container claims."""
    devices: Devices
    """What the cluster tells of DRA for this TrainJob (:class:`trainer.trainjob.spec.devices.Devices`)."""
    subdomain: str | None
    """The headless Service and Pod subdomain, or None when DNS hostnames are disabled."""
    not_in_gang: frozenset[str]
    """Replicated jobs completed before the rest start (see :func:`trainer.trainjob.spec.shape.completed_first`)."""
    queue: QueueChoice

    @property
    def template(self) -> JobSetSpec:
        """The runtime's JobSet spec."""
        return self.runtime.template.spec or JobSetSpec()

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
    def restarts_alone(self) -> bool:
        """The runtime's failurePolicy has a ``RestartJob`` or ``RestartJobAndIgnoreMaxRestarts`` rule: its
        Jobs and Pods carry ``jobset.sigs.k8s.io/job-restart-attempt``."""
        policy = self.template.failure_policy
        return any(r.action in (RESTART_JOB, RESTART_JOB_IGNORE_MAX) for r in (policy.rules if policy else None) or [])

    @property
    def deadline_seconds(self) -> int | None:
        """The ``activeDeadlineSeconds`` that holds: the TrainJob's own, else its runtime's ``runPolicy``'s."""
        return deadline_seconds(self.job, self.runtime)

    @property
    def ttl_deletes_job(self) -> bool:
        """The TTL that holds is the TrainJob's own or its runtime's ``runPolicy``'s: it deletes the TrainJob
        itself; else (the runtime template's JobSet TTL) it deletes the children and the TrainJob stays."""
        return ttl_of(self.job, self.runtime)[1]

    def gang_input(self, *, finished: bool, started: bool) -> GangInput:
        """The gang a scheduler sees: every pod set but those completed first, the ML policy's minimum
        (:meth:`~trainer.trainjob.policies.base.Policy.gang_min_member`), the runtime's ``podGroupPolicy`` and
        ``spec.scheduling`` as typed; ``finished`` and ``started`` from the attempt in progress."""
        pgp = self.runtime.pod_group_policy
        cosched = pgp.coscheduling if pgp is not None else None
        pod_sets = [ps for ps in self.pod_sets if ps.name not in self.not_in_gang]
        return GangInput(
            owner=self.obj,
            pod_sets=pod_sets,
            min_available=self.policy.gang_min_member(self, pod_sets),
            queue=self.queue,
            schedule_timeout_seconds=cosched.schedule_timeout_seconds if cosched else None,
            pod_group_policy=pgp,
            runtime_policy=(
                "volcano"
                if pgp is not None and pgp.volcano is not None
                else "coscheduling"
                if cosched is not None
                else "workload"
                if self.runtime.scheduling is not None
                else None
            ),
            finished=finished,
            started=started,
            scheduling=self.runtime.scheduling.to_dict() if self.runtime.scheduling is not None else None,
            all_pod_sets=tuple(self.pod_sets),
            sequenced=sequenced(self.rjobs, self.template),
        )

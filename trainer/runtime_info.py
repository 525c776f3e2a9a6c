"""Everything derived from one TrainJob and its runtime, computed once per reconcile.

Mirrors kubeflow/trainer ``pkg/runtime/runtime.go`` (``Info``: the runtime's replicated jobs as pod
sets with counts, pod templates and per-pod requests, plus scheduling facts): :func:`runtime_info`
builds a :class:`RuntimeInfo` from (TrainJob, runtime, observed Jobs, gang scheduler name); the
builders, the gang modules (through :meth:`RuntimeInfo.gang_input`), the status logic and admission
read it and derive nothing again.

A pod template here is the replicated job's template with, in this order: the trainer or
initializer settings (:mod:`trainer.builders.steps`), the ML policy (torch env, mpi mounts) and the
TrainJob's overrides in all three upstream forms (:mod:`trainer.builders.overrides`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from api.trainer_v1alpha1 import (
    ANCESTOR_LABEL,
    COND_COMPLETE,
    COND_FAILED,
    NODE_CONTAINER,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    STEP_TRAINER,
    ClusterTrainingRuntime,
    JobSetSpec,
    JobStatus,
    ReplicatedJob,
    TrainingRuntimeSpec,
    TrainJob,
)
from trainer.builders import trainjob_mpi
from trainer.builders.overrides import apply_pod_patch, patches_for
from trainer.builders.steps import apply_initializer, apply_trainer
from trainer.builders.torch import apply_torch
from trainer.gang.base import GangInput, PodSet
from trainer.queues import QueueChoice, resolve_queue
from trainer.status import jobs_status

JSON = dict[str, Any]


def runtime_ref(obj: JSON) -> tuple[str, str]:
    """``(kind, name)`` of the runtime a TrainJob (as JSON) references; the kind defaults to
    ClusterTrainingRuntime, as upstream."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or ClusterTrainingRuntime.KIND), str(ref.get("name") or "")


def step_of(rjob: ReplicatedJob) -> str:
    """The ancestor step of a replicated job (its ``trainjob-ancestor-step`` label), or ""."""
    return str(((rjob.template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL, ""))


def replicated_jobs(runtime: TrainingRuntimeSpec) -> list[ReplicatedJob]:
    """The runtime's replicated jobs, in order."""
    return list((runtime.template.spec.replicated_jobs if runtime.template.spec else None) or [])


def trainer_rjob(rjobs: list[ReplicatedJob]) -> ReplicatedJob | None:
    """The replicated job the trainer settings apply to: the one labelled ``trainer``, else the one
    named ``node``, else None."""
    return next((r for r in rjobs if step_of(r) == STEP_TRAINER), None) or next(
        (r for r in rjobs if r.name == NODE_CONTAINER), None
    )


def num_nodes(job: TrainJob, runtime: TrainingRuntimeSpec) -> int | None:
    """Training nodes: ``trainer.numNodes``, else the runtime's ``mlPolicy.numNodes`` (default 1),
    else None (no ML policy: keep the template's parallelism)."""
    if job.spec.trainer and job.spec.trainer.num_nodes is not None:
        return job.spec.trainer.num_nodes
    if runtime.ml_policy is not None:
        return runtime.ml_policy.num_nodes or 1
    return None


def subdomain_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> str | None:
    """The Pods' subdomain (= headless Service name), or None when DNS hostnames are disabled."""
    network = runtime.template.spec.network if runtime.template.spec else None
    if network is not None and network.enable_dns_hostnames is False:
        return None
    return (network.subdomain if network and network.subdomain else None) or str(job.metadata.name)


def completed_first(rjobs: list[ReplicatedJob]) -> set[str]:
    """Replicated jobs some other replicated job waits to be Complete (initializers): they finish
    before the rest start, so they are not in the gang (counting them would deadlock it, as in
    mpi-operator#608)."""
    return {d.name for r in rjobs for d in r.depends_on or [] if d.status == "Complete"}


def _pods_per_job(
    job: TrainJob, runtime: TrainingRuntimeSpec, rjob: ReplicatedJob, trainer: str | None, nodes: int | None
) -> tuple[int, bool]:
    """(pods per Job, whether the ML policy sets it): torch (or no policy) gives the trainer step
    ``numNodes`` pods; mpi gives the ``node`` replicated job ``numNodes`` pods (one fewer when the
    launcher runs as a node) and leaves the launcher at the template's; else the template's
    min(parallelism, completions)."""
    mpi = runtime.ml_policy.mpi if runtime.ml_policy else None
    if nodes is not None and mpi is not None and rjob.name == trainjob_mpi.NODE_RJOB:
        return trainjob_mpi.node_pods(mpi, nodes), True
    if nodes is not None and mpi is None and rjob.name == trainer:
        return nodes, True
    spec = rjob.template.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    return (min(parallelism, int(completions)) if completions is not None else parallelism), False


def _pod_template(
    job: TrainJob, runtime: TrainingRuntimeSpec, rjob: ReplicatedJob, is_trainer: bool, nodes: int, subdomain: str
) -> JSON:
    spec = copy.deepcopy(rjob.template.get("spec") or {})
    pod: JSON = spec.get("template") or {}
    step = step_of(rjob)
    policy = runtime.ml_policy
    if is_trainer:
        apply_trainer(job, pod)
        if policy is not None and policy.torch is not None:
            apply_torch(job, policy.torch, rjob.name, subdomain, nodes, pod)
    elif step in (STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER):
        apply_initializer(job, step, pod)
    if policy is not None and policy.mpi is not None:
        trainjob_mpi.apply_mpi(job, policy.mpi, rjob.name, is_trainer, pod)
    for patch in patches_for(job, rjob.name):
        pod = apply_pod_patch(pod, patch)
    return pod


@dataclass(frozen=True)
class RuntimeInfo:
    """One TrainJob with its runtime, as this reconcile sees them."""

    obj: JSON
    """The TrainJob as stored (for owner references and status)."""
    job: TrainJob
    runtime: TrainingRuntimeSpec
    rjobs: list[ReplicatedJob]
    """The runtime's replicated jobs, in order."""
    pod_sets: list[PodSet]
    """One per replicated job, in order: ``replicas`` Jobs of pods per Job, the pod template with
    settings, ML policy and overrides applied, and per-pod requests."""
    policy_sized: frozenset[str]
    """Replicated jobs whose pods per Job the ML policy sets (parallelism = completions)."""
    trainer: str | None
    """The trainer's replicated job, if any."""
    num_nodes: int | None
    subdomain: str | None
    """The headless Service and Pod subdomain, or None when DNS hostnames are disabled."""
    not_in_gang: frozenset[str]
    """Replicated jobs completed before the rest start (see :func:`completed_first`)."""
    queue: QueueChoice
    observed: list[JSON]
    """The TrainJob's Jobs, as cached."""
    statuses: list[JobStatus]
    """``jobsStatus`` of the observed Jobs, in runtime order."""
    finished: bool
    """The TrainJob already has Complete or Failed True."""
    started: bool
    """Some Job of the TrainJob is not suspended (it was released at least once)."""

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

    def gang_input(self) -> GangInput:
        """The gang a scheduler sees: every pod set but those completed first."""
        pgp = self.runtime.pod_group_policy
        volcano = pgp.volcano if pgp is not None else None
        cosched = pgp.coscheduling if pgp is not None else None
        return GangInput(
            owner=self.obj,
            pod_sets=[ps for ps in self.pod_sets if ps.name not in self.not_in_gang],
            queue=self.queue,
            schedule_timeout_seconds=cosched.schedule_timeout_seconds if cosched else None,
            network_topology=volcano.network_topology if volcano else None,
            runtime_policy="volcano" if volcano is not None else "coscheduling" if cosched is not None else None,
            finished=self.finished,
            started=self.started,
        )


def runtime_info(
    obj: JSON, job: TrainJob, runtime: TrainingRuntimeSpec, runtime_obj: JSON | None, observed: list[JSON], gang: str
) -> RuntimeInfo:
    """Derive everything about ``job`` (its JSON ``obj``) on ``runtime`` (``runtime_obj`` its JSON,
    for the queue default) with its ``observed`` Jobs, under ``--gang-scheduler-name=gang``. Pure."""
    rjobs = replicated_jobs(runtime)
    trainer = trainer_rjob(rjobs)
    nodes = num_nodes(job, runtime)
    subdomain = subdomain_of(job, runtime)
    pod_sets, sized = [], set()
    for r in rjobs:
        pods, by_policy = _pods_per_job(job, runtime, r, trainer.name if trainer else None, nodes)
        if by_policy:
            sized.add(r.name)
        is_trainer = trainer is not None and trainer.name == r.name
        template = _pod_template(job, runtime, r, is_trainer, nodes or 1, subdomain or str(job.metadata.name))
        pod_sets.append(PodSet(name=r.name, jobs=r.replicas, pods_per_job=pods, template=template))
    current = (job.status.conditions if job.status else None) or []
    return RuntimeInfo(
        obj=obj,
        job=job,
        runtime=runtime,
        rjobs=rjobs,
        pod_sets=pod_sets,
        policy_sized=frozenset(sized),
        trainer=trainer.name if trainer else None,
        num_nodes=nodes,
        subdomain=subdomain,
        not_in_gang=frozenset(completed_first(rjobs)),
        queue=resolve_queue(obj, gang, runtime_obj),
        observed=observed,
        statuses=jobs_status(rjobs, observed),
        finished=any(c.type in (COND_COMPLETE, COND_FAILED) and c.status == "True" for c in current),
        started=any(not (j.get("spec") or {}).get("suspend") for j in observed),
    )

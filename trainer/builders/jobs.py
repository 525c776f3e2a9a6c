"""Expand a TrainJob and its runtime into the desired children: ``batch/v1`` Jobs and a headless Service.

Pure: ``(TrainJob, runtime spec, observed Jobs, suspend) -> Children``. Follows JobSet's
``constructJobsFromTemplate`` (kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go``):
each replicated job ``r`` with ``replicas: n`` becomes Jobs ``<trainjob>-<r>-<0..n-1>``, Indexed,
labelled with the JobSet keys, their Pods under the subdomain of a headless Service named after the
TrainJob, so that pod ``p`` of Job ``i`` resolves as ``<trainjob>-<r>-<i>-<p>.<trainjob>``.
A replicated job whose ``dependsOn`` is not met yet is left out (and reported in ``waiting``) unless
its Jobs already exist.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from api.trainer_v1alpha1 import (
    ANCESTOR_LABEL,
    NODE_CONTAINER,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    STEP_TRAINER,
    ReplicatedJob,
    TrainingRuntimeSpec,
    TrainJob,
)
from trainer.builders import labels as L
from trainer.builders import trainjob_mpi
from trainer.builders.merge import JSON
from trainer.builders.overrides import apply_pod_patch, patches_for
from trainer.builders.steps import apply_initializer, apply_trainer
from trainer.builders.torch import apply_torch
from trainer.builders.trainjob_mpi import hostfile_config_map
from trainer.status import dependency_blocker, jobs_status


@dataclass(frozen=True)
class Children:
    """The desired children of one TrainJob."""

    service: JSON | None
    """The headless Service, or None when DNS hostnames are disabled."""
    config_maps: list[JSON]
    """ConfigMaps the pods mount (the MPI hostfile)."""
    jobs: list[JSON]
    """The Jobs to apply, in runtime order."""
    waiting: dict[str, str] = field(default_factory=dict)
    """Replicated jobs held back by ``dependsOn``: name -> why."""


def step_of(rjob: ReplicatedJob) -> str:
    """The ancestor step of a replicated job (its ``trainjob-ancestor-step`` label), or ""."""
    return str(((rjob.template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL, ""))


def trainer_rjob(runtime: TrainingRuntimeSpec) -> ReplicatedJob | None:
    """The replicated job the trainer settings apply to: the one labelled ``trainer``, else the
    one named ``node``, else None."""
    rjobs = (runtime.template.spec.replicated_jobs if runtime.template.spec else None) or []
    for r in rjobs:
        if step_of(r) == STEP_TRAINER:
            return r
    return next((r for r in rjobs if r.name == NODE_CONTAINER), None)


def num_nodes(job: TrainJob, runtime: TrainingRuntimeSpec) -> int | None:
    """Training nodes: ``trainer.numNodes``, else the runtime's ``mlPolicy.numNodes``, else None
    (keep the template's parallelism)."""
    if job.spec.trainer and job.spec.trainer.num_nodes is not None:
        return job.spec.trainer.num_nodes
    if runtime.ml_policy is not None:
        return runtime.ml_policy.num_nodes or 1
    return None


def pod_count(job: TrainJob, runtime: TrainingRuntimeSpec, rjob: ReplicatedJob) -> int | None:
    """Pods per Job of ``rjob`` the ML policy sets (parallelism = completions), or None to keep the
    template's: torch (or no policy) gives the trainer step ``numNodes`` pods; mpi gives the ``node``
    replicated job ``numNodes`` pods (one fewer when the launcher runs as a node) and leaves the
    launcher (the trainer step) at one."""
    nodes = num_nodes(job, runtime)
    trainer = trainer_rjob(runtime)
    mpi = runtime.ml_policy.mpi if runtime.ml_policy else None
    if nodes is None:
        return None
    if mpi is not None:
        return trainjob_mpi.node_pods(mpi, nodes) if rjob.name == trainjob_mpi.NODE_RJOB else None
    return nodes if trainer is not None and trainer.name == rjob.name else None


def subdomain_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> str | None:
    """The Pods' subdomain (= headless Service name), or None when DNS hostnames are disabled."""
    network = runtime.template.spec.network if runtime.template.spec else None
    if network is not None and network.enable_dns_hostnames is False:
        return None
    return (network.subdomain if network and network.subdomain else None) or str(job.metadata.name)


def headless_service(job: TrainJob, name: str) -> JSON:
    """The headless Service that gives every Pod of ``job`` a DNS record."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": {L.JOBSET_NAME: job.metadata.name},
            "ownerReferences": [L.owner_reference(job)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {L.JOBSET_NAME: job.metadata.name},
            "publishNotReadyAddresses": True,
        },
    }


def pod_template(job: TrainJob, runtime: TrainingRuntimeSpec, rjob: ReplicatedJob) -> JSON:
    """The Pod template of ``rjob`` with the trainer/initializer settings, ML policy and overrides
    applied (without the per-Job labels)."""
    spec = copy.deepcopy(rjob.template.get("spec") or {})
    pod: JSON = spec.get("template") or {}
    step = step_of(rjob)
    trainer = trainer_rjob(runtime)
    is_trainer = trainer is not None and trainer.name == rjob.name
    if is_trainer:
        apply_trainer(job, pod)
        policy = runtime.ml_policy
        nodes = num_nodes(job, runtime) or 1
        subdomain = subdomain_of(job, runtime) or str(job.metadata.name)
        if policy is not None and policy.torch is not None:
            apply_torch(job, policy.torch, rjob.name, subdomain, nodes, pod)
    elif step in (STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER):
        apply_initializer(job, step, pod)
    mpi = runtime.ml_policy.mpi if runtime.ml_policy else None
    if mpi is not None:
        trainjob_mpi.apply_mpi(job, mpi, rjob.name, is_trainer, pod)
    for patch in patches_for(job, rjob.name):
        pod = apply_pod_patch(pod, patch)
    return pod


def build_job(
    job: TrainJob, runtime: TrainingRuntimeSpec, rjob: ReplicatedJob, index: int, global_index: int, suspend: bool
) -> JSON:
    """One child Job: ``<trainjob>-<rjob>-<index>``."""
    name = str(job.metadata.name)
    template_meta = rjob.template.get("metadata") or {}
    spec = copy.deepcopy(rjob.template.get("spec") or {})
    pod = pod_template(job, runtime, rjob)
    jobset_labels = {
        L.JOBSET_NAME: name,
        L.REPLICATED_JOB_NAME: rjob.name,
        L.REPLICATED_JOB_REPLICAS: str(rjob.replicas),
        L.JOB_INDEX: str(index),
        L.JOB_GLOBAL_INDEX: str(global_index),
    }
    runtime_meta = runtime.template.metadata or {}
    job_labels = {
        **(runtime_meta.get("labels") or {}),
        **(template_meta.get("labels") or {}),
        **(job.spec.labels or {}),
        **jobset_labels,
    }
    job_annotations = {
        **(runtime_meta.get("annotations") or {}),
        **(template_meta.get("annotations") or {}),
        **(job.spec.annotations or {}),
        **jobset_labels,
    }
    pod_meta = pod.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **(job.spec.labels or {}), **jobset_labels}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **(job.spec.annotations or {}), **jobset_labels}
    pod_spec = pod.setdefault("spec", {})
    subdomain = subdomain_of(job, runtime)
    if subdomain is not None:
        pod_spec["subdomain"] = subdomain
    pod_spec.setdefault("restartPolicy", "Never")
    spec["template"] = pod
    spec.setdefault("completionMode", "Indexed")
    pods = pod_count(job, runtime, rjob)
    if pods is not None:
        spec["parallelism"] = pods
        spec["completions"] = pods
    spec["suspend"] = suspend
    if job.spec.active_deadline_seconds is not None:
        # The Job controller enforces it per Job and restarts the clock on resume.
        spec["activeDeadlineSeconds"] = job.spec.active_deadline_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-{rjob.name}-{index}",
            "namespace": job.metadata.namespace,
            "labels": job_labels,
            "annotations": job_annotations,
            "ownerReferences": [L.owner_reference(job)],
        },
        "spec": spec,
    }


def build_children(job: TrainJob, runtime: TrainingRuntimeSpec, observed_jobs: list[JSON], suspend: bool) -> Children:
    """All desired children of ``job``.

    ``observed_jobs`` are the Jobs that exist now (for ``dependsOn``); ``suspend`` is the suspension
    every Job gets (the TrainJob's, or a gang scheduler's hold).
    """
    rjobs = (runtime.template.spec.replicated_jobs if runtime.template.spec else None) or []
    statuses = {s.name: s for s in jobs_status(rjobs, observed_jobs)}
    replicas = {r.name: r.replicas for r in rjobs}
    existing = {((j.get("metadata") or {}).get("labels") or {}).get(L.REPLICATED_JOB_NAME) for j in observed_jobs}
    jobs: list[JSON] = []
    waiting: dict[str, str] = {}
    global_index = 0
    for rjob in rjobs:
        blocker = dependency_blocker(rjob, statuses, replicas)
        if blocker and rjob.name not in existing:
            waiting[rjob.name] = blocker
        else:
            for i in range(rjob.replicas):
                jobs.append(build_job(job, runtime, rjob, i, global_index + i, suspend))
        global_index += rjob.replicas
    subdomain = subdomain_of(job, runtime)
    service = headless_service(job, subdomain) if subdomain is not None else None
    trainer = trainer_rjob(runtime)
    hostfile = hostfile_config_map(
        job.to_dict(),
        job,
        runtime,
        trainer.name if trainer else "launcher",
        num_nodes(job, runtime) or 1,
        subdomain or str(job.metadata.name),
    )
    return Children(service=service, config_maps=[hostfile] if hostfile else [], jobs=jobs, waiting=waiting)

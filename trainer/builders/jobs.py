"""Expand a TrainJob and its runtime into the desired children: ``batch/v1`` Jobs and a headless Service.

Pure: ``(RuntimeInfo, suspend) -> Children`` (:mod:`trainer.runtime_info`). Follows JobSet's
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
from typing import TYPE_CHECKING

from api.jobset_v1alpha2 import ReplicatedJob
from api.trainer_v1alpha1 import JobStatus, TrainJob
from trainer.builders import labels as L
from trainer.builders.merge import JSON
from trainer.builders.trainjob_mpi import hostfile_config_map
from trainer.gang.base import PodSet

if TYPE_CHECKING:
    from trainer.runtime_info import RuntimeInfo


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


def dependency_blocker(rjob: ReplicatedJob, statuses: dict[str, JobStatus], replicas: dict[str, int]) -> str:
    """Why ``rjob`` may not start yet ("" when every ``dependsOn`` entry is met), as JobSet's
    ``dependsOn`` (kubernetes-sigs/jobset ``pkg/controllers/depends_on.go``).

    ``Ready``: every Job of the dependency is ready or succeeded; ``Complete``: every one succeeded.
    """
    for dep in rjob.depends_on or []:
        st = statuses.get(dep.name)
        want = replicas.get(dep.name, 0)
        if st is None:
            return f"depends on unknown replicated job {dep.name!r}"
        reached = st.succeeded if dep.status == "Complete" else st.ready + st.succeeded
        if reached < want:
            return f"waiting for replicated job {dep.name!r} to be {dep.status} ({reached}/{want} Jobs)"
    return ""


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


def build_job(
    info: RuntimeInfo, rjob: ReplicatedJob, pod_set: PodSet, index: int, global_index: int, suspend: bool
) -> JSON:
    """One child Job: ``<trainjob>-<rjob>-<index>``, its Pods from the pod set's template."""
    job = info.job
    name = str(job.metadata.name)
    template_meta = rjob.template.get("metadata") or {}
    spec = copy.deepcopy(rjob.template.get("spec") or {})
    pod = copy.deepcopy(pod_set.template)
    jobset_labels = {
        L.JOBSET_NAME: name,
        L.REPLICATED_JOB_NAME: rjob.name,
        L.REPLICATED_JOB_REPLICAS: str(rjob.replicas),
        L.JOB_INDEX: str(index),
        L.JOB_GLOBAL_INDEX: str(global_index),
        L.RESTART_ATTEMPT: str(info.restarts),
    }
    runtime_meta = info.runtime.template.metadata or {}
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
    if info.subdomain is not None:
        pod_spec["subdomain"] = info.subdomain
    pod_spec.setdefault("restartPolicy", "Never")
    spec["template"] = pod
    spec.setdefault("completionMode", "Indexed")
    if rjob.name in info.policy_sized:
        spec["parallelism"] = pod_set.pods_per_job
        spec["completions"] = pod_set.pods_per_job
    spec["suspend"] = suspend
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


def build_children(info: RuntimeInfo, suspend: bool) -> Children:
    """All desired children of the TrainJob; ``suspend`` is the suspension every Job gets (the
    TrainJob's, or a gang scheduler's hold). A replicated job whose ``dependsOn`` is not met is left
    out (and named in ``waiting``) unless its Jobs already exist."""
    statuses = {s.name: s for s in info.statuses}
    replicas = {r.name: r.replicas for r in info.rjobs}
    existing = {((j.get("metadata") or {}).get("labels") or {}).get(L.REPLICATED_JOB_NAME) for j in info.observed}
    jobs: list[JSON] = []
    waiting: dict[str, str] = {}
    global_index = 0
    for rjob, pod_set in zip(info.rjobs, info.pod_sets, strict=True):
        blocker = dependency_blocker(rjob, statuses, replicas)
        if blocker and rjob.name not in existing:
            waiting[rjob.name] = blocker
        else:
            for i in range(rjob.replicas):
                jobs.append(build_job(info, rjob, pod_set, i, global_index + i, suspend))
        global_index += rjob.replicas
    name = str(info.job.metadata.name)
    service = headless_service(info.job, info.subdomain) if info.subdomain is not None else None
    hostfile = hostfile_config_map(
        info.obj, info.job, info.runtime, info.trainer or "launcher", info.num_nodes or 1, info.subdomain or name
    )
    return Children(service=service, config_maps=[hostfile] if hostfile else [], jobs=jobs, waiting=waiting)

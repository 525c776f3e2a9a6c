"""Expand a TrainJob and its runtime into the desired children: ``batch/v1`` Jobs and a headless Service.

Pure: ``(TrainJobView, suspend) -> Children`` (:mod:`trainer.trainjob.runtime`). Follows JobSet's
``constructJobsFromTemplate`` (kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go``):
each replicated job ``r`` with ``replicas: n`` becomes Jobs ``<trainjob>-<r>-<0..n-1>``, Indexed,
labelled with the JobSet keys, their Pods under the subdomain of a headless Service named after the
TrainJob, so that pod ``p`` of Job ``i`` resolves as ``<trainjob>-<r>-<i>-<p>.<trainjob>``.
A replicated job whose ``dependsOn`` is not met yet is left out (and reported in ``waiting``) unless
its Jobs already exist.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from trainer.api import labels as L
from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.trainer_v1alpha1 import JobStatus, TrainJob
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.meta import meta
from trainer.framework.owner import owner_reference
from trainer.jobs.gang.base import PodSet
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.runtime.view import TrainJobView
from trainer.trainjob.spec.exclusive import exclusive_annotations, exclusive_of, place_exclusively


@dataclass(frozen=True)
class Children:
    """The desired children of one TrainJob."""

    service: JSON | None
    """The headless Service, or None when DNS hostnames are disabled."""
    config_maps: list[JSON]
    """ConfigMaps the pods mount (the ML policy's, e.g. the MPI hostfile)."""
    jobs: list[JSON]
    """The Jobs to apply, in runtime order."""
    waiting: dict[str, str] = field(default_factory=dict)
    """Replicated jobs held back by ``dependsOn``: name -> why."""
    secrets: list[JSON] = field(default_factory=list)
    """Secrets the pods mount, derived from the TrainJob (the ML policy's, e.g. the Flux curve certificate)."""


def dependency_blocker(
    rjob: ReplicatedJob,
    statuses: dict[str, JobStatus],
    replicas: dict[str, int],
    previous: ReplicatedJob | None = None,
    in_order: bool = False,
) -> str:
    """Why ``rjob`` may not start yet ("" when it may), as JobSet's ``dependsOn``
    (kubernetes-sigs/jobset ``pkg/controllers/depends_on.go``) and ``startupPolicy: InOrder``
    (``pkg/controllers/startup_policy.go``): ``previous`` is the replicated job before ``rjob``.

    ``Complete``: every Job of the dependency succeeded. ``Ready`` (and InOrder, on the previous
    replicated job): every Job of it is ready, succeeded or failed.
    """
    deps = [(d.name, d.status, "") for d in rjob.depends_on or []]
    if in_order and previous is not None:
        deps.append((previous.name, "Ready", "startupPolicy InOrder: "))
    for name, status, why in deps:
        st = statuses.get(name)
        want = replicas.get(name, 0)
        if st is None:
            return f"depends on unknown replicated job {name!r}"
        reached = st.succeeded if status == "Complete" else st.ready + st.succeeded + st.failed
        if reached < want:
            return f"{why}waiting for replicated job {name!r} to be {status} ({reached}/{want} Jobs)"
    return ""


@dataclass(frozen=True)
class JobIndices:
    """Where one replicated job's Jobs sit among all Jobs of the TrainJob (JobSet ``globalJobIndex`` and
    ``groupJobIndex``, kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go``)."""

    global_offset: int
    """Replicas of every replicated job before this one."""
    global_replicas: int
    """Replicas of every replicated job."""
    group_offset: int
    """Replicas of the replicated jobs of the same group before this one."""
    group_replicas: int
    """Replicas of every replicated job of the same group."""


def job_indices(rjobs: list[ReplicatedJob]) -> dict[str, JobIndices]:
    """:class:`JobIndices` of every replicated job, by name."""
    total = sum(r.replicas for r in rjobs)
    groups: dict[str, int] = {}
    for r in rjobs:
        groups[r.group_name] = groups.get(r.group_name, 0) + r.replicas
    out, seen, seen_in_group = {}, 0, dict.fromkeys(groups, 0)
    for r in rjobs:
        out[r.name] = JobIndices(seen, total, seen_in_group[r.group_name], groups[r.group_name])
        seen += r.replicas
        seen_in_group[r.group_name] += r.replicas
    return out


def job_key(namespace: str, job_name: str) -> str:
    """JobSet's ``job-key``: the SHA-1 of ``<namespace>/<job name>`` in hex (``jobHashKey``)."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()


def coordinator_endpoint(info: RuntimeInfo) -> str | None:
    """``<trainjob>-<rjob>-<jobIndex>-<podIndex>.<subdomain>`` of the runtime's ``coordinator``, or None
    (JobSet ``CoordinatorEndpoint``; the subdomain is named even when DNS hostnames are disabled)."""
    coordinator = info.template.coordinator
    if coordinator is None:
        return None
    name = str(info.job.metadata.name)
    network = info.template.network
    subdomain = (network.subdomain if network else None) or name
    return f"{name}-{coordinator.replicated_job}-{coordinator.job_index or 0}-{coordinator.pod_index or 0}.{subdomain}"


def headless_service(job: TrainJob, name: str, publish_not_ready: bool = True) -> JSON:
    """The headless Service ``name`` that gives every Pod of ``job`` a DNS record (JobSet
    ``createHeadlessSvcIfNecessary``); ``publish_not_ready``: the network's ``publishNotReadyAddresses``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": {L.JOBSET_NAME: job.metadata.name},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {L.JOBSET_NAME: job.metadata.name},
            "publishNotReadyAddresses": publish_not_ready,
        },
    }


def build_job(
    view: TrainJobView, rjob: ReplicatedJob, pod_set: PodSet, index: int, at: JobIndices, suspend: bool
) -> JSON:
    """One child Job: ``<trainjob>-<rjob>-<index>``, its Pods from the pod set's template, both
    labelled and annotated with JobSet's keys (``labelAndAnnotateObject``); under JobSet's exclusive
    placement its pods are kept alone in one topology domain (:mod:`trainer.trainjob.spec.exclusive`);
    the ML policy's Job fields over the template's (:meth:`~trainer.trainjob.policies.base.Policy.job_fields`)."""
    info, job = view.info, view.info.job
    name, namespace = str(job.metadata.name), str(job.metadata.namespace)
    job_name = f"{name}-{rjob.name}-{index}"
    spec = copy_json({k: v for k, v in (rjob.template.get("spec") or {}).items() if k != "template"})
    pod = copy_json(pod_set.template)
    jobset_labels = jobset_keys(view, rjob, index, at)
    runtime_meta, template_meta = info.template_metadata, info.job_metadata[rjob.name]
    exclusive = exclusive_of(
        {**runtime_meta["annotations"], **(job.spec.annotations or {})}, template_meta["annotations"]
    )
    jobset_annotations = {**jobset_labels, **exclusive_annotations(exclusive)}
    job_labels = {**runtime_meta["labels"], **template_meta["labels"], **(job.spec.labels or {}), **jobset_labels}
    job_annotations = {
        **runtime_meta["annotations"],
        **template_meta["annotations"],
        **(job.spec.annotations or {}),
        **jobset_annotations,
    }
    pod_meta = pod.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **(job.spec.labels or {}), **jobset_labels}
    pod_meta["annotations"] = {
        **(pod_meta.get("annotations") or {}),
        **(job.spec.annotations or {}),
        **jobset_annotations,
    }
    pod_spec = pod.setdefault("spec", {})
    if exclusive is not None:
        place_exclusively(pod_spec, exclusive, namespace, job_name, jobset_labels[L.JOB_KEY])
    if info.subdomain is not None:
        pod_spec["subdomain"] = info.subdomain
    pod_spec.setdefault("restartPolicy", "OnFailure")  # JobSet's default for a pod template without one
    spec["template"] = pod
    spec.setdefault("completionMode", "Indexed")
    if rjob.name in info.policy_sized:
        spec["parallelism"] = pod_set.pods_per_job
        spec["completions"] = pod_set.pods_per_job
    spec.update(info.policy.job_fields(info, rjob.name))
    spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": namespace,
            "labels": job_labels,
            "annotations": job_annotations,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def jobset_keys(view: TrainJobView, rjob: ReplicatedJob, index: int, at: JobIndices) -> dict[str, str]:
    """JobSet's labels of Job ``index`` of ``rjob`` and of its Pods (kubernetes-sigs/jobset
    ``labelAndAnnotateObject``): names, indices, the restart attempt, the job restart attempt when the
    failurePolicy restarts Jobs alone, and the coordinator's endpoint when the runtime names one."""
    info, job = view.info, view.info.job
    name, namespace = str(job.metadata.name), str(job.metadata.namespace)
    job_name = f"{name}-{rjob.name}-{index}"
    out = {
        L.JOBSET_NAME: name,
        L.JOBSET_UID: str(job.metadata.uid or ""),
        L.REPLICATED_JOB_NAME: rjob.name,
        L.RESTART_ATTEMPT: str(view.attempt.restarts),
        L.REPLICATED_JOB_REPLICAS: str(rjob.replicas),
        L.GLOBAL_REPLICAS: str(at.global_replicas),
        L.JOB_INDEX: str(index),
        L.JOB_KEY: job_key(namespace, job_name),
        L.JOB_GLOBAL_INDEX: str(at.global_offset + index),
        L.GROUP_NAME: rjob.group_name,
        L.GROUP_REPLICAS: str(at.group_replicas),
        L.JOB_GROUP_INDEX: str(at.group_offset + index),
    }
    if info.restarts_alone:
        out[L.JOB_RESTART_ATTEMPT] = str(view.attempt.job_restart_attempt(rjob.name, index))
    coordinator = coordinator_endpoint(info)
    if coordinator is not None:
        out[L.COORDINATOR] = coordinator
    return out


def build_children(view: TrainJobView, suspend: bool) -> Children:
    """All desired children of the TrainJob; ``suspend`` is the suspension every Job gets (the
    TrainJob's, or a gang scheduler's hold). A replicated job whose ``dependsOn`` (or, under
    ``startupPolicy: InOrder``, whose predecessor) is not met is left out (and named in ``waiting``)
    unless its Jobs already exist."""
    info = view.info
    statuses = {s.name: s for s in view.attempt.statuses}
    replicas = {r.name: r.replicas for r in info.rjobs}
    existing = {meta(j).labels.get(L.REPLICATED_JOB_NAME) for j in view.attempt.observed}
    startup = info.template.startup_policy
    in_order = startup is not None and startup.startup_policy_order == "InOrder"
    indices = job_indices(info.rjobs)
    jobs: list[JSON] = []
    waiting: dict[str, str] = {}
    previous: ReplicatedJob | None = None
    for rjob, pod_set in zip(info.rjobs, info.pod_sets, strict=True):
        blocker = dependency_blocker(rjob, statuses, replicas, previous, in_order)
        if blocker and rjob.name not in existing:
            waiting[rjob.name] = blocker
        else:
            for i in range(rjob.replicas):
                jobs.append(build_job(view, rjob, pod_set, i, indices[rjob.name], suspend))
        previous = rjob
    network = info.template.network
    publish = network.publish_not_ready_addresses if network is not None else None
    service = headless_service(info.job, info.subdomain, publish is not False) if info.subdomain is not None else None
    return Children(
        service=service,
        config_maps=info.policy.config_maps(info),
        jobs=jobs,
        waiting=waiting,
        secrets=info.policy.secrets(info),
    )

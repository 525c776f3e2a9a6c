"""Expand an MPIJob into its children: a headless Service, the hostfile ConfigMap, a worker Job and a
launcher Job (the SSH Secret is made once by the reconciler, see :mod:`trainer.jobs.mpi`).

Names follow kubeflow/mpi-operator v2: Service ``<job>``, ConfigMap ``<job>-config``, Secret
``<job>-ssh``, launcher ``<job>-launcher``. Workers are one Indexed Job ``<job>-worker`` with
parallelism = completions = replicas, so worker ``i`` gets the hostname ``<job>-worker-<i>`` and
resolves as ``<job>-worker-<i>.<job>.<namespace>.svc``. Pods carry mpi-operator's labels
``training.kubeflow.org/{job-name,job-role,replica-type,operator-name}``; the launcher that runs as a
worker also ``training.kubeflow.org/replica-index: "0"`` (its workers are then numbered from 1, see
:func:`worker_replica_index`; the admission webhook writes it on each worker pod), the label Kueue's
Topology Aware Scheduling orders ranks by (kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go``
``newLauncherPodTemplate``, ``workerReplicaIndexLabel``; kubernetes-sigs/kueue
``pkg/controller/jobs/mpijob/mpijob_controller.go``). Both Jobs have ``podReplacementPolicy: Failed``:
a terminating pod is not replaced before it is gone (mpi-operator v0.8.1, #810, for the launcher; its
workers are Pods of fixed names, which cannot be made twice either).

Pure: ``(MPIJob, observed worker Job, suspend) -> MPIChildren``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.api.kubeflow_v2beta1 import MPIJob, ReplicaSpec
from trainer.api.labels import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    OPERATOR_NAME,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.merge import upsert_env
from trainer.framework.owner import owner_reference
from trainer.jobs.mpi import Host, config_map, mount_config, mount_ssh

DNS_LABEL_MAX = 63


@dataclass(frozen=True)
class MPIChildren:
    """The desired children of one MPIJob."""

    service: JSON
    config_map: JSON
    worker_job: JSON | None
    launcher_job: JSON | None
    """None while ``launcherCreationPolicy: WaitForWorkersReady`` waits for the workers."""


def worker_replicas(job: MPIJob) -> int:
    """Number of workers (0 when unset, as upstream defaults)."""
    worker = job.spec.mpi_replica_specs.worker
    return worker.replicas or 0 if worker else 0


def names(job: MPIJob) -> dict[str, str]:
    """Names of the children: service, config, ssh, launcher, worker."""
    n = str(job.metadata.name)
    return {
        "service": n,
        "config": f"{n}-config",
        "ssh": f"{n}-ssh",
        "launcher": f"{n}-launcher",
        "worker": f"{n}-worker",
    }


LAUNCHER_MISSING = (
    "spec.mpiReplicaSpecs.Launcher is missing: an MPIJob has exactly one launcher; add a Launcher replica spec"
)
"""Why an MPIJob without a Launcher cannot run. Admission lets it in with this as a warning, as
mpi-operator's API admits it (its controller then refuses it: ``pkg/apis/kubeflow/validation``, a
``ValidationError`` event; Kueue's e2e suites create one); the reconcile ends it ``Failed``
(``InvalidSpec``) with this message."""


def validate(job: MPIJob) -> list[str]:
    """What makes ``job`` impossible to run, each message naming the field and the fix
    (:data:`LAUNCHER_MISSING` among them)."""
    out = []
    specs = job.spec.mpi_replica_specs
    if specs.launcher is None:
        out.append(LAUNCHER_MISSING)
    elif (specs.launcher.replicas if specs.launcher.replicas is not None else 1) != 1:
        out.append("spec.mpiReplicaSpecs.Launcher.replicas must be 1: an MPIJob has exactly one launcher")
    workers = worker_replicas(job)
    if workers < 1:
        out.append(
            "spec.mpiReplicaSpecs.Worker.replicas must be at least 1: add a Worker replica spec with replicas >= 1"
        )
    longest = f"{job.metadata.name}-worker-{max(workers - 1, 0)}"
    if len(longest) > DNS_LABEL_MAX:
        room = DNS_LABEL_MAX - len(f"-worker-{max(workers - 1, 0)}")
        out.append(
            f"metadata.name is too long: worker hostname {longest!r} has {len(longest)} characters, more than the "
            f"{DNS_LABEL_MAX} of a DNS label; use a name of at most {room} characters"
        )
    return out


def hosts(job: MPIJob) -> list[Host]:
    """The hostfile entries: the launcher first when it runs as a worker, then every worker."""
    n, ns = job.metadata.name, job.metadata.namespace
    slots = job.spec.slots_per_worker or 1
    out = [Host(f"{n}-worker-{i}.{n}.{ns}.svc", slots) for i in range(worker_replicas(job))]
    if job.spec.run_launcher_as_worker:
        out.insert(0, Host(f"{n}-launcher.{n}.{ns}.svc", slots))
    return out


def _labels(job: MPIJob, role: str) -> dict[str, str]:
    return {
        JOB_NAME_LABEL: str(job.metadata.name),
        JOB_ROLE_LABEL: role,
        REPLICA_TYPE_LABEL: role,
        OPERATOR_NAME_LABEL: OPERATOR_NAME,
    }


def _restart_policy(spec: ReplicaSpec, default: str) -> str:
    policy = spec.restart_policy or default
    return policy if policy in ("Never", "OnFailure") else "OnFailure"


def _pod(job: MPIJob, spec: ReplicaSpec, role: str, default_restart: str) -> JSON:
    pod = copy_json(spec.template)
    meta = pod.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **_labels(job, role)}
    pod_spec = pod.setdefault("spec", {})
    pod_spec["subdomain"] = str(job.metadata.name)
    pod_spec["restartPolicy"] = _restart_policy(spec, default_restart)
    mount_ssh(pod, names(job)["ssh"], job.spec.ssh_auth_mount_path or "/root/.ssh")
    for container in pod_spec.get("containers") or []:
        upsert_env(container, [{"name": "K_MPI_JOB_ROLE", "value": role}])
    return pod


def _job(owner: JSON, job: MPIJob, name: str, role: str, pod: JSON, count: int, suspend: bool, indexed: bool) -> JSON:
    policy = job.spec.run_policy
    spec: JSON = {
        "parallelism": count,
        "completions": count,
        "suspend": suspend,
        "podReplacementPolicy": "Failed",
        "template": pod,
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    if policy is not None and policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = policy.active_deadline_seconds
    if role == "launcher" and policy is not None and policy.backoff_limit is not None:
        spec["backoffLimit"] = policy.backoff_limit
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": _labels(job, role),
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": spec,
    }


def worker_replica_index(completion_index: int, run_launcher_as_worker: bool) -> str:
    """The ``training.kubeflow.org/replica-index`` of the worker pod with ``completion_index``: the
    index, or one more when the launcher runs as a worker and holds 0 (mpi-operator's
    ``workerReplicaIndexLabel``)."""
    return str(completion_index + 1 if run_launcher_as_worker else completion_index)


def workers_ready(worker_job: JSON | None, replicas: int) -> bool:
    """True when every worker pod of the observed worker Job is ready."""
    return worker_job is not None and int((worker_job.get("status") or {}).get("ready") or 0) >= replicas


def build_mpijob_children(owner: JSON, job: MPIJob, observed: dict[str, JSON], suspend: bool) -> MPIChildren:
    """The desired children. ``observed`` maps ``"worker"``/``"launcher"`` to the existing Jobs."""
    n = names(job)
    ns = str(job.metadata.namespace)
    specs = job.spec.mpi_replica_specs
    implementation = job.spec.mpi_implementation or "OpenMPI"
    slots = job.spec.slots_per_worker or 1
    replicas = worker_replicas(job)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": n["service"],
            "namespace": ns,
            "labels": {JOB_NAME_LABEL: str(job.metadata.name)},
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_NAME_LABEL: str(job.metadata.name)},
            "publishNotReadyAddresses": True,
        },
    }
    cm = config_map(owner, n["config"], implementation, hosts(job))
    cm["metadata"]["labels"] = {JOB_NAME_LABEL: str(job.metadata.name)}
    worker_job = None
    if specs.worker is not None and replicas > 0:
        pod = _pod(job, specs.worker, "worker", "OnFailure")
        worker_job = _job(owner, job, n["worker"], "worker", pod, replicas, suspend, indexed=True)
    launcher_job = None
    wait = job.spec.launcher_creation_policy == "WaitForWorkersReady"
    if specs.launcher is not None and (
        "launcher" in observed or not wait or workers_ready(observed.get("worker"), replicas)
    ):
        pod = _pod(job, specs.launcher, "launcher", "OnFailure")
        pod["spec"]["hostname"] = n["launcher"]
        if job.spec.run_launcher_as_worker:
            pod["metadata"]["labels"][REPLICA_INDEX_LABEL] = "0"
        mount_config(pod, n["config"], implementation, slots, None)
        launcher_job = _job(owner, job, n["launcher"], "launcher", pod, 1, suspend, indexed=False)
    return MPIChildren(service=service, config_map=cm, worker_job=worker_job, launcher_job=launcher_job)

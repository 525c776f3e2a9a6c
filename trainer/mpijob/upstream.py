"""MPIJobs kubeflow/mpi-operator started: finished under the Kubernetes Job controller, or handed over.

A cluster switched from mpi-operator v0.8 keeps what it made of each MPIJob (kubeflow/mpi-operator
``pkg/controller/mpi_job_controller.go``), each object with a controller owner reference to the MPIJob:
the launcher Job ``<job>-launcher``, the worker **Pods** ``<job>-worker-<i>`` (labelled
``training.kubeflow.org/operator-name: mpi-operator``, ``job-name``, ``job-role: worker`` and
``replica-index``), the Service ``<job>``, the hostfile ConfigMap ``<job>-config`` and the SSH Secret
``<job>-ssh``. The Job, Service, ConfigMap and Secret carry only the label ``app: <job>``. Suspending an
MPIJob suspends its launcher Job and deletes its worker Pods (``cleanUpWorkerPods``); once it finished,
its worker Pods are deleted as ``runPolicy.cleanPodPolicy`` says (``deleteWorkerPods``). This operator
names its children the same, but its workers are one Indexed Job ``<job>-worker``, so while an MPIJob
controls a launcher Job mpi-operator made, this operator makes no child of it (:func:`handover`):

- **running** (neither suspended nor finished): it finishes under the Kubernetes Job controller (its
  launcher Job) with mpi-operator's worker Pods. The MPIJob's conditions, ``replicaStatuses`` and
  ``completionTime`` follow the launcher Job and the worker Pods as this operator's own status code
  derives them from a launcher Job (:func:`~trainer.mpijob.status.desired_conditions`, the worker Pods
  counted as a worker Job's status would count them); a worker Pod evicted fails it with
  ``MPIJobEvicted``, as ``updateMPIJobStatus`` does. Once finished, ``cleanPodPolicy`` deletes its
  worker Pods (``All``: every one; ``Running``: those running or pending; ``None``: none).
- **suspended**: the launcher Job is deleted in the foreground (its Pod template is immutable and not
  this operator's) and the worker Pods left, if any, are deleted. Once they are gone the MPIJob is this
  operator's like any other and runs under it when resumed. Its Service, ConfigMap and SSH Secret, of the
  names this operator gives its own and controlled by the MPIJob, are taken as they are (the Service and
  the ConfigMap are applied over, the Secret labelled): the Secret's keys, ``ssh-privatekey`` and
  ``ssh-publickey`` (:data:`UPSTREAM_SSH_KEYS`), are those this operator mounts
  (:func:`~trainer.jobs.mpi.mount_ssh`), so the key pair is kept.
- **finished**: untouched but for ``cleanPodPolicy`` on worker Pods mpi-operator left (it deletes them at
  its next sync of a finished MPIJob, so normally none are left). A finished MPIJob that controls no Job
  this operator's cache lists (its launcher Job gone with its ``ttlSecondsAfterFinished``, which
  mpi-operator sets on the launcher Job only) is left untouched too: mpi-operator never deletes an
  MPIJob, so this operator's ``ttlSecondsAfterFinished`` (which deletes it) does not apply to one it
  did not run.

Which launcher Job is mpi-operator's: every object this operator writes carries the child writer's
desired-hash annotation (:data:`~trainer.jobs.child_writer.HASH_ANNOTATION`); mpi-operator's launcher Job
carries none. (mpi-operator's own labels cannot tell: its launcher Job carries ``app`` only, and this
operator's Pods carry ``training.kubeflow.org/operator-name: mpi-operator`` too.)

Seeing it: mpi-operator's launcher Job lacks this operator's child label, so the label-narrowed Job cache
does not list it. A non-finished MPIJob that controls no Job in that cache but has worker Pods of
mpi-operator, or a status (someone ran it; this operator writes a status only after its children), is
one mpi-operator may have started: its launcher Job is asked for once, as a child created once
(:class:`~trainer.jobs.child_writer.Once`): when the name is taken by a Job the MPIJob controls, the child
writer gives that Job this operator's labels so the cache lists it (and the next reconcile sees it);
when it is free, this operator's own launcher Job is created suspended, as it would create it for a
suspended MPIJob, and the next reconcile goes on as for any MPIJob of this operator's.

The worker Pods are read from an informer (:data:`WATCHES`) of the Pods labelled
``training.kubeflow.org/operator-name=mpi-operator`` that keeps only their metadata, phase and reason
(:func:`kept_pod`); a Pod controlled by an MPIJob (only mpi-operator makes such Pods; this operator's are
controlled by its Jobs) brings that MPIJob's reconcile.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from trainer.api.base import Condition
from trainer.api.conditions import COND_MISCONFIGURED, JOB_COMPLETE, is_true
from trainer.api.kinds import JOBS, MPIJOBS, PODS
from trainer.api.kubeflow_v2beta1 import COND_FAILED, COND_RUNNING, MPIJob
from trainer.api.labels import OPERATOR_NAME, OPERATOR_NAME_LABEL
from trainer.framework.controller import Key, Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import controller_of, controller_uid, key_of
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs.child_writer import HASH_ANNOTATION, Desired, Once
from trainer.jobs.conditions import JOB_TERMINAL, MPIJOB_TERMINAL, finished, kept_conditions
from trainer.jobs.reconcile import Blocked
from trainer.mpijob.children import build_mpijob_children, names
from trainer.mpijob.status import desired_conditions, replica_statuses

UPSTREAM_SSH_KEYS = ("ssh-privatekey", "ssh-publickey")
"""The keys of the SSH Secret mpi-operator makes (``newSSHAuthSecret``: ``corev1.SSHAuthPrivateKey`` and
``sshPublicKey``)."""
REASON_EVICTED = "MPIJobEvicted"
"""mpi-operator's reason of ``Failed`` when a worker Pod was evicted (``mpiJobEvict``)."""
POD_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences", "deletionTimestamp")
"""The metadata fields the MPIJob controller's Pod cache keeps."""


def kept_pod(obj: JSON) -> JSON:
    """What the MPIJob controller's cache keeps of a Pod: :data:`POD_METADATA` and ``status.phase`` and
    ``status.reason``; not its spec."""
    m = meta(obj).data  # managedFields are not among the fields kept
    status = obj.get("status") or {}
    out: JSON = {"metadata": {k: m[k] for k in POD_METADATA if k in m}}
    for k in ("apiVersion", "kind"):
        if k in obj:
            out[k] = obj[k]
    kept = {k: status[k] for k in ("phase", "reason") if k in status}
    if kept:
        out["status"] = kept
    return out


def mpijob_of_pod(obj: JSON, _reader: Reader) -> Iterable[Key]:
    """The MPIJob that controls the Pod ``obj`` (a worker Pod mpi-operator made), if one does."""
    ref = controller_of(obj)
    if ref is not None and ref.get("kind") == MPIJOBS.kind and ref.get("apiVersion") == MPIJOBS.api_version:
        yield key_of(obj)[0], str(ref.get("name", ""))


WATCHES = Watches(PODS, mpijob_of_pod, keep=kept_pod, label=f"{OPERATOR_NAME_LABEL}={OPERATOR_NAME}")
PERMISSIONS = (
    Permission(
        PODS,
        ("delete",),
        "the worker Pods of MPIJobs mpi-operator started: deleted when such an MPIJob is suspended and as its "
        "cleanPodPolicy says once it finished",
    ),
)
"""The MPIJob controller's Pod informer: the Pods labelled as mpi-operator labels them (its own and this
operator's), each controlled by an MPIJob mapped to it."""


def upstream_launcher(reader: Reader, job: MPIJob) -> JSON | None:
    """The launcher Job ``<job>-launcher`` mpi-operator made (controlled by ``job``, without the desired-hash
    annotation), as the Job cache lists it, or None."""
    launcher = reader.get(JOBS, str(job.metadata.namespace), names(job)["launcher"])
    if launcher is None or controller_uid(launcher) != str(job.metadata.uid):
        return None
    return None if HASH_ANNOTATION in meta(launcher).annotations else launcher


def upstream_workers(reader: Reader, uid: str) -> list[JSON]:
    """The worker Pods mpi-operator made of the MPIJob with ``uid`` (only mpi-operator makes Pods an MPIJob
    controls), as the Pod cache of :data:`WATCHES` lists them."""
    return reader.owned(PODS, uid)


def handover(reader: Reader, obj: JSON, job: MPIJob) -> Blocked | None:
    """None when mpi-operator did not start the MPIJob ``obj`` (parsed as ``job``): this operator runs it.
    Else what to do while it did (see the module docstring): ask once for a launcher Job the cache does
    not list; leave a finished MPIJob be but for ``cleanPodPolicy``; wait for a launcher Job being
    deleted; delete the launcher Job (in the foreground) and the worker Pods of a suspended one; for a
    running one, its status as its launcher Job and worker Pods say."""
    uid = str(job.metadata.uid)
    workers = upstream_workers(reader, uid)
    launcher = upstream_launcher(reader, job)
    if finished(obj, MPIJOB_TERMINAL) is not None:
        if launcher is None and not workers and reader.owned(JOBS, uid):
            return None  # this operator's
        if launcher is None and not workers and _invalid(obj):
            return None  # refused by this operator: its ttlSecondsAfterFinished holds
        return Blocked(None, Desired(delete=[(PODS, *key_of(p)) for p in cleaned(job, workers)]))
    if launcher is None:
        if reader.owned(JOBS, uid) or not (workers or _ran(obj)):
            return None
        probe = _probe(obj, job)
        return Blocked(None, Desired(once=[probe])) if probe is not None else None
    if meta(launcher).deletion:
        return Blocked(None)  # its deletion (its Pods gone first) brings the next reconcile
    if job.spec.run_policy is not None and job.spec.run_policy.suspend:
        ident = (JOBS, *key_of(launcher))
        pods = [(PODS, *key_of(p)) for p in workers if not meta(p).deletion]
        return Blocked(None, Desired(delete=pods, delete_foreground=[ident]))
    return running(obj, job, launcher, workers)


def running(obj: JSON, job: MPIJob, launcher: JSON, workers: list[JSON]) -> Blocked:
    """The status of the MPIJob ``obj`` running under mpi-operator's ``launcher`` Job and ``workers``
    Pods: its conditions (:func:`~trainer.mpijob.status.desired_conditions`, or ``Failed``/
    ``MPIJobEvicted`` once a worker Pod was evicted), ``replicaStatuses`` and, when the launcher
    succeeded, the launcher's ``completionTime``."""
    current = kept_conditions(obj, "")
    counts = worker_counts(workers)
    worker = {"status": counts}
    conditions = desired_conditions(job, launcher, worker, current, [])
    evicted = [p for p in workers if _phase(p) == "Failed" and (p.get("status") or {}).get("reason") == "Evicted"]
    if evicted and finished(conditions, MPIJOB_TERMINAL) is None:
        message = f"{len(evicted)}/{len(workers)} workers are evicted"
        conditions = [c for c in conditions if c.type != COND_RUNNING]
        stopped = next((c for c in current if c.type == COND_RUNNING), None)
        conditions.append(Condition(type=COND_FAILED, status="True", reason=REASON_EVICTED, message=message))
        if stopped is not None:
            conditions.append(stopped.model_copy(update={"status": "False"}))
    replicas = {k: v.to_dict() for k, v in replica_statuses(job, launcher, worker).items()}
    status: JSON = {"replicaStatuses": replicas}
    done = (launcher.get("status") or {}).get("completionTime")
    succeeded = finished(launcher, JOB_TERMINAL) == JOB_COMPLETE
    if succeeded and done and not (obj.get("status") or {}).get("completionTime"):
        status["completionTime"] = done
    return Blocked(conditions, status=status)


def worker_counts(workers: list[JSON]) -> JSON:
    """The worker Pods counted as a worker Job's status counts its Pods: ``active`` and ``ready``, those
    running (mpi-operator counts a running worker as ready), ``succeeded``, ``failed``."""
    phases = [_phase(p) for p in workers if not meta(p).deletion]
    running_now = phases.count("Running")
    return {
        "active": running_now,
        "ready": running_now,
        "succeeded": phases.count("Succeeded"),
        "failed": phases.count("Failed"),
    }


def cleaned(job: MPIJob, workers: list[JSON]) -> list[JSON]:
    """The worker Pods ``runPolicy.cleanPodPolicy`` deletes once the MPIJob finished, as mpi-operator's
    ``deleteWorkerPods``: ``All``, every one; ``Running``, those running or pending; ``None`` (its
    default), none. Pods being deleted are left out."""
    policy = (job.spec.run_policy.clean_pod_policy if job.spec.run_policy else None) or "None"
    live = [p for p in workers if not meta(p).deletion]
    if policy == "All":
        return live
    if policy == "Running":
        return [p for p in live if _phase(p) in ("Running", "Pending")]
    return []


def _probe(obj: JSON, job: MPIJob) -> Once | None:
    """The launcher Job asked for once (see the module docstring): this operator's, suspended; None
    when the spec has no launcher to build."""
    launcher = build_mpijob_children(obj, job, {"launcher": {}}, True).launcher_job
    if launcher is None:
        return None
    ns, name = key_of(launcher)
    return Once(JOBS, ns, name, partial(dict, launcher))


def _ran(obj: JSON) -> bool:
    """Whether someone wrote the MPIJob's status (conditions) and this operator refused none of its
    children (``Misconfigured``: then it made none, and they are not asked for)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return bool(conditions) and not is_true(obj, COND_MISCONFIGURED)


def _invalid(obj: JSON) -> bool:
    """Whether the MPIJob failed as this operator fails a spec it cannot run (reason ``InvalidSpec``)."""
    return any(
        c.get("type") == COND_FAILED and c.get("reason") == "InvalidSpec"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _phase(pod: JSON) -> str:
    return str((pod.get("status") or {}).get("phase") or "")

"""TrainJobs Kubeflow Trainer started: the JobSet it made of each, finished under JobSet or handed over.

A cluster switched from Kubeflow Trainer v2 keeps the JobSet upstream made of each TrainJob: named as the
TrainJob, in its namespace, with a controller owner reference to it (kubeflow/trainer
``pkg/runtime/framework/plugins/jobset/jobset.go``). Its Jobs carry the names this operator gives its own
(``<trainjob>-<replicatedJob>-<index>``). While a TrainJob controls such a JobSet, this operator makes no
child of it, so no TrainJob ever runs two sets of pods (:func:`handover`):

- **running** (neither suspended nor finished): it finishes under JobSet, whose controller must keep
  running. The TrainJob's status follows the JobSet's as upstream's ``JobSet.Status`` writes it:
  ``Complete`` and ``Failed`` are the JobSet's ``Completed`` and ``Failed`` conditions, renamed (reason
  and message kept); ``jobsStatus`` is its ``replicatedJobsStatus``. ``activeDeadlineSeconds`` holds as
  upstream's ``reconcileDeadline``: once past, the TrainJob fails with ``DeadlineExceeded`` and the JobSet
  is deleted.
- **suspended** (by its user or a queue), or its JobSet still suspended (resumed, but upstream stopped
  before it resumed the JobSet): the JobSet is deleted in the foreground (its Jobs and their pods
  first). Once it is gone the TrainJob is this operator's like any other, and runs under it when
  resumed. Upstream's runtime snapshot, if it made one, is kept and read (YAML,
  :func:`~trainer.trainjob.features.snapshot.runtime_of_snapshot`).
- **finished**: nothing is touched, the JobSet included (its own TTL, if any, collects it).

The JobSets are read from an informer (:data:`FEATURE`'s watch) that keeps only what this needs
(:func:`kept_jobset`); with no JobSet CRD in the cluster it is empty and nothing here applies: the
informer is optional, so that is said once at info, discovery is asked every 30 s whether JobSets are
served, and they are listed only once they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from trainer.api.base import Condition
from trainer.api.kinds import JOBSETS, TRAINJOBS
from trainer.api.trainer_v1alpha1 import COND_COMPLETE, COND_FAILED, TrainJob
from trainer.framework.controller import Key, Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.projection import strip_managed_fields
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs.child_writer import Desired
from trainer.jobs.conditions import TRAINJOB_TERMINAL, finished, kept_conditions
from trainer.jobs.reconcile import Blocked
from trainer.trainjob.features.base import Feature
from trainer.trainjob.spec.run_policy import deadline_left
from trainer.trainjob.status import deadline_exceeded

JOBSET_CONDITIONS = {"Completed": COND_COMPLETE, "Failed": COND_FAILED}
"""A JobSet's terminal condition types (kubernetes-sigs/jobset ``api/jobset/v1alpha2``) and the TrainJob
condition each becomes."""
JOB_STATUS_COUNTS = ("ready", "succeeded", "failed", "active", "suspended")
"""The counts of a JobSet's ``replicatedJobsStatus`` entry a TrainJob's ``jobsStatus`` entry carries."""


def kept_jobset(obj: JSON) -> JSON:
    """What the TrainJob controller's cache keeps of a JobSet: its metadata (no managedFields),
    ``spec.suspend`` and its status; not its replicated Job templates."""
    out = strip_managed_fields(obj)
    spec = out.get("spec")
    return {**out, "spec": {"suspend": spec.get("suspend")} if isinstance(spec, dict) else {}}


def trainjob_of_jobset(obj: JSON, _reader: Reader) -> Iterable[Key]:
    """The TrainJob that controls the JobSet ``obj``, if one does."""
    for ref in meta(obj).owner_references:
        group = str(ref.get("apiVersion", "")).split("/")[0]
        if ref.get("controller") and ref.get("kind") == TRAINJOBS.kind and group == TRAINJOBS.group:
            yield str(meta(obj).namespace or ""), str(ref.get("name", ""))


PERMISSIONS = (
    Permission(
        JOBSETS,
        ("delete",),
        "the JobSets Kubeflow Trainer made of TrainJobs: a suspended one's is deleted, and one past its "
        "TrainJob's deadline",
    ),
)


def handover(reader: Reader, obj: JSON, job: TrainJob, now: datetime) -> Blocked | None:
    """None when the TrainJob ``obj`` (parsed as ``job``) controls no JobSet: this operator runs it. Else
    what to do while it does (see the module docstring): wait for a JobSet being deleted; leave a finished
    TrainJob untouched; delete the JobSet of a suspended one (or a suspended JobSet) in the foreground;
    for a running one,
    its status as the JobSet's (or ``DeadlineExceeded`` and the JobSet's deletion past
    ``activeDeadlineSeconds``), looked at again when its deadline falls."""
    jobsets = reader.owned(JOBSETS, str(job.metadata.uid))
    if not jobsets:
        return None
    jobset = jobsets[0]
    ident = (JOBSETS, str(job.metadata.namespace), str(meta(jobset).name))
    if finished(obj, TRAINJOB_TERMINAL) is not None or meta(jobset).deletion:
        return Blocked(None)  # a JobSet's deletion brings the next reconcile
    if job.spec.suspend or (jobset.get("spec") or {}).get("suspend"):
        # No pods to keep (or about to have none): its Jobs go with their pods first.
        return Blocked(None, Desired(delete_foreground=[ident]))
    left = deadline_left(job, False, now)
    if left is not None and left <= 0:
        failed = deadline_exceeded(int(job.spec.active_deadline_seconds or 0))
        return Blocked([*kept_conditions(obj, COND_FAILED), failed], Desired(delete=[ident]))
    return Blocked(jobset_conditions(obj, jobset), status=jobset_status(jobset), requeue_after=left)


def jobset_conditions(obj: JSON, jobset: JSON) -> list[Condition]:
    """The TrainJob ``obj``'s conditions with the JobSet's ``Completed`` and ``Failed`` ones that are True,
    renamed ``Complete`` and ``Failed``, as upstream's ``JobSet.Status`` sets them."""
    out = kept_conditions(obj, "")
    for cond in (jobset.get("status") or {}).get("conditions") or []:
        renamed = JOBSET_CONDITIONS.get(str(cond.get("type")))
        if renamed is None or cond.get("status") != "True":
            continue
        out = [c for c in out if c.type != renamed]
        reason, message = str(cond.get("reason", "")), str(cond.get("message", ""))
        out.append(Condition(type=renamed, status="True", reason=reason, message=message))
    return out


def jobset_status(jobset: JSON) -> JSON:
    """``{"jobsStatus": [...]}``: the JobSet's ``replicatedJobsStatus``, one entry per replicated job with
    its name and counts (0 when unset), as upstream's ``JobSet.Status`` copies them; None when it has none."""
    entries = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    statuses = [{"name": e.get("name"), **{k: int(e.get(k) or 0) for k in JOB_STATUS_COUNTS}} for e in entries]
    return {"jobsStatus": statuses or None}


FEATURE = Feature(
    name="upstream_jobset",
    watches=(Watches(JOBSETS, trainjob_of_jobset, keep=kept_jobset, optional=True),),
    take_over=handover,
)
"""The TrainJob controller's JobSet informer, each JobSet mapped to the TrainJob that controls it, and the
hand-over (:func:`handover`)."""

"""Dispatch to other clusters with Kueue's MultiKueue: marking a job for it, and reading its Workload.

A job submitted to a MultiKueue manager cluster carries ``managedBy: kueue.x-k8s.io/multikueue``
(TrainJob ``spec.managedBy``, MPIJob ``spec.runPolicy.managedBy``), its LocalQueue in the label
``kueue.x-k8s.io/queue-name``, and starts suspended. Kueue makes a Workload for it, copies the job
to the worker cluster that admits that Workload first, and copies the worker's status back; the
Workload's ``status.clusterName`` names that worker.

Follows kubernetes-sigs/kueue v0.19.2: ``apis/kueue/v1beta2/multikueue_types.go``
(``MultiKueueControllerName``), ``apis/kueue/v1beta2/workload_types.go`` (Workload status:
``clusterName``, ``nominatedClusterNames``, ``admission``, ``admissionChecks``, conditions),
``pkg/controller/constants/constants.go`` (``JobUIDLabel``), and the adapters
``pkg/controller/jobs/trainjob/trainjob_multikueue_adapter.go`` and
``pkg/controller/jobs/mpijob/mpijob_multikueue_adapter.go`` (which field holds ``managedBy``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from pydantic import Field

from trainer.api.base import Model
from trainer.api.conditions import is_true
from trainer.api.kinds import MPIJOBS, TRAINJOBS
from trainer.api.labels import KUEUE_QUEUE_LABEL
from trainer.api.trainer_v1alpha1 import MANAGED_BY_MULTIKUEUE
from trainer.client.errors import ManifestError
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""Label Kueue puts on a job's Workload: the job's uid."""
QUOTA_RESERVED, ADMITTED, FINISHED, EVICTED = "QuotaReserved", "Admitted", "Finished", "Evicted"
"""Workload condition types."""


def _managed_by_path(kind: str) -> tuple[str, ...]:
    if kind == TRAINJOBS.kind:
        return ("spec",)
    if kind == MPIJOBS.kind:
        return ("spec", "runPolicy")
    raise ManifestError(
        f"{kind or 'an object without kind'} cannot be dispatched by MultiKueue here: only TrainJob, MPIJob"
    )


def for_multicluster(obj: JSON, queue: str | None = None) -> JSON:
    """A copy of the TrainJob or MPIJob manifest ``obj`` (wire form, camelCase) marked for MultiKueue.

    Sets ``managedBy`` to ``kueue.x-k8s.io/multikueue`` (``spec`` of a TrainJob, ``spec.runPolicy``
    of an MPIJob), the label ``kueue.x-k8s.io/queue-name`` to ``queue`` (default: the label the
    manifest has) and ``suspend: true`` beside ``managedBy``, so that nothing runs before Kueue
    admits it. Raises :class:`ManifestError` for another kind, when there is no queue, or when the
    manifest names another ``managedBy``.
    """
    out = copy.deepcopy(obj)
    path = _managed_by_path(str(out.get("kind") or ""))
    meta = out.setdefault("metadata", {})
    name = meta.get("name") or "<unnamed>"
    labels = meta.setdefault("labels", {})
    chosen = queue or labels.get(KUEUE_QUEUE_LABEL)
    if not chosen:
        raise ManifestError(
            f"{out['kind']} {name}: multi-cluster dispatch needs a Kueue LocalQueue: give a queue "
            f"(--queue) or the label {KUEUE_QUEUE_LABEL}"
        )
    labels[KUEUE_QUEUE_LABEL] = chosen
    holder = out
    for key in path:
        holder = holder.setdefault(key, {})
    current = holder.get("managedBy")
    if current not in (None, "", MANAGED_BY_MULTIKUEUE):
        where = ".".join((*path, "managedBy"))
        raise ManifestError(f"{out['kind']} {name}: {where} is {current!r}; MultiKueue needs {MANAGED_BY_MULTIKUEUE}")
    holder["managedBy"] = MANAGED_BY_MULTIKUEUE
    holder["suspend"] = True
    return out


def owned_workload(workloads: Iterable[JSON], uid: str) -> JSON | None:
    """The Workload among ``workloads`` that the job of ``uid`` owns (the newest if several), or None."""
    owned = [w for w in workloads if any(o.get("uid") == uid for o in meta(w).owner_references)]
    return max(owned, key=lambda w: str(meta(w).creation_timestamp or ""), default=None)


class CheckState(Model):
    """One AdmissionCheck's state on a Workload (``status.admissionChecks[]``)."""

    name: str
    """The AdmissionCheck, e.g. ``multikueue``."""
    state: str = ""
    """``Pending``, ``Ready``, ``Retry`` or ``Rejected``."""
    message: str = ""
    """Why, as the check's controller wrote it (MultiKueue names the reserving worker or the refusal)."""


class WorkloadCondition(Model):
    """One condition of a Workload (``QuotaReserved``, ``Admitted``, ``Evicted``, ``Finished``...)."""

    type: str
    status: str = ""
    reason: str = ""
    message: str = ""


class WorkloadInfo(Model):
    """What the client shows of a job's Kueue Workload (``kueue.x-k8s.io/v1beta2``)."""

    name: str
    """The Workload's name."""
    queue: str | None = None
    """``spec.queueName``: the LocalQueue."""
    cluster_queue: str | None = None
    """``status.admission.clusterQueue`` once quota is reserved."""
    cluster_name: str | None = None
    """``status.clusterName``: the MultiKueue worker cluster the job runs on (None: not dispatched)."""
    nominated_cluster_names: list[str] = Field(default_factory=list)
    """``status.nominatedClusterNames``: workers the Workload is offered to, before one reserves it."""
    admitted: bool = False
    """Condition ``Admitted`` is True."""
    conditions: list[WorkloadCondition] = Field(default_factory=list)
    """``status.conditions``."""
    admission_checks: list[CheckState] = Field(default_factory=list)
    """``status.admissionChecks``."""

    @classmethod
    def from_dict(cls, obj: JSON) -> WorkloadInfo:
        """Read a Workload object (unknown fields ignored)."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        conditions = [
            WorkloadCondition(
                type=str(c.get("type") or ""),
                status=str(c.get("status") or ""),
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
            )
            for c in status.get("conditions") or []
        ]
        checks = [
            CheckState(
                name=str(c.get("name") or ""), state=str(c.get("state") or ""), message=str(c.get("message") or "")
            )
            for c in status.get("admissionChecks") or []
        ]
        return cls(
            name=str(meta(obj).name or ""),
            queue=spec.get("queueName"),
            cluster_queue=(status.get("admission") or {}).get("clusterQueue"),
            cluster_name=status.get("clusterName"),
            nominated_cluster_names=list(status.get("nominatedClusterNames") or []),
            admitted=is_true(conditions, ADMITTED),
            conditions=conditions,
            admission_checks=checks,
        )

    def where(self) -> str:
        """One phrase for where the job runs: the worker cluster, the workers it is offered to, or
        the state of the Workload on this cluster."""
        if self.cluster_name:
            return self.cluster_name
        if self.nominated_cluster_names:
            return f"<pending on {', '.join(self.nominated_cluster_names)}>"
        rejected = [c for c in self.admission_checks if c.state == "Rejected"]
        if rejected:
            return f"<rejected by {', '.join(c.name for c in rejected)}>"
        return "<this cluster>" if self.admitted and not self.admission_checks else "<not dispatched>"

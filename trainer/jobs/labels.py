"""Label and annotation keys the children carry, and the owner reference helper.

The JobSet keys (kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``) are kept because
tools, Kueue and the kubeflow SDK select pods on them although no JobSet object exists.
"""

from __future__ import annotations

from typing import Any

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"
"""How many times the Job of this index was recreated alone (JobSet ``pkg/constants``), on the Jobs and
Pods of a runtime with a ``RestartJob`` or ``RestartJobAndIgnoreMaxRestarts`` rule."""
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
GROUP_NAME = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
COORDINATOR = "jobset.sigs.k8s.io/coordinator"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
"""Annotation: the node label key of the domains that take one Job each (JobSet ``ExclusiveKey``)."""
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
"""Annotation beside ``EXCLUSIVE_TOPOLOGY``: place by node labels, not pod affinities (``NodeSelectorStrategyKey``)."""
NAMESPACED_JOB = "alpha.jobset.sigs.k8s.io/namespaced-job"
"""Node label the node-selector strategy selects: ``<namespace>_<job name>`` (``NamespacedJobKey``)."""
NO_SCHEDULE_TAINT = "alpha.jobset.sigs.k8s.io/no-schedule"
"""Taint the node-selector strategy's pods tolerate (``NoScheduleTaintKey``)."""


def owner_reference(obj: dict[str, Any] | Any) -> dict[str, Any]:
    """The controller owner reference pointing at ``obj`` (a dict or an ``api`` model).

    Shape: ``{apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true}``.
    Raises ``ValueError`` when the object has no uid yet (it was never stored).
    """
    data = obj if isinstance(obj, dict) else obj.to_dict()
    meta = data.get("metadata") or {}
    if not meta.get("uid"):
        raise ValueError(f"{data.get('kind')} {meta.get('name')!r} has no uid; owner references need one")
    return {
        "apiVersion": data["apiVersion"],
        "kind": data["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_config_map(
    owner: dict[str, Any], name: str, data: dict[str, str], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """The ConfigMap ``name`` in ``owner``'s namespace holding ``data``, with ``labels`` (none when
    None) and a controller owner reference to ``owner`` (JSON with metadata name, namespace and uid), so
    it goes with it. Raises ``ValueError`` (:func:`owner_reference`) when ``owner`` has no uid."""
    meta: dict[str, Any] = {"name": name, "namespace": owner["metadata"]["namespace"]}
    if labels is not None:
        meta["labels"] = labels
    meta["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}

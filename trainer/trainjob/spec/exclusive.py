"""JobSet's exclusive placement: one Job per topology domain.

A runtime asks for it with the annotation ``alpha.jobset.sigs.k8s.io/exclusive-topology: <node label
key>`` on its template (``template.metadata.annotations``, or the TrainJob's ``spec.annotations``: the
JobSet's) for every Job, or on a replicated job's Job template (``template.metadata.annotations``) for
that replicated job's Jobs; the replicated job's wins (kubernetes-sigs/jobset
``api/jobset/v1alpha2/jobset_types.go`` ``ExclusiveKey``, ``pkg/controllers/jobset_controller.go``
``labelAndAnnotateObject``). With ``alpha.jobset.sigs.k8s.io/node-selector`` beside it (same level), the
pods instead select the nodes labelled ``alpha.jobset.sigs.k8s.io/namespaced-job: <namespace>_<job>``
and tolerate the taint ``alpha.jobset.sigs.k8s.io/no-schedule`` (``constructJob``,
``addNamespacedJobNodeSelector``, ``addTaintToleration``): the nodes are labelled and tainted beforehand.

Otherwise JobSet's pod webhook (``pkg/webhooks/pod_webhook.go``, ``setExclusiveAffinities``) gives the pods
a required pod affinity to their own Job (``jobset.sigs.k8s.io/job-key`` In the Job's key) and a required
pod anti-affinity to every other Job's pods (``job-key`` Exists and NotIn the Job's key), both with
``topologyKey`` the annotation's value and an empty ``namespaceSelector`` (all namespaces). Having no pod
webhook, we put these terms on the Job's pod template, so every pod of the Job carries them; the
scheduler lets the first pod of a Job start a domain (it matches its own affinity term) and keeps the
rest with it. JobSet's webhook also scopes the anti-affinity to the pod's priority (label
``jobset.sigs.k8s.io/priority``, known only once the pod is admitted); here exclusivity holds across
priorities.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.api import labels as L
from trainer.framework.json_codec import JSON


@dataclass(frozen=True)
class Exclusive:
    """What one Job's exclusive placement is."""

    topology: str
    """The node label key whose values are the domains (the annotation's value)."""
    node_selector: str | None
    """The ``node-selector`` annotation's value (JobSet reads it as a flag), None: pod affinities."""


def exclusive_of(jobset_annotations: dict[str, str], job_annotations: dict[str, str]) -> Exclusive | None:
    """The exclusive placement of a replicated job's Jobs, or None: ``job_annotations`` (its Job
    template's) if they name a topology, else ``jobset_annotations`` (the runtime template's with the
    TrainJob's ``spec.annotations``); the ``node-selector`` flag is read at the same level."""
    for level in (job_annotations, jobset_annotations):
        if L.EXCLUSIVE_TOPOLOGY in level:
            return Exclusive(str(level[L.EXCLUSIVE_TOPOLOGY]), level.get(L.NODE_SELECTOR_STRATEGY))
    return None


def exclusive_annotations(exclusive: Exclusive | None) -> dict[str, str]:
    """The annotations JobSet puts on the Job and its pods for ``exclusive`` (none when None)."""
    if exclusive is None:
        return {}
    out = {L.EXCLUSIVE_TOPOLOGY: exclusive.topology}
    if exclusive.node_selector is not None:
        out[L.NODE_SELECTOR_STRATEGY] = exclusive.node_selector
    return out


def namespaced_job(namespace: str, job_name: str) -> str:
    """The node label value of the node-selector strategy: ``<namespace>_<job name>``
    (JobSet ``namespacedJobName``; ``/`` is not allowed in a label value)."""
    return f"{namespace}_{job_name}"


def _term(topology: str, expressions: list[JSON]) -> JSON:
    return {"labelSelector": {"matchExpressions": expressions}, "topologyKey": topology, "namespaceSelector": {}}


def place_exclusively(pod_spec: JSON, exclusive: Exclusive, namespace: str, job_name: str, key: str) -> None:
    """Add to ``pod_spec`` (a pod template's ``spec``, changed in place) what keeps the pods of Job
    ``job_name`` (job key ``key``) alone in one domain of ``exclusive.topology``: with the node-selector
    strategy, ``nodeSelector`` ``alpha.jobset.sigs.k8s.io/namespaced-job: <namespace>_<job>`` and a
    toleration ``{key: alpha.jobset.sigs.k8s.io/no-schedule, operator: Exists, effect: NoSchedule}``;
    otherwise ``affinity.podAffinity`` and ``affinity.podAntiAffinity``
    ``requiredDuringSchedulingIgnoredDuringExecution`` terms appended to any the template has."""
    if exclusive.node_selector is not None:
        pod_spec["nodeSelector"] = {
            **(pod_spec.get("nodeSelector") or {}),
            L.NAMESPACED_JOB: namespaced_job(namespace, job_name),
        }
        toleration = {"key": L.NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), toleration]
        return
    together = _term(exclusive.topology, [{"key": L.JOB_KEY, "operator": "In", "values": [key]}])
    apart = _term(
        exclusive.topology,
        [{"key": L.JOB_KEY, "operator": "Exists"}, {"key": L.JOB_KEY, "operator": "NotIn", "values": [key]}],
    )
    affinity = pod_spec.setdefault("affinity", {})
    for kind, term in (("podAffinity", together), ("podAntiAffinity", apart)):
        section = affinity.setdefault(kind, {})
        required = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        section["requiredDuringSchedulingIgnoredDuringExecution"] = [*required, term]

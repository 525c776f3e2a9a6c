"""A TrainJob's NetworkPolicy under ``--trainjob-network-policy``: its pods take connections only from
pods of the same TrainJob (rendezvous, collectives, MPI's SSH), in multi-tenant clusters.

Follows kubeflow/trainer#4020 (draft, part of #3120; the ingress half of #2341): one ``networking.k8s.io/v1``
NetworkPolicy per TrainJob, named like it and controlled by it, selecting its pods by the label
``trainer.kubeflow.org/trainjob-name`` (which the pods are given while the switch is on, :func:`labelled`)
and allowing ingress only from pods with the same label in the same namespace. It restricts ingress only:
egress (DNS, the status server trainer pods report to, the apiserver, storage) is not restricted, and
nothing but the job's own pods connects to them (the operator does not). Kubelet probes come from the
node, which the common plugins allow. Enforced only by a network plugin that implements NetworkPolicy.
"""

from __future__ import annotations

from trainer.api.kinds import NETWORK_POLICIES
from trainer.api.labels import JOBSET_NAME, TRAINJOB_NAME
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.owner import owner_reference
from trainer.jobs.child_writer import Desired
from trainer.trainjob.features.base import Feature, Step, keep_only


def network_policy(job: TrainJob) -> JSON:
    """The TrainJob's NetworkPolicy. Shape: ``{apiVersion: networking.k8s.io/v1, kind, metadata: {name,
    namespace, labels, ownerReferences}, spec: {podSelector, policyTypes: [Ingress], ingress: [{from:
    [{podSelector}]}]}}``, both selectors ``{matchLabels: {trainer.kubeflow.org/trainjob-name: <name>}}``.
    Raises ``ValueError`` when the TrainJob has no uid (never stored)."""
    name = str(job.metadata.name)
    pods = {"matchLabels": {TRAINJOB_NAME: name}}
    return {
        "apiVersion": NETWORK_POLICIES.api_version,
        "kind": NETWORK_POLICIES.kind,
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": {JOBSET_NAME: name},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "podSelector": pods,
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": pods}]}],
        },
    }


def labelled(jobs: list[JSON], name: str) -> list[JSON]:
    """Copies of the Jobs ``jobs`` whose pod templates carry ``trainer.kubeflow.org/trainjob-name: name``
    (only the path that changes is copied)."""
    out = []
    for job in jobs:
        pod = dict(job["spec"]["template"])
        meta = dict(pod.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), TRAINJOB_NAME: name}
        pod["metadata"] = meta
        out.append({**job, "spec": {**job["spec"], "template": pod}})
    return out


def desired(step: Step, out: Desired) -> None:
    """The NetworkPolicy while the TrainJob runs under ``--trainjob-network-policy``; deleted once it
    finished or the switch is off."""
    wanted = network_policy(step.view.info.job) if step.options.network_policy else None
    keep_only(step, out, NETWORK_POLICIES, wanted)


def jobs(step: Step, new: list[JSON], _out: Desired) -> list[JSON]:
    """Under the switch, the Jobs' pods carry the label the NetworkPolicy selects them by."""
    return labelled(new, str(step.view.info.job.metadata.name)) if step.options.network_policy else new


FEATURE = Feature(name="network_policy", owns=(NETWORK_POLICIES,), desired=desired, jobs=jobs)

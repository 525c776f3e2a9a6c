"""A runtime's ``volumeClaimPolicies``: PersistentVolumeClaims shared by a TrainJob's pods.

Mirrors kubernetes-sigs/jobset ``pkg/controllers/volume_claim_policy.go`` (v0.12): each template
becomes claim ``<template>-<trainjob>`` in the TrainJob's namespace, labelled
``jobset.sigs.k8s.io/jobset-name``, created once and never updated; owned by the TrainJob (deleted
with it) unless its policy says ``whenDeleted: Retain``. A Pod template gets volume ``<template>`` for
that claim only when one of its containers or init containers mounts a volume of that name.
"""

from __future__ import annotations

from trainer.api import labels as L
from trainer.api.jobset_v1alpha2 import VolumeClaimPolicy
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.meta import meta
from trainer.framework.owner import owner_reference


def claim_name(template: JSON, trainjob: str) -> str:
    """``<template name>-<trainjob>`` (JobSet ``GeneratePVCName``)."""
    return f"{meta(template).name or ''}-{trainjob}"


def claims(owner: JSON, policies: list[VolumeClaimPolicy]) -> list[JSON]:
    """The PersistentVolumeClaims of ``owner`` (a TrainJob as JSON), in template order."""
    own = owner["metadata"]
    out = []
    for policy in policies:
        retain = policy.retention_policy is not None and policy.retention_policy.when_deleted == "Retain"
        for template in policy.templates or []:
            tmeta = meta(template)
            claim: JSON = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": claim_name(template, own["name"]),
                    "namespace": own["namespace"],
                    "labels": {**tmeta.labels, L.JOBSET_NAME: own["name"]},
                },
                "spec": copy_json(template.get("spec") or {}),
            }
            if tmeta.annotations:
                claim["metadata"]["annotations"] = dict(tmeta.annotations)
            if not retain:
                claim["metadata"]["ownerReferences"] = [owner_reference(owner)]
            out.append(claim)
    return out


def mounted(pod: JSON) -> set[str]:
    """Names of the volumes some container or init container of ``pod`` mounts."""
    spec = pod.get("spec") or {}
    return {
        str(m.get("name"))
        for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        for m in c.get("volumeMounts") or []
    }


def add_claim_volumes(pod: JSON, policies: list[VolumeClaimPolicy], trainjob: str) -> None:
    """Add volume ``<template>`` (claim ``<template>-<trainjob>``) to ``pod`` for every template a
    container mounts, in place (JobSet ``addVolumes``)."""
    used = mounted(pod)
    for policy in policies:
        for template in policy.templates or []:
            name = str(meta(template).name or "")
            if name in used:
                volumes = pod.setdefault("spec", {}).setdefault("volumes", [])
                if not any(v.get("name") == name for v in volumes):
                    volumes.append(
                        {"name": name, "persistentVolumeClaim": {"claimName": claim_name(template, trainjob)}}
                    )

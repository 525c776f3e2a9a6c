"""Apply a TrainJob's overrides to one replicated job's Pod template, in all three upstream forms.

Every form ends in the same merge: ``podSpecOverrides`` (kubeflow/trainer v2.0; written by Kueue
0.14.0-0.14.4) and ``podTemplateOverrides`` (v2.1; Kueue 0.14.5-0.16) are turned into a Pod
template patch, and ``runtimePatches`` (v2.2+; Kueue >= 0.17 and the kubeflow SDK) already carry
one per replicated job. Patches apply in that order, each list in its order; later ones win.
"""

from __future__ import annotations

from typing import Any

from api.trainer_v1alpha1 import PodTemplateSpecOverride, TrainJob
from trainer.builders.merge import JSON, deep_merge, find_named, merge_named_replace


def override_patch(override: PodTemplateSpecOverride) -> JSON:
    """The Pod template patch ``{spec}`` equivalent to one ``podSpecOverride`` (or the spec of a
    ``podTemplateOverride``)."""
    spec: JSON = {}
    if override.service_account_name is not None:
        spec["serviceAccountName"] = override.service_account_name
    if override.node_selector:
        spec["nodeSelector"] = dict(override.node_selector)
    if override.affinity is not None:
        spec["affinity"] = override.affinity
    if override.tolerations:
        spec["tolerations"] = list(override.tolerations)
    if override.volumes:
        spec["volumes"] = list(override.volumes)
    if override.scheduling_gates:
        spec["schedulingGates"] = [g.to_dict() for g in override.scheduling_gates]
    if override.image_pull_secrets:
        spec["imagePullSecrets"] = [s.to_dict() for s in override.image_pull_secrets]
    for field, overrides in (("initContainers", override.init_containers), ("containers", override.containers)):
        if overrides:
            spec[field] = [c.to_dict() for c in overrides]
    return {"spec": spec}


def runtime_patch_for(patch_spec: dict[str, Any] | None, rjob: str) -> JSON | None:
    """The Pod template patch a ``runtimePatches[].trainingRuntimeSpec`` holds for ``rjob``, if any."""
    rjobs = (((patch_spec or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")
    entry = find_named(rjobs, rjob)
    if entry is None:
        return None
    pod = ((entry.get("template") or {}).get("spec") or {}).get("template")
    return pod if isinstance(pod, dict) else None


def patches_for(job: TrainJob, rjob: str) -> list[JSON]:
    """Every Pod template patch of ``job`` that targets the replicated job ``rjob``, in order."""
    out: list[JSON] = []
    for override in job.spec.pod_spec_overrides or []:
        if any(t.name == rjob for t in override.target_jobs):
            out.append(override_patch(override))
    for tmpl in job.spec.pod_template_overrides or []:
        if any(t.name == rjob for t in tmpl.target_jobs):
            tpatch = override_patch(tmpl.spec) if tmpl.spec is not None else {"spec": {}}
            meta = tmpl.metadata or {}
            tpatch["metadata"] = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
            out.append(tpatch)
    for patch in job.spec.runtime_patches or []:
        pod = runtime_patch_for(patch.training_runtime_spec, rjob)
        if pod is not None:
            out.append(pod)
    return out


def apply_pod_patch(template: JSON, patch: JSON) -> JSON:
    """A new Pod template with ``patch`` merged in.

    Container entries merge by name into containers the template already has (a patch never adds
    a container); their ``env`` entries replace same-named variables whole.
    """
    spec_patch = dict(patch.get("spec") or {})
    container_patches = {k: spec_patch.pop(k, None) for k in ("containers", "initContainers")}
    out = deep_merge(template, {"metadata": patch.get("metadata") or {}, "spec": spec_patch})
    spec = out.setdefault("spec", {})
    for field, patches in container_patches.items():
        for cpatch in patches or []:
            container = find_named(spec.get(field), cpatch.get("name", ""))
            if container is None:
                continue
            env = cpatch.get("env")
            rest = {k: v for k, v in cpatch.items() if k != "env"}
            merged = deep_merge(container, rest)
            if env:
                merged["env"] = merge_named_replace(merged.get("env"), env)
            container.clear()
            container.update(merged)
    return out

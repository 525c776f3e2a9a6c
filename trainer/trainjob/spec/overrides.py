"""Apply a TrainJob's overrides to one replicated job's Pod template, in all three upstream forms.

Every form ends in the same merge: ``podSpecOverrides`` (kubeflow/trainer v2.0; written by Kueue
0.14.0-0.14.4) and ``podTemplateOverrides`` (v2.1; Kueue 0.14.5-0.16) are turned into a Pod
template patch, and ``runtimePatches`` (v2.2+; Kueue >= 0.17 and the kubeflow SDK) already carry
one per replicated job. Patches apply in that order, each list in its order; later ones win.

:func:`override_targets` walks every (override entry, targeted replicated job) of the three forms;
the expansion (:func:`patches_for`, :func:`job_metadata`), the reconciler's target check
(:func:`trainer.trainjob.validation.override_target_errors`) and admission
(:mod:`trainer.webhook.rules`) all read the overrides through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from trainer.api.trainer_v1alpha1 import PodTemplateSpecOverride, TrainJob
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.merge import (
    deep_merge,
    find_named,
    merge_named,
    merge_named_replace,
    merge_patch,
    replace_named,
)

POD_SPEC_OVERRIDES = "podSpecOverrides"
POD_TEMPLATE_OVERRIDES = "podTemplateOverrides"
RUNTIME_PATCHES = "runtimePatches"
SECURITY_CONTEXT = "securityContext"
VOLUME_MOUNTS = "volumeMounts"


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


@dataclass(frozen=True)
class OverrideTarget:
    """One replicated job targeted by one override entry: ``spec.<field>[index]`` names ``rjob``."""

    field: str
    """``podSpecOverrides``, ``podTemplateOverrides`` or ``runtimePatches``."""
    index: int
    """The entry's index in its list."""
    rjob: str
    """The targeted replicated job's name."""
    pod_patch: JSON | None
    """The Pod template patch ``{metadata?, spec}`` of the entry, or None (a ``runtimePatches`` entry
    without a Pod template)."""
    job_metadata: JSON | None = None
    """``runtimePatches`` only: the Job template's ``metadata`` patch."""

    @property
    def strategic(self) -> bool:
        """A ``runtimePatches`` entry, a strategic merge patch: its tolerations replace the template's
        instead of adding to them."""
        return self.field == RUNTIME_PATCHES

    @property
    def where(self) -> str:
        """The path of the list that names the target, for messages."""
        if self.field == RUNTIME_PATCHES:
            return f"spec.{self.field}[{self.index}].trainingRuntimeSpec.template.spec.replicatedJobs"
        return f"spec.{self.field}[{self.index}].targetJobs"

    def containers(self, kind: str) -> list[JSON]:
        """The patch's entries of ``kind`` (``containers`` or ``initContainers``), each with a ``name``."""
        items = ((self.pod_patch or {}).get("spec") or {}).get(kind) or []
        return list(items) if isinstance(items, list) else []


def override_targets(job: TrainJob) -> Iterator[OverrideTarget]:
    """Every (override entry, targeted replicated job) of ``job``, in merge order: ``podSpecOverrides``,
    ``podTemplateOverrides``, then ``runtimePatches``, each list in order and each entry's targets in
    order (a name listed twice is yielded twice). Each target gets its own copy of the patch. Follows
    kubeflow/trainer ``pkg/runtime/core/trainingruntime.go`` (the overrides applied per pod set) and
    ``pkg/apis/trainer/v1alpha1/trainjob_types.go`` (the three forms)."""
    for i, override in enumerate(job.spec.pod_spec_overrides or []):
        for t in override.target_jobs:
            yield OverrideTarget(POD_SPEC_OVERRIDES, i, t.name, override_patch(override))
    for i, tmpl in enumerate(job.spec.pod_template_overrides or []):
        meta = tmpl.metadata or {}
        for t in tmpl.target_jobs:
            tpatch = override_patch(tmpl.spec) if tmpl.spec is not None else {"spec": {}}
            tpatch["metadata"] = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
            yield OverrideTarget(POD_TEMPLATE_OVERRIDES, i, t.name, tpatch)
    for i, patch in enumerate(job.spec.runtime_patches or []):
        spec = patch.training_runtime_spec
        template = spec.template if spec is not None else None
        entries = (template.spec.replicated_jobs if template is not None and template.spec is not None else None) or []
        for entry in entries:
            job_template = entry.template.to_dict() if entry.template is not None else {}
            pod = (job_template.get("spec") or {}).get("template")
            yield OverrideTarget(
                RUNTIME_PATCHES, i, entry.name, pod if isinstance(pod, dict) else None, job_template.get("metadata")
            )


def _first_per_entry(job: TrainJob, rjob: str) -> list[OverrideTarget]:
    """The targets of ``rjob``, the first only of an entry that names it more than once."""
    seen: set[tuple[str, int]] = set()
    out = []
    for t in override_targets(job):
        if t.rjob == rjob and (t.field, t.index) not in seen:
            seen.add((t.field, t.index))
            out.append(t)
    return out


def patches_for(job: TrainJob, rjob: str) -> list[tuple[JSON, bool]]:
    """Every Pod template patch of ``job`` that targets the replicated job ``rjob``, in order, each
    with whether it is a ``runtimePatches`` entry (a strategic merge patch: its tolerations replace
    the template's instead of adding to them)."""
    return [(t.pod_patch, t.strategic) for t in _first_per_entry(job, rjob) if t.pod_patch is not None]


def _labels_and_annotations(base: JSON | None, patches: list[JSON | None]) -> JSON:
    out: JSON = {k: dict((base or {}).get(k) or {}) for k in ("labels", "annotations")}
    for patch in patches:
        for k in ("labels", "annotations"):
            out[k].update((patch or {}).get(k) or {})
    return out


def template_metadata(job: TrainJob, base: JSON | None) -> JSON:
    """``{labels, annotations}`` of the runtime template (``base``: its ``metadata``) with every
    ``runtimePatches[].trainingRuntimeSpec.template.metadata`` merged in, in order (kubeflow/trainer
    ``pkg/runtime/core/trainingruntime.go``); they reach every child Job."""
    patches: list[JSON | None] = []
    for patch in job.spec.runtime_patches or []:
        spec = patch.training_runtime_spec
        if spec is not None and spec.template is not None:
            patches.append(spec.template.metadata)
    return _labels_and_annotations(base, patches)


def job_metadata(job: TrainJob, rjob: str, base: JSON | None) -> JSON:
    """``{labels, annotations}`` of replicated job ``rjob``'s Job template (``base``: its
    ``metadata``) with the ``runtimePatches`` entries for it merged in, in order."""
    patches = [t.job_metadata for t in _first_per_entry(job, rjob) if t.field == RUNTIME_PATCHES]
    return _labels_and_annotations(base, patches)


def apply_pod_patch(template: JSON, patch: JSON, strategic: bool = False) -> JSON:
    """A new Pod template with ``patch`` merged in.

    Every form is a strategic merge patch of the Pod template upstream (kubeflow/trainer
    ``pkg/runtime/core/trainingruntime.go``: ``mergePodSpecOverrides`` v2.0, ``mergePodTemplateOverrides``
    v2.1, ``mergeRuntimePatches`` v2.2+), and merges as one: container entries merge by name into
    containers the template already has (a patch never adds a container); their ``env`` entries replace
    same-named variables whole; their ``volumeMounts`` merge by ``mountPath`` (``corev1.Container``'s
    patch merge key: a mount of a new path is added, one of a path the container mounts already is
    merged into it); ``securityContext``, the Pod's and a container's, merges field by field with its
    lists replaced (:func:`~trainer.framework.merge.merge_patch`); scalars such as
    ``terminationGracePeriodSeconds`` replace the template's. ``strategic`` (a ``runtimePatches`` entry):
    tolerations replace the template's list, as in a strategic merge patch. As a strategic merge patch of
    a Pod does (KEP-2782's ``resourceClaims`` and ``resources``): a ``resourceClaims`` entry replaces the
    one of the same name whole (``retainKeys``), a container's ``resources.claims`` replace its list (no
    merge key), its requests and limits merge key by key.
    """
    spec_patch = dict(patch.get("spec") or {})
    if strategic and spec_patch.get("tolerations") is not None:
        template = {**template, "spec": {**(template.get("spec") or {}), "tolerations": []}}
    container_patches = {k: spec_patch.pop(k, None) for k in ("containers", "initContainers")}
    claim_patches = spec_patch.pop("resourceClaims", None)
    security = spec_patch.pop(SECURITY_CONTEXT, None)
    out = deep_merge(template, {"metadata": patch.get("metadata") or {}, "spec": spec_patch})
    spec = out.setdefault("spec", {})
    for entry in claim_patches or []:
        spec["resourceClaims"] = replace_named(spec.get("resourceClaims"), entry)
    if security is not None:
        spec[SECURITY_CONTEXT] = merge_patch(spec.get(SECURITY_CONTEXT) or {}, security)
    for field, patches in container_patches.items():
        for cpatch in patches or []:
            container = find_named(spec.get(field), cpatch.get("name", ""))
            if container is None:
                continue
            env, mounts, csecurity = (cpatch.get(k) for k in ("env", VOLUME_MOUNTS, SECURITY_CONTEXT))
            rest = {k: v for k, v in cpatch.items() if k not in ("env", VOLUME_MOUNTS, SECURITY_CONTEXT)}
            merged = deep_merge(container, rest)
            if env:
                merged["env"] = merge_named_replace(merged.get("env"), env)
            if mounts:
                merged[VOLUME_MOUNTS] = merge_named(merged.get(VOLUME_MOUNTS), mounts, key="mountPath")
            if csecurity is not None:
                merged[SECURITY_CONTEXT] = merge_patch(merged.get(SECURITY_CONTEXT) or {}, csecurity)
            claims = (cpatch.get("resources") or {}).get("claims")
            if claims is not None:
                merged["resources"]["claims"] = copy_json(claims)
            container.clear()
            container.update(merged)
    return out

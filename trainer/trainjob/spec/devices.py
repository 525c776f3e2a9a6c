"""DRA devices per training node: ``spec.trainer.resourceClaimsPerNode`` and the claims of runtime patches.

Follows kubeflow/trainer KEP-2782 (``proposals/2782-dra-support/README.md``; implementation
kubeflow/trainer#4027, open). Each trainer pod gets the TrainJob's claims in ``spec.resourceClaims`` (by
name, replacing the runtime's or a runtime patch's entry of the same name) with
``resourceClaimTemplateName``, so the kube-controller-manager's resourceclaim controller makes one
ResourceClaim per pod, and its ``node`` container names each in ``resources.claims``. The GPUs of a
training node, when no extended resource (``nvidia.com/gpu``) says them, are those the ``node``
container's first claim asks for (:func:`claimed_gpus`): the ML policies read them as they read extended
GPUs. Where the cluster does not serve ``resource.k8s.io/v1``, a TrainJob that asks for claims is refused
naming the field (:func:`unserved_errors`); a container that names a claim its pod lacks, or a claim
without exactly one source, is refused (:func:`claim_errors`). Pure: the cache of ResourceClaimTemplates
is read through :class:`Devices`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.kinds import RESOURCE_CLAIM_TEMPLATES
from trainer.api.trainer_v1alpha1 import NODE_CONTAINER, TrainerResourceClaim, TrainJob
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.merge import find_named, replace_named
from trainer.framework.resources import gpus_requested
from trainer.trainjob.spec.overrides import RUNTIME_PATCHES, apply_pod_patch, override_targets, patches_for

DRA_API = RESOURCE_CLAIM_TEMPLATES.api_version
"""``resource.k8s.io/v1``: Dynamic Resource Allocation, GA and on by default from Kubernetes v1.34."""


def _no_template(_name: str) -> JSON | None:
    return None


@dataclass(frozen=True)
class Devices:
    """What the cluster tells of DRA for one TrainJob: whether it serves ``resource.k8s.io/v1`` and its
    ResourceClaimTemplates in the TrainJob's namespace, as the operator's cache holds them."""

    served: bool = True
    """False when the cluster does not serve ``resource.k8s.io/v1`` (the cache of ResourceClaimTemplates
    found the resource absent); True otherwise, unknown included."""
    template: Callable[[str], JSON | None] = field(default=_no_template)
    """``template(name)``: the ResourceClaimTemplate of that name in the TrainJob's namespace, or None."""


NO_DEVICES = Devices()
"""A cluster that serves DRA and has no ResourceClaimTemplate (admission without caches, tests)."""


def apply_claims(pod: JSON, claims: list[TrainerResourceClaim] | None) -> None:
    """Put ``claims`` (``spec.trainer.resourceClaimsPerNode``) on ``pod`` (a Pod template, changed in place):
    each replaces the pod's ``spec.resourceClaims`` entry of the same name whole, else is added, as
    ``{name, resourceClaimTemplateName}``; the ``node`` container's ``resources.claims`` gets ``{name}``
    for each (replacing an entry of that name). No-op without claims; the pod-level claims are set even
    when the pod has no ``node`` container."""
    if not claims:
        return
    spec = pod.setdefault("spec", {})
    node = find_named(spec.get("containers"), NODE_CONTAINER)
    for claim in claims:
        entry = {"name": claim.name, "resourceClaimTemplateName": claim.resource_claim_template_name}
        spec["resourceClaims"] = replace_named(spec.get("resourceClaims"), entry)
        if node is not None:
            resources = node.setdefault("resources", {})
            resources["claims"] = replace_named(resources.get("claims"), {"name": claim.name})


def trainer_claims(job: TrainJob, rjob: ReplicatedJob) -> JSON | None:
    """The pod template of the trainer's replicated job ``rjob`` as far as its claims go: the runtime's,
    with the TrainJob's overrides and runtime patches (:func:`~trainer.trainjob.spec.overrides.apply_pod_patch`)
    and then ``resourceClaimsPerNode`` (:func:`apply_claims`), as the expansion builds it; what
    :func:`claimed_gpus` reads before the ML policy's environment exists. None, without building it, when
    neither the runtime, a patch nor the TrainJob gives the pod a claim (the common case)."""
    claims = job.spec.trainer.resource_claims_per_node if job.spec.trainer else None
    template: JSON = (rjob.template.get("spec") or {}).get("template") or {}
    patches = patches_for(job, rjob.name)
    patched = any((patch.get("spec") or {}).get("resourceClaims") for patch, _ in patches)
    if not claims and not patched and not (template.get("spec") or {}).get("resourceClaims"):
        return None
    pod = reduce(lambda p, patch: apply_pod_patch(p, *patch), patches, copy_json(template))
    apply_claims(pod, claims)
    return pod


def claimed_gpus(pod: JSON | None, devices: Devices) -> int:
    """GPUs the ``node`` container of ``pod`` claims through DRA, as KEP-2782 resolves them: its first
    ``resources.claims`` entry, the pod's ``resourceClaims`` entry of that name, and the ResourceClaimTemplate
    it names (:attr:`Devices.template`), whose device requests count as
    :func:`~trainer.framework.resources.gpus_requested` says (only the request the entry names, when it
    names one). 0 when the container claims nothing, the claim names a ResourceClaim (``resourceClaimName``,
    not read here), the template is not in the cache or there is no pod (None)."""
    spec = (pod or {}).get("spec") or {}
    node = find_named(spec.get("containers"), NODE_CONTAINER)
    first = next(iter(((node or {}).get("resources") or {}).get("claims") or []), None)
    source = find_named(spec.get("resourceClaims"), str((first or {}).get("name") or "")) if first else None
    name = (source or {}).get("resourceClaimTemplateName")
    template = devices.template(str(name)) if name else None
    requests = ((((template or {}).get("spec") or {}).get("spec") or {}).get("devices") or {}).get("requests")
    if first is not None and first.get("request") and isinstance(requests, list):
        requests = [r for r in requests if isinstance(r, dict) and r.get("name") == first["request"]]
    return gpus_requested(requests)


def claims_of(pod: JSON) -> list[str]:
    """Names of the DRA claims of ``pod`` (``spec.resourceClaims``), in order."""
    return [str(c.get("name")) for c in (pod.get("spec") or {}).get("resourceClaims") or [] if isinstance(c, dict)]


def claim_errors(pod_spec: JSON, where: str) -> list[str]:
    """Why the DRA claims of ``pod_spec`` (a Pod spec, at path ``where``) would have the apiserver refuse
    every pod of it: a ``resourceClaims`` entry that sets not exactly one of ``resourceClaimName`` and
    ``resourceClaimTemplateName``, a container that names in ``resources.claims`` a claim the pod's
    ``resourceClaims`` lack (KEP-2782 Validation)."""
    have = [str(c.get("name")) for c in pod_spec.get("resourceClaims") or [] if isinstance(c, dict)]
    errors = [
        f"{where}.resourceClaims[{c.get('name')}]: set exactly one of resourceClaimName and resourceClaimTemplateName"
        for c in pod_spec.get("resourceClaims") or []
        if isinstance(c, dict) and bool(c.get("resourceClaimName")) == bool(c.get("resourceClaimTemplateName"))
    ]
    for kind in ("initContainers", "containers"):
        for c in pod_spec.get(kind) or []:
            for claim in ((c.get("resources") or {}).get("claims") or []) if isinstance(c, dict) else []:
                name = str((claim or {}).get("name") or "")
                if name not in have:
                    errors.append(
                        f"{where}.{kind}[{c.get('name')}].resources.claims: claim {name!r} is not in the pod's "
                        f"resourceClaims ({', '.join(have) or 'none'}); add it there "
                        "(spec.trainer.resourceClaimsPerNode for the node container, a runtime patch's "
                        "resourceClaims otherwise) or remove it"
                    )
    return errors


def unserved_errors(job: TrainJob, pods: dict[str, JSON], devices: Devices) -> list[str]:
    """Why ``job`` cannot run where the cluster does not serve ``resource.k8s.io/v1`` (``devices.served``
    False): each field that asks for DRA claims, named, and the pods of the runtime's replicated jobs
    (``pods``: name -> expanded pod template) that carry claims from the runtime itself. Nothing when DRA is
    served (the operator's own rule, ahead of upstream: upstream leaves such pods Pending)."""
    if devices.served:
        return []
    fix = f"this cluster does not serve {DRA_API} (Dynamic Resource Allocation, GA from Kubernetes v1.34)"
    errors = []
    named: set[str] = set()
    if job.spec.trainer is not None and job.spec.trainer.resource_claims_per_node:
        errors.append(
            f"spec.trainer.resourceClaimsPerNode: {fix}; remove it, or run the TrainJob on a cluster with DRA"
        )
        named.update(c.name for c in job.spec.trainer.resource_claims_per_node)
    for t in override_targets(job):
        claims = ((t.pod_patch or {}).get("spec") or {}).get("resourceClaims") if t.field == RUNTIME_PATCHES else None
        if claims:
            errors.append(
                f"spec.runtimePatches[{t.index}].trainingRuntimeSpec.template.spec.replicatedJobs[{t.rjob}]"
                f".template.spec.template.spec.resourceClaims: {fix}; remove them"
            )
            named.update(str(c.get("name")) for c in claims if isinstance(c, dict))
    for rjob, pod in pods.items():
        left = [c for c in claims_of(pod) if c not in named]
        if left:
            errors.append(
                f"spec.runtimeRef: the runtime's replicated job {rjob!r} claims DRA devices ({', '.join(left)}): "
                f"{fix}; use a runtime without resourceClaims"
            )
    return errors


def count_warnings(job: TrainJob, torch: bool, trainer_pod: JSON | None, gpus: int) -> list[str]:
    """KEP-2782's admission warning: the trainer's ``node`` container (in ``trainer_pod``, its expanded pod
    template) claims DRA devices, the node has no GPU count (``gpus``: extended, else claimed, is 0: the
    ResourceClaimTemplate is not there yet, or has no ``exactly`` request named like ``gpu``), the runtime
    is torch (``torch``) and ``spec.trainer.numProcPerNode`` is not set: torchrun would run one process
    per CPU."""
    spec = (trainer_pod or {}).get("spec") or {}
    node = find_named(spec.get("containers"), NODE_CONTAINER)
    claims = [str(c.get("name")) for c in ((node or {}).get("resources") or {}).get("claims") or []]
    set_by_job = job.spec.trainer is not None and job.spec.trainer.num_proc_per_node is not None
    if not torch or not claims or gpus or set_by_job:
        return []
    return [
        f"spec.trainer.numProcPerNode: the node container claims DRA devices ({', '.join(claims)}) but no GPU "
        "count could be read from the first claim's ResourceClaimTemplate (not found, or no exactly request "
        "whose name contains 'gpu'); torch would start one process per CPU: set spec.trainer.numProcPerNode"
    ]

"""The pod template of one replicated job of a TrainJob: the runtime's, with, in this order, the
trainer or initializer settings (:func:`apply_trainer`, :func:`apply_initializer`; the trainer also gets the
ML policy's environment with the rendezvous port, then the status server's injection), the ML policy's mutations,
the TrainJob's overrides in all three upstream forms (:mod:`trainer.trainjob.spec.overrides`), the
trainer's DRA claims (``resourceClaimsPerNode``, :mod:`trainer.trainjob.spec.devices`) and the
``volumeClaimPolicies`` volumes.

Mirrors kubeflow/trainer ``pkg/runtime/core/trainingruntime.go`` (``buildObjects``: each plugin's
``EnforceMLPolicy`` and ``EnforcePodGroupPolicy`` on the pod specs, then the TrainJob's overrides). The
trainer settings land on the container ``node`` of the replicated job labelled
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``; the initializers' ``storageUri`` becomes env
``STORAGE_URI`` (and ``secretRef`` an ``envFrom``) on ``dataset-initializer`` / ``model-initializer``, as
kubeflow/trainer ``pkg/runtime/framework/plugins/jobset`` (v2.0) sets them.
"""

from __future__ import annotations

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.trainer_v1alpha1 import (
    NODE_CONTAINER,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    DatasetInitializer,
    ModelInitializer,
    TrainJob,
)
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.merge import find_named, upsert_env
from trainer.framework.resources import merge_resources
from trainer.trainjob.policies.base import Expansion, Policy, add_rendezvous
from trainer.trainjob.spec.devices import apply_claims
from trainer.trainjob.spec.injection import Injection, inject
from trainer.trainjob.spec.overrides import apply_pod_patch, patches_for
from trainer.trainjob.spec.shape import step_of
from trainer.trainjob.spec.volume_claims import add_claim_volumes


def pod_template(
    x: Expansion,
    policy: Policy,
    rjob: ReplicatedJob,
    is_trainer: bool,
    env: list[JSON],
    injection: Injection | None,
) -> JSON:
    """A new pod template (``{metadata, spec}``) of ``rjob`` (the trainer's when ``is_trainer``) under
    ``policy``, whose environment is ``env``; ``injection``: the status server's, when served.
    The runtime's template is not changed."""
    job = x.job
    pod: JSON = copy_json((rjob.template.get("spec") or {}).get("template") or {})
    step = step_of(rjob)
    if is_trainer:
        apply_trainer(job, pod)
        if env:
            add_rendezvous(pod, NODE_CONTAINER, env)
        inject(job, pod, injection)  # the status server's env and token volume, when served
    elif step in (STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER):
        apply_initializer(job, step, pod)
    policy.mutate_pod(x, rjob, is_trainer, pod, env)
    for patch, strategic in patches_for(job, rjob.name):
        pod = apply_pod_patch(pod, patch, strategic)
    if (is_trainer or policy.training_node(x, rjob)) and job.spec.trainer is not None:
        apply_claims(pod, job.spec.trainer.resource_claims_per_node)  # after the patches: they win (KEP-2782)
    claims = x.runtime.template.spec.volume_claim_policies if x.runtime.template.spec else None
    if claims:
        add_claim_volumes(pod, claims, str(job.metadata.name))
    return pod


def apply_trainer(job: TrainJob, pod: JSON) -> None:
    """Set image, command, args and env of ``spec.trainer`` on the ``node`` container of ``pod`` (a Pod
    template, changed in place) and merge ``resourcesPerNode`` into its resources key by key (v2.3).
    No-op when the template has no such container."""
    trainer = job.spec.trainer
    node = find_named(pod.get("spec", {}).get("containers"), NODE_CONTAINER)
    if trainer is None or node is None:
        return
    if trainer.image is not None:
        node["image"] = trainer.image
    if trainer.command is not None:
        node["command"] = list(trainer.command)
    if trainer.args is not None:
        node["args"] = list(trainer.args)
    if trainer.env:
        upsert_env(node, [e.to_dict() for e in trainer.env])
    if trainer.resources_per_node is not None:
        node["resources"] = merge_resources(node.get("resources"), trainer.resources_per_node)


def apply_initializer(job: TrainJob, step: str, pod: JSON) -> None:
    """Apply the dataset or model initializer settings (``step`` is the ancestor label value) to the
    container of the same name in ``pod``, in place."""
    init = job.spec.initializer
    settings: DatasetInitializer | ModelInitializer | None = None
    if init is not None and step == STEP_DATASET_INITIALIZER:
        settings = init.dataset
    elif init is not None and step == STEP_MODEL_INITIALIZER:
        settings = init.model
    container = find_named(pod.get("spec", {}).get("containers"), step)
    if settings is None or container is None:
        return
    env: list[JSON] = []
    if settings.storage_uri is not None:
        env.append({"name": "STORAGE_URI", "value": settings.storage_uri})
    env.extend(e.to_dict() for e in settings.env or [])
    if env:
        upsert_env(container, env)
    if settings.secret_ref is not None:
        env_from = container.setdefault("envFrom", [])
        ref = {"secretRef": {"name": settings.secret_ref.name}}
        if ref not in env_from:
            env_from.append(ref)

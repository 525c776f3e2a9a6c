"""The pod template of one replicated job of a TrainJob: the runtime's, with, in this order, the
trainer or initializer settings (:mod:`trainer.trainjob.builders.steps`; the trainer also gets the ML policy's
environment with the rendezvous port, then the status server's injection), the ML policy's mutations,
the TrainJob's overrides in all three upstream forms (:mod:`trainer.trainjob.builders.overrides`) and the
``volumeClaimPolicies`` volumes.

Mirrors kubeflow/trainer ``pkg/runtime/core/trainingruntime.go`` (``buildObjects``: each plugin's
``EnforceMLPolicy`` and ``EnforcePodGroupPolicy`` on the pod specs, then the TrainJob's overrides).
"""

from __future__ import annotations

from api.jobset_v1alpha2 import ReplicatedJob
from api.trainer_v1alpha1 import NODE_CONTAINER, STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER
from trainer.framework.json_codec import JSON, copy_json
from trainer.trainjob.builders.overrides import apply_pod_patch, patches_for
from trainer.trainjob.builders.steps import apply_initializer, apply_trainer
from trainer.trainjob.builders.volume_claims import add_claim_volumes
from trainer.trainjob.policies.base import Expansion, Policy, add_rendezvous
from trainer.trainjob.runtime.injection import Injection, inject
from trainer.trainjob.runtime.shape import step_of


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
    claims = x.runtime.template.spec.volume_claim_policies if x.runtime.template.spec else None
    if claims:
        add_claim_volumes(pod, claims, str(job.metadata.name))
    return pod

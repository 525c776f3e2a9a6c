"""Apply ``spec.trainer`` and ``spec.initializer`` of a TrainJob to the Pod template of their step.

Follows kubeflow/trainer ``pkg/runtime/framework/plugins/jobset`` (v2.0): the trainer settings land
on the container ``node`` of the replicated job labelled
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``; the initializers' ``storageUri`` becomes env
``STORAGE_URI`` (and ``secretRef`` an ``envFrom``) on ``dataset-initializer`` / ``model-initializer``.
"""

from __future__ import annotations

from api.trainer_v1alpha1 import (
    NODE_CONTAINER,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    DatasetInitializer,
    ModelInitializer,
    TrainJob,
)
from trainer.framework.json_codec import JSON
from trainer.jobs.merge import find_named, upsert_env
from trainer.jobs.resources import merge_resources


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

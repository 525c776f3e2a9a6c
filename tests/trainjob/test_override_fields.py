"""The Pod fields of a TrainJob's overrides that reach the pods whole (kubeflow/trainer
``pkg/runtime/core/trainingruntime.go``: every form is a strategic merge patch of the Pod template): the
Pod's and a container's ``securityContext`` merged field by field with their lists replaced,
``terminationGracePeriodSeconds`` replacing the runtime's, a container's ``volumeMounts`` merged by
``mountPath`` (``corev1.Container``'s patch merge key) with every field of a mount carried."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import info, load_sample, runtime_patch
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named
from trainer.trainjob.children import build_children

RUNTIME_MOUNTS = [
    {"name": "data", "mountPath": "/data"},
    {"name": "data", "mountPath": "/ckpt", "subPath": "ckpt"},
]


def runtime() -> ClusterTrainingRuntime:
    """The torch sample whose ``node`` pod has a security context, a grace period and two mounts of one volume."""
    obj = load_sample("torch-distributed.yaml")
    pod = obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["securityContext"] = {
        "runAsUser": 1000,
        "supplementalGroups": [1, 2],
        "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}, {"name": "kernel.shm_rmid_forced", "value": "0"}],
    }
    pod["terminationGracePeriodSeconds"] = 30
    pod["volumes"] = [{"name": "data", "emptyDir": {}}]
    node = pod["containers"][0]
    node["volumeMounts"] = [dict(m) for m in RUNTIME_MOUNTS]
    node["securityContext"] = {"runAsNonRoot": True, "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}
    return ClusterTrainingRuntime.model_validate(obj)


def node_pod(**spec: Any) -> JSON:
    """The ``node`` pod spec of the sample TrainJob with ``spec`` merged into its spec, on :func:`runtime`."""
    obj = load_sample("trainjob.yaml")
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"].update(spec)
    (job,) = build_children(info(TrainJob.model_validate(obj), runtime()), suspend=False).jobs
    pod: JSON = job["spec"]["template"]["spec"]
    return pod


def node_container(pod: JSON) -> JSON:
    container = find_named(pod["containers"], "node")
    assert container is not None
    return container


def test_a_runtime_patch_merges_the_pod_security_context_field_by_field_and_replaces_its_lists() -> None:
    patch = runtime_patch(
        {
            "securityContext": {
                "fsGroup": 2000,
                "supplementalGroups": [3],
                "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}],
            }
        }
    )
    pod = node_pod(runtimePatches=[patch])
    assert pod["securityContext"] == {
        "runAsUser": 1000,  # the runtime's, kept
        "fsGroup": 2000,
        "supplementalGroups": [3],  # replaced, not [1, 2, 3]
        "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}],  # replaced whole, not merged by name
    }


def test_a_runtime_patch_merges_a_container_security_context_field_by_field_and_replaces_its_lists() -> None:
    patch = runtime_patch(
        {
            "containers": [
                {
                    "name": "node",
                    "securityContext": {"readOnlyRootFilesystem": True, "capabilities": {"add": ["SYS_PTRACE"]}},
                }
            ]
        }
    )
    assert node_container(node_pod(runtimePatches=[patch]))["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "capabilities": {"add": ["SYS_PTRACE"], "drop": ["ALL"]},
    }


def test_a_runtime_patch_replaces_the_termination_grace_period() -> None:
    assert node_pod()["terminationGracePeriodSeconds"] == 30
    patch = runtime_patch({"terminationGracePeriodSeconds": 5})
    assert node_pod(runtimePatches=[patch])["terminationGracePeriodSeconds"] == 5
    zero = runtime_patch({"terminationGracePeriodSeconds": 0}, manager="other")
    assert node_pod(runtimePatches=[patch, zero])["terminationGracePeriodSeconds"] == 0, "the later patch wins"


PATCH_MOUNTS = [
    # The path /data is the runtime's: merged into that mount (another volume there, read-only).
    {"name": "scratch", "mountPath": "/data", "readOnly": True},
    # A second mount of the runtime's volume at a new path: added beside the runtime's two.
    {
        "name": "data",
        "mountPath": "/logs",
        "subPathExpr": "$(POD_NAME)",
        "mountPropagation": "None",
        "readOnly": True,
        "recursiveReadOnly": "IfPossible",
    },
]
MERGED_MOUNTS = [
    {"name": "scratch", "mountPath": "/data", "readOnly": True},
    RUNTIME_MOUNTS[1],
    PATCH_MOUNTS[1],
]


def _overrides(form: str) -> JSON:
    """The TrainJob spec fields of ``form`` adding volume ``scratch`` and :data:`PATCH_MOUNTS` to ``node``."""
    container = {"name": "node", "volumeMounts": PATCH_MOUNTS}
    volumes = [{"name": "scratch", "emptyDir": {}}]
    if form == "runtimePatches":
        return {form: [runtime_patch({"volumes": volumes, "containers": [container]})]}
    if form == "podTemplateOverrides":
        return {form: [{"targetJobs": [{"name": "node"}], "spec": {"volumes": volumes, "containers": [container]}}]}
    return {form: [{"targetJobs": [{"name": "node"}], "volumes": volumes, "containers": [container]}]}


@pytest.mark.parametrize("form", ["runtimePatches", "podTemplateOverrides", "podSpecOverrides"])
def test_volume_mounts_merge_by_mount_path_with_every_field_of_a_mount(form: str) -> None:
    pod = node_pod(**_overrides(form))
    assert node_container(pod)["volumeMounts"] == MERGED_MOUNTS
    assert [v["name"] for v in pod["volumes"]] == ["data", "scratch"]

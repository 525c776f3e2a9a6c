"""DRA devices per training node (kubeflow/trainer KEP-2782): each trainer pod's claims, the GPUs they
count for the ML policies, and the refusals (a cluster without resource.k8s.io/v1, a dangling claim)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import load_sample, runtime_patch
from tests.kube_double import TableStore
from trainer.api import crd
from trainer.api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBS,
    JOBSETS,
    RESOURCE_CLAIM_TEMPLATES,
    TRAINJOBS,
    Resource,
)
from trainer.api.trainer_v1alpha1 import (
    CLAIMS_IN_RESOURCES_MESSAGE,
    CLAIMS_IN_RESOURCES_RULE,
    ClusterTrainingRuntime,
    TrainJob,
)
from trainer.framework.controller import Reader, Store
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named
from trainer.framework.resources import gpus_requested
from trainer.jobs.reconcile import Blocked
from trainer.trainjob.children import build_children
from trainer.trainjob.features.dra import devices_of, trainjobs_of_claim_template
from trainer.trainjob.kind import kind as trainjob_kind
from trainer.trainjob.options import TrainJobOptions
from trainer.trainjob.runtime import expand as expansion
from trainer.trainjob.runtime.view import TrainJobView
from trainer.trainjob.spec.devices import Devices, claimed_gpus
from trainer.trainjob.validation import runtime_errors, trainjob_errors


def template(name: str = "gpu-x4", count: int | None = 4, **request: Any) -> JSON:
    """A ResourceClaimTemplate (resource.k8s.io/v1) of one request named ``gpu``."""
    exactly: JSON = {"deviceClassName": "gpu.example.com", **request}
    if count is not None:
        exactly["count"] = count
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def job(**trainer: Any) -> TrainJob:
    obj = load_sample("trainjob.yaml")
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"]["trainer"].update(trainer)
    return TrainJob.model_validate(obj)


def runtime(**mutate: Any) -> ClusterTrainingRuntime:
    obj = load_sample("torch-distributed.yaml")
    pod = obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod.update(mutate)
    return ClusterTrainingRuntime.model_validate(obj)


def expand(tj: TrainJob, rt: ClusterTrainingRuntime, devices: Devices | None = None) -> TrainJobView:
    obj = tj.to_dict() | {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
    return expansion.expand(obj, tj, rt.spec, rt.to_dict(), [], gang="none", devices=devices or Devices())


def templates(*objs: JSON) -> Devices:
    by_name = {o["metadata"]["name"]: o for o in objs}
    return Devices(template=by_name.get)


def trainer_pod(info: TrainJobView) -> JSON:
    job = build_children(info, suspend=False).jobs[0]
    spec: JSON = job["spec"]["template"]["spec"]
    return spec


def env(container: JSON) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "gpu-x4"}]


def test_each_node_pod_gets_the_claim_from_the_template_and_its_node_container_consumes_it() -> None:
    info = expand(job(resourceClaimsPerNode=CLAIM), runtime(), templates(template()))
    pod = trainer_pod(info)
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-x4"}]
    node = find_named(pod["containers"], "node")
    assert node is not None and node["resources"]["claims"] == [{"name": "gpu"}]
    assert node["resources"]["limits"]["cpu"] == "1"  # resourcesPerNode still merged
    # One Indexed Job of numNodes pods, each made from this template: the resourceclaim controller of
    # the kube-controller-manager makes one ResourceClaim per pod.
    assert build_children(info, suspend=False).jobs[0]["spec"]["parallelism"] == 2


def test_auto_num_proc_per_node_is_the_device_count_of_the_template() -> None:
    tj = job(resourceClaimsPerNode=CLAIM)
    for count in (1, 4, 8):
        info = expand(tj, runtime(), templates(template(count=count)))
        node = find_named(trainer_pod(info)["containers"], "node")
        assert node is not None and env(node)["PET_NPROC_PER_NODE"] == str(count)
        assert info.info.node_gpus == count
    # resource.k8s.io/v1 defaults count to 1.
    assert expand(tj, runtime(), templates(template(count=None))).info.node_gpus == 1


def test_device_count_follows_the_kep() -> None:
    assert gpus_requested([{"name": "h100-gpu", "exactly": {"count": 8}}]) == 8
    assert gpus_requested([{"name": "gpu", "exactly": {"count": 2}}, {"name": "gpu-b", "exactly": {}}]) == 3
    assert gpus_requested([{"name": "nic", "exactly": {"count": 2}}]) == 0  # not named like a GPU
    assert gpus_requested([{"name": "gpu", "exactly": {"allocationMode": "All"}}]) == 0
    assert gpus_requested([{"name": "gpu", "exactly": {"count": 2, "adminAccess": True}}]) == 0
    assert gpus_requested([{"name": "gpu", "firstAvailable": [{"name": "a", "count": 2}]}]) == 0
    assert gpus_requested(None) == 0


def test_explicit_num_proc_per_node_and_extended_gpus_win_over_the_claim() -> None:
    devices = templates(template(count=4))
    node = find_named(
        trainer_pod(expand(job(resourceClaimsPerNode=CLAIM, numProcPerNode=3), runtime(), devices))["containers"],
        "node",
    )
    assert node is not None and env(node)["PET_NPROC_PER_NODE"] == "3"
    extended = job(resourceClaimsPerNode=CLAIM, resourcesPerNode={"limits": {"nvidia.com/gpu": 2}})
    info = expand(extended, runtime(), devices)
    node = find_named(trainer_pod(info)["containers"], "node")
    assert node is not None and env(node)["PET_NPROC_PER_NODE"] == "auto"  # left to torchrun, as upstream
    assert info.info.node_gpus == 2


def test_a_template_not_in_the_cache_counts_no_gpu_and_torch_falls_back_to_cpus() -> None:
    info = expand(job(resourceClaimsPerNode=CLAIM), runtime(), Devices())
    node = find_named(trainer_pod(info)["containers"], "node")
    assert node is not None and env(node)["PET_NPROC_PER_NODE"] == "1"  # the CPU limit
    assert info.info.node_gpus == 0


def test_the_first_claim_of_the_node_container_counts_and_a_named_request_narrows_it() -> None:
    pod: JSON = {
        "spec": {
            "resourceClaims": [
                {"name": "nic", "resourceClaimTemplateName": "nic"},
                {"name": "gpu", "resourceClaimTemplateName": "gpu-x4"},
            ],
            "containers": [{"name": "node", "resources": {"claims": [{"name": "gpu"}, {"name": "nic"}]}}],
        }
    }
    two = template(count=4)
    two["spec"]["spec"]["devices"]["requests"].append({"name": "gpu-b", "exactly": {"count": 2}})
    assert claimed_gpus(pod, templates(two)) == 6
    pod["spec"]["containers"][0]["resources"]["claims"][0]["request"] = "gpu-b"
    assert claimed_gpus(pod, templates(two)) == 2


def test_resource_claims_per_node_wins_over_the_runtime_and_runtime_patches() -> None:
    rt = runtime(
        resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}, {"name": "extra", "resourceClaimName": "e"}]
    )
    patch = runtime_patch(
        {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "from-patch"}],
            "initContainers": [{"name": "check", "resources": {"claims": [{"name": "gpu"}]}}],
        }
    )
    rt_obj = rt.to_dict()
    pod_spec = rt_obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["initContainers"] = [{"name": "check", "image": "busybox"}]
    rt = ClusterTrainingRuntime.model_validate(rt_obj)
    obj = load_sample("trainjob.yaml")
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"]["trainer"]["resourceClaimsPerNode"] = CLAIM
    obj["spec"]["runtimePatches"] = [patch]
    info = expand(TrainJob.model_validate(obj), rt, templates(template()))
    pod = trainer_pod(info)
    # By name, whole (no resourceClaimName left beside the template's name), the runtime's order kept.
    assert pod["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "gpu-x4"},
        {"name": "extra", "resourceClaimName": "e"},
    ]
    check = find_named(pod["initContainers"], "check")
    assert check is not None and check["resources"]["claims"] == [{"name": "gpu"}]  # the patch's escape hatch
    assert trainjob_errors(info.info) == []


def test_a_container_claim_without_its_pod_claim_is_refused() -> None:
    rt = runtime()
    rt_obj = rt.to_dict()
    node = rt_obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    errors = runtime_errors(ClusterTrainingRuntime.model_validate(rt_obj).spec)
    assert errors == [
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[node].resources.claims: claim "
        "'gpu' is not in the pod's resourceClaims (none); add it there (spec.trainer.resourceClaimsPerNode for the "
        "node container, a runtime patch's resourceClaims otherwise) or remove it"
    ]
    node["resourceClaims"] = [{"name": "gpu"}]  # neither source: the apiserver would refuse every pod
    assert runtime_errors(ClusterTrainingRuntime.model_validate(rt_obj).spec) == [
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.resourceClaims[gpu]: set exactly one of "
        "resourceClaimName and resourceClaimTemplateName"
    ]


REFUSAL = (
    "spec.trainer.resourceClaimsPerNode: this cluster does not serve resource.k8s.io/v1 (Dynamic Resource "
    "Allocation, GA from Kubernetes v1.34); remove it, or run the TrainJob on a cluster with DRA"
)


def test_a_cluster_without_dra_refuses_the_field_by_name() -> None:
    info = expand(job(resourceClaimsPerNode=CLAIM), runtime(), Devices(served=False))
    assert trainjob_errors(info.info) == [REFUSAL]
    assert trainjob_errors(expand(job(), runtime(), Devices(served=False)).info) == []  # no claim, no refusal


def reader(absent: bool, *tables: tuple[Resource, list[JSON]]) -> Reader:
    stores: dict[Resource, Store] = {res: TableStore(objs) for res, objs in tables}
    stores[RESOURCE_CLAIM_TEMPLATES] = TableStore([] if absent else [template()], absent=absent)
    return Reader("trainjob", stores)


def test_the_reconcile_without_the_webhook_fails_the_trainjob_with_the_same_message() -> None:
    obj = load_sample("trainjob.yaml")
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"]["trainer"]["resourceClaimsPerNode"] = CLAIM
    rt = load_sample("torch-distributed.yaml")
    tables: tuple[tuple[Resource, list[JSON]], ...] = (
        (TRAINJOBS, [obj]),
        (CLUSTER_TRAINING_RUNTIMES, [rt]),
        (JOBS, []),
        (CONFIGMAPS, []),
        (JOBSETS, []),
    )
    kind = trainjob_kind(TrainJobOptions(), "none")
    blocked = kind.expand(reader(True, *tables), obj, TrainJob.model_validate(obj))
    assert isinstance(blocked, Blocked) and blocked.conditions is not None
    failed = next(c for c in blocked.conditions if c.type == "Failed")
    assert failed.status == "True" and failed.message == REFUSAL
    served = kind.expand(reader(False, *tables), obj, TrainJob.model_validate(obj))
    assert isinstance(served, TrainJobView) and served.info.node_gpus == 4


def test_a_template_change_reconciles_the_trainjobs_that_name_it() -> None:
    named, other = load_sample("trainjob.yaml"), copy.deepcopy(load_sample("trainjob.yaml"))
    named["spec"]["trainer"]["resourceClaimsPerNode"] = CLAIM
    named["metadata"]["namespace"] = other["metadata"]["namespace"] = "default"
    other["metadata"]["name"] = "other"
    r = reader(False, (TRAINJOBS, [named, other]))
    assert list(trainjobs_of_claim_template(template(), r)) == [("default", named["metadata"]["name"])]
    assert devices_of(r, "default").template("gpu-x4") == template()
    assert devices_of(reader(True), "default").served is False


def test_the_schema_refuses_resources_per_node_claims_and_bad_claim_names() -> None:
    trainer = crd.model_schema(TrainJob, top_level=True)["properties"]["spec"]["properties"]["trainer"]["properties"]
    assert trainer["resourcesPerNode"]["x-kubernetes-validations"] == [
        {"rule": CLAIMS_IN_RESOURCES_RULE, "message": CLAIMS_IN_RESOURCES_MESSAGE}
    ]
    claims = trainer["resourceClaimsPerNode"]
    assert (claims["maxItems"], claims["x-kubernetes-list-type"], claims["x-kubernetes-list-map-keys"]) == (
        32,
        "map",
        ["name"],
    )
    assert claims["items"]["required"] == ["name", "resourceClaimTemplateName"]
    assert claims["items"]["properties"]["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    with pytest.raises(ValidationError):
        job(resourceClaimsPerNode=[{"name": "gpu"}])  # resourceClaimTemplateName is required
    with pytest.raises(ValidationError):
        job(resourceClaimsPerNode=[{"name": "GPU_0", "resourceClaimTemplateName": "t"}])


def test_mpi_workers_get_the_claims_when_the_launcher_is_a_node_too() -> None:
    obj = load_sample("deepspeed-distributed.yaml")
    mpi = ClusterTrainingRuntime.model_validate(obj)
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "ds", "namespace": "default", "uid": "u"},
            "spec": {
                "runtimeRef": {"name": "deepspeed-distributed"},
                "trainer": {"numNodes": 2, "resourceClaimsPerNode": CLAIM},
            },
        }
    )

    def claims(rt: ClusterTrainingRuntime) -> dict[str, Any]:
        jobs = build_children(expand(tj, rt, templates(template(count=4))), suspend=False).jobs
        return {j["metadata"]["name"]: j["spec"]["template"]["spec"].get("resourceClaims") for j in jobs}

    # runLauncherAsNode: the launcher (the trainer step) and its node workers, as kubeflow/trainer#4027.
    assert claims(mpi) == {"ds-launcher-0": CLAIM, "ds-node-0": CLAIM}
    obj["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    assert claims(ClusterTrainingRuntime.model_validate(obj)) == {"ds-launcher-0": CLAIM, "ds-node-0": None}
    info = expand(tj, mpi, templates(template(count=4)))
    assert info.info.node_gpus == 4
    (hostfile,) = info.info.policy.config_maps(info.info)
    assert hostfile["data"]["hostfile"].split("\n")[0] == "ds-launcher-0-0.ds slots=4"  # a slot per claimed GPU

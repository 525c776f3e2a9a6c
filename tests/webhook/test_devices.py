"""Admission of TrainJobs that ask for DRA devices (kubeflow/trainer KEP-2782): refused by name where the
cluster does not serve resource.k8s.io/v1, KEP-2782's warning when no GPU count can be read, and a
container claim without its pod claim refused."""

from __future__ import annotations

from typing import Any

from tests.conftest import load_sample, runtime_patch
from tests.kube_double import TableStore
from trainer.api.kinds import RESOURCE_CLAIM_TEMPLATES
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.trainjob.spec.devices import Devices
from trainer.webhook import rules
from trainer.webhook.server import cache_facts

RUNTIME = load_sample("torch-distributed.yaml")
TEMPLATE = {
    "metadata": {"name": "gpu-x2", "namespace": "ns"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "d", "count": 2}}]}}},
}
CLAIM = {"name": "gpu", "resourceClaimTemplateName": "gpu-x2"}


def facts(devices: Devices) -> rules.AdmissionFacts:
    return rules.AdmissionFacts(
        runtime=lambda kind, name, ns: RUNTIME if name == "torch-distributed" else None,
        active_pods=lambda kind, ns, name: 0,
        volcano_queues=lambda: None,
        local_queue_exists=lambda ns, name: None,
        devices=lambda namespace: devices,
    )


def served(*templates: JSON) -> Devices:
    by_name = {t["metadata"]["name"]: t for t in templates}
    return Devices(template=by_name.get)


def tj(**spec: Any) -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def test_a_cluster_without_dra_refuses_resource_claims_per_node_naming_it() -> None:
    v = rules.validate_trainjob(tj(trainer={"resourceClaimsPerNode": [CLAIM]}), None, facts(Devices(served=False)))
    assert v.errors == [
        "spec.trainer.resourceClaimsPerNode: this cluster does not serve resource.k8s.io/v1 (Dynamic Resource "
        "Allocation, GA from Kubernetes v1.34); remove it, or run the TrainJob on a cluster with DRA"
    ]
    assert rules.validate_trainjob(tj(trainer={"numNodes": 2}), None, facts(Devices(served=False))).allowed


def test_a_cluster_without_dra_refuses_a_runtime_patchs_claims_naming_them() -> None:
    patch = runtime_patch({"resourceClaims": [{"name": "x", "resourceClaimName": "c"}]})
    v = rules.validate_trainjob(tj(runtimePatches=[patch]), None, facts(Devices(served=False)))
    assert v.errors == [
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[node].template.spec.template.spec"
        ".resourceClaims: this cluster does not serve resource.k8s.io/v1 (Dynamic Resource Allocation, GA from "
        "Kubernetes v1.34); remove them"
    ]


def test_with_dra_the_job_is_admitted_and_warned_only_when_no_gpu_count_can_be_read() -> None:
    job = tj(trainer={"resourceClaimsPerNode": [CLAIM]})
    counted = rules.validate_trainjob(job, None, facts(served(TEMPLATE)))
    assert counted.allowed and counted.warnings == []
    missing = rules.validate_trainjob(job, None, facts(served()))
    assert missing.allowed
    assert missing.warnings == [
        "spec.trainer.numProcPerNode: the node container claims DRA devices (gpu) but no GPU count could be read "
        "from the first claim's ResourceClaimTemplate (not found, or no exactly request whose name contains "
        "'gpu'); torch would start one process per CPU: set spec.trainer.numProcPerNode"
    ]
    explicit = tj(trainer={"resourceClaimsPerNode": [CLAIM], "numProcPerNode": 2})
    assert rules.validate_trainjob(explicit, None, facts(served())).warnings == []


def test_a_patched_container_claim_without_its_pod_claim_is_refused() -> None:
    patch = runtime_patch({"containers": [{"name": "node", "resources": {"claims": [{"name": "nic"}]}}]})
    v = rules.validate_trainjob(tj(runtimePatches=[patch]), None, facts(served()))
    assert v.errors == [
        "spec.runtimePatches: replicated job 'node', pod spec.containers[node].resources.claims: claim 'nic' is not "
        "in the pod's resourceClaims (none); add it there (spec.trainer.resourceClaimsPerNode for the node "
        "container, a runtime patch's resourceClaims otherwise) or remove it"
    ]


def test_the_webhook_reads_dra_from_the_operators_cache() -> None:
    def readers(absent: bool) -> dict[str, Reader]:
        store = TableStore([] if absent else [TEMPLATE], absent=absent)
        return {"trainjob": Reader("trainjob", {RESOURCE_CLAIM_TEMPLATES: store}), "mpijob": Reader("mpijob", {})}

    assert cache_facts(readers(True), "none").devices("ns").served is False
    devices = cache_facts(readers(False), "none").devices("ns")
    assert devices.served and devices.template("gpu-x2") == TEMPLATE and devices.template("other") is None

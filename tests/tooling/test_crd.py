"""The CRDs are generated from the API models and checked in; a stale file fails here."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import Field, ValidationError

from localcluster.kueue import kueue_sees_runtime_patches
from trainer.api import crd
from trainer.api.base import Model
from trainer.api.trainer_v1alpha1 import MPIMLPolicySource, TrainJob

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec", crd.CRDS, ids=lambda s: s.resource.plural)
def test_checked_in_crd_is_current(spec: crd.CRDSpec) -> None:
    path = crd.path_of(spec)
    assert path.exists(), f"{path} missing: run `python -m trainer.api.crd`"
    assert path.read_text() == crd.render(spec), f"{path} is stale: run `python -m trainer.api.crd`"


def schema_of(plural: str) -> dict[str, Any]:
    spec = next(s for s in crd.CRDS if s.resource.plural == plural)
    version: dict[str, Any] = crd.crd(spec)["spec"]["versions"][0]
    return version


def walk(schema: dict[str, Any], path: str) -> dict[str, Any]:
    for part in path.split("."):
        schema = schema["items"] if part == "[]" else schema["properties"][part]
    return schema


def test_trainjob_schema_has_status_columns_defaults_enums_and_rules() -> None:
    version = schema_of("trainjobs")
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.trainer.numNodes",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["State"]["jsonPath"] == '.status.conditions[?(@.status=="True")].type'  # kubeflow/trainer#3963
    assert columns["Suspended"] == {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend"}
    spec = walk(version["schema"]["openAPIV3Schema"], "spec")
    assert spec["required"] == ["runtimeRef"]
    assert walk(spec, "suspend")["default"] is False
    assert walk(spec, "managedBy")["default"] == "trainer.kubeflow.org/trainjob-controller"
    assert walk(spec, "runtimeRef.kind")["enum"] == ["TrainingRuntime", "ClusterTrainingRuntime"]
    assert walk(spec, "runtimeRef")["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    gates = walk(spec, "podSpecOverrides.[].schedulingGates")
    assert gates["x-kubernetes-list-map-keys"] == ["name"]
    assert walk(spec, "podSpecOverrides.[].targetJobs")["minItems"] == 1
    assert walk(spec, "podSpecOverrides.[].affinity")["x-kubernetes-preserve-unknown-fields"] is True
    assert walk(spec, "trainer.numProcPerNode") == {
        "x-kubernetes-int-or-string": True,
        "description": walk(spec, "trainer.numProcPerNode")["description"],
        "x-kubernetes-validations": [
            {"rule": "type(self) != int || self >= 1", "message": "numProcPerNode must be greater than or equal to 1"}
        ],
    }
    assert "kubectl" not in str(spec)  # descriptions are the docstrings, not tool notes


def test_num_nodes_may_be_zero_and_num_proc_per_node_is_at_least_one_as_kubeflow_trainer_3809() -> None:
    trainer = walk(schema_of("trainjobs")["schema"]["openAPIV3Schema"], "spec.trainer")
    assert walk(trainer, "numNodes")["minimum"] == 0
    assert TrainJob.model_validate({"spec": {"runtimeRef": {"name": "rt"}, "trainer": {"numNodes": 0}}})
    for plural in ("trainingruntimes", "clustertrainingruntimes"):
        policy = walk(schema_of(plural)["schema"]["openAPIV3Schema"], "spec.mlPolicy")
        assert walk(policy, "numNodes")["minimum"] == 0, plural
        procs = walk(policy, "mpi.numProcPerNode")
        assert "minimum" not in procs, "the CEL rule's message, not the schema's, tells it"
        assert procs["x-kubernetes-validations"] == [
            {"rule": "self >= 1", "message": "NumProcPerNode in mpiPolicy must be >= 1"}
        ], plural
    with pytest.raises(ValidationError, match="numProcPerNode must be greater than or equal to 1"):
        TrainJob.model_validate({"spec": {"runtimeRef": {"name": "rt"}, "trainer": {"numProcPerNode": 0}}})
    with pytest.raises(ValidationError, match="NumProcPerNode in mpiPolicy must be >= 1"):
        MPIMLPolicySource.model_validate({"numProcPerNode": 0})
    assert TrainJob.model_validate({"spec": {"runtimeRef": {"name": "rt"}, "trainer": {"numProcPerNode": "auto"}}})


def test_every_property_is_typed_structurally() -> None:
    def check(node: dict[str, Any], where: str) -> None:
        assert "$ref" not in node and "anyOf" not in node, where
        assert (
            "type" in node or node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        ), where
        for name, child in (node.get("properties") or {}).items():
            check(child, f"{where}.{name}")
        if isinstance(node.get("items"), dict):
            check(node["items"], f"{where}[]")

    for spec in crd.CRDS:
        check(crd.crd(spec)["spec"]["versions"][0]["schema"]["openAPIV3Schema"], spec.resource.plural)


def test_upstream_manifest_round_trips_through_the_model() -> None:
    manifest = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "a"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "numProcPerNode": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}},
            "podSpecOverrides": [{"targetJobs": [{"name": "node"}], "schedulingGates": [{"name": "g"}]}],
        },
    }
    data = TrainJob.model_validate(manifest).to_dict()
    assert data["spec"]["trainer"] == manifest["spec"]["trainer"]  # type: ignore[index]
    assert data["spec"]["podSpecOverrides"] == manifest["spec"]["podSpecOverrides"]  # type: ignore[index]


@pytest.mark.parametrize("where", ["config/crd/bases", "charts/trainer/crds"])
def test_the_shipped_trainjob_crd_passes_kueues_runtime_patches_check(where: str) -> None:
    doc = yaml.safe_load((ROOT / where / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    assert doc["metadata"]["name"] == "trainjobs.trainer.kubeflow.org"
    assert kueue_sees_runtime_patches(doc)
    (version,) = doc["spec"]["versions"]
    patches = walk(version["schema"]["openAPIV3Schema"], "spec.runtimePatches")
    # Upstream's shape (pkg/apis/trainer/v1alpha1/trainjob_types.go, v2.3.0): a list map keyed by manager.
    assert patches["type"] == "array" and patches["x-kubernetes-list-map-keys"] == ["manager"]
    assert patches["x-kubernetes-list-type"] == "map" and patches["items"]["required"] == ["manager"]
    assert {"manager", "time", "trainingRuntimeSpec"} <= set(patches["items"]["properties"])
    # What the check refuses: a served version without the field, or the field only in a version not served.
    assert not kueue_sees_runtime_patches({"spec": {"versions": [{**version, "served": False}]}})
    older = copy.deepcopy(version)
    del older["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["runtimePatches"]
    assert not kueue_sees_runtime_patches({"spec": {"versions": [older]}})


class _Base(Model):
    shared: str | None = None
    """Said by the base."""
    plain: int | None = None


class _Derived(_Base):
    shared: str | None = None
    """Said again,
        over two lines, by the subclass."""
    named: str | None = Field(default=None, description="Said by the field.")
    """Not this one."""
    own: bool | None = None
    """Its own."""


def test_descriptions_are_the_attribute_docstrings_the_nearest_class_first_and_a_fields_own_ahead() -> None:
    assert crd.attribute_docs(_Derived) == {
        "shared": "Said again,\nover two lines, by the subclass.",
        "named": "Not this one.",
        "own": "Its own.",
    }
    properties = crd.model_schema(_Derived)["properties"]
    assert {k: v.get("description") for k, v in properties.items()} == {
        "shared": "Said again, over two lines, by the subclass.",
        "plain": None,
        "named": "Said by the field.",
        "own": "Its own.",
    }
    assert crd.model_schema(_Base)["properties"]["shared"]["description"] == "Said by the base."

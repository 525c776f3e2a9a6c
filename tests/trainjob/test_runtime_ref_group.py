"""``spec.runtimeRef.apiGroup``: runtimes are ``trainer.kubeflow.org`` only (its default), as upstream registers
them (kubeflow/trainer ``pkg/runtime/runtime.go`` ``RuntimeRefToRuntimeRegistryKey``). Another group is
refused by the CRD, by the webhook and, where neither ran, by the reconcile (``Failed``,
``TrainingRuntimeNotSupported``, upstream's controller's reason), never expanded from a runtime of the
default group that happens to have the name."""

from __future__ import annotations

import pytest

from tests.conftest import load_sample
from tests.harness import World
from tests.webhook.test_admission import facts, tj
from trainer.api import crd
from trainer.api.kinds import TRAINJOBS
from trainer.api.trainer_v1alpha1 import REASON_RUNTIME_NOT_SUPPORTED
from trainer.framework.json_codec import JSON
from trainer.trainjob.features.snapshot import unsupported_runtime
from trainer.webhook import rules

MESSAGE = (
    "unsupported runtime: ClusterTrainingRuntime.example.com; spec.runtimeRef.apiGroup must be "
    "trainer.kubeflow.org (the default): remove it or set it to that"
)


def with_group(group: str | None, obj: JSON | None = None) -> JSON:
    out = obj if obj is not None else tj()
    if group is not None:
        out["spec"]["runtimeRef"]["apiGroup"] = group
    return out


@pytest.mark.parametrize("group", [None, "trainer.kubeflow.org"])
def test_the_default_group_is_admitted(group: str | None) -> None:
    assert unsupported_runtime(with_group(group)) is None
    assert rules.validate_trainjob(with_group(group), None, facts()).allowed


def test_another_group_is_refused_at_admission_with_upstreams_words_the_field_and_the_fix() -> None:
    assert rules.validate_trainjob(with_group("example.com"), None, facts()).errors == [MESSAGE]
    empty = rules.validate_trainjob(with_group(""), None, facts()).errors
    assert empty == [MESSAGE.replace("ClusterTrainingRuntime.example.com", "ClusterTrainingRuntime")]


def test_the_crd_refuses_another_group_too() -> None:
    spec = next(s for s in crd.CRDS if s.resource == TRAINJOBS)
    schema = crd.crd(spec)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    ref = schema["properties"]["spec"]["properties"]["runtimeRef"]["properties"]["apiGroup"]
    assert ref["default"] == "trainer.kubeflow.org"
    assert [r["rule"] for r in ref["x-kubernetes-validations"]] == ["self == 'trainer.kubeflow.org'"]


async def test_without_admission_the_reconcile_fails_the_job_and_creates_nothing() -> None:
    job = with_group("example.com", load_sample("trainjob.yaml"))
    w = World(objects=[load_sample("torch-distributed.yaml"), job])
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None
    assert (failed["status"], failed["reason"], failed["message"]) == ("True", REASON_RUNTIME_NOT_SUPPORTED, MESSAGE)
    assert w.jobs() == [], "not expanded from the trainer.kubeflow.org runtime of that name"
    assert {write.kind for write in w.kube.writes} == {TRAINJOBS.kind, "Event"}, (
        "its status alone: no snapshot, no child"
    )

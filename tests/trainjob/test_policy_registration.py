"""An ML policy is one object registered once: a policy known only to this test expands a runtime
through the real expansion, and its environment, pod mutation, children and rules reach the pod
templates, the children and the validation, with no other module changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import info, load_sample
from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.kinds import CONFIGMAPS
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named
from trainer.trainjob import policies as registry
from trainer.trainjob.children import build_children
from trainer.trainjob.policies import Created, Expansion, Policy
from trainer.trainjob.policies.base import Expanded
from trainer.trainjob.validation import runtime_errors, trainjob_errors
from trainer.webhook.rules import AdmissionFacts, validate_trainjob


class Greeter(Policy):
    """``mlPolicy.greeter: {text}``: GREETING on the trainer, a label on every pod, a ConfigMap made once."""

    field = "greeter"
    reserved_env = ("GREETING",)

    def env(self, x: Expansion) -> list[JSON]:
        return [{"name": "GREETING", "value": str(self.source(x.runtime)["text"])}]

    def mutate_pod(self, x: Expansion, rjob: ReplicatedJob, is_trainer: bool, pod: JSON, env: list[JSON]) -> None:
        pod.setdefault("metadata", {}).setdefault("labels", {})["greeted"] = rjob.name

    def created_once(self, info: Expanded) -> list[Created]:
        name = f"{info.job.metadata.name}-greeting"
        return [Created(CONFIGMAPS, name, lambda: {"metadata": {"name": name}})]

    def runtime_errors(self, runtime: TrainingRuntimeSpec) -> list[str]:
        return [] if self.source(runtime).get("text") else ["spec.mlPolicy.greeter.text: say something"]

    def trainjob_errors(self, info: Expanded) -> list[str]:
        return ["spec.trainer.numNodes: a greeter greets 2 nodes at most"] if (info.num_nodes or 1) > 2 else []


GREETER = Greeter()


@pytest.fixture
def greeter() -> Iterator[Greeter]:
    registry.register(GREETER)
    try:
        yield GREETER
    finally:
        registry.unregister(GREETER.field)


def greeter_runtime(text: str = "hello") -> ClusterTrainingRuntime:
    raw = load_sample("torch-distributed.yaml")
    raw["spec"]["mlPolicy"] = {"numNodes": 2, "greeter": {"text": text}}
    return ClusterTrainingRuntime.model_validate(raw)


def trainjob(**trainer: Any) -> TrainJob:
    return TrainJob.model_validate(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
        }
    )


def test_a_registered_policy_expands_the_runtime(greeter: Greeter) -> None:
    rt = greeter_runtime()
    view = info(trainjob(), rt)
    expanded = view.info
    assert expanded.policy is greeter
    trainer = expanded.pod_set(str(expanded.trainer))
    node = find_named(trainer.template["spec"]["containers"], "node")
    assert node is not None
    assert {"name": "GREETING", "value": "hello"} in node["env"]
    assert {"containerPort": 29500, "protocol": "TCP"} in node["ports"]
    assert trainer.template["metadata"]["labels"]["greeted"] == trainer.name
    assert trainer.pods_per_job == 2 and trainer.name in expanded.policy_sized
    job = next(j for j in build_children(view, suspend=False).jobs if j["metadata"]["name"] == "tj-node-0")
    assert job["spec"]["template"]["metadata"]["labels"]["greeted"] == "node"
    assert [(c.resource, c.name) for c in greeter.created_once(expanded)] == [(CONFIGMAPS, "tj-greeting")]


def test_the_policy_rules_are_reported(greeter: Greeter) -> None:
    assert runtime_errors(greeter_runtime("").spec) == ["spec.mlPolicy.greeter.text: say something"]
    rt = greeter_runtime()
    assert runtime_errors(rt.spec) == []
    assert trainjob_errors(info(trainjob(numNodes=3), rt).info) == [
        "spec.trainer.numNodes: a greeter greets 2 nodes at most"
    ]
    facts = AdmissionFacts(
        runtime=lambda kind, name, ns: rt.to_dict(),
        active_pods=lambda kind, ns, name: 0,
        volcano_queues=lambda: None,
        local_queue_exists=lambda ns, name: None,
    )
    obj = trainjob(numNodes=3, env=[{"name": "GREETING", "value": "hi"}]).to_dict()
    assert validate_trainjob(obj, None, facts).errors == [
        "spec.trainer.env: 'GREETING' is set by the operator from the runtime's mlPolicy and reserved",
        "spec.trainer.numNodes: a greeter greets 2 nodes at most",
    ]


def test_without_its_registration_the_runtime_is_plain() -> None:
    expanded = info(trainjob(), greeter_runtime()).info
    assert expanded.policy is registry.FALLBACK
    node = find_named(expanded.pod_set(str(expanded.trainer)).template["spec"]["containers"], "node")
    assert node is not None and not any(e["name"] == "GREETING" for e in node.get("env") or [])


def test_a_field_has_one_policy(greeter: Greeter) -> None:
    with pytest.raises(ValueError, match="greeter"):
        registry.register(Greeter())

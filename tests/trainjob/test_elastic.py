"""An elastic TrainJob (``mlPolicy.torch.elasticPolicy``, kubeflow/trainer KEP-2903): its admission (the CRD's
rules on the policy and the webhook's bounds), the torchrun environment of its pods, the gang's
``minMember`` and how a member's failure is read (the trainer's Job absorbs up to ``maxRestarts`` failed
pods; only a failed Job fails the TrainJob, as for any job)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import info, load_sample
from tests.harness import World, job
from trainer.api.kinds import JOBS, TRAINJOBS
from trainer.api.trainer_v1alpha1 import (
    ELASTIC_BOUNDS_MESSAGE,
    ELASTIC_BOUNDS_RULE,
    ELASTIC_MAX_MESSAGE,
    ELASTIC_METRICS_MESSAGE,
    ClusterTrainingRuntime,
    TorchMLPolicySource,
    TrainJob,
)
from trainer.framework.json_codec import JSON
from trainer.jobs.conditions import job_failed
from trainer.trainjob.children import build_children
from trainer.trainjob.features.resize import REASON_SCALED, resize
from trainer.trainjob.spec.failure_policy import decide
from trainer.webhook import rules

ELASTIC = {"minNodes": 1, "maxNodes": 3, "maxRestarts": 5}


def elastic_runtime(**policy: Any) -> JSON:
    obj = load_sample("torch-distributed.yaml")
    obj["spec"]["mlPolicy"]["torch"]["elasticPolicy"] = policy or dict(ELASTIC)
    return obj


def trainjob(num_nodes: int | None = 2, suspend: bool = False) -> JSON:
    obj = load_sample("trainjob.yaml")
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"]["suspend"] = suspend
    if num_nodes is None:
        del obj["spec"]["trainer"]["numNodes"]
    else:
        obj["spec"]["trainer"]["numNodes"] = num_nodes
    return obj


def facts(runtime: JSON, active: int = 0) -> rules.AdmissionFacts:
    return rules.AdmissionFacts(
        runtime=lambda kind, name, ns: runtime if name == "torch-distributed" else None,
        active_pods=lambda kind, ns, name: active,
        volcano_queues=lambda: None,
        local_queue_exists=lambda ns, name: None,
    )


def policy_rules() -> dict[str, str]:
    """The CRD's rules on ``elasticPolicy`` (rule -> message) and the refusal on ``metrics``."""
    schema = ClusterTrainingRuntime.model_json_schema(by_alias=True)
    torch = schema["$defs"]["TorchMLPolicySource"]["properties"]["elasticPolicy"]
    found = {r["rule"]: r["message"] for r in torch["x-kubernetes-validations"]}
    metrics = schema["$defs"]["TorchElasticPolicy"]["properties"]["metrics"]
    found |= {r["rule"]: r["message"] for r in metrics["x-kubernetes-validations"]}
    return found


def test_the_crd_refuses_min_above_max_a_missing_max_and_metrics_naming_the_field_and_the_fix() -> None:
    found = policy_rules()
    assert found[ELASTIC_BOUNDS_RULE] == ELASTIC_BOUNDS_MESSAGE
    assert found["has(self.maxNodes)"] == ELASTIC_MAX_MESSAGE
    assert found["false"] == ELASTIC_METRICS_MESSAGE
    assert "kubectl scale trainjob" in ELASTIC_METRICS_MESSAGE


def test_min_nodes_below_one_is_refused_by_the_schema() -> None:
    with pytest.raises(ValidationError):
        TorchMLPolicySource.model_validate({"elasticPolicy": {"minNodes": 0, "maxNodes": 2}})


@pytest.mark.parametrize(
    ("num_nodes", "error"),
    [
        (1, None),
        (3, None),
        (None, None),  # the runtime's mlPolicy.numNodes: 1
        (4, "spec.trainer.numNodes: 4 is above mlPolicy.torch.elasticPolicy.maxNodes 3; set it between 1 and 3"),
    ],
)
def test_a_trainjob_s_num_nodes_lies_within_the_bounds(num_nodes: int | None, error: str | None) -> None:
    verdict = rules.validate_trainjob(trainjob(num_nodes), None, facts(elastic_runtime()))
    assert verdict.errors == ([error] if error else [])


def test_num_nodes_below_min_nodes_is_refused_naming_the_bound() -> None:
    runtime = elastic_runtime(minNodes=2, maxNodes=3)
    runtime["spec"]["mlPolicy"]["numNodes"] = 2
    verdict = rules.validate_trainjob(trainjob(1), None, facts(runtime))
    assert verdict.errors == [
        "spec.trainer.numNodes: 1 is below mlPolicy.torch.elasticPolicy.minNodes 2; set it between 2 and 3"
    ]


def test_a_runtime_whose_num_nodes_is_outside_its_bounds_is_refused() -> None:
    runtime = elastic_runtime(minNodes=2, maxNodes=3)
    verdict = rules.validate_runtime(runtime, None)
    assert verdict.errors == [
        "spec.mlPolicy.numNodes: 1 is below mlPolicy.torch.elasticPolicy.minNodes 2; set it between 2 and 3"
    ]


def test_pet_names_of_the_rendezvous_are_reserved() -> None:
    obj = trainjob()
    obj["spec"]["trainer"]["env"] = [{"name": "PET_RDZV_ENDPOINT", "value": "x:1"}]
    errors = rules.validate_trainjob(obj, None, facts(elastic_runtime())).errors
    assert any("PET_RDZV_ENDPOINT" in e for e in errors), errors


def test_an_elastic_trainjob_may_scale_while_it_runs_within_its_bounds() -> None:
    running = trainjob(1)
    grown = copy.deepcopy(running)
    grown["spec"]["trainer"]["numNodes"] = 2
    assert rules.validate_trainjob(grown, running, facts(elastic_runtime(), active=1)).errors == []
    grown["spec"]["trainer"]["numNodes"] = 4
    (error,) = rules.validate_trainjob(grown, running, facts(elastic_runtime(), active=1)).errors
    assert "above mlPolicy.torch.elasticPolicy.maxNodes 3" in error


def test_other_fields_of_an_elastic_trainjob_and_num_nodes_of_a_static_one_change_only_while_suspended() -> None:
    running = trainjob(1)
    changed = copy.deepcopy(running)
    changed["spec"]["trainer"]["image"] = "busybox:2"
    (error,) = rules.validate_trainjob(changed, running, facts(elastic_runtime(), active=1)).errors
    assert error.startswith("spec.trainer.image: may change only while the TrainJob is suspended")
    grown = copy.deepcopy(running)
    grown["spec"]["trainer"]["numNodes"] = 2
    static = load_sample("torch-distributed.yaml")
    (error,) = rules.validate_trainjob(grown, running, facts(static, active=1)).errors
    assert error.startswith("spec.trainer.numNodes: may change only while the TrainJob is suspended")


def env(obj: JSON, runtime: JSON) -> dict[str, str | None]:
    job_ = TrainJob.model_validate(obj)
    (built,) = build_children(info(job_, ClusterTrainingRuntime.model_validate(runtime)), suspend=False).jobs
    (node,) = built["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in node["env"]}


def test_an_elastic_job_gets_torchrun_s_c10d_rendezvous() -> None:
    got = env(trainjob(2), elastic_runtime())
    master = "pytorch-simple-node-0-0.pytorch-simple"
    assert got["PET_NNODES"] == "1:3"
    assert got["PET_RDZV_BACKEND"] == "c10d"
    assert got["PET_RDZV_ENDPOINT"] == f"{master}.default.svc.cluster.local:29500"
    assert got["PET_RDZV_ID"] == "uid-1"
    assert got["PET_MAX_RESTARTS"] == "5"
    assert got["PET_MASTER_ADDR"] == master


def test_the_pod_template_of_an_elastic_job_is_the_same_at_every_size() -> None:
    assert env(trainjob(1), elastic_runtime()) == env(trainjob(3), elastic_runtime())


def test_a_static_job_keeps_its_environment() -> None:
    got = env(trainjob(2), load_sample("torch-distributed.yaml"))
    assert got["PET_NNODES"] == "2"
    assert not {"PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS"} & set(got)


def test_without_max_restarts_torchrun_s_default_holds() -> None:
    got = env(trainjob(2), elastic_runtime(maxNodes=2))
    assert got["PET_NNODES"] == "1:2" and "PET_MAX_RESTARTS" not in got


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins"])
async def test_the_gang_of_an_elastic_job_needs_min_nodes(gang: str) -> None:
    runtime = elastic_runtime(minNodes=2, maxNodes=3)
    runtime["spec"]["mlPolicy"]["numNodes"] = 2
    runtime["spec"]["podGroupPolicy"] = {"volcano": {}} if gang == "volcano" else {"coscheduling": {}}
    w = World(objects=[runtime, trainjob(3)], scheduler=gang)
    await w.settle()
    groups = [o for (res, _), o in w.kube.objects.items() if res.kind == "PodGroup"]
    (group,) = groups
    assert group["spec"]["minMember"] == 2
    assert job(w, "node")["spec"]["parallelism"] == 3


def test_the_trainer_job_absorbs_max_restarts_failed_members() -> None:
    job_ = TrainJob.model_validate(trainjob(2))
    (built,) = build_children(info(job_, ClusterTrainingRuntime.model_validate(elastic_runtime())), False).jobs
    assert built["spec"]["backoffLimit"] == 5
    static = ClusterTrainingRuntime.model_validate(load_sample("torch-distributed.yaml"))
    (built,) = build_children(info(job_, static), False).jobs
    assert "backoffLimit" not in built["spec"]


def failed_job(failed_condition: bool) -> JSON:
    status: JSON = {"active": 1, "failed": 1}
    if failed_condition:
        status["conditions"] = [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "too many"}
        ]
    return {"metadata": {"name": "pytorch-simple-node-0", "namespace": "default"}, "status": status}


def test_a_member_s_failure_is_no_failure_of_the_job_until_the_job_fails() -> None:
    member_lost = failed_job(False)
    assert not job_failed(member_lost)
    assert decide(None, [j for j in [member_lost] if job_failed(j)], 0) is None
    spent = failed_job(True)
    decision = decide(None, [spent], 0)
    assert decision is not None and decision.fail


def test_a_running_elastic_job_is_scaled_in_place_and_told() -> None:
    running = {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"parallelism": 1, "completions": 1}}
    wanted = {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"parallelism": 2, "completions": 2}}
    out = resize([running], [wanted], in_place=True)
    assert out.scale == [("ns", "a", {"spec": {"parallelism": 2, "completions": 2}})]
    assert out.scaled == "Scaled in place: Job a from 1 to 2 pods"
    assert out.delete == [] and out.message == ""
    assert resize([running], [wanted]).scale == [], "a job that is not elastic is never scaled in place"


async def test_scaling_an_elastic_trainjob_patches_its_running_job_and_reports_the_scale_status() -> None:
    w = World(objects=[elastic_runtime(), trainjob(1)])
    await w.settle()
    assert job(w, "node")["spec"]["parallelism"] == 1
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    assert status["elastic"] == {"minNodes": 1, "maxNodes": 3}
    assert status["selector"] == (
        "jobset.sigs.k8s.io/jobset-name=pytorch-simple,jobset.sigs.k8s.io/replicatedjob-name=node"
    )
    assert status["replicas"] == 0
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["trainer"]["numNodes"] = 2
    w.kube.put(tj)
    await w.settle()
    scaled = job(w, "node")
    assert (scaled["spec"]["parallelism"], scaled["spec"]["completions"]) == (2, 2)
    assert [x.verb for x in w.kube.writes if x.kind == JOBS.kind].count("delete") == 0
    (event,) = [x.body for x in w.kube.writes if x.kind == "Event" and x.body.get("reason") == REASON_SCALED]
    assert event["message"] == "Scaled in place: Job pytorch-simple-node-0 from 1 to 2 pods"


def test_the_gang_input_of_an_elastic_job_asks_min_nodes_and_of_a_static_one_every_pod() -> None:
    runtime = elastic_runtime(minNodes=2, maxNodes=3)
    runtime["spec"]["mlPolicy"]["numNodes"] = 2
    job_ = TrainJob.model_validate(trainjob(3))
    gang = info(job_, ClusterTrainingRuntime.model_validate(runtime)).gang
    assert gang.min_available == 2 and sum(ps.count for ps in gang.pod_sets) == 3
    static = ClusterTrainingRuntime.model_validate(load_sample("torch-distributed.yaml"))
    assert info(job_, static).gang.min_available is None

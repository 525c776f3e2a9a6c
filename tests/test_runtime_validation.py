"""Runtime and TrainJob rules beyond the schema (JobSet's and Trainer's webhooks), and the JobSet
settings they guard: each refusal names the field; each setting changes the children as JobSet does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from tests.conftest import SAMPLES, info
from trainer.builders.jobs import build_children
from trainer.runtime_validation import runtime_errors, trainjob_errors

JSON = dict[str, Any]


def base() -> JSON:
    data: JSON = yaml.safe_load((SAMPLES / "upstream" / "torch-distributed.yaml").read_text())
    return data


def with_rjobs(*extra: JSON, **spec: Any) -> JSON:
    rt = base()
    rt["spec"]["template"]["spec"]["replicatedJobs"] += list(extra)
    rt["spec"]["template"]["spec"].update(spec)
    return rt


def plain(name: str, **fields: Any) -> JSON:
    pod = {"containers": [{"name": "c", "image": "busybox", "volumeMounts": fields.pop("mounts", [])}]}
    return {"name": name, "template": {"spec": {"template": {"spec": pod}, **fields.pop("job", {})}}, **fields}


def errors(rt: JSON) -> list[str]:
    return runtime_errors(ClusterTrainingRuntime.model_validate(rt).spec)


def one(rt: JSON) -> str:
    (err,) = errors(rt)
    return err


def test_trainer_replicas_above_one_are_refused_naming_replicas() -> None:
    rt = base()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    err = one(rt)
    assert err.startswith("spec.template.spec.replicatedJobs[0].replicas: always must be 1") and "numNodes" in err


def test_a_step_without_its_container_is_refused() -> None:
    rt = base()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "name"
    ] = "trainer"
    assert "must contain the required container for the ancestor: trainer" in one(rt)


@pytest.mark.parametrize(
    ("deps", "message"),
    [
        ([{"name": "later", "status": "Ready"}], "replicatedJob: first cannot depend on replicatedJob: later"),
        ([{"name": "first", "status": "Ready"}], "replicatedJob: first cannot depend on replicatedJob: first"),
    ],
)
def test_depends_on_names_an_earlier_replicated_job(deps: list[JSON], message: str) -> None:
    rt = with_rjobs(plain("first", dependsOn=deps), plain("later"))
    assert any(message in e for e in errors(rt))


def test_the_first_replicated_job_cannot_depend_on_anything() -> None:
    rt = with_rjobs(plain("other"))
    rjobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    rjobs[0]["dependsOn"] = [{"name": "other", "status": "Complete"}]
    assert any("DependsOn can't be set for the first ReplicatedJob" in e for e in errors(rt))


def test_policy_targets_and_rule_names_and_reasons() -> None:
    rt = with_rjobs(
        successPolicy={"operator": "All", "targetReplicatedJobs": ["ghost"]},
        failurePolicy={"rules": [{"name": "1bad", "action": "FailJobSet", "onJobFailureReasons": ["OOMKilled"]}]},
    )
    got = errors(rt)
    assert any("successPolicy.targetReplicatedJobs: invalid replicatedJob name 'ghost'" in e for e in got)
    assert any("rules[0].name: invalid failure policy rule name '1bad'" in e for e in got)
    assert any("'OOMKilled' is not a recognized job failure reason" in e for e in got)


def test_coordinator_must_name_an_existing_pod() -> None:
    assert "coordinator replicatedJob ghost does not exist" in one(with_rjobs(coordinator={"replicatedJob": "ghost"}))
    no_completions = with_rjobs(coordinator={"replicatedJob": "node"})
    assert "completions number must be set" in one(no_completions)
    out_of_range = with_rjobs(
        plain("side", job={"completions": 2}), coordinator={"replicatedJob": "side", "podIndex": 2}
    )
    assert "coordinator pod index 2 is invalid for replicatedJob side" in one(out_of_range)


def test_volume_claim_templates_must_be_mounted_and_unique() -> None:
    template = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    unmounted = with_rjobs(volumeClaimPolicies=[{"templates": [template]}])
    assert "don't have a matching volumeMount: data" in one(unmounted)
    twice = with_rjobs(
        plain("side", mounts=[{"name": "data", "mountPath": "/d"}]),
        volumeClaimPolicies=[{"templates": [template]}, {"templates": [template]}],
    )
    assert "names must be unique for VolumeClaimPolicies template" in one(twice)


def test_env_injection_targets_must_exist() -> None:
    rt = with_rjobs(plain("side"))
    rt["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": [{"jobName": "side", "containerNames": ["x"]}]}}
    assert "envInjection target podSet 'side' container 'x' not found" in one(rt)


def test_names_that_would_not_fit_63_characters_are_refused_up_front() -> None:
    rt = ClusterTrainingRuntime.model_validate(base())
    long_name = "t" * 50
    job = TrainJob.model_validate(
        {"metadata": {"name": long_name, "namespace": "ns", "uid": "u"}, "spec": {"runtimeRef": {"name": "x"}}}
    )
    (err,) = trainjob_errors(info(job, rt))
    assert "pod names generated for this TrainJob will exceed 63 characters" in err
    job.metadata.name = "t" * 58
    (err,) = trainjob_errors(info(job, rt))
    assert "job names generated for this TrainJob will exceed 63 characters" in err


def expand(rt: JSON, observed: list[JSON] | None = None) -> Any:
    job = TrainJob.model_validate(
        {"metadata": {"name": "tj", "namespace": "ns", "uid": "u"}, "spec": {"runtimeRef": {"name": "x"}}}
    )
    return build_children(info(job, ClusterTrainingRuntime.model_validate(rt), observed or []), suspend=False)


def test_dns_hostnames_disabled_means_no_service_and_no_subdomain() -> None:
    built = expand(with_rjobs(network={"enableDNSHostnames": False}))
    assert built.service is None
    assert "subdomain" not in built.jobs[0]["spec"]["template"]["spec"]


def test_subdomain_and_publish_not_ready_addresses_reach_the_service() -> None:
    built = expand(with_rjobs(network={"subdomain": "mesh", "publishNotReadyAddresses": False}))
    assert built.service["metadata"]["name"] == "mesh"
    assert built.service["spec"]["publishNotReadyAddresses"] is False
    assert built.jobs[0]["spec"]["template"]["spec"]["subdomain"] == "mesh"


def test_coordinator_and_groups_label_every_job_and_pod() -> None:
    second = plain("side", groupName="workers", replicas=2, job={"completions": 1})
    built = expand(with_rjobs(second, coordinator={"replicatedJob": "node"}))
    by_name = {j["metadata"]["name"]: j for j in built.jobs}
    side1 = by_name["tj-side-1"]
    for meta in (side1["metadata"], side1["spec"]["template"]["metadata"]):
        assert meta["labels"]["jobset.sigs.k8s.io/coordinator"] == "tj-node-0-0.tj"
        assert meta["labels"]["jobset.sigs.k8s.io/group-name"] == "workers"
        assert meta["labels"]["jobset.sigs.k8s.io/group-replicas"] == "2"
        assert meta["labels"]["jobset.sigs.k8s.io/job-group-index"] == "1"
        assert meta["labels"]["jobset.sigs.k8s.io/job-global-index"] == "2"
        assert meta["annotations"]["jobset.sigs.k8s.io/global-replicas"] == "3"


def test_startup_policy_in_order_waits_for_the_previous_replicated_job() -> None:
    rt = with_rjobs(plain("side"), startupPolicy={"startupPolicyOrder": "InOrder"})
    built = expand(rt)
    assert [j["metadata"]["name"] for j in built.jobs] == ["tj-node-0"]
    assert built.waiting["side"].startswith("startupPolicy InOrder: waiting for replicated job 'node' to be Ready")
    ready = copy.deepcopy(built.jobs[0]) | {"status": {"ready": 1, "active": 1}}
    assert [j["metadata"]["name"] for j in expand(rt, [ready]).jobs] == ["tj-node-0", "tj-side-0"]


def test_runtime_patches_reach_template_job_and_pod_metadata_and_replace_tolerations() -> None:
    rt = with_rjobs()
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["tolerations"] = [{"key": "old", "operator": "Exists"}]
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": {"from": "template"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"annotations": {"from": "job"}},
                                "spec": {
                                    "template": {
                                        "metadata": {"labels": {"from-pod": "pod"}},
                                        "spec": {"tolerations": [{"key": "new", "operator": "Exists"}]},
                                    }
                                },
                            },
                        }
                    ]
                },
            }
        },
    }
    job = TrainJob.model_validate(
        {
            "metadata": {"name": "tj", "namespace": "ns", "uid": "u"},
            "spec": {"runtimeRef": {"name": "x"}, "runtimePatches": [patch]},
        }
    )
    (built,) = build_children(info(job, ClusterTrainingRuntime.model_validate(rt)), False).jobs
    assert built["metadata"]["labels"]["from"] == "template"
    assert built["metadata"]["annotations"]["from"] == "job"
    assert built["spec"]["template"]["metadata"]["labels"]["from-pod"] == "pod"
    assert built["spec"]["template"]["spec"]["tolerations"] == [{"key": "new", "operator": "Exists"}]

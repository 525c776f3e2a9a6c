"""Runtime and TrainJob rules beyond the schema (JobSet's and Trainer's webhooks), and the JobSet
settings they guard: each refusal names the field; each setting changes the children as JobSet does."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SAMPLES, info, load_sample
from trainer.api.crd import CRDS, crd
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.framework.json_codec import JSON
from trainer.mpijob.validation import mpijob_errors
from trainer.trainjob.children import build_children
from trainer.trainjob.validation import runtime_errors, trainjob_errors


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
    (err,) = trainjob_errors(info(job, rt).info)
    assert "pod names generated for this TrainJob will exceed 63 characters" in err
    job.metadata.name = "t" * 58
    (err,) = trainjob_errors(info(job, rt).info)
    assert "job names generated for this TrainJob will exceed 63 characters" in err


def test_a_replicated_job_name_longer_than_20_characters_is_refused_naming_it() -> None:
    rt = load_sample("torch-distributed.yaml")
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "a-very-long-node-name"  # 21
    errors = runtime_errors(ClusterTrainingRuntime.model_validate(rt).spec)
    assert errors == [
        "spec.template.spec.replicatedJobs[0].name: must be no more than 20 characters (got 21, "
        "'a-very-long-node-name'): it is part of every Job, Pod and hostname of the job; use a shorter name"
    ]
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "dataset-initializer"  # 19, upstream's longest
    assert runtime_errors(ClusterTrainingRuntime.model_validate(rt).spec) == []


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


# ---------------------------------------------------------------- what would end in silence or a retry loop


def tj(spec: JSON | None = None, name: str = "tj") -> TrainJob:
    return TrainJob.model_validate(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": "u"},
            "spec": {"runtimeRef": {"name": "x"}, **(spec or {})},
        }
    )


def job_errors(rt: JSON, spec: JSON | None = None, max_nodes: int = 0) -> list[str]:
    return trainjob_errors(info(tj(spec), ClusterTrainingRuntime.model_validate(rt)).info, max_nodes)


def test_a_replicated_job_with_no_replicas_is_refused_whatever_its_step() -> None:
    assert one(with_rjobs(plain("side", replicas=0))).startswith(
        "spec.template.spec.replicatedJobs[1].replicas: must be at least 1 (got 0): replicated job 'side' would "
        "create no Job"
    )
    rt = base()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 0
    assert "replicatedJobs[0].replicas: must be at least 1 (got 0)" in one(rt), "one message, not two"
    assert errors(with_rjobs(plain("side", replicas=3))) == []


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        ({"limits": {"cpu": "lots"}}, "containers[0].resources.limits[cpu]: 'lots' is not a quantity"),
        ({"requests": {"memory": "1 Gi"}}, "containers[0].resources.requests[memory]: '1 Gi' is not a quantity"),
        ({"requests": {"cpu": True}}, "requests[cpu]: True is not a quantity"),
        ({"limits": "lots"}, "containers[0].resources.limits: must be a map of resource name to quantity"),
    ],
)
def test_runtime_quantities_the_apiserver_cannot_read_are_refused_naming_them(resources: JSON, named: str) -> None:
    rt = with_rjobs(plain("side"))
    rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ] = resources
    err = one(rt)
    assert err.startswith("spec.template.spec.replicatedJobs[1].template.spec.template.spec.") and named in err


def test_valid_quantities_pass() -> None:
    rt = with_rjobs(plain("side"))
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": {"cpu": 2, "memory": "4Gi"}, "requests": {"cpu": "500m"}}
    pod["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": 0.5, "ephemeral-storage": "1e3"}}}]
    assert errors(rt) == []
    assert job_errors(base(), {"trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}}) == []


def test_resources_per_node_quantities_are_checked() -> None:
    (err,) = job_errors(base(), {"trainer": {"resourcesPerNode": {"requests": {"cpu": "lots"}}}})
    assert err.startswith("spec.trainer.resourcesPerNode.requests[cpu]: 'lots' is not a quantity")


def test_the_crd_schema_refuses_what_the_apiserver_cannot_read() -> None:
    from trainer.api.base import QUANTITY_PATTERN
    from trainer.api.crd import CRDS, crd

    (spec,) = [c for c in CRDS if c.resource.kind == "TrainJob"]
    schema = crd(spec)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    per_node = schema["properties"]["spec"]["properties"]["trainer"]["properties"]["resourcesPerNode"]
    for key in ("limits", "requests"):
        item = per_node["properties"][key]["additionalProperties"]
        assert item["anyOf"] == [{"type": "integer"}, {"type": "string"}] and item["pattern"] == QUANTITY_PATTERN
        assert item["x-kubernetes-int-or-string"] is True
    (mpi,) = [c for c in CRDS if c.resource.kind == "MPIJob"]
    policy = crd(mpi)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    min_resources = policy["runPolicy"]["properties"]["schedulingPolicy"]["properties"]["minResources"]
    assert min_resources["additionalProperties"]["pattern"] == QUANTITY_PATTERN


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789.+-eEkKMGTPinum ", max_size=8))
def test_the_schema_pattern_accepts_every_quantity_the_apiserver_reads(text: str) -> None:
    from trainer.api.base import QUANTITY_PATTERN
    from trainer.framework.resources import parse_quantity

    try:
        parse_quantity(text)
    except ValueError:
        return
    assert re.fullmatch(QUANTITY_PATTERN, text), text


def test_overrides_of_replicated_jobs_the_runtime_lacks_are_refused_in_all_three_forms() -> None:
    patch = {"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "gone"}]}}}}
    got = job_errors(
        with_rjobs(plain("side")),
        {
            "podSpecOverrides": [{"targetJobs": [{"name": "side"}, {"name": "ghost"}]}],
            "podTemplateOverrides": [{"targetJobs": [{"name": "node"}]}, {"targetJobs": [{"name": "nope"}]}],
            "runtimePatches": [patch],
        },
    )
    assert got == [
        "spec.podSpecOverrides[0].targetJobs: replicated job 'ghost' is not in runtime 'x' (it has node, side)",
        "spec.podTemplateOverrides[1].targetJobs: replicated job 'nope' is not in runtime 'x' (it has node, side)",
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs: must not have replicated job that "
        "doesn't exist in the runtime job template: replicated job 'gone' is not in runtime 'x' (it has node, side)",
    ]


def test_num_nodes_above_the_limit_is_refused_naming_where_it_comes_from() -> None:
    (err,) = job_errors(base(), {"trainer": {"numNodes": 9}}, max_nodes=8)
    assert err.startswith("spec.trainer.numNodes: 9 nodes is more than this operator's limit of 8")
    assert "--max-nodes-per-job" in err
    assert job_errors(base(), {"trainer": {"numNodes": 8}}, max_nodes=8) == []
    assert job_errors(base(), {"trainer": {"numNodes": 100000}}, max_nodes=0) == [], "0: no limit"
    rt = base()
    rt["spec"]["mlPolicy"]["numNodes"] = 9
    (err,) = job_errors(rt, max_nodes=8)
    assert err.startswith("spec.mlPolicy.numNodes of runtime 'x' (set spec.trainer.numNodes): 9 nodes")


def test_the_pods_of_any_other_replicated_job_count_against_the_limit() -> None:
    rt = with_rjobs(plain("side", replicas=3, job={"parallelism": 3}))
    (err,) = job_errors(rt, max_nodes=8)
    assert "replicatedJobs[1] of runtime 'x': replicated job 'side' has 9 pods (3 replicas x 3 pods)" in err
    assert job_errors(rt, max_nodes=9) == []


def test_the_default_limit_is_applied_when_none_is_given() -> None:
    job = info(tj({"trainer": {"numNodes": 100000}}), ClusterTrainingRuntime.model_validate(base()))
    assert any("limit of 1000" in e for e in trainjob_errors(job.info))


def test_mpijob_workers_above_the_limit_and_bad_quantities_are_refused() -> None:
    mpi = MPIJob.model_validate(load_sample("mpijob.yaml"))
    assert mpijob_errors(mpi, 2) == []
    (err,) = mpijob_errors(mpi, 1)
    assert err.startswith("spec.mpiReplicaSpecs.Worker.replicas: 2 workers is more than this operator's limit of 1")
    assert mpijob_errors(mpi, 0) == []
    bad = load_sample("mpijob.yaml")
    bad["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "x"
    (err,) = mpijob_errors(MPIJob.model_validate(bad), 0)
    assert err.startswith("spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].resources.limits[cpu]: 'x'")


# ---------------------------------------------------------------- a Job template's own spec.scheduling


JOB_SCHEDULING = {"schedulingPolicy": {"gang": {"minCount": 2}}}
"""kubernetes v1.37.2 ``staging/src/k8s.io/api/batch/v1/types.go`` ``JobSpec.Scheduling``
(``JobSchedulingConfiguration``, feature gate ``WorkloadWithJob``, alpha since 1.36)."""


@pytest.mark.parametrize("index", [0, 1])
def test_a_job_templates_own_scheduling_is_refused_naming_the_field_and_the_runtimes_scheduling(index: int) -> None:
    rt = with_rjobs(plain("side"))
    rt["spec"]["template"]["spec"]["replicatedJobs"][index]["template"]["spec"]["scheduling"] = JOB_SCHEDULING
    err = one(rt)
    assert err.startswith(f"spec.template.spec.replicatedJobs[{index}].template.spec.scheduling: ")
    assert "WorkloadWithJob" in err and "controller owner" in err
    assert "set the runtime's spec.scheduling instead" in err and "--gang-scheduler-name=workload" in err
    assert "spec.scheduling.replicatedJobs[].job" in err, "the per-Job group is the runtime's level 3"


def test_an_empty_job_scheduling_is_refused_too_and_the_runtimes_own_scheduling_is_not() -> None:
    rt = base()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["scheduling"] = {}
    assert one(rt).startswith("spec.template.spec.replicatedJobs[0].template.spec.scheduling: ")
    ok = base()
    ok["spec"]["scheduling"] = {"schedulingPolicy": {"gang": {}}}
    assert errors(ok) == []


def test_a_training_runtime_with_job_scheduling_is_refused_as_a_cluster_one_is() -> None:
    rt = base()
    rt["kind"] = "TrainingRuntime"
    rt["metadata"]["namespace"] = "ns"
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["scheduling"] = JOB_SCHEDULING
    (err,) = runtime_errors(TrainingRuntime.model_validate(rt).spec)
    assert err.startswith("spec.template.spec.replicatedJobs[0].template.spec.scheduling: ")


def job_spec_patch_schema() -> JSON:
    """The TrainJob CRD's schema of ``runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]
    .template.spec`` (Trainer's ``JobSpecPatch``), the one place a TrainJob writes a Job spec."""
    (spec,) = [s for s in CRDS if s.model is TrainJob]
    version = crd(spec)["spec"]["versions"][0]
    props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    patch = props["runtimePatches"]["items"]["properties"]["trainingRuntimeSpec"]["properties"]["template"]
    rjob = patch["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    schema: JSON = rjob["properties"]["template"]["properties"]["spec"]
    return schema


def test_a_trainjob_cannot_write_a_job_scheduling_the_schema_prunes_it_and_the_expansion_drops_it() -> None:
    """kubeflow/trainer ``pkg/apis/trainer/v1alpha1/trainjob_types.go`` ``JobSpecPatch``: ``template`` only.
    The schema keeps no unknown field there, so the apiserver prunes ``scheduling`` (refuses it under strict
    field validation, kubectl's default) before any webhook sees it; the overrides (``podSpecOverrides``,
    ``podTemplateOverrides``) reach only the Pod template. Were it read anyway, no Job carries it."""
    schema = job_spec_patch_schema()
    assert set(schema["properties"]) == {"template"}
    assert "x-kubernetes-preserve-unknown-fields" not in schema
    patch = {
        "manager": "m",
        "trainingRuntimeSpec": {
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"scheduling": {}}}}]}}
        },
    }
    for overrides in (
        {"runtimePatches": [patch]},
        {"podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": {"scheduling": {}}}]},
    ):
        built = build_children(info(tj(overrides), ClusterTrainingRuntime.model_validate(base())), False)
        assert [j for j in built.jobs if "scheduling" in j["spec"]] == [], overrides

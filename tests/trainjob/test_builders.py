"""The pure builders: TrainJob + runtime -> Jobs and Service, without a cluster."""

from __future__ import annotations

from typing import Any

from tests.conftest import info, multi_step_runtime
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.framework.merge import find_named
from trainer.trainjob.children import build_children


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_sample_expands_into_one_indexed_job_and_a_headless_service(
    trainjob: TrainJob, runtime: ClusterTrainingRuntime
) -> None:
    children = build_children(info(trainjob, runtime, []), suspend=False)
    assert [j["metadata"]["name"] for j in children.jobs] == ["pytorch-simple-node-0"]
    job = children.jobs[0]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 2
    assert job["spec"]["suspend"] is False
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "pytorch-simple"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert labels["jobset.sigs.k8s.io/job-index"] == "0"
    assert job["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert pod_spec(job)["subdomain"] == "pytorch-simple"
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainJob",
        "pytorch-simple",
        "uid-1",
        True,
    )
    svc = children.service
    assert svc is not None
    assert svc["metadata"]["name"] == "pytorch-simple"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": "pytorch-simple"}


def test_trainer_settings_and_torch_env_land_on_the_node_container(
    trainjob: TrainJob, runtime: ClusterTrainingRuntime
) -> None:
    job = build_children(info(trainjob, runtime, []), suspend=False).jobs[0]
    node = find_named(pod_spec(job)["containers"], "node")
    assert node is not None and trainjob.spec.trainer is not None
    assert trainjob.spec.trainer is not None and node["command"] == trainjob.spec.trainer.command
    assert node["resources"]["limits"]["cpu"] == "1"
    env = env_of(node)
    assert env["PET_NNODES"] == "2"
    assert env["PET_NPROC_PER_NODE"] == "1"  # auto on a CPU node: its CPUs (limit 1)
    assert env["PET_MASTER_ADDR"] == "pytorch-simple-node-0-0.pytorch-simple"
    assert env["PET_MASTER_PORT"] == "29500"
    assert env["PET_NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert {"containerPort": 29500, "protocol": "TCP"} in node["ports"]


def test_trainjob_num_proc_overrides_runtime_and_runtime_num_nodes_is_the_default() -> None:
    runtime = multi_step_runtime()
    tj = TrainJob.model_validate(
        {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {"runtimeRef": {"name": "with-init"}}}
    )
    done_init = {
        "metadata": {
            "name": "t-dataset-initializer-0",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "dataset-initializer"},
        },
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    jobs = build_children(info(tj, runtime, [done_init]), suspend=False).jobs
    node_job = next(j for j in jobs if j["metadata"]["name"] == "t-node-0")
    assert node_job["spec"]["parallelism"] == 3
    node = find_named(pod_spec(node_job)["containers"], "node")
    assert node is not None and env_of(node)["PET_NPROC_PER_NODE"] == "2"
    assert env_of(node)["A"] == "1"
    sidecar = find_named(pod_spec(node_job)["containers"], "sidecar")
    assert sidecar is not None and "env" not in sidecar


def test_depends_on_holds_back_a_replicated_job_until_its_dependency_completes() -> None:
    runtime = multi_step_runtime()
    tj = TrainJob.model_validate(
        {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {"runtimeRef": {"name": "with-init"}}}
    )
    first = build_children(info(tj, runtime, []), suspend=False)
    assert [j["metadata"]["name"] for j in first.jobs] == ["t-dataset-initializer-0"]
    assert "dataset-initializer" in first.waiting["node"]
    running_init = {
        "metadata": {
            "name": "t-dataset-initializer-0",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "dataset-initializer"},
        },
        "spec": {"parallelism": 1},
        "status": {"active": 1, "ready": 1},
    }
    # Ready is not Complete: still held back.
    assert build_children(info(tj, runtime, [running_init]), suspend=False).waiting
    running_init["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    after = build_children(info(tj, runtime, [running_init]), suspend=False)
    assert [j["metadata"]["name"] for j in after.jobs] == ["t-dataset-initializer-0", "t-node-0"]
    assert after.waiting == {}


def test_initializer_storage_uri_and_secret_reach_their_container() -> None:
    runtime = multi_step_runtime()
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
            "spec": {
                "runtimeRef": {"name": "with-init"},
                "initializer": {"dataset": {"storageUri": "hf://data", "secretRef": {"name": "creds"}}},
            },
        }
    )
    job = build_children(info(tj, runtime, []), suspend=True).jobs[0]
    init = find_named(pod_spec(job)["containers"], "dataset-initializer")
    assert init is not None
    assert env_of(init)["STORAGE_URI"] == "hf://data"
    assert init["envFrom"] == [{"secretRef": {"name": "creds"}}]
    assert job["spec"]["suspend"] is True


def test_pod_spec_overrides_reach_only_the_target_jobs() -> None:
    runtime = multi_step_runtime()
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
            "spec": {
                "runtimeRef": {"name": "with-init"},
                "podSpecOverrides": [
                    {
                        "targetJobs": [{"name": "dataset-initializer"}],
                        "schedulingGates": [{"name": "example.com/gate"}],
                        "nodeSelector": {"pool": "a"},
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "serviceAccountName": "sa",
                        "volumes": [{"name": "v", "emptyDir": {}}],
                        "containers": [
                            {
                                "name": "dataset-initializer",
                                "env": [{"name": "X", "value": "y"}],
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                            },
                            {"name": "not-in-runtime", "env": [{"name": "Z", "value": "z"}]},
                        ],
                    }
                ],
            },
        }
    )
    done_init = {
        "metadata": {
            "name": "t-dataset-initializer-0",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "dataset-initializer"},
        },
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    init_job, node_job = build_children(info(tj, runtime, [done_init]), suspend=False).jobs
    spec = pod_spec(init_job)
    assert spec["schedulingGates"] == [{"name": "example.com/gate"}]
    assert spec["nodeSelector"] == {"pool": "a"}
    assert spec["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert spec["serviceAccountName"] == "sa"
    assert spec["volumes"] == [{"name": "v", "emptyDir": {}}]
    container = spec["containers"][0]
    assert env_of(container) == {"X": "y"}
    assert container["volumeMounts"] == [{"name": "v", "mountPath": "/v"}]
    assert [c["name"] for c in spec["containers"]] == ["dataset-initializer"]
    other = pod_spec(node_job)
    for field in ("schedulingGates", "nodeSelector", "tolerations", "serviceAccountName", "volumes"):
        assert field not in other


def test_runtime_patches_merge_like_overrides() -> None:
    runtime = multi_step_runtime()
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
            "spec": {
                "runtimeRef": {"name": "with-init"},
                "runtimePatches": [
                    {
                        "manager": "kueue.x-k8s.io/manager",
                        "trainingRuntimeSpec": {
                            "template": {
                                "spec": {
                                    "replicatedJobs": [
                                        {
                                            "name": "dataset-initializer",
                                            "template": {
                                                "spec": {
                                                    "template": {
                                                        "metadata": {"labels": {"kueue.x-k8s.io/podset": "init"}},
                                                        "spec": {
                                                            "nodeSelector": {"zone": "z1"},
                                                            "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
                                                        },
                                                    }
                                                }
                                            },
                                        }
                                    ]
                                }
                            }
                        },
                    }
                ],
            },
        }
    )
    init_job = build_children(info(tj, runtime, []), suspend=False).jobs[0]
    assert pod_spec(init_job)["nodeSelector"] == {"zone": "z1"}
    assert pod_spec(init_job)["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert init_job["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "init"


def test_builders_do_not_mutate_their_inputs(trainjob: TrainJob, runtime: ClusterTrainingRuntime) -> None:
    before = (trainjob.model_dump(), runtime.model_dump())
    first = build_children(info(trainjob, runtime, []), suspend=False)
    second = build_children(info(trainjob, runtime, []), suspend=False)
    assert first == second
    assert (trainjob.model_dump(), runtime.model_dump()) == before


def test_spec_labels_and_annotations_reach_jobs_and_pods(runtime: ClusterTrainingRuntime) -> None:
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "x", "namespace": "ns", "uid": "u"},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "labels": {"team": "a"},
                "annotations": {"note": "n"},
            },
        }
    )
    job = build_children(info(tj, runtime, []), suspend=False).jobs[0]
    assert job["metadata"]["labels"]["team"] == "a"
    assert job["metadata"]["annotations"]["note"] == "n"
    assert job["spec"]["template"]["metadata"]["labels"]["team"] == "a"
    assert job["spec"]["parallelism"] == 1


def test_pod_template_overrides_merge_metadata_and_spec() -> None:
    runtime = multi_step_runtime()
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
            "spec": {
                "runtimeRef": {"name": "with-init"},
                "podTemplateOverrides": [
                    {
                        "targetJobs": [{"name": "dataset-initializer"}],
                        "metadata": {"labels": {"kueue.x-k8s.io/podset": "init"}},
                        "spec": {"nodeSelector": {"zone": "z2"}, "tolerations": [{"key": "t", "operator": "Exists"}]},
                    }
                ],
            },
        }
    )
    init_job = build_children(info(tj, runtime, []), suspend=False).jobs[0]
    assert pod_spec(init_job)["nodeSelector"] == {"zone": "z2"}
    assert pod_spec(init_job)["tolerations"] == [{"key": "t", "operator": "Exists"}]
    assert init_job["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "init"


def test_the_trainjob_deadline_is_not_copied_to_jobs_and_a_job_deadline_names_the_reason(
    trainjob: TrainJob, runtime: ClusterTrainingRuntime
) -> None:
    from trainer.trainjob.status import desired_conditions

    tj = trainjob.model_copy(update={"spec": trainjob.spec.model_copy(update={"active_deadline_seconds": 30})})
    (job,) = build_children(info(tj, runtime, []), suspend=False).jobs
    assert "activeDeadlineSeconds" not in job["spec"], "one budget for the whole TrainJob, not one per Job"
    failed = {**job, "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    (cond,) = desired_conditions(info(tj, runtime, [failed]), [])
    assert (cond.type, cond.reason) == ("Failed", "DeadlineExceeded")

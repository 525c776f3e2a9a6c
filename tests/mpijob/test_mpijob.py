"""MPIJob: expansion, hostfile, SSH, validation, gang and status, without a cluster."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from pydantic import ValidationError

from tests.conftest import info, load_sample
from trainer.api.base import Condition
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.queues import resolve_queue
from trainer.framework.json_codec import JSON
from trainer.jobs.gang.base import GangInput, min_member
from trainer.jobs.mpi import Host, generate_ssh_keypair, hostfile, ssh_secret
from trainer.mpijob.children import build_mpijob_children, validate
from trainer.mpijob.controller import MPIJobInfo, mpijob_gang_input
from trainer.mpijob.status import desired_conditions, replica_statuses


def sample(**spec: Any) -> tuple[JSON, MPIJob]:
    obj = load_sample("mpijob.yaml")
    obj["metadata"]["uid"] = "uid-m"
    obj["spec"].update(spec)
    return obj, MPIJob.model_validate(obj)


def env(container: JSON) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_sample_expands_into_service_config_worker_and_launcher_jobs() -> None:
    obj, job = sample()
    c = build_mpijob_children(obj, job, {}, suspend=False)
    assert c.service["metadata"]["name"] == "pi" and c.service["spec"]["clusterIP"] == "None"
    assert c.config_map["metadata"]["name"] == "pi-config"
    assert c.config_map["data"]["hostfile"] == (
        "pi-worker-0.pi.default.svc slots=1\npi-worker-1.pi.default.svc slots=1\n"
    )
    assert "echo pi-worker-1.pi.default.svc:1" in c.config_map["data"]["discover_hosts.sh"]
    worker, launcher = c.worker_job, c.launcher_job
    assert worker is not None and launcher is not None
    assert worker["metadata"]["name"] == "pi-worker"
    assert (worker["spec"]["parallelism"], worker["spec"]["completions"], worker["spec"]["completionMode"]) == (
        2,
        2,
        "Indexed",
    )
    wpod = worker["spec"]["template"]["spec"]
    assert wpod["subdomain"] == "pi" and wpod["restartPolicy"] == "OnFailure"
    assert wpod["containers"][0]["volumeMounts"] == [{"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    secret_volume = next(v for v in wpod["volumes"] if v["name"] == "ssh-auth")["secret"]
    assert secret_volume["secretName"] == "pi-ssh"
    assert [i["path"] for i in secret_volume["items"]] == ["id_rsa", "id_rsa.pub", "authorized_keys"]
    assert launcher["metadata"]["name"] == "pi-launcher"
    lpod = launcher["spec"]["template"]["spec"]
    assert lpod["hostname"] == "pi-launcher" and lpod["subdomain"] == "pi"
    lenv = env(lpod["containers"][0])
    assert lenv["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert lenv["OMPI_MCA_orte_keep_fqdn_hostnames"] == "true"
    assert lenv["OMPI_MCA_orte_set_default_slots"] == "1"
    assert lenv["K_MPI_JOB_ROLE"] == "launcher"
    assert {"name": "mpi-job-config", "mountPath": "/etc/mpi"} in lpod["containers"][0]["volumeMounts"]
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert labels["training.kubeflow.org/job-name"] == "pi"
    assert labels["training.kubeflow.org/job-role"] == "worker"


def test_run_launcher_as_worker_and_intel_hostfile() -> None:
    obj, job = sample(runLauncherAsWorker=True, mpiImplementation="Intel", slotsPerWorker=4)
    c = build_mpijob_children(obj, job, {}, suspend=True)
    assert c.config_map["data"]["hostfile"].splitlines() == [
        "pi-launcher.pi.default.svc:4",
        "pi-worker-0.pi.default.svc:4",
        "pi-worker-1.pi.default.svc:4",
    ]
    assert c.launcher_job is not None and c.launcher_job["spec"]["suspend"] is True
    lenv = env(c.launcher_job["spec"]["template"]["spec"]["containers"][0])
    assert lenv["I_MPI_HYDRA_HOST_FILE"] == "/etc/mpi/hostfile"
    assert hostfile("MPICH", [Host("h", 2)]) == "h:2\n"


def test_run_policy_reaches_the_jobs() -> None:
    obj, job = sample(runPolicy={"activeDeadlineSeconds": 30, "backoffLimit": 2})
    c = build_mpijob_children(obj, job, {}, suspend=False)
    assert c.launcher_job is not None and c.worker_job is not None
    assert (c.launcher_job["spec"]["activeDeadlineSeconds"], c.launcher_job["spec"]["backoffLimit"]) == (30, 2)
    assert c.worker_job["spec"]["activeDeadlineSeconds"] == 30


def test_wait_for_workers_ready_creates_the_launcher_after_the_workers_and_keeps_it_out_of_the_gang() -> None:
    obj, job = sample(launcherCreationPolicy="WaitForWorkersReady")
    assert build_mpijob_children(obj, job, {}, suspend=False).launcher_job is None
    not_ready = {"worker": {"status": {"ready": 1}}}
    assert build_mpijob_children(obj, job, not_ready, suspend=False).launcher_job is None
    ready = {"worker": {"status": {"ready": 2}}}
    assert build_mpijob_children(obj, job, ready, suspend=False).launcher_job is not None
    # mpi-operator#608: the gang counts only what exists before it is admitted.
    assert min_member(gang_input(obj, job)) == 2
    _, at_startup = sample()
    assert min_member(gang_input(obj, at_startup)) == 3


def gang_input(obj: dict[str, Any], job: MPIJob) -> GangInput:
    """The gang of a new MPIJob (nothing observed yet) under Volcano."""
    queue = resolve_queue(obj, "volcano")
    return mpijob_gang_input(MPIJobInfo(obj, job, {}, [], queue, validate(job), False, False, None))


def test_scheduling_policy_queue_comes_first() -> None:
    obj, job = sample(
        runPolicy={"schedulingPolicy": {"queue": "production", "minAvailable": 2, "priorityClass": "high"}}
    )
    gi = gang_input(obj, job)
    assert (gi.queue.name, gi.queue.source) == ("production", "spec.runPolicy.schedulingPolicy.queue")
    assert (gi.min_available, gi.priority_class) == (2, "high")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"Launcher": {"replicas": 2}}, "spec.mpiReplicaSpecs.Launcher.replicas must be 1"),
        ({"Worker": {"replicas": 0}}, "spec.mpiReplicaSpecs.Worker.replicas must be at least 1"),
        ({"Launcher": None}, "spec.mpiReplicaSpecs.Launcher is missing"),
    ],
)
def test_validation_names_the_field(change: dict[str, Any], needle: str) -> None:
    obj = load_sample("mpijob.yaml")
    for role, patch in change.items():
        if patch is None:
            del obj["spec"]["mpiReplicaSpecs"][role]
        else:
            obj["spec"]["mpiReplicaSpecs"][role].update(patch)
    assert any(needle in m for m in validate(MPIJob.model_validate(obj)))


def test_a_name_too_long_for_worker_hostnames_is_refused_with_the_limit() -> None:
    obj = load_sample("mpijob.yaml")
    obj["metadata"]["name"] = "n" * 55
    (msg,) = validate(MPIJob.model_validate(obj))
    assert "metadata.name" in msg and "at most 54 characters" in msg
    obj["metadata"]["name"] = "n" * 54
    assert validate(MPIJob.model_validate(obj)) == []


def test_unknown_mpi_implementation_is_a_validation_error_naming_the_field() -> None:
    obj = load_sample("mpijob.yaml")
    obj["spec"]["mpiImplementation"] = "MVAPICH"
    with pytest.raises(ValidationError, match=r"mpi_implementation|mpiImplementation"):
        MPIJob.model_validate(obj)


def test_ssh_keys_are_ecdsa_p521_in_an_ssh_auth_secret() -> None:
    private, public = generate_ssh_keypair()
    key = serialization.load_pem_private_key(private.encode(), password=None)
    assert key.key_size == 521  # type: ignore[union-attr]
    assert public.startswith("ecdsa-sha2-nistp521 ")
    secret = ssh_secret(
        {"apiVersion": "v", "kind": "K", "metadata": {"name": "pi", "namespace": "d", "uid": "u"}},
        "pi-ssh",
        private,
        public,
    )
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(secret["data"]["ssh-publickey"]).decode().strip() == public


def test_status_follows_the_launcher() -> None:
    _, job = sample()
    running_launcher = {"status": {"active": 1, "ready": 1}}
    ready_workers = {"status": {"active": 2, "ready": 2}}
    conds = {c.type: c.reason for c in desired_conditions(job, running_launcher, ready_workers, [], [])}
    assert conds == {"Created": "MPIJobCreated", "Running": "MPIJobRunning"}
    done = {"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}
    have = [Condition(type="Running", status="True", reason="MPIJobRunning")]
    out = {c.type: (c.status, c.reason) for c in desired_conditions(job, done, ready_workers, have, [])}
    assert out["Succeeded"] == ("True", "MPIJobSucceeded") and out["Running"] == ("False", "MPIJobRunning")
    deadline = {
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                }
            ]
        }
    }
    out = {c.type: (c.status, c.reason) for c in desired_conditions(job, deadline, ready_workers, [], [])}
    assert out["Failed"] == ("True", "DeadlineExceeded")
    restarting = {"status": {"active": 1, "failed": 1}}
    assert "Restarting" in {c.type for c in desired_conditions(job, restarting, ready_workers, [], [])}
    statuses = replica_statuses(job, running_launcher, ready_workers)
    assert (statuses["Launcher"].active, statuses["Worker"].active) == (1, 2)


def test_suspended_status_and_invalid_spec() -> None:
    _, job = sample(runPolicy={"suspend": True})
    out = {c.type: c.reason for c in desired_conditions(job, None, None, [], [])}
    assert out["Suspended"] == "MPIJobSuspended"
    out = {c.type: c.reason for c in desired_conditions(job, None, None, [], ["spec.x is wrong"])}
    assert out["Failed"] == "InvalidSpec"


def test_trainjob_with_an_mpi_runtime_shares_the_hostfile_and_ssh_machinery() -> None:
    from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
    from trainer.trainjob.children import build_children

    runtime = ClusterTrainingRuntime.model_validate(load_sample("deepspeed-distributed.yaml"))
    obj = load_sample("trainjob-deepspeed.yaml")
    obj["metadata"]["uid"] = "u"
    tj = TrainJob.model_validate(obj)
    children = build_children(info(tj, runtime, []), suspend=False)
    launcher, node = children.jobs
    assert launcher["metadata"]["name"] == "deepspeed-simple-launcher-0"
    assert "parallelism" not in launcher["spec"], "the launcher keeps its template's single pod"
    assert node["spec"]["parallelism"] == node["spec"]["completions"] == 2
    (cm,) = children.config_maps
    assert cm["metadata"]["name"] == "deepspeed-simple-mpi-hostfile"
    assert cm["data"]["hostfile"].splitlines() == [
        "deepspeed-simple-launcher-0-0.deepspeed-simple slots=1",
        "deepspeed-simple-node-0-0.deepspeed-simple slots=1",
        "deepspeed-simple-node-0-1.deepspeed-simple slots=1",
    ]
    lpod = launcher["spec"]["template"]["spec"]
    lnode = lpod["containers"][0]
    assert lnode["command"] == ["mpirun", "python3", "/workspace/train.py"]
    assert env(lnode)["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    volumes = {v["name"]: v for v in lpod["volumes"]}
    assert volumes["ssh-auth"]["secret"]["secretName"] == "deepspeed-simple-mpi-ssh-auth"
    assert volumes["mpi-job-config"]["configMap"]["name"] == "deepspeed-simple-mpi-hostfile"
    npod = node["spec"]["template"]["spec"]
    assert {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"} in npod["containers"][0]["volumeMounts"]
    assert "PET_NNODES" not in env(lnode)


@pytest.mark.parametrize(
    ("trainer", "node_pods", "extra"),
    [
        # Upstream's DeepSpeed runtime as published (numNodes 1, runLauncherAsNode): the node Job still
        # runs one pod (never zero), with or without trainer.numNodes.
        (None, 1, {}),
        ({"numNodes": 1}, 1, {}),
        ({"numNodes": 2}, 1, {}),
        ({"numNodes": 3}, 2, {}),
        # Without trainer.numNodes the node Job has the runtime's own count: its template's parallelism
        # (mlPolicy.numNodes sizes only a replicated job labelled the trainer step).
        (None, 1, {"numNodes": 4}),
        (None, 3, {"parallelism": 3}),
    ],
)
def test_the_node_job_of_an_mpi_runtime_is_sized_as_upstreams_mpi_plugin_sizes_it(
    trainer: JSON | None, node_pods: int, extra: dict[str, int]
) -> None:
    """kubeflow/trainer ``plugins/mpi`` ``EnforceMLPolicy``: ``max(numNodes - 1, 1)`` with
    runLauncherAsNode, and without ``trainer.numNodes`` the PodSet count of the runtime."""
    from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
    from trainer.trainjob.children import build_children

    raw = load_sample("upstream/deepspeed-distributed.yaml")
    if "numNodes" in extra:
        raw["spec"]["mlPolicy"]["numNodes"] = extra["numNodes"]
    node_rjob = next(r for r in raw["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == "node")
    if "parallelism" in extra:
        node_rjob["template"]["spec"]["parallelism"] = extra["parallelism"]
    runtime = ClusterTrainingRuntime.model_validate(raw)
    spec: JSON = {"runtimeRef": {"name": "deepspeed-distributed"}} | ({"trainer": trainer} if trainer else {})
    tj = TrainJob.model_validate({"metadata": {"name": "ds", "namespace": "ns", "uid": "u"}, "spec": spec})
    children = build_children(info(tj, runtime, []), suspend=False)
    node = next(j for j in children.jobs if j["metadata"]["name"] == "ds-node-0")
    assert node["spec"]["parallelism"] == node["spec"]["completions"] == node_pods
    (cm,) = children.config_maps
    assert cm["data"]["hostfile"].splitlines() == [
        *(f"ds-node-0-{i}.ds slots=1" for i in range(node_pods)),
        "ds-launcher-0-0.ds slots=1",
    ]

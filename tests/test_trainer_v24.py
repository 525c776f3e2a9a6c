"""Kubeflow Trainer v2.4 behaviour: replicated job names of at most 20 characters (#4394), the TrainJob's
image on the MPI workers too (#4301), Open MPI 5's ``PRTE_MCA_*`` beside the ORTE names (#4029, for
MPIJobs as well), JobSet's words on ``Complete``; and what an upgrade to them must not break (a running
Job is never rewritten; a suspended one made before is recreated when resumed)."""

from __future__ import annotations

import copy
from typing import Any

from api.kinds import JOBS, TRAINJOBS
from api.trainer_v1alpha1 import ClusterTrainingRuntime
from tests.conftest import load_sample
from tests.harness import World
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.trainjob.policies.mpi import MPI
from trainer.trainjob.validation import runtime_errors
from trainer.webhook.rules import default_patch

PRTE = {
    "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
    "PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
    "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
}


def env_of(job: JSON, container: str = "node") -> dict[str, Any]:
    pod = job["spec"]["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == container]
    return {e["name"]: e.get("value") for e in c.get("env") or []}


def job(w: World, rjob: str) -> JSON:
    (out,) = [j for j in w.jobs() if j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rjob]
    return out


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


async def test_the_trainjobs_image_runs_the_mpi_launcher_and_its_workers() -> None:
    w = World("deepspeed-mpi", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["trainer"]["image"] = "registry.example/mine:1"
    w.kube.put(tj)
    await w.settle()
    for rjob in ("launcher", "node"):
        (node,) = [c for c in job(w, rjob)["spec"]["template"]["spec"]["containers"] if c["name"] == "node"]
        assert node["image"] == "registry.example/mine:1", rjob


async def test_open_mpi_5_reads_the_hostfile_of_a_trainjob_and_of_an_mpijob() -> None:
    w = World("deepspeed-mpi", "none")
    await w.settle()
    env = env_of(job(w, "launcher"))
    assert {k: env[k] for k in PRTE} == PRTE and env["PRTE_MCA_prte_set_default_slots"] == "1"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile", "Open MPI 4's names stay"
    assert "PRTE_MCA_" not in "".join(env_of(job(w, "node"))), "the workers run sshd, not mpirun"
    assert MPI.reserves("PRTE_MCA_prte_default_hostfile"), "a runtime or TrainJob may not set them"
    m = World("mpijob", "none")
    await m.settle()
    (launcher,) = [j for j in m.jobs() if j["metadata"]["name"].endswith("-launcher")]
    container = launcher["spec"]["template"]["spec"]["containers"][0]["name"]
    assert {k: env_of(launcher, container)[k] for k in PRTE} == PRTE


async def test_the_complete_condition_says_jobsets_words() -> None:
    w = World("torch", "none")
    await w.settle()
    w.complete_jobs()
    await w.settle()
    cond = w.condition("Complete")
    assert cond is not None and (cond["reason"], cond["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )


async def test_a_running_job_is_not_rewritten_when_a_newer_operator_wants_another_template() -> None:
    w = World("deepspeed-mpi", "none")
    await w.settle()
    launcher = copy.deepcopy(job(w, "launcher"))
    annotations = launcher["metadata"]["annotations"]
    annotations["trainer.kubeflow.org/desired-hash"] = "made-by-an-older-release"
    w.kube.put(launcher)
    writes = w.kube.count()
    await w.settle()
    assert w.kube.count("apply", JOBS.kind) + w.kube.count("json_patch", JOBS.kind) == 0, w.kube.writes[writes:]


async def test_a_suspended_job_made_by_an_older_release_is_recreated_when_resumed() -> None:
    """Its Pod template differs in more than scheduling directives, which the apiserver refuses to
    change (422): the Job, which has no Pods, is recreated with the new template instead of failing."""
    w = World("deepspeed-mpi", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = True
    w.kube.put(tj)
    await w.settle()
    old = job(w, "launcher")
    assert old["spec"]["suspend"] is True
    old["metadata"]["annotations"]["trainer.kubeflow.org/desired-hash"] = "made-by-an-older-release"
    w.kube.put(old)
    apply = w.kube.apply

    async def immutable(obj: JSON, manager: str, force: bool = True) -> JSON:
        stored = w.kube.objects.get((JOBS, (obj["metadata"]["namespace"], obj["metadata"]["name"])))
        if obj["kind"] == JOBS.kind and stored is not None and stored["metadata"]["uid"] == old["metadata"]["uid"]:
            raise ApiError(422, {"reason": "Invalid", "message": "spec.template: field is immutable"})
        return await apply(obj, manager, force)

    w.kube.apply = immutable  # type: ignore[method-assign]
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = False
    w.kube.put(tj)
    await w.settle()
    new = job(w, "launcher")
    assert new["metadata"]["uid"] != old["metadata"]["uid"] and new["spec"]["suspend"] is False
    assert "PRTE_MCA_prte_default_hostfile" in env_of(new)
    assert w.condition("Misconfigured") is None


def test_runtime_patch_times_are_stamped_on_create_and_kept_for_unchanged_entries() -> None:
    def tj(*patches: JSON) -> JSON:
        return {"kind": "TrainJob", "spec": {"runtimePatches": list(patches)}}

    kueue = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"metadata": {}}}}
    sdk = {"manager": "trainer.kubeflow.org/sdk", "trainingRuntimeSpec": {}}
    created = default_patch(tj(kueue, {**sdk, "time": "2026-01-01T00:00:00Z"}), "TrainJob", "none", None, "T1")
    assert created == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": "T1"}], "a set time stays"
    old = tj({**kueue, "time": "T1"}, {**sdk, "time": "T1"})
    changed = {**sdk, "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}}
    # Kueue's entry unchanged (sent without its time), the SDK's changed, a third one new.
    new = tj(kueue, {**changed, "time": "T1"}, {"manager": "other", "trainingRuntimeSpec": {}})
    assert default_patch(new, "TrainJob", "none", old, "T2") == [
        {"op": "add", "path": "/spec/runtimePatches/0/time", "value": "T1"},
        {"op": "replace", "path": "/spec/runtimePatches/1/time", "value": "T2"},
        {"op": "add", "path": "/spec/runtimePatches/2/time", "value": "T2"},
    ]
    assert default_patch(old, "TrainJob", "none", old, "T2") == [], "an update that changes nothing stamps nothing"

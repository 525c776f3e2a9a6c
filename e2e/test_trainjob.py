"""TrainJob end to end on the real local cluster: children, overrides, gates, suspend, dependsOn,
deletion and a missing runtime. Pods run on KWOK nodes, which drive them to Running and then
Succeeded after the delay their annotations ask for."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from e2e.helpers import ROOT, log_events, size
from localcluster.client import Client, condition, wait_for
from localcluster.operator_process import Operator
from trainer.api.kinds import CONFIGMAPS, JOBS, PODS, SECRETS, SERVICES, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e
QUIET_LOG = True
"""The operator logs no error and only JSON over this module (checked by the operator fixture)."""
RUN_FOR = {  # KWOK completes pods carrying these after ~delay (jitter must exceed delay)
    "pod-complete.stage.kwok.x-k8s.io/delay": "600s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "601s",
}


def rjob(name: str, step: str | None = None, run_for: dict[str, str] | None = None, **extra: Any) -> JSON:
    """A replicated job whose pods run ``run_for`` (default: complete at once)."""
    labels = {"trainer.kubeflow.org/trainjob-ancestor-step": step} if step else {}
    return {
        "name": name,
        **extra,
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "template": {
                    "metadata": {"annotations": run_for or {}},
                    "spec": {
                        "containers": [
                            {
                                "name": "node" if step == "trainer" else name,
                                "image": "busybox",
                                "env": [{"name": "R", "value": name}],
                            }
                        ]
                    },
                }
            },
        },
    }


def runtime(name: str, *rjobs: JSON, torch: bool = True) -> JSON:
    spec: JSON = {"template": {"spec": {"replicatedJobs": list(rjobs)}}}
    if torch:
        spec["mlPolicy"] = {"numNodes": 1, "torch": {"numProcPerNode": "auto"}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": spec,
    }


def trainjob(name: str, runtime_name: str, kind: str = "TrainingRuntime", **spec: Any) -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime_name, "kind": kind}, **spec},
    }


def env(container: JSON) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def gated(pod: JSON) -> bool:
    c = condition(pod, "PodScheduled")
    return bool(c and c.get("reason") == "SchedulingGated")


async def test_sample_trainjob_runs_to_complete(client: Client, samples: None, ns: str) -> None:
    await client.apply_file(ROOT / "config" / "samples" / "trainjob.yaml", ns)
    tj = await client.wait_condition(ns, "pytorch-simple", "Complete", timeout=90)
    assert tj["status"]["conditions"][-1]["type"] == "Complete"
    assert tj["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    (job,) = await client.jobs(ns, "pytorch-simple")
    assert job["metadata"]["name"] == "pytorch-simple-node-0"
    assert (job["spec"]["parallelism"], job["spec"]["completions"], job["spec"]["completionMode"]) == (2, 2, "Indexed")
    assert job["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=pytorch-simple")
    assert len(pods) == 2
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        assert labels["jobset.sigs.k8s.io/job-index"] == "0"
        index = labels["batch.kubernetes.io/job-completion-index"]
        assert pod["spec"]["hostname"] == f"pytorch-simple-node-0-{index}"
        assert pod["spec"]["subdomain"] == "pytorch-simple"
        node = pod["spec"]["containers"][0]
        assert env(node)["PET_NNODES"] == "2"
        assert env(node)["PET_MASTER_ADDR"] == "pytorch-simple-node-0-0.pytorch-simple"
        assert node["resources"]["requests"]["cpu"] == "1"
        assert pod["status"]["phase"] == "Succeeded"
    svc = await client.service(ns, "pytorch-simple")
    assert svc is not None and svc["spec"]["clusterIP"] == "None"
    events = await client.wait_events(ns, "pytorch-simple", bool, "the TrainJob's event")
    # As JobSet: no event per child created, one at the end.
    assert [e["reason"] for e in events] == ["AllJobsCompleted"]
    assert "SuccessfulCreate" in {e["reason"] for e in await client.events(ns, "pytorch-simple-node-0")}


async def test_no_condition_but_jobs_status_while_pods_run(client: Client, ns: str) -> None:
    """As upstream: a running TrainJob carries no condition (the official SDK reads that as Running)."""
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("long", "rt", trainer={"numNodes": 3}), ns)
    tj = await client.wait_running(ns, "long", timeout=60)
    assert not tj["status"].get("conditions")
    assert tj["status"]["jobsStatus"][0] == {
        "name": "node",
        "ready": 1,
        "succeeded": 0,
        "failed": 0,
        "active": 1,
        "suspended": 0,
    }
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=long")
    assert [p["status"]["phase"] for p in pods] == ["Running"] * 3


async def test_scheduling_gates_reach_only_the_targeted_pods_until_removed(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR), rjob("aux", None, RUN_FOR)), ns)
    override = {"targetJobs": [{"name": "aux"}], "schedulingGates": [{"name": "example.com/hold"}]}
    await client.apply(trainjob("gates", "rt", podSpecOverrides=[override]), ns)

    async def both_sides() -> tuple[list[JSON], list[JSON]] | None:
        aux = await client.pods(ns, "jobset.sigs.k8s.io/replicatedjob-name=aux")
        node = await client.pods(ns, "jobset.sigs.k8s.io/replicatedjob-name=node")
        if aux and node and all(gated(p) for p in aux) and all(p["status"].get("phase") == "Running" for p in node):
            return aux, node
        return None

    aux, node = await wait_for(both_sides, "aux pods gated and node pods running")
    assert aux[0]["spec"]["schedulingGates"] == [{"name": "example.com/hold"}]
    assert "schedulingGates" not in node[0]["spec"]
    assert aux[0]["status"]["phase"] == "Pending" and "nodeName" not in aux[0]["spec"]
    # Kubernetes lets a gate be removed from a Pod; then it schedules and runs.
    await client.kube.merge_patch(PODS, ns, aux[0]["metadata"]["name"], {"spec": {"schedulingGates": None}})

    async def aux_running() -> JSON | None:
        (pod,) = await client.pods(ns, "jobset.sigs.k8s.io/replicatedjob-name=aux")
        return pod if pod["status"].get("phase") == "Running" else None

    pod = await wait_for(aux_running, "aux pod running once its gate is removed")
    assert pod["spec"]["nodeName"].startswith("kwok-node-")


async def test_suspend_holds_pods_overrides_change_while_suspended_and_resume_starts(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("sus", "rt", suspend=True, trainer={"numNodes": 2}), ns)
    tj = await client.wait_condition(ns, "sus", "Suspended")
    assert condition(tj, "Suspended")["reason"] == "Suspended"  # type: ignore[index]
    jobs = await wait_for(lambda: client.jobs(ns, "sus"), "suspended Job created")
    assert jobs[0]["spec"]["suspend"] is True
    await wait_for(lambda: _jobs_status_suspended(client, ns, "sus"), "jobsStatus counts the suspended Job", timeout=20)
    assert await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=sus") == []

    # Overrides changed while suspended reach the Job (scheduling directives and env alike).
    override = {
        "targetJobs": [{"name": "node"}],
        "nodeSelector": {"type": "kwok"},
        "schedulingGates": [{"name": "example.com/topology"}],
        "containers": [{"name": "node", "env": [{"name": "EXTRA", "value": "1"}]}],
    }
    await client.apply(trainjob("sus", "rt", suspend=True, trainer={"numNodes": 2}, podSpecOverrides=[override]), ns)

    async def job_updated() -> JSON | None:
        jobs = await client.jobs(ns, "sus")
        spec = jobs[0]["spec"]["template"]["spec"] if jobs else {}
        ok = spec.get("nodeSelector") == {"type": "kwok"} and env(spec["containers"][0]).get("EXTRA") == "1"
        return jobs[0] if ok else None

    job = await wait_for(job_updated, "overrides re-applied to the suspended Job")
    assert job["spec"]["template"]["spec"]["schedulingGates"] == [{"name": "example.com/topology"}]
    assert await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=sus") == []

    # Resume: pods are created, carrying the overrides (gated until the gate goes).
    await client.apply(trainjob("sus", "rt", suspend=False, trainer={"numNodes": 2}, podSpecOverrides=[override]), ns)
    await client.wait_gone(ns, "sus", "Suspended")  # resumed: as upstream, but no Suspended=False left over
    await client.wait_events(ns, "sus", lambda es: any(e["reason"] == "Resumed" for e in es), "Resumed")
    pods = await wait_for(
        lambda: _n_pods(client, ns, "jobset.sigs.k8s.io/jobset-name=sus", 2), "pods created after resume"
    )
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"type": "kwok"}
        assert env(pod["spec"]["containers"][0])["EXTRA"] == "1"
        assert pod["spec"]["schedulingGates"] == [{"name": "example.com/topology"}]


async def _jobs_status_suspended(client: Client, ns: str, name: str) -> bool:
    tj = await client.trainjob(ns, name)
    return bool(tj and (tj.get("status") or {}).get("jobsStatus", [{}])[0].get("suspended") == 1)


async def _n_pods(client: Client, ns: str, selector: str, n: int) -> list[JSON] | None:
    pods = await client.pods(ns, selector)
    return pods if len(pods) == n else None


async def test_depends_on_creates_the_trainer_only_after_the_initializer_completes(client: Client, ns: str) -> None:
    init_run = {
        "pod-complete.stage.kwok.x-k8s.io/delay": "3s",
        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "4s",
    }
    await client.apply(
        runtime(
            "rt",
            rjob("dataset-initializer", "dataset-initializer", init_run),
            rjob("node", "trainer", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}]),
        ),
        ns,
    )
    await client.apply(trainjob("dep", "rt", initializer={"dataset": {"storageUri": "hf://x"}}), ns)
    jobs = await wait_for(lambda: client.jobs(ns, "dep"), "initializer Job")
    assert [j["metadata"]["name"] for j in jobs] == ["dep-dataset-initializer-0"]
    assert env(jobs[0]["spec"]["template"]["spec"]["containers"][0])["STORAGE_URI"] == "hf://x"
    await client.wait_condition(ns, "dep", "Complete", timeout=60)
    init, node = await client.jobs(ns, "dep")
    completed = next(c for c in init["status"]["conditions"] if c["type"] == "Complete")["lastTransitionTime"]
    assert node["metadata"]["creationTimestamp"] >= completed


async def test_deleting_the_trainjob_removes_every_child(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR), rjob("aux", None, RUN_FOR)), ns)
    await client.apply(trainjob("del", "rt"), ns)
    await wait_for(lambda: _n_pods(client, ns, "jobset.sigs.k8s.io/jobset-name=del", 2), "pods of both jobs")
    assert await client.service(ns, "del") is not None
    await client.kube.delete(TRAINJOBS, ns, "del")

    async def gone() -> bool:
        jobs = await client.jobs(ns, "del")
        svc = await client.service(ns, "del")
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=del")
        return not jobs and svc is None and not pods and await client.trainjob(ns, "del") is None

    await wait_for(gone, "TrainJob, Jobs, Service and Pods deleted", timeout=60)


async def test_missing_runtime_gets_a_named_condition_and_recovers_when_it_appears(client: Client, ns: str) -> None:
    await client.apply(trainjob("orphan", "late-rt"), ns)
    tj = await client.wait_condition(ns, "orphan", "RuntimeNotFound")
    cond = condition(tj, "RuntimeNotFound")
    assert cond is not None and "TrainingRuntime 'late-rt' not found" in cond["message"]
    assert "spec.runtimeRef" in cond["message"]
    assert tj["status"]["conditions"][-1]["type"] == "RuntimeNotFound"
    await client.wait_events(
        ns, "orphan", lambda es: any(e["type"] == "Warning" and "late-rt" in e["message"] for e in es), "the Warning"
    )
    assert await client.jobs(ns, "orphan") == []

    await client.apply(runtime("late-rt", rjob("node", "trainer")), ns)
    done = await client.wait_condition(ns, "orphan", "Complete", timeout=60)
    assert condition(done, "RuntimeNotFound") is None


async def test_a_trainjob_managed_by_multikueue_is_left_alone(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(trainjob("mk", "rt", managedBy="kueue.x-k8s.io/multikueue"), ns)
    # A managed-by-us twin proves the operator is active in this namespace meanwhile.
    await client.apply(trainjob("ours", "rt"), ns)
    await client.wait_condition(ns, "ours", "Complete", timeout=60)
    assert await client.jobs(ns, "mk") == []
    assert await client.kube.get_or_none(SERVICES, ns, "mk") is None
    tj = await client.trainjob(ns, "mk")
    assert not (tj or {}).get("status")


async def test_a_failed_job_fails_the_trainjob_with_its_reason(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("fail", "rt"), ns)
    (job,) = await wait_for(lambda: client.jobs(ns, "fail"), "the Job")
    # Fail the Job for real: an activeDeadlineSeconds the Job controller enforces.
    await client.kube.merge_patch(JOBS, ns, job["metadata"]["name"], {"spec": {"activeDeadlineSeconds": 1}})
    tj = await client.wait_condition(ns, "fail", "Failed", timeout=60)
    failed = condition(tj, "Failed")
    # A Job failed by its deadline fails the TrainJob with upstream's reason DeadlineExceeded.
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert "Job fail-node-0 failed" in failed["message"]
    assert tj["status"]["jobsStatus"][0]["failed"] == 1


async def test_without_a_gang_scheduler_a_volcano_queue_is_reported_not_silently_dropped(
    client: Client, ns: str
) -> None:
    """Seed 000: the operator runs with --gang-scheduler-name=none, the job names a Volcano queue and
    its pods ask for schedulerName volcano; the job says which flag to change."""
    node = rjob("node", "trainer")
    node["template"]["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    await client.apply(runtime("rt", node), ns)
    job = trainjob("seed", "rt")
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "production"}
    await client.apply(job, ns)
    tj = await client.wait_condition(ns, "seed", "Misconfigured")
    cond = condition(tj, "Misconfigured")
    assert cond is not None and cond["reason"] == "QueueIgnored"
    assert "'production'" in cond["message"] and "--gang-scheduler-name=volcano" in cond["message"]
    assert "schedulerName 'volcano'" in cond["message"]
    await client.wait_events(
        ns, "seed", lambda es: any(e["type"] == "Warning" and e["reason"] == "QueueIgnored" for e in es), "QueueIgnored"
    )


async def test_a_trainjob_on_an_mpi_runtime_keeps_one_ssh_secret_and_one_hostfile(
    client: Client, ns: str, operator: Operator
) -> None:
    """A new key pair under running pods would break every ssh between launcher and nodes: the Secret
    (and the hostfile) are written once, whatever reconciles follow."""
    await client.apply_file(ROOT / "config" / "samples" / "deepspeed-distributed.yaml")
    tj = yaml.safe_load((ROOT / "config" / "samples" / "trainjob-deepspeed.yaml").read_text())
    tj["spec"]["annotations"] = RUN_FOR  # the pods keep running
    await client.apply(tj, ns)
    name = tj["metadata"]["name"]
    await client.wait_running(ns, name, timeout=90)
    secret = await client.kube.get(SECRETS, ns, f"{name}-mpi-ssh-auth")
    hostfile = await client.kube.get(CONFIGMAPS, ns, f"{name}-mpi-hostfile")
    start = size(operator.log_path)
    for i in range(5):  # each change of the TrainJob is a watch event, hence a reconcile
        await client.kube.merge_patch(TRAINJOBS, ns, name, {"metadata": {"annotations": {"touched": str(i)}}})
        await asyncio.sleep(1)
    again = await client.kube.get(SECRETS, ns, f"{name}-mpi-ssh-auth")
    assert again["data"] == secret["data"]
    assert again["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]
    assert (await client.kube.get(CONFIGMAPS, ns, f"{name}-mpi-hostfile"))["metadata"]["resourceVersion"] == (
        hostfile["metadata"]["resourceVersion"]
    )
    writes = [e for e in log_events(operator.log_path, start) if e.get("event") == "applied"]
    assert writes == [], f"reconciles of a settled TrainJob wrote: {writes}"


async def test_bad_input_the_webhook_would_refuse_ends_in_a_condition(client: Client, ns: str) -> None:
    """Without the webhook: a child the apiserver refuses ends in a Misconfigured condition naming the
    field, within 10 s, not in silence; malformed overrides and resources are refused by the schema."""
    bad = rjob("node", "trainer")
    bad["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"memory": "-1Mi"}}
    await client.apply(runtime("bad-env", bad), ns)
    await client.apply(trainjob("refused", "bad-env"), ns)
    tj = await client.wait_condition(ns, "refused", "Misconfigured", timeout=10)
    cond = condition(tj, "Misconfigured")
    assert cond is not None and cond["reason"] == "TrainJobResourcesCreationFailed"
    assert "refused-node-0" in cond["message"] and "requests[memory]" in cond["message"], cond["message"]
    assert not await client.jobs(ns, "refused")

    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    garbage = {"template": {"spec": {"replicatedJobs": "not a list"}}}
    garbled = trainjob("garbled", "rt", runtimePatches=[{"manager": "me", "trainingRuntimeSpec": garbage}])
    with pytest.raises(ApiError) as refusal:  # runtimePatches are typed: the schema refuses garbage
        await client.apply(garbled, ns)
    assert "runtimePatches" in refusal.value.message and "replicatedJobs: expected list" in refusal.value.message
    assert await client.trainjob(ns, "garbled") is None

    # resourcesPerNode's limits and requests are typed in the schema too (e2e/test_bad_input.py has the rest).
    with pytest.raises(ApiError) as refusal:
        await client.apply(trainjob("opaque", "rt", trainer={"resourcesPerNode": {"limits": "lots"}}), ns)
    assert "spec.trainer.resourcesPerNode.limits" in refusal.value.message, refusal.value.message


def _trainer_entries(obj: JSON) -> list[tuple[str, str | None]]:
    """``(operation, subresource)`` of every managedFields entry of field manager ``trainer``."""
    return [
        (e["operation"], e.get("subresource"))
        for e in obj["metadata"].get("managedFields") or []
        if e["manager"] == "trainer"
    ]


async def test_a_child_created_with_post_is_taken_over_so_an_apply_prunes_what_it_drops(
    client: Client, ns: str
) -> None:
    """On the real apiserver: what a create by ``trainer`` wrote, a later apply by ``trainer`` prunes
    only once the create's entry was taken over (trainer/controllers/take_over.py)."""
    from trainer.jobs.child_writer import take_over

    def cm(name: str, data: dict[str, str]) -> JSON:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}

    for name in ("taken", "not-taken"):
        await client.kube.create(CONFIGMAPS, ns, cm(name, {"a": "1", "b": "2"}), "trainer")
    assert await take_over(client.kube, CONFIGMAPS, cm("taken", {}), "trainer") is True
    assert await take_over(client.kube, CONFIGMAPS, cm("taken", {}), "trainer") is False, "once"
    for name in ("taken", "not-taken"):
        await client.kube.apply(cm(name, {"a": "1"}), "trainer")
    taken = await client.kube.get(CONFIGMAPS, ns, "taken")
    assert taken["data"] == {"a": "1"}, "the dropped key is pruned"
    assert _trainer_entries(taken) == [("Apply", None)]
    not_taken = await client.kube.get(CONFIGMAPS, ns, "not-taken")
    assert not_taken["data"] == {"a": "1", "b": "2"}, "without the take-over the create's key stays"


async def test_a_running_trainjob_suspended_later_suspends_its_jobs_created_with_post(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("later", "rt"), ns)
    jobs = await wait_for(lambda: client.jobs(ns, "later"), "Job created")
    assert jobs[0]["spec"]["suspend"] is False
    assert ("Update", None) in _trainer_entries(jobs[0]), "created with POST"
    await client.apply(trainjob("later", "rt", suspend=True), ns)

    async def suspended() -> JSON | None:
        jobs = await client.jobs(ns, "later")
        return jobs[0] if jobs and jobs[0]["spec"]["suspend"] is True else None

    job = await wait_for(suspended, "the Job suspended", timeout=20)
    assert ("Apply", None) in _trainer_entries(job) and ("Update", None) not in _trainer_entries(job)

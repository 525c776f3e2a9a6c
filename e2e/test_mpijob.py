"""MPIJob end to end on the real local cluster: children, hostfile, SSH, runPolicy and status.
Worker pods run "sshd" for an hour on KWOK (pod-complete annotations); the launcher runs about a
second unless a test says otherwise."""

from __future__ import annotations

import asyncio
import base64
import copy
from typing import Any

import pytest

from e2e.helpers import ROOT
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import CONFIGMAPS, JOBS, MPIJOBS, SECRETS, SERVICES
from trainer.framework.json_codec import JSON
from trainer.mpijob.children import LAUNCHER_MISSING

pytestmark = pytest.mark.e2e
SAMPLE: JSON = __import__("yaml").safe_load((ROOT / "config" / "samples" / "mpijob.yaml").read_text())
LONG = {"pod-complete.stage.kwok.x-k8s.io/delay": "600s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "601s"}


def mpijob(name: str, **spec: Any) -> JSON:
    obj = copy.deepcopy(SAMPLE)
    obj["metadata"] = {"name": name}
    for key, value in spec.items():
        obj["spec"][key] = value
    return obj


async def get(client: Client, ns: str, name: str) -> JSON | None:
    return await client.kube.get_or_none(MPIJOBS, ns, name)


async def wait_cond(client: Client, ns: str, name: str, type_: str, timeout: float = 60) -> JSON:
    async def probe() -> JSON | None:
        obj = await get(client, ns, name)
        c = condition(obj, type_)
        return obj if c and c["status"] == "True" else None

    return await wait_for(probe, f"MPIJob {ns}/{name} {type_}", timeout)


async def pods(client: Client, ns: str, name: str, role: str) -> list[JSON]:
    return await client.pods(ns, f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role={role}")


async def test_sample_mpijob_runs_to_succeeded_with_hostfile_and_ssh(client: Client, ns: str) -> None:
    await client.apply_file(ROOT / "config" / "samples" / "mpijob.yaml", ns)
    obj = await wait_cond(client, ns, "pi", "Succeeded")
    # Running is never True once finished; a launcher that finished before the operator saw it run gets a
    # Running=False appended after Succeeded (mpi-operator #787), so the order depends on timing.
    running = condition(obj, "Running")
    assert running is None or running["status"] == "False", obj["status"]["conditions"]
    assert obj["status"]["startTime"] and obj["status"]["completionTime"]
    assert obj["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1
    assert await client.kube.get_or_none(SERVICES, ns, "pi") is not None
    cm = await client.kube.get(CONFIGMAPS, ns, "pi-config")
    assert cm["data"]["hostfile"] == f"pi-worker-0.pi.{ns}.svc slots=1\npi-worker-1.pi.{ns}.svc slots=1\n"
    secret = await client.kube.get(SECRETS, ns, "pi-ssh")
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(secret["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    (launcher,) = await pods(client, ns, "pi", "launcher")
    assert launcher["spec"]["hostname"] == "pi-launcher"
    mounts = {m["name"]: m["mountPath"] for m in launcher["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["ssh-auth"] == "/home/mpiuser/.ssh" and mounts["mpi-job-config"] == "/etc/mpi"
    told = {"SuccessfulCreate", "MPIJobCreated", "MPIJobSucceeded"}
    await client.wait_events(ns, "pi", lambda es: told <= {e["reason"] for e in es}, ", ".join(sorted(told)))


@pytest.mark.parametrize("policy", ["All", "Running", "None"])
async def test_clean_pod_policy_leaves_exactly_what_it_promises(client: Client, ns: str, policy: str) -> None:
    await client.apply(mpijob("clean", runPolicy={"cleanPodPolicy": policy}), ns)
    # Workers must be running before the launcher finishes for the policy to have something to clean.
    await wait_for(lambda: _n_running(client, ns, "clean", 2), "2 running workers")
    await wait_cond(client, ns, "clean", "Succeeded")

    async def settled() -> bool:
        workers = await pods(client, ns, "clean", "worker")
        worker_job = await client.kube.get_or_none(JOBS, ns, "clean-worker")
        if policy == "All":
            return worker_job is None and not workers
        if policy == "Running":
            running = [p for p in workers if p["status"].get("phase") in ("Running", "Pending")]
            return bool(worker_job and worker_job["spec"]["suspend"] and not running)
        return len([p for p in workers if p["status"].get("phase") == "Running"]) == 2

    await wait_for(settled, f"cleanPodPolicy {policy} applied", timeout=30)
    if policy == "None":
        await asyncio.sleep(2)
        assert len(await _n_running(client, ns, "clean", 2) or []) == 2, "None must not touch running workers"
    (launcher_job,) = [j for j in [await client.kube.get_or_none(JOBS, ns, "clean-launcher")] if j]
    assert launcher_job is not None, "the launcher Job stays, with its status"


async def _n_running(client: Client, ns: str, name: str, n: int) -> list[JSON] | None:
    running = [p for p in await pods(client, ns, name, "worker") if p["status"].get("phase") == "Running"]
    return running if len(running) >= n else None


async def test_ttl_after_finished_deletes_the_mpijob(client: Client, ns: str) -> None:
    await client.apply(mpijob("ttl", runPolicy={"ttlSecondsAfterFinished": 2}), ns)
    await wait_cond(client, ns, "ttl", "Succeeded")

    async def gone() -> bool:
        return await get(client, ns, "ttl") is None

    await wait_for(gone, "MPIJob deleted 2 s after it finished", timeout=30)


async def test_active_deadline_fails_the_job_with_deadline_exceeded(client: Client, ns: str) -> None:
    job = mpijob("late", runPolicy={"activeDeadlineSeconds": 3})
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {"annotations": LONG}
    await client.apply(job, ns)
    obj = await wait_cond(client, ns, "late", "Failed", timeout=60)
    failed = condition(obj, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded", failed
    await client.wait_events(
        ns, "late", lambda es: any(e["type"] == "Warning" and e["reason"] == "DeadlineExceeded" for e in es), "Warning"
    )


async def test_suspend_holds_every_pod_until_resumed(client: Client, ns: str) -> None:
    await client.apply(mpijob("held", runPolicy={"suspend": True}), ns)
    obj = await wait_cond(client, ns, "held", "Suspended")
    assert condition(obj, "Suspended")["reason"] == "MPIJobSuspended"  # type: ignore[index]
    jobs = await wait_for(lambda: _jobs(client, ns, "held", 2), "worker and launcher Jobs")
    assert all(j["spec"]["suspend"] for j in jobs)
    await asyncio.sleep(2)
    assert await client.pods(ns, "training.kubeflow.org/job-name=held") == []
    await client.apply(mpijob("held", runPolicy={"suspend": False}), ns)
    obj = await wait_cond(client, ns, "held", "Succeeded")
    assert condition(obj, "Suspended")["reason"] == "MPIJobResumed"  # type: ignore[index]


async def _jobs(client: Client, ns: str, name: str, n: int) -> list[JSON] | None:
    items, _ = await client.kube.list(JOBS, ns, f"training.kubeflow.org/job-name={name}")
    return items if len(items) == n else None


async def test_an_mpijob_without_a_launcher_is_admitted_and_fails_naming_it(client: Client, ns: str) -> None:
    """mpi-operator's API admits it (Kueue's e2e suites create one); nothing is created for it."""
    job = mpijob("nolauncher")
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    await client.apply(job, ns)
    obj = await wait_cond(client, ns, "nolauncher", "Failed")
    failed = condition(obj, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert LAUNCHER_MISSING in failed["message"]
    jobs, _ = await client.kube.list(JOBS, ns)
    assert jobs == []


async def test_an_impossible_mpijob_fails_with_the_field_named(client: Client, ns: str) -> None:
    job = mpijob("twolaunchers")
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    await client.apply(job, ns)
    obj = await wait_cond(client, ns, "twolaunchers", "Failed")
    failed = condition(obj, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "spec.mpiReplicaSpecs.Launcher.replicas must be 1" in failed["message"]
    assert await client.pods(ns, "training.kubeflow.org/job-name=twolaunchers") == []


async def test_trainjob_on_the_mpi_runtime_runs_to_complete(client: Client, ns: str) -> None:
    runtime = __import__("yaml").safe_load((ROOT / "config" / "samples" / "deepspeed-distributed.yaml").read_text())
    launcher = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    launcher["metadata"] = {"annotations": {k: v.replace("600", "4").replace("601", "5") for k, v in LONG.items()}}
    await client.apply(runtime)
    await client.apply_file(ROOT / "config" / "samples" / "trainjob-deepspeed.yaml", ns)
    nodes = await wait_for(
        lambda: _running_pods(client, ns, "jobset.sigs.k8s.io/replicatedjob-name=node", 2), "2 node pods running"
    )
    assert {p["spec"]["hostname"] for p in nodes} == {"deepspeed-simple-node-0-0", "deepspeed-simple-node-0-1"}
    tj = await client.wait_condition(ns, "deepspeed-simple", "Complete", timeout=90)
    assert tj["status"]["conditions"][-1]["type"] == "Complete"
    cm = await client.kube.get(CONFIGMAPS, ns, "deepspeed-simple-mpi-hostfile")
    assert cm["data"]["hostfile"].splitlines() == [
        "deepspeed-simple-launcher-0-0.deepspeed-simple slots=1",
        "deepspeed-simple-node-0-0.deepspeed-simple slots=1",
        "deepspeed-simple-node-0-1.deepspeed-simple slots=1",
    ]
    secret = await client.kube.get(SECRETS, ns, "deepspeed-simple-mpi-ssh-auth")
    assert secret["type"] == "kubernetes.io/ssh-auth"
    # Finished: the node workers (still running sshd) are removed with their Job, as JobSet does.
    await wait_for(
        lambda: _no_pods(client, ns, "jobset.sigs.k8s.io/replicatedjob-name=node"), "node pods gone after Complete"
    )


async def _running_pods(client: Client, ns: str, selector: str, n: int) -> list[JSON] | None:
    running = [p for p in await client.pods(ns, selector) if p["status"].get("phase") == "Running"]
    return running if len(running) >= n else None


async def _no_pods(client: Client, ns: str, selector: str) -> bool:
    return not await client.pods(ns, selector)

"""Trainer v2.4 and master items on the real apiserver, with the operator's webhook (URL mode, 127.0.0.1):
``numNodes`` may be 0 (the TrainJob runs no trainer pod and completes) and not below; ``numProcPerNode``
below 1 is refused by the CRDs' CEL rules with upstream's messages (kubeflow/trainer#3809); the trainer's
env reaches the MPI workers (#3931); ``runtimePatches`` naming what the runtime's template lacks are
refused with upstream's messages (#3948); an update is checked against the TrainJob's runtime snapshot,
not the live runtime, edited or deleted (#3960). Refusals are asked of ``kubectl create``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.test_admission import OPERATOR_ARGS, webhook_installed
from e2e.test_trainjob import env, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from trainer.api.kinds import CONFIGMAPS, TRAINING_RUNTIMES, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e

# The operator serves admission on test_admission's port (modules run one at a time); its autouse
# fixture waits for the webhook configurations to carry the served CA.
__all__ = ["OPERATOR_ARGS", "webhook_installed"]
MISSING_RJOB = "must not have replicated job that doesn't exist in the runtime job template"


def kubectl_create(cluster: Any, tmp_path: Path, obj: JSON, ns: str) -> tuple[bool, str]:
    """``kubectl create -n ns -f`` of ``obj``: (created, what kubectl printed)."""
    path = tmp_path / f"{obj['kind']}-{obj['metadata']['name']}.json"
    path.write_text(json.dumps(obj))
    done = cluster.run_kubectl("create", "-n", ns, "-f", str(path), check=False)
    return done.returncode == 0, done.stdout + done.stderr


def refused_by_kubectl(cluster: Any, tmp_path: Path, obj: JSON, ns: str) -> str:
    created, out = kubectl_create(cluster, tmp_path, obj, ns)
    assert not created, f"{obj['kind']} {obj['metadata']['name']} was created: {out}"
    return out


def mpi_runtime(name: str) -> JSON:
    """A TrainingRuntime of the ``mpi`` policy: a launcher (the trainer step) and ``node`` workers."""
    rt = runtime(name, rjob("launcher", "trainer"), rjob("node"), torch=False)
    rt["spec"]["mlPolicy"] = {"numNodes": 1, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": False}}
    return rt


def patch_of(entry: JSON) -> JSON:
    """A ``runtimePatches`` entry patching the one replicated job ``entry``."""
    return {"manager": "example.com/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [entry]}}}}


async def test_num_nodes_and_num_proc_per_node_bounds_are_upstreams(cluster: Any, ns: str, tmp_path: Path) -> None:
    created, out = kubectl_create(cluster, tmp_path, runtime("rt", rjob("node", "trainer")), ns)
    assert created, out
    negative = refused_by_kubectl(cluster, tmp_path, trainjob("negative", "rt", trainer={"numNodes": -1}), ns)
    assert "spec.trainer.numNodes" in negative and "should be greater than or equal to 0" in negative
    no_procs = trainjob("no-procs", "rt", trainer={"numProcPerNode": 0})
    assert "numProcPerNode must be greater than or equal to 1" in refused_by_kubectl(cluster, tmp_path, no_procs, ns)
    mpi = mpi_runtime("mpi-no-slots")
    mpi["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] = 0
    assert "NumProcPerNode in mpiPolicy must be >= 1" in refused_by_kubectl(cluster, tmp_path, mpi, ns)
    auto = trainjob("auto", "rt", suspend=True, trainer={"numProcPerNode": "auto"})
    created, out = kubectl_create(cluster, tmp_path, auto, ns)
    assert created, out


async def test_a_trainjob_of_zero_nodes_runs_no_pod_and_completes(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(trainjob("none", "rt", trainer={"numNodes": 0}), ns)
    tj = await client.wait_condition(ns, "none", "Complete", timeout=60)
    (job,) = await client.jobs(ns, "none")
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (0, 0)
    assert tj["spec"]["trainer"]["numNodes"] == 0
    assert await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=none") == []


async def test_the_trainer_env_reaches_the_mpi_workers(client: Client, ns: str) -> None:
    await client.apply(mpi_runtime("mpi"), ns)
    trainer = {"numNodes": 2, "env": [{"name": "MODEL", "value": "tiny"}]}
    await client.apply(trainjob("mpi-env", "mpi", suspend=True, trainer=trainer), ns)

    async def both() -> list[JSON] | None:
        jobs = await client.jobs(ns, "mpi-env")
        return jobs if len(jobs) == 2 else None

    jobs = await wait_for(both, "the launcher and node Jobs")
    by_rjob = {j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]: j for j in jobs}
    for name, container in (("launcher", "node"), ("node", "node")):
        (c,) = [c for c in by_rjob[name]["spec"]["template"]["spec"]["containers"] if c["name"] == container]
        assert env(c)["MODEL"] == "tiny", name


async def test_runtime_patches_naming_what_the_template_lacks_are_refused(
    cluster: Any, client: Client, ns: str, tmp_path: Path
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer"), rjob("aux")), ns)

    def patched(name: str, rjob_name: str, **pod_spec: Any) -> JSON:
        entry: JSON = {"name": rjob_name}
        if pod_spec:
            entry["template"] = {"spec": {"template": {"spec": pod_spec}}}
        return trainjob(name, "rt", suspend=True, runtimePatches=[patch_of(entry)])

    assert MISSING_RJOB in refused_by_kubectl(cluster, tmp_path, patched("a", "gone"), ns)
    out = refused_by_kubectl(cluster, tmp_path, patched("b", "aux", containers=[{"name": "ghost"}]), ns)
    assert "must not have container that doesn't exist in the runtime job aux" in out
    out = refused_by_kubectl(cluster, tmp_path, patched("c", "aux", initContainers=[{"name": "aux"}]), ns)
    assert "must not have initContainer that doesn't exist in the runtime job aux" in out
    created, out = kubectl_create(cluster, tmp_path, patched("d", "aux", containers=[{"name": "aux"}]), ns)
    assert created, out


async def test_an_update_is_checked_against_the_runtime_snapshot(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer"), rjob("aux")), ns)
    await client.apply(trainjob("frozen", "rt", suspend=True), ns)
    await wait_for(lambda: client.kube.get_or_none(CONFIGMAPS, ns, "frozen-runtime-snapshot"), "the runtime snapshot")
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)  # the admin drops aux
    patch = patch_of({"name": "aux"})

    async def live_runtime_read() -> bool | None:
        try:
            await client.kube.create(TRAINJOBS, ns, trainjob("probe", "rt", suspend=True, runtimePatches=[patch]))
        except ApiError as e:
            return True if MISSING_RJOB in e.message else None
        await client.kube.delete(TRAINJOBS, ns, "probe")
        return None

    await wait_for(live_runtime_read, "the webhook reads the edited runtime for a create")
    updated = await client.kube.merge_patch(TRAINJOBS, ns, "frozen", {"spec": {"runtimePatches": [patch]}})
    assert updated["spec"]["runtimePatches"][0]["manager"] == "example.com/m", "checked against the snapshot"
    await client.kube.delete(TRAINING_RUNTIMES, ns, "rt")
    ghost = patch_of({"name": "ghost"})
    with pytest.raises(ApiError) as refused:
        await client.kube.merge_patch(TRAINJOBS, ns, "frozen", {"spec": {"runtimePatches": [ghost]}})
    assert MISSING_RJOB in refused.value.message and "(it has node, aux)" in refused.value.message
    resumed = await client.kube.merge_patch(TRAINJOBS, ns, "frozen", {"spec": {"suspend": False}})
    assert resumed["spec"]["suspend"] is False, "a deleted runtime does not stop an update"

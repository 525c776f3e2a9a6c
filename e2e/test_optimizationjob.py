"""OptimizationJob end to end on the real local cluster: the operator creates its trials as TrainJobs (at
most ``parallelTrials`` at a time, ``numTrials`` in all), reads each trial's objective from the
``status.trainerStatus`` the test writes as a trainer would, names the best trial, and the garbage
collector deletes the trials with their job. The trials are handed to another controller
(``managedBy: kueue.x-k8s.io/multikueue``), so no pod runs: this tests the search, not training."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from e2e.test_trainjob import rjob, runtime
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import OPTIMIZATION_JOBS, TRAINJOBS
from trainer.client import AsyncTrainerClient, Objective, RandomSearch, Search, TrainJobTemplate, Trial, TrialConfig
from trainer.client.trainers import CustomTrainer
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e


def search(name: str) -> JSON:
    """Three trials, two at a time, of a seeded random search over a learning rate and a batch size."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": name},
        "spec": {
            "objectives": [{"metric": "loss"}],
            "searchAlgorithm": {"random": {"seed": 3}},
            "parameters": [
                {"name": "lr", "searchSpace": {"logUniform": {"min": "0.001", "max": "0.1"}}},
                {"name": "batch_size", "searchSpace": {"categorical": {"choices": ["16", "32"]}}},
            ],
            "numTrials": 3,
            "parallelTrials": 2,
            "trainJobTemplate": {
                "spec": {
                    "runtimeRef": {"name": "rt", "kind": "TrainingRuntime"},
                    "managedBy": "kueue.x-k8s.io/multikueue",
                }
            },
        },
    }


async def trials(client: Client, ns: str) -> dict[str, JSON]:
    items, _ = await client.kube.list(TRAINJOBS, ns, "trainer.kubeflow.org/optimizationjob-name=o")
    return {t["metadata"]["name"]: t for t in items}


async def finish(client: Client, ns: str, name: str, loss: str) -> None:
    """The trial ``name`` completes, its trainer having reported ``loss``."""
    status = {
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "reason": "JobsCompleted",
                "message": "done",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
        "trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", "metrics": [{"name": "loss", "value": loss}]},
    }
    await client.kube.patch_status(TRAINJOBS, ns, name, status, manager="e2e")


async def test_trials_run_in_parallel_the_best_is_named_and_deleting_the_job_deletes_them(
    client: Client, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(search("o"), ns)

    async def two() -> dict[str, JSON] | None:
        found = await trials(client, ns)
        return found if len(found) == 2 else None

    first = await wait_for(two, "two trials")
    assert sorted(first) == ["o-trial-0", "o-trial-1"]
    job = await client.kube.get(OPTIMIZATION_JOBS, ns, "o")
    for trial in first.values():
        (ref,) = trial["metadata"]["ownerReferences"]
        assert ref["uid"] == job["metadata"]["uid"] and ref["controller"] is True
        values = {
            p["name"]: p["value"]
            for p in json.loads(trial["metadata"]["annotations"]["trainer.kubeflow.org/trial-parameters"])
        }
        env = {e["name"]: e["value"] for e in trial["spec"]["trainer"]["env"]}
        assert env == {"KUBEFLOW_TRAINER_OPT_LR": values["lr"], "KUBEFLOW_TRAINER_OPT_BATCH_SIZE": values["batch_size"]}
    await finish(client, ns, "o-trial-0", "0.9")

    async def third() -> dict[str, JSON] | None:
        found = await trials(client, ns)
        return found if "o-trial-2" in found else None

    assert len(await wait_for(third, "the third trial")) == 3
    await finish(client, ns, "o-trial-1", "0.2")
    await finish(client, ns, "o-trial-2", "0.5")

    async def complete() -> JSON | None:
        obj = await client.kube.get(OPTIMIZATION_JOBS, ns, "o")
        c = condition(obj, "Complete")
        return obj if c and c["status"] == "True" else None

    done = await wait_for(complete, "OptimizationJob Complete")
    status = done["status"]
    assert condition(done, "Complete")["reason"] == "MaxTrialsReached"  # type: ignore[index]
    assert status["result"]["trainJobName"] == "o-trial-1"
    assert (status["trials"], status["trialsSucceeded"], status["trialsFailed"]) == (3, 3, 0)
    assert len(await trials(client, ns)) == 3  # no fourth

    await client.kube.delete(OPTIMIZATION_JOBS, ns, "o")

    async def collected() -> bool:
        return not await trials(client, ns)

    await wait_for(collected, "trials deleted with their OptimizationJob", timeout=90)


async def test_the_sdks_optimize_creates_a_search_whose_trials_get_and_describe_show(
    client: Client, ns: str, cluster: Any
) -> None:
    """``optimize()`` (the kubeflow SDK's arguments) creates an OptimizationJob; the operator creates its
    trials with the parameters drawn; ``trainer get optj`` and ``trainer describe optj`` show them."""
    rt = runtime("rt", rjob("node", "trainer", run_for={"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}))
    rt["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "torch"}
    await client.apply(rt, ns)

    def train(lr: str, batch_size: str) -> None:
        print(float(lr), int(batch_size))

    async with await AsyncTrainerClient.connect(str(cluster.kubeconfig), ns) as sdk:
        name = await sdk.optimize(
            TrainJobTemplate(trainer=CustomTrainer(func=train), runtime="rt"),
            trial_config=TrialConfig(num_trials=3, parallel_trials=2),
            search_space={"lr": Search.loguniform(0.001, 0.1), "batch_size": Search.choice([16, 32])},
            objectives=[Objective(metric="loss", direction="minimize")],
            algorithm=RandomSearch(random_state=5),
            name="sdk",
        )
        assert name == "sdk"

        async def two() -> list[Trial] | None:
            found = await sdk.list_trials(name)
            return found if len(found) == 2 else None

        first = await wait_for(two, "two trials of the SDK's search")
    assert [(t.index, t.name) for t in first] == [(0, "sdk-trial-0"), (1, "sdk-trial-1")]
    for t in first:
        assert set(t.parameters) == {"lr", "batch_size"} and t.parameters["batch_size"] in ("16", "32")
        assert 0.001 <= float(t.parameters["lr"]) <= 0.1
        assert t.trainjob is not None and t.trainjob.spec.trainer is not None
        env = {e.name: e.value for e in t.trainjob.spec.trainer.env or []}
        assert env["KUBEFLOW_TRAINER_OPT_LR"] == t.parameters["lr"]
        command = " ".join(t.trainjob.spec.trainer.command or [])
        assert "train(**{'lr': __import__('os').environ['KUBEFLOW_TRAINER_OPT_LR']" in command

    def cli(*args: str) -> str:
        cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(cluster.kubeconfig), "-n", ns, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = cli("get", "optj").splitlines()
    assert listed[0].split()[:4] == ["NAME", "STATE", "METRIC", "TRIALS"]
    assert listed[1].split()[:5] == ["sdk", "Running", "loss", "(Minimize)", "2/3"]
    described = cli("describe", "optj", "sdk")
    rows = [line.split() for line in described.split("Trials:")[-1].splitlines() if line.strip()]
    assert rows[0] == ["INDEX", "NAME", "STATE", "PARAMETERS", "OBJECTIVE"]
    assert [r[:3] for r in rows[1:]] == [["0", "sdk-trial-0", "Running"], ["1", "sdk-trial-1", "Running"]]
    for row, t in zip(rows[1:], first, strict=True):
        assert f"lr={t.parameters['lr']}," in row and row[-1] == "-"
    print(described)  # shown with -s


async def test_a_foreign_trainjob_with_a_trials_name_is_left_said_and_survives_the_jobs_deletion(
    client: Client, ns: str
) -> None:
    """Someone's TrainJob named and labelled as trial 0 of ``o`` (no owner reference): the operator never
    writes it, runs trial 1, says on the job why trial 0 waits; deleting the job, the garbage collector
    deletes trial 1 only."""
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    theirs: JSON = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "o-trial-0",
            "labels": {"trainer.kubeflow.org/optimizationjob-name": "o", "trainer.kubeflow.org/trial-index": "0"},
        },
        "spec": {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}, "managedBy": "kueue.x-k8s.io/multikueue"},
    }
    stored = await client.apply(theirs, ns)
    await client.apply(search("o"), ns)

    async def said() -> JSON | None:
        obj = await client.kube.get(OPTIMIZATION_JOBS, ns, "o")
        c = condition(obj, "Misconfigured")
        counted = (obj.get("status") or {}).get("trials") == 1  # trial 1's create reaches the status a reconcile later
        if c and c["reason"] == "ErrResourceExists" and counted and "o-trial-1" in await trials(client, ns):
            return obj
        return None

    job = await wait_for(said, "the job saying o-trial-0 is someone else's and counting trial 1")
    message = condition(job, "Misconfigured")["message"]  # type: ignore[index]
    assert "TrainJob o-trial-0: already exists and is not controlled by OptimizationJob o" in message
    now = (await trials(client, ns))["o-trial-0"]
    assert now["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # never written
    assert "ownerReferences" not in now["metadata"]
    assert job["status"]["trials"] == 1 and "o-trial-0" not in {r["name"] for r in job["status"]["trialResults"]}

    await client.kube.delete(OPTIMIZATION_JOBS, ns, "o")

    async def only_theirs_left() -> bool:
        return sorted(await trials(client, ns)) == ["o-trial-0"]

    await wait_for(only_theirs_left, "the job's own trial collected, the foreign one left", timeout=90)
    assert (await trials(client, ns))["o-trial-0"]["metadata"]["uid"] == stored["metadata"]["uid"]

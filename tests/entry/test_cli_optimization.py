"""OptimizationJobs (``optj``) in the CLI and the SDK against the HTTP double of the apiserver: ``get``,
``describe`` (the trials table), ``wait``, ``delete``, and ``optimize()`` posting an OptimizationJob."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import typer

from tests.entry import test_cli
from tests.entry.test_cli import CLUSTER_RUNTIMES_PATH, Apiserver, one_error_line, runtime
from tests.kube_double import RecordingKube
from trainer.api.kinds import OPTIMIZATION_JOBS
from trainer.cli import errors, targets
from trainer.cli.get import watch_optimization_jobs
from trainer.cli.root import Output
from trainer.client import (
    AsyncTrainerClient,
    GridSearch,
    NotFoundError,
    Objective,
    Search,
    TrainerClient,
    TrainJobTemplate,
    TrialConfig,
)
from trainer.client.trainers import CustomTrainer
from trainer.framework.json_codec import JSON

apiserver = test_cli.apiserver
GROUP = "/apis/trainer.kubeflow.org/v1alpha1"
OPTJ_PATH = f"{GROUP}/namespaces/team-a/optimizationjobs"
TRAINJOBS_PATH = f"{GROUP}/namespaces/team-a/trainjobs"


def optj(name: str = "tune", status: JSON | None = None) -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": "2026-01-01T00:05:00Z"},
        "spec": {
            "objectives": [{"metric": "loss", "direction": "Minimize"}],
            "searchAlgorithm": {"random": {"seed": 7}},
            "parameters": [
                {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}},
                {"name": "batch", "searchSpace": {"categorical": {"choices": ["16", "32"]}}},
            ],
            "numTrials": 3,
            "parallelTrials": 2,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": "torch-distributed"}}},
        },
        **({"status": status} if status else {}),
    }


RUNNING_STATUS: JSON = {
    "conditions": [{"type": "Created", "status": "True", "reason": "TrialsCreated", "message": "3 trials"}],
    "trials": 3,
    "trialsRunning": 1,
    "trialsSucceeded": 1,
    "trialsFailed": 1,
    "result": {"trainJobName": "tune-trial-0", "parameters": [{"name": "lr", "value": "0.01"}]},
    "trialResults": [
        {"name": "tune-trial-0", "state": "Succeeded", "value": "0.25"},
        {"name": "tune-trial-1", "state": "Failed", "message": "TrainJob failed: OOMKilled"},
    ],
}


def trial(index: int, lr: str, loss: str | None = None) -> JSON:
    status: JSON = {}
    if loss is not None:
        status["trainerStatus"] = {
            "lastUpdatedTime": "2026-01-01T00:08:00Z",
            "metrics": [{"name": "loss", "value": "9"}, {"name": "loss", "value": loss}],
        }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": f"tune-trial-{index}",
            "namespace": "team-a",
            "labels": {
                "trainer.kubeflow.org/optimizationjob-name": "tune",
                "trainer.kubeflow.org/trial-index": str(index),
            },
            "annotations": {
                "trainer.kubeflow.org/trial-parameters": json.dumps(
                    [{"name": "lr", "value": lr}, {"name": "batch", "value": "16"}]
                )
            },
        },
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": status,
    }


def serve(apiserver: Apiserver, status: JSON | None = RUNNING_STATUS) -> None:
    apiserver.routes[OPTJ_PATH] = {"items": [optj(status=status)]}
    apiserver.routes[f"{OPTJ_PATH}/tune"] = optj(status=status)
    apiserver.routes[TRAINJOBS_PATH] = {
        "items": [trial(0, "0.01", "0.25"), trial(1, "0.05"), trial(2, "0.002", "0.5"), {**trial(3, "0.1")}]
    }
    # a TrainJob of another OptimizationJob is left out by the label selector
    apiserver.routes[TRAINJOBS_PATH]["items"][3]["metadata"]["labels"]["trainer.kubeflow.org/optimizationjob-name"] = (
        "other"
    )


def apiserver_free_logs() -> Any:
    return test_cli.invoke("logs", "optj", "tune")


def test_optj_is_a_type_with_its_names() -> None:
    for name in ("optimizationjobs", "optimizationjob", "optj", "optimizationjobs.trainer.kubeflow.org", "OPTJ"):
        t = targets.object_type(name)
        assert (t.name, t.optimization, t.job, t.resources) == ("optimizationjobs", True, None, (OPTIMIZATION_JOBS,))
    assert targets.parse_target(["optj/tune"]) == (targets.TYPES["optimizationjobs"], "tune")
    with pytest.raises(typer.BadParameter, match="optimizationjobs run no pods of their own: their trials are"):
        targets.target(["optj", "tune"])
    logs = apiserver_free_logs()
    assert logs.exit_code == errors.EXIT_USAGE and "trainer.kubeflow.org/optimizationjob-name=NAME" in logs.output


def test_get_optj_lists_counts_and_the_best_trial(apiserver: Apiserver) -> None:
    serve(apiserver)
    for form in (["get", "optj"], ["get", "optimizationjobs"], ["list", "optj"]):
        lines = apiserver(*form).output.splitlines()
        assert lines[0].split() == [
            "NAME",
            "STATE",
            "METRIC",
            "TRIALS",
            "SUCCEEDED",
            "FAILED",
            "STOPPED",
            "RUNNING",
            "BEST",
            "AGE",
        ]
        row = ["tune", "Running", "loss", "(Minimize)", "3/3", "1", "1", "0", "1", "tune-trial-0"]
        assert lines[1].split()[:10] == row
        assert "(loss=0.25)" in lines[1]
    assert apiserver("get", "optj", "tune", "-o", "name").output == "optimizationjob.trainer.kubeflow.org/tune\n"
    assert json.loads(apiserver("get", "optj/tune", "-o", "json").output)["status"]["trials"] == 3
    apiserver.routes[OPTJ_PATH] = {"items": []}
    empty = apiserver("get", "optj")
    assert (empty.exit_code, empty.stderr) == (0, "No OptimizationJobs found.\n")
    assert apiserver("get", "optj", "--runtime", "x").exit_code == errors.EXIT_USAGE


def test_describe_optj_shows_the_trials_with_parameters_state_and_objective(apiserver: Apiserver) -> None:
    serve(apiserver)
    result = apiserver("describe", "optj", "tune")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "State:" in out and "Running" in out
    assert "Objective:  loss (Minimize)" in " ".join(out.split("\n")) or "loss (Minimize)" in out
    assert "random (seed 7)" in out and "Best parameters:" in out and "lr=0.01" in out
    assert "Early stopping:   none" in out
    section = out.split("Trials:", 2)[-1].splitlines()
    rows = [line.split() for line in section if line.strip()]
    assert rows[0] == ["INDEX", "NAME", "STATE", "PARAMETERS", "OBJECTIVE"]
    assert rows[1] == ["0", "tune-trial-0", "Succeeded", "(best)", "lr=0.01,", "batch=16", "0.25"]
    assert rows[2][:3] == ["1", "tune-trial-1", "Failed:"] and rows[2][-1] == "-" and "OOMKilled" in rows[2]
    # not recorded yet: Running, with the last value it reported
    assert rows[3] == ["2", "tune-trial-2", "Running", "lr=0.002,", "batch=16", "0.5"]
    assert len(rows) == 4  # the other job's TrainJob is not a trial
    data = json.loads(apiserver("describe", "optj/tune", "-o", "json").output)
    assert data["state"] == "Running" and data["best"]["name"] == "tune-trial-0"
    assert [t["objective"] for t in data["trials"]] == ["0.25", None, "0.5"]


def test_describe_optj_of_a_missing_job_and_without_the_crd(apiserver: Apiserver) -> None:
    assert one_error_line(apiserver("describe", "optj", "x")).startswith("error: OptimizationJob CRD not installed")
    apiserver.routes[GROUP] = {"resources": [{"name": "optimizationjobs"}]}
    assert one_error_line(apiserver("describe", "optj", "x")) == "error: OptimizationJob team-a/x not found"


def test_wait_optj_returns_on_complete_and_exits_1_on_failed(apiserver: Apiserver) -> None:
    done = {
        **RUNNING_STATUS,
        "conditions": [{"type": "Complete", "status": "True", "reason": "MaxTrialsReached", "message": "best"}],
    }
    serve(apiserver, done)
    result = apiserver("wait", "optj", "tune", "--timeout", "20")
    assert (result.exit_code, result.stdout) == (0, "tune Complete\n")
    assert (
        "tune: Complete trials 3/3 (1 succeeded, 1 failed, 0 stopped early, 1 running) best tune-trial-0"
        in result.stderr
    )
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "AllTrialsFailed", "message": "none"}]}
    serve(apiserver, failed)
    line = apiserver("wait", "optj/tune", "--timeout", "20")
    assert line.exit_code == errors.EXIT_ERROR and "AllTrialsFailed: none" in line.stderr


def test_delete_optj_deletes_the_job(apiserver: Apiserver) -> None:
    deleted: list[str] = []

    def answer(method: str, _: bytes) -> JSON:
        deleted.append(method)
        return optj()

    apiserver.routes[f"{OPTJ_PATH}/tune"] = answer
    result = apiserver("delete", "optj", "tune")
    assert (result.exit_code, result.output) == (0, "optimizationjobs.trainer.kubeflow.org/tune deleted\n")
    assert deleted == ["DELETE"]


def test_optimize_creates_an_optimization_job_from_the_sdk_arguments(apiserver: Apiserver) -> None:
    posted: list[JSON] = []

    def create(method: str, body: bytes) -> JSON:
        assert method == "POST"
        posted.append(json.loads(body))
        return posted[-1]

    apiserver.routes[f"{CLUSTER_RUNTIMES_PATH}/torch-distributed"] = runtime(
        "ClusterTrainingRuntime", "torch-distributed"
    )
    apiserver.routes[OPTJ_PATH] = create

    def train() -> None:
        pass

    with TrainerClient(kubeconfig=apiserver.kubeconfig, namespace="team-a") as client:
        name = client.optimize(
            TrainJobTemplate(trainer=CustomTrainer(func=train), runtime="torch-distributed"),
            trial_config=TrialConfig(num_trials=4, parallel_trials=2),
            search_space={"batch": Search.choice([16, 32]), "opt": Search.choice(["adam", "sgd"])},
            objectives=[Objective(metric="accuracy", direction="maximize")],
            algorithm=GridSearch(),
            name="grid-tune",
        )
    assert name == "grid-tune"
    (body,) = posted
    spec: dict[str, Any] = body["spec"]
    assert (body["kind"], body["metadata"]["name"], body["metadata"]["namespace"]) == (
        "OptimizationJob",
        "grid-tune",
        "team-a",
    )
    assert spec["objectives"] == [{"metric": "accuracy", "direction": "Maximize"}]
    assert spec["searchAlgorithm"] == {"grid": {}}
    assert spec["parameters"][0] == {"name": "batch", "searchSpace": {"categorical": {"choices": ["16", "32"]}}}
    assert (spec["numTrials"], spec["parallelTrials"]) == (4, 2)
    template = spec["trainJobTemplate"]["spec"]
    assert template["runtimeRef"]["name"] == "torch-distributed" and template["trainer"]["command"]
    assert "status" not in body


HELD_STATUS: JSON = {
    **RUNNING_STATUS,
    "conditions": [
        *RUNNING_STATUS["conditions"],
        {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "the search is held"},
    ],
    "trialsFailed": 0,
    "trialsEarlyStopped": 1,
    "trialResults": [
        {"name": "tune-trial-0", "state": "Succeeded", "value": "0.25"},
        {"name": "tune-trial-1", "state": "EarlyStopped", "message": "loss=3.0 at 60% progress is worse"},
    ],
}


def test_get_and_describe_optj_show_a_held_search_tpe_median_stopping_and_the_trials_stopped_early(
    apiserver: Apiserver,
) -> None:
    serve(apiserver, HELD_STATUS)
    for path in (OPTJ_PATH, f"{OPTJ_PATH}/tune"):
        job = apiserver.routes[path]["items"][0] if "items" in apiserver.routes[path] else apiserver.routes[path]
        job["spec"] |= {
            "searchAlgorithm": {"tpe": {"seed": 7, "nStartupTrials": 4}},
            "pruneAlgorithm": {"median": {"startStep": 20, "minTrials": 2}},
            "suspend": True,
        }
    (_, row) = apiserver("get", "optj").output.splitlines()[:2]
    assert row.split()[:10] == ["tune", "Suspended", "loss", "(Minimize)", "3/3", "1", "0", "1", "1", "tune-trial-0"]
    out = apiserver("describe", "optj", "tune").output
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert "State: Suspended (Suspended: the search is held)" in lines
    assert "Algorithm: tpe (seed 7, 4 startup trials)" in lines
    assert "Early stopping: median (from 20% progress, after 2 succeeded trials)" in lines
    stopped = next(line for line in lines if line.startswith("1 tune-trial-1"))
    assert stopped.startswith("1 tune-trial-1 EarlyStopped: loss=3.0 at 60% progress is worse")
    data = json.loads(apiserver("describe", "optj/tune", "-o", "json").output)
    assert data["state"] == "Suspended" and data["trials"][1]["state"] == "EarlyStopped"


class Ended(Exception):
    """Ends the watch of :class:`WatchedKube` (an interrupt, in the CLI)."""


class WatchedKube(RecordingKube):
    """A list of what is stored, then a watch that sends ``events`` and ends with :class:`Ended`."""

    def __init__(self, events: list[tuple[str, JSON]]) -> None:
        super().__init__()
        self.events = events

    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[tuple[str, JSON]]:
        for event in self.events:
            yield event
        raise Ended


async def test_get_optj_watch_prints_the_header_once_and_a_row_at_each_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = {**optj(status=RUNNING_STATUS)}
    held = optj(status=HELD_STATUS)
    held["metadata"]["resourceVersion"] = "99"
    kube = WatchedKube([("MODIFIED", held), ("BOOKMARK", {"metadata": {"resourceVersion": "100"}})])
    kube.put(first)
    stored = kube.objects[next(iter(kube.objects))]
    kube.events.insert(0, ("MODIFIED", stored))  # the version listed: not printed again
    client = AsyncTrainerClient(kube, "team-a")  # type: ignore[arg-type]
    with pytest.raises(Ended):
        await watch_optimization_jobs(client, Output.table)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "STATE", "METRIC"] and len(lines) == 3, lines
    assert lines[1].split()[1] == "Running" and lines[2].split()[1] == "Suspended"
    with pytest.raises(NotFoundError, match="OptimizationJob"):
        await watch_optimization_jobs(client, Output.table, name="nowhere")
    kube.events = [("MODIFIED", held)]
    with pytest.raises(Ended):
        await watch_optimization_jobs(client, Output.name, name="tune")
    assert capsys.readouterr().out.splitlines() == ["optimizationjob.trainer.kubeflow.org/tune"] * 2


def test_suspend_and_resume_optj_patch_its_spec_suspend(apiserver: Apiserver) -> None:
    apiserver.routes[f"{OPTJ_PATH}/tune"] = optj()
    assert apiserver("suspend", "optj", "tune").output == "optimizationjobs.trainer.kubeflow.org/tune suspended\n"
    assert apiserver("resume", "optj/tune").output == "optimizationjobs.trainer.kubeflow.org/tune resumed\n"
    patches = [json.loads(r.body) for r in apiserver.double.received if r.method == "PATCH"]
    assert patches == [{"spec": {"suspend": True}}, {"spec": {"suspend": False}}]
    assert apiserver("suspend", "optj").exit_code == errors.EXIT_USAGE  # a type alone names no job

"""kubectl's habits in the ``trainer`` CLI, against an HTTP double of the apiserver: ``get``'s first
word is a TYPE; ``delete`` of several names, by label (``-l``) and ``--all``; ``--dry-run=client|server``
of create, apply and delete; ``-o yaml|json`` without ``metadata.managedFields``; ``describe`` of
runtimes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import SAMPLES
from tests.entry import test_cli
from tests.entry.test_cli import (
    CLUSTER_RUNTIMES_PATH,
    DISCOVERY,
    TRAINING_RUNTIMES_PATH,
    TRAINJOBS_PATH,
    Apiserver,
    held,
    invoke,
    one_error_line,
    runtime,
)
from trainer.cli import errors
from trainer.framework.json_codec import JSON

apiserver = test_cli.apiserver
"""The fixture of :mod:`tests.entry.test_cli`: an :class:`Apiserver` double and a kubeconfig for it."""


MPIJOBS_PATH = "/apis/kubeflow.org/v2beta1/namespaces/team-a/mpijobs"


def labelled(name: str, **labels: str) -> JSON:
    job = held(name, "team-a", "Running", "", "")
    job["metadata"]["labels"] = labels
    return job


def deletes(server: Apiserver) -> list[tuple[str, dict[str, str]]]:
    return [(r.path, dict(r.query)) for r in server.double.received if r.method == "DELETE"]


@pytest.mark.parametrize("word", ["pods", "a", "deployments"])
def test_get_reads_its_first_word_as_a_type_and_an_unknown_one_is_a_usage_error(word: str) -> None:
    result = invoke("get", word)
    assert result.exit_code == errors.EXIT_USAGE, result.output
    text = " ".join(result.output.split())
    assert f"unknown resource type {word!r}; the types are trainjobs (trainjob, tj)," in text
    assert "mpijobs (mpijob, mpij), optimizationjobs (optimizationjob, optj), runtimes (runtime)" in text


def test_delete_takes_several_names_of_a_type_or_several_type_slash_names(apiserver: Apiserver) -> None:
    apiserver.routes.update(DISCOVERY)
    for name in ("a", "b"):
        apiserver.routes[f"{TRAINJOBS_PATH}/{name}"] = held(name, "team-a", "Running", "", "")
    apiserver.routes[f"{MPIJOBS_PATH}/pi"] = {"kind": "MPIJob"}

    result = apiserver("delete", "tj", "a", "b")
    assert (result.exit_code, result.output) == (
        0,
        "trainjobs.trainer.kubeflow.org/a deleted\ntrainjobs.trainer.kubeflow.org/b deleted\n",
    )
    result = apiserver("delete", "tj/a", "mpij/pi", "trainjob/gone")
    assert result.exit_code == errors.EXIT_ERROR
    assert result.stdout == "trainjobs.trainer.kubeflow.org/a deleted\nmpijobs.kubeflow.org/pi deleted\n"
    assert result.stderr == "error: TrainJob team-a/gone not found\n"
    assert [path for path, _ in deletes(apiserver)] == [
        f"{TRAINJOBS_PATH}/a",
        f"{TRAINJOBS_PATH}/b",
        f"{TRAINJOBS_PATH}/a",
        f"{MPIJOBS_PATH}/pi",
        f"{TRAINJOBS_PATH}/gone",
    ]


def test_delete_by_label_and_all_deletes_what_the_list_selects(apiserver: Apiserver) -> None:
    apiserver.routes.update(DISCOVERY)
    apiserver.routes[TRAINJOBS_PATH] = {
        "items": [labelled("a", team="x"), labelled("b", team="y"), labelled("c", team="x")]
    }
    for name in "abc":
        apiserver.routes[f"{TRAINJOBS_PATH}/{name}"] = labelled(name)

    result = apiserver("delete", "tj", "-l", "team=x")
    assert (result.exit_code, result.output) == (
        0,
        "trainjobs.trainer.kubeflow.org/a deleted\ntrainjobs.trainer.kubeflow.org/c deleted\n",
    )
    (listed,) = [r for r in apiserver.double.received if r.method == "GET" and r.path == TRAINJOBS_PATH]
    assert listed.query["labelSelector"] == "team=x"
    assert apiserver("delete", "trainjobs", "--all").output.count(" deleted\n") == 3

    none = apiserver("delete", "tj", "-l", "team=nobody")
    assert (none.exit_code, none.stdout, none.stderr) == (0, "", "No resources found\n")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["delete", "tj", "a", "-l", "x=y"], "-l and --all select the objects of a TYPE: give the TYPE, without names"),
        (["delete", "tj/a", "--all"], "-l and --all select the objects of a TYPE"),
        (["delete", "tj", "-l", "x=y", "--all"], "-l and --all: give one of them"),
        (["delete", "-f", "x.yaml", "--all"], "-l and --all select objects of a TYPE; not with -f"),
        (["delete", "tj"], "expected trainjobs NAME...: which one? (or -l, --all)"),
        (["delete", "tj/a", "b"], "mixes TYPE/NAME with other words"),
        (["delete", "pods", "a"], "unknown resource type 'pods'"),
        (["delete", "runtimes", "--all"], "delete trainingruntime NAME or clustertrainingruntime NAME"),
        (["create", "-f", "x.yaml", "--dry-run", "maybe"], "--dry-run"),
    ],
)
def test_wrong_delete_forms_are_usage_errors(args: list[str], expected: str) -> None:
    result = invoke(*args)
    assert result.exit_code == errors.EXIT_USAGE, result.output
    assert expected in " ".join(result.output.split())


def test_dry_run_server_sends_dry_run_all_and_says_so(apiserver: Apiserver, tmp_path: Path) -> None:
    apiserver.routes.update(DISCOVERY)
    job: JSON = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    apiserver.routes[TRAINJOBS_PATH] = lambda method, body: {**json.loads(body), "status": {}}
    apiserver.routes[f"{TRAINJOBS_PATH}/{job['metadata']['name']}"] = lambda method, body: (
        job if method != "PATCH" else json.loads(body)
    )
    sample = str(SAMPLES / "trainjob.yaml")

    created = apiserver("create", "-f", sample, "--dry-run=server")
    assert (created.exit_code, created.output) == (
        0,
        "trainjob.trainer.kubeflow.org/pytorch-simple created (server dry run)\n",
    )
    applied = apiserver("apply", "-f", sample, "--dry-run", "server")
    assert (applied.exit_code, applied.output) == (
        0,
        "trainjobs.trainer.kubeflow.org/pytorch-simple applied (server dry run)\n",
    )
    deleted = apiserver("delete", "-f", sample, "--dry-run=server")
    assert deleted.output == "trainjobs.trainer.kubeflow.org/pytorch-simple deleted (server dry run)\n"
    by_name = apiserver("delete", "tj", "pytorch-simple", "--dry-run=server")
    assert by_name.output == "trainjobs.trainer.kubeflow.org/pytorch-simple deleted (server dry run)\n"
    writes = [r for r in apiserver.double.received if r.method in ("POST", "PATCH", "DELETE")]
    assert [r.method for r in writes] == ["POST", "PATCH", "DELETE", "DELETE"]
    assert [r.query.get("dryRun") for r in writes[:2]] == ["All", "All"]  # create and apply: the query
    assert [json.loads(r.body)["dryRun"] for r in writes[2:]] == [["All"], ["All"]]  # delete: its DeleteOptions

    plain = apiserver("delete", "tj", "pytorch-simple")
    assert plain.output == "trainjobs.trainer.kubeflow.org/pytorch-simple deleted\n"
    assert "dryRun" not in json.loads(apiserver.double.received[-1].body)


def test_dry_run_client_sends_nothing(apiserver: Apiserver) -> None:
    sample = str(SAMPLES / "trainjob.yaml")
    result = invoke("create", "-f", sample, "--dry-run=client", "--queue", "gpu", "-n", "team-b", "-o", "yaml")
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.output)
    assert obj["metadata"]["namespace"] == "team-b"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
    assert invoke("apply", "-f", sample, "--dry-run=client").output == (
        "trainjobs.trainer.kubeflow.org/pytorch-simple applied (dry run)\n"
    )
    digits = str(SAMPLES / "digits" / "trainjob.yaml")  # named by metadata.generateName: digits-
    assert invoke("create", "-f", digits, "--dry-run=client").output == (
        "trainjob.trainer.kubeflow.org/digits- created (dry run)\n"
    )
    apiserver.routes.update(DISCOVERY)
    apiserver.routes[f"{TRAINJOBS_PATH}/a"] = held("a", "team-a", "Running", "", "")
    result = apiserver("delete", "tj", "a", "gone", "--dry-run=client")
    assert result.stdout == "trainjobs.trainer.kubeflow.org/a deleted (dry run)\n"
    assert result.stderr == "error: TrainJob team-a/gone not found\n"
    assert deletes(apiserver) == []


def test_yaml_and_json_output_leave_out_managed_fields(apiserver: Apiserver) -> None:
    job = held("a", "team-a", "Running", "", "")
    job["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    apiserver.routes[f"{TRAINJOBS_PATH}/a"] = job
    apiserver.routes[TRAINJOBS_PATH] = {"items": [job]}
    for args in (["get", "tj", "a"], ["get", "tj"]):
        as_yaml = apiserver(*args, "-o", "yaml")
        as_json = apiserver(*args, "-o", "json")
        assert as_yaml.exit_code == as_json.exit_code == 0
        assert "managedFields" not in as_yaml.output and "managedFields" not in as_json.output
        assert "name: a" in as_yaml.output and '"name": "a"' in as_json.output


EVENTS_PATH = "/api/v1/namespaces/team-a/events"


def runtime_event(kind: str, name: str, reason: str) -> JSON:
    return {
        "type": "Warning",
        "reason": reason,
        "message": "something about it",
        "involvedObject": {"kind": kind, "name": name},
        "lastTimestamp": "2026-01-01T00:05:00Z",
        "metadata": {"name": f"{name}.1", "namespace": "team-a"},
    }


def test_describe_shows_a_runtime(apiserver: Apiserver) -> None:
    apiserver.routes.update(DISCOVERY)
    apiserver.routes[f"{TRAINING_RUNTIMES_PATH}/mine"] = runtime("TrainingRuntime", "mine")
    apiserver.routes[f"{CLUSTER_RUNTIMES_PATH}/torch-distributed"] = runtime(
        "ClusterTrainingRuntime", "torch-distributed"
    )
    apiserver.routes[EVENTS_PATH] = {"items": [runtime_event("TrainingRuntime", "mine", "Odd")]}
    apiserver.routes["/api/v1/namespaces/default/events"] = {"items": []}

    result = apiserver("describe", "tr", "mine")
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    for expected in (
        "Name: mine",
        "Namespace: team-a",
        "Kind: TrainingRuntime",
        "Framework: torch",
        "Nodes: 1",
        "ML policy: torch (numProcPerNode: auto)",
        "Gang policy: <none>",
        "STEP REPLICAS DEPENDS ON CONTAINERS",
        "node 1 - node=pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
    ):
        assert expected in lines, (expected, lines)
    assert any("Warning Odd TrainingRuntime/mine something about it" in line for line in lines)
    (events,) = [r for r in apiserver.double.received if r.path == EVENTS_PATH]
    assert events.query["fieldSelector"] == "involvedObject.kind=TrainingRuntime,involvedObject.name=mine"

    data: Any = json.loads(apiserver("describe", "ctr/torch-distributed", "-o", "json").output)
    assert data["clusterTrainingRuntime"]["metadata"]["name"] == "torch-distributed" and data["events"] == []
    assert "Namespace:" not in apiserver("describe", "clustertrainingruntime", "torch-distributed").output
    assert (
        apiserver("describe", "runtime", "mine", "-o", "name").output == "trainingruntime.trainer.kubeflow.org/mine\n"
    )
    assert one_error_line(apiserver("describe", "tr", "nope")) == "error: TrainingRuntime team-a/nope not found"

"""The ``trainer`` command line without a cluster: help and exit codes, manifest errors (one line,
no traceback, before any connection), output formats, and ``operator run`` handing its arguments
to the operator."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from rich.console import Console
from typer.testing import CliRunner

from api.base import Condition, ObjectMeta
from api.trainer_v1alpha1 import JobStatus, RuntimeRef, Trainer, TrainJob, TrainJobSpec, TrainJobStatus
from tests.conftest import SAMPLES
from trainer import cli
from trainer.client import STATUSES, Event, JobFailedError, ManifestError, WaitTimeoutError
from trainer.kube.client import ApiError

NOW = datetime(2026, 1, 1, 0, 10, 0, tzinfo=UTC)
runner = CliRunner()


def invoke(*args: str, **kwargs: Any) -> Any:
    """Run the CLI in-process (no cluster: a kubeconfig that does not exist)."""
    return runner.invoke(cli.app, ["--kubeconfig", "/nonexistent/kubeconfig", *args], **kwargs)


def job() -> TrainJob:
    return TrainJob(
        metadata=ObjectMeta(
            name="pytorch-simple",
            namespace="team-a",
            creation_timestamp="2026-01-01T00:05:00Z",
            labels={"kueue.x-k8s.io/queue-name": "gpu"},
        ),
        spec=TrainJobSpec(runtime_ref=RuntimeRef(name="torch-distributed"), trainer=Trainer(num_nodes=2)),
        status=TrainJobStatus(
            conditions=[Condition(type="Complete", status="True", reason="AllJobsCompleted", message="done")],
            jobs_status=[JobStatus(name="node", succeeded=1)],
        ),
    )


def render(table: Any) -> str:
    console = Console(width=200, record=True, markup=False, highlight=False)
    console.print(table)
    return console.export_text()


def test_help_documents_the_exit_codes_and_every_command() -> None:
    result = runner.invoke(cli.app, ["--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Exit codes: 0 success; 1 the job Failed (wait) or an error" in text
    assert "2 usage error; 3 timeout" in text
    for command in ("apply", "get", "list", "describe", "logs", "wait", "delete", "runtimes", "operator"):
        assert command in result.output
    assert (cli.EXIT_OK, cli.EXIT_ERROR, cli.EXIT_USAGE, cli.EXIT_TIMEOUT) == (0, 1, 2, 3)
    assert tuple(cli.Status) == STATUSES


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["get"], "Missing argument"),
        (["wait", "x", "--status", "Finished"], "Finished"),
        (["logs", "x", "--node", "-1"], "--node"),
        (["list", "--bogus"], "No such option"),
        (["-o", "xml", "list"], "xml"),
    ],
)
def test_usage_errors_exit_2(args: list[str], expected: str) -> None:
    result = invoke(*args)
    assert result.exit_code == cli.EXIT_USAGE
    assert expected in result.output


def test_a_missing_manifest_is_one_line_and_exit_1_without_contacting_a_cluster(tmp_path: Path) -> None:
    result = invoke("apply", "-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == cli.EXIT_ERROR
    assert result.stderr == f"error: {tmp_path / 'nope.yaml'}: no such file\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [", "invalid YAML at line 1, column 8"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "kind 'ConfigMap' is not supported"),
        (
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
            "spec: {runtimeRef: {name: rt}, trainer: {numNodes: 0}}\n",
            "spec.trainer.numNodes: Input should be greater than or equal to 1",
        ),
        (
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
            "spec: {runtimeRef: {name: rt}, trainr: {}}\n",
            "fields this API does not know: spec.trainr",
        ),
    ],
)
def test_an_invalid_manifest_is_one_line_and_exit_1(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    result = invoke("apply", "-f", str(path))
    assert result.exit_code == cli.EXIT_ERROR
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}") and message in lines[0]
    assert "Traceback" not in result.output


def test_stdin_manifests_are_validated_too() -> None:
    result = invoke("apply", "-f", "-", input="apiVersion: x\nkind: TrainJob\nmetadata: {name: a}\n")
    assert result.exit_code == cli.EXIT_ERROR
    assert result.stderr.startswith("error: <stdin>: TrainJob must have apiVersion")


def test_a_valid_manifest_without_a_cluster_fails_in_one_line() -> None:
    result = invoke("apply", "-f", str(SAMPLES / "trainjob.yaml"))
    assert result.exit_code == cli.EXIT_ERROR
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert result.stderr == "error: kubeconfig not found: /nonexistent/kubeconfig\n"


def test_exit_codes_and_messages_of_errors() -> None:
    timeout = WaitTimeoutError("TrainJob ns/j to be Complete", 3, "Running")
    assert cli.exit_code(timeout) == cli.EXIT_TIMEOUT
    assert cli.exit_code(JobFailedError("TrainJob", "ns", "j", "x")) == cli.EXIT_ERROR
    assert cli.exit_code(ManifestError("bad")) == cli.EXIT_ERROR
    refused = ApiError(422, {"reason": "Invalid", "message": "spec.runtimeRef: Invalid value"})
    assert cli.error_message(refused) == "the apiserver refused: 422 Invalid: spec.runtimeRef: Invalid value"
    assert cli.error_message(FileNotFoundError(2, "No such file or directory", "/k")) == "No such file or directory: /k"
    with pytest.raises(typer.Exit) as caught:
        cli.fail("two\nlines", cli.EXIT_TIMEOUT)
    assert caught.value.exit_code == cli.EXIT_TIMEOUT


# --------------------------------------------------------------------------- output formats


def test_age_reads_like_kubectl() -> None:
    assert [cli.age(t, NOW) for t in ("2026-01-01T00:09:58Z", "2026-01-01T00:05:00Z", "2025-12-31T21:00:00Z")] == [
        "2s",
        "5m",
        "3h",
    ]
    assert cli.age("2025-12-25T00:10:00.5Z", NOW) == "6d"
    assert cli.age(None, NOW) == "<unknown>"


def test_the_job_table() -> None:
    assert cli.job_row(job(), NOW) == [
        "pytorch-simple",
        "Complete",
        "torch-distributed",
        "2",
        "node: 1 succeeded",
        "gpu",
        "5m",
    ]
    lines = render(cli.jobs_table([job()], NOW)).splitlines()
    assert lines[0].split() == list(cli.JOB_COLUMNS)
    assert lines[1].split() == [
        "pytorch-simple",
        "Complete",
        "torch-distributed",
        "2",
        "node:",
        "1",
        "succeeded",
        "gpu",
        "5m",
    ]


def test_jobs_summary_lists_non_zero_counts() -> None:
    j = job()
    assert j.status is not None
    j.status.jobs_status = [JobStatus(name="init", succeeded=1), JobStatus(name="node", ready=1, active=1)]
    assert cli.jobs_summary(j) == "init: 1 succeeded; node: 1 ready, 1 active"
    j.status.jobs_status = [JobStatus(name="node")]
    assert cli.jobs_summary(j) == "node: no Jobs"
    j.status = None
    assert cli.jobs_summary(j) == "-"


def test_json_and_yaml_output_are_the_objects() -> None:
    data = json.loads(cli.dump(job(), cli.Output.json))
    assert data["metadata"]["name"] == "pytorch-simple" and data["spec"]["runtimeRef"]["name"] == "torch-distributed"
    listed = yaml.safe_load(cli.dump(cli.as_list([job()]), cli.Output.yaml))
    assert listed["kind"] == "List" and listed["items"][0]["status"]["conditions"][0]["type"] == "Complete"


def test_describe_has_conditions_jobs_podgroup_queue_and_events() -> None:
    event = Event(reason="AllJobsCompleted", type="Normal", involved_object_kind="TrainJob", involved_object_name="j")
    podgroup = {
        "metadata": {"name": "pytorch-simple"},
        "spec": {"minMember": 2, "queue": "gpu"},
        "status": {"phase": "Running"},
    }
    text = "\n".join(render(t) for t in cli.describe_tables(job(), podgroup, [event], NOW))
    for expected in ("Name:", "pytorch-simple", "State:", "Queue:", "gpu", "Conditions:", "AllJobsCompleted", "done"):
        assert expected in text
    assert "Jobs status:" in text and "PodGroup:" in text and "Events:" in text
    assert "Running" in text and "TrainJob/j" in text
    data = cli.describe_data(job(), None, [event])
    assert (data["state"], data["queue"], data["podGroup"], data["events"][0]["reason"]) == (
        "Complete",
        "gpu",
        None,
        "AllJobsCompleted",
    )
    assert "<none>" in render(cli.describe_tables(job(), None, [], NOW)[3])


def test_names_with_brackets_are_printed_as_they_are() -> None:
    j = job()
    j.metadata.labels = {"kueue.x-k8s.io/queue-name": "[bold]q[/bold]"}
    console = cli.console()
    with console.capture() as captured:
        console.print(cli.jobs_table([j], NOW))
    assert "[bold]q[/bold]" in captured.get()


# --------------------------------------------------------------------------- operator run


def test_operator_run_hands_its_arguments_and_the_global_flags_to_the_operator(monkeypatch: Any) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(list(argv))
        return 0

    monkeypatch.setattr("trainer.main.main", fake_main)
    result = runner.invoke(
        cli.app, ["--kubeconfig", "/k", "-n", "ns", "operator", "run", "--gang-scheduler-name", "volcano"]
    )
    assert result.exit_code == 0
    assert seen == [["--namespace", "ns", "--kubeconfig", "/k", "--gang-scheduler-name", "volcano"]]
    runner.invoke(cli.app, ["--kubeconfig", "/k", "operator", "run", "--kubeconfig=/other"])
    assert seen[-1] == ["--kubeconfig=/other"]


def test_operator_run_help_is_the_operators() -> None:
    result = runner.invoke(cli.app, ["operator", "run", "--help"])
    assert result.exit_code == 0
    assert "usage: trainer-operator" in result.output and "--gang-scheduler-name" in result.output

"""The ``trainer`` command line without a cluster: help and exit codes, manifest errors (one line,
no traceback, before any connection), output formats, and ``operator run`` handing its arguments
to the operator."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from aiohttp import web
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import SAMPLES
from tests.http_double import HttpDouble, without_proxies, write_kubeconfig
from trainer import cli
from trainer.api.base import Condition, ObjectMeta
from trainer.api.trainer_v1alpha1 import (
    JobStatus,
    RuntimeRef,
    Trainer,
    TrainJob,
    TrainJobSpec,
    TrainJobStatus,
    runtime_from_dict,
)
from trainer.cli import describe, errors, root, submit, tables, targets, wait
from trainer.cli.logs import parse_duration
from trainer.client import STATUSES, TRAINJOB, Event, JobFailedError, ManifestError, WaitTimeoutError, shapes
from trainer.client.types import MPIJOB, Holding, holding_condition
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

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
    for command in ("apply", "create", "get", "list", "describe", "logs", "wait", "delete", "operator"):
        assert command in result.output
    assert (errors.EXIT_OK, errors.EXIT_ERROR, errors.EXIT_USAGE, errors.EXIT_TIMEOUT) == (0, 1, 2, 3)
    assert tuple(root.Status) == STATUSES


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
    assert result.exit_code == errors.EXIT_USAGE
    assert expected in result.output


def test_a_missing_manifest_is_one_line_and_exit_1_without_contacting_a_cluster(tmp_path: Path) -> None:
    result = invoke("apply", "-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == errors.EXIT_ERROR
    assert result.stderr == f"error: {tmp_path / 'nope.yaml'}: no such file\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [", "invalid YAML at line 1, column 8"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "kind 'ConfigMap' is not supported"),
        (
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
            "spec: {runtimeRef: {name: rt}, trainer: {numNodes: -1}}\n",
            "spec.trainer.numNodes: Input should be greater than or equal to 0",
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
    assert result.exit_code == errors.EXIT_ERROR
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}") and message in lines[0]
    assert "Traceback" not in result.output


def test_stdin_manifests_are_validated_too() -> None:
    result = invoke("apply", "-f", "-", input="apiVersion: x\nkind: TrainJob\nmetadata: {name: a}\n")
    assert result.exit_code == errors.EXIT_ERROR
    assert result.stderr.startswith("error: <stdin>: TrainJob must have apiVersion")


def test_a_valid_manifest_without_a_cluster_fails_in_one_line() -> None:
    result = invoke("apply", "-f", str(SAMPLES / "trainjob.yaml"))
    assert result.exit_code == errors.EXIT_ERROR
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert result.stderr == "error: kubeconfig not found: /nonexistent/kubeconfig\n"


def test_exit_codes_and_messages_of_errors() -> None:
    timeout = WaitTimeoutError("TrainJob ns/j to be Complete", 3, "Running")
    assert errors.exit_code(timeout) == errors.EXIT_TIMEOUT
    assert errors.exit_code(JobFailedError("TrainJob", "ns", "j", "x")) == errors.EXIT_ERROR
    assert errors.exit_code(ManifestError("bad")) == errors.EXIT_ERROR
    refused = ApiError(422, {"reason": "Invalid", "message": "spec.runtimeRef: Invalid value"})
    assert errors.error_message(refused) == "the apiserver refused: 422 Invalid: spec.runtimeRef: Invalid value"
    assert (
        errors.error_message(FileNotFoundError(2, "No such file or directory", "/k")) == "No such file or directory: /k"
    )
    with pytest.raises(typer.Exit) as caught:
        errors.fail("two\nlines", errors.EXIT_TIMEOUT)
    assert caught.value.exit_code == errors.EXIT_TIMEOUT


# --------------------------------------------------------------------------- output formats


def test_age_reads_like_kubectl() -> None:
    assert [tables.age(t, NOW) for t in ("2026-01-01T00:09:58Z", "2026-01-01T00:05:00Z", "2025-12-31T21:00:00Z")] == [
        "2s",
        "5m",
        "3h",
    ]
    assert tables.age("2025-12-25T00:10:00.5Z", NOW) == "6d"
    assert tables.age(None, NOW) == "<unknown>"


def test_the_job_table() -> None:
    assert tables.job_row(job(), NOW) == [
        "pytorch-simple",
        "Complete",
        "torch-distributed",
        "2",
        "node: 1 succeeded",
        "gpu",
        "5m",
    ]
    lines = render(tables.jobs_table([job()], NOW)).splitlines()
    assert lines[0].split() == list(tables.JOB_COLUMNS)
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
    assert tables.jobs_summary(j) == "init: 1 succeeded; node: 1 ready, 1 active"
    j.status.jobs_status = [JobStatus(name="node")]
    assert tables.jobs_summary(j) == "node: no Jobs"
    j.status = None
    assert tables.jobs_summary(j) == "-"


def test_json_and_yaml_output_are_the_objects() -> None:
    data = json.loads(tables.dump(job(), root.Output.json))
    assert data["metadata"]["name"] == "pytorch-simple" and data["spec"]["runtimeRef"]["name"] == "torch-distributed"
    listed = yaml.safe_load(tables.dump(tables.as_list([job()]), root.Output.yaml))
    assert listed["kind"] == "List" and listed["items"][0]["status"]["conditions"][0]["type"] == "Complete"


def test_describe_has_conditions_jobs_podgroup_queue_and_events() -> None:
    event = Event(reason="AllJobsCompleted", type="Normal", involved_object_kind="TrainJob", involved_object_name="j")
    podgroup = {
        "metadata": {"name": "pytorch-simple"},
        "spec": {"minMember": 2, "queue": "gpu"},
        "status": {"phase": "Running"},
    }
    text = "\n".join(render(t) for t in describe.describe_tables(job(), podgroup, [event], NOW))
    for expected in ("Name:", "pytorch-simple", "State:", "Queue:", "gpu", "Conditions:", "AllJobsCompleted", "done"):
        assert expected in text
    assert "Jobs status:" in text and "PodGroup:" in text and "Events:" in text
    assert "Running" in text and "TrainJob/j" in text
    data = describe.describe_data(job(), None, [event])
    assert (data["state"], data["queue"], data["podGroup"], data["events"][0]["reason"]) == (
        "Complete",
        "gpu",
        None,
        "AllJobsCompleted",
    )
    assert "<none>" in render(describe.describe_tables(job(), None, [], NOW)[3])


def test_names_with_brackets_are_printed_as_they_are() -> None:
    j = job()
    j.metadata.labels = {"kueue.x-k8s.io/queue-name": "[bold]q[/bold]"}
    console = tables.console()
    with console.capture() as captured:
        console.print(tables.jobs_table([j], NOW))
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


def test_operator_run_says_when_the_operator_is_not_installed(monkeypatch: Any) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    result = runner.invoke(cli.app, ["operator", "run"])
    assert result.exit_code == errors.EXIT_ERROR
    assert "error: the operator is not installed" in result.output


def test_operator_run_help_is_the_operators() -> None:
    result = runner.invoke(cli.app, ["operator", "run", "--help"])
    assert result.exit_code == 0
    assert "usage: trainer-operator" in result.output and "--gang-scheduler-name" in result.output


# --------------------------------------------------------------------------- against an HTTP double


class Apiserver:
    """An :class:`HttpDouble` served from a thread of its own (the CLI runs its own event loop):
    ``routes`` maps a path to an answer (a JSON object, its ``items`` narrowed by a label selector of
    ``key=value`` and ``key`` terms, text, or a function of the method and body giving the JSON or the
    response); anything else is the apiserver's plain-text ``404 page not found``."""

    def __init__(self, directory: Path) -> None:
        self.routes: dict[str, Any] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.double: HttpDouble[None] = HttpDouble(self.answer)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.double.start(), self.loop).result(10)
        self.kubeconfig = write_kubeconfig(directory, self.double.url)

    async def answer(self, _: HttpDouble[None], request: web.Request) -> web.StreamResponse:
        found = self.routes.get(request.path)
        if found is None:
            return web.Response(status=404, text="404 page not found")
        if isinstance(found, str):
            return web.Response(text=found)
        if callable(found):
            answer = found(request.method, await request.read())
            return answer if isinstance(answer, web.StreamResponse) else web.json_response(answer)
        terms = [p for p in request.query.get("labelSelector", "").split(",") if p]
        selector = dict(p.split("=", 1) for p in terms if "=" in p)
        exists = {p for p in terms if "=" not in p}
        if "items" in found and terms:
            labels = [(i["metadata"].get("labels") or {}) for i in found["items"]]
            items = [
                i
                for i, have in zip(found["items"], labels, strict=True)
                if selector.items() <= have.items() and exists <= have.keys()
            ]
            return web.json_response({**found, "items": items})
        return web.json_response(found)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.double.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def __call__(self, *args: str) -> Any:
        return runner.invoke(cli.app, ["--kubeconfig", self.kubeconfig, "-n", "team-a", *args])


@pytest.fixture
def apiserver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Apiserver]:
    without_proxies(monkeypatch)
    server = Apiserver(tmp_path)
    yield server
    server.stop()


TRAINJOBS_PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
DISCOVERY = {
    "/apis/trainer.kubeflow.org/v1alpha1": {"resources": [{"name": "trainjobs"}, {"name": "trainingruntimes"}]},
    "/apis/kubeflow.org/v2beta1": {"resources": [{"name": "mpijobs"}]},
}


def one_error_line(result: Any) -> str:
    assert result.exit_code == errors.EXIT_ERROR, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return str(lines[0])


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["list"], "TrainJob"),
        (["get", "tj", "x"], "TrainJob"),
        (["describe", "x"], "TrainJob"),
        (["delete", "x"], "TrainJob"),
        (["delete", "x", "--ignore-not-found"], "TrainJob"),
        (["logs", "x"], "TrainJob"),
        (["wait", "x"], "TrainJob"),
        (["suspend", "x"], "TrainJob"),
        (["list", "mpijobs"], "MPIJob"),
        (["get", "mpijob/x"], "MPIJob"),
        (["runtimes"], "TrainingRuntime"),
        (["get", "runtimes"], "TrainingRuntime"),
        (["get", "ctr"], "ClusterTrainingRuntime"),
        (["get", "ctr", "x"], "ClusterTrainingRuntime"),
        (["list", "tr"], "TrainingRuntime"),
        (["delete", "tr/x"], "TrainingRuntime"),
    ],
)
def test_crds_not_installed_is_one_line_naming_the_install(apiserver: Apiserver, args: list[str], kind: str) -> None:
    line = one_error_line(apiserver(*args))
    assert line == f"error: {kind} CRD not installed; {errors.CRD_INSTALL}"
    assert "helm install trainer charts/trainer" in line and "kubectl apply --server-side -k config/default" in line


def test_a_missing_job_with_the_crds_installed_is_not_found(apiserver: Apiserver) -> None:
    apiserver.routes.update(DISCOVERY)
    assert one_error_line(apiserver("get", "tj", "x")) == "error: TrainJob team-a/x not found"
    assert one_error_line(apiserver("describe", "mpijob", "x")) == "error: MPIJob team-a/x not found"
    quiet = apiserver("delete", "x", "--ignore-not-found")
    assert (quiet.exit_code, quiet.output) == (0, "")


def test_kubeconfig_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    malformed = tmp_path / "malformed"
    malformed.write_text("apiVersion: v1\nclusters: [\n")
    line = one_error_line(runner.invoke(cli.app, ["--kubeconfig", str(malformed), "list"]))
    assert line.startswith(f"error: cannot read the kubeconfig {malformed}: invalid YAML at line 3")
    monkeypatch.setenv("KUBECONFIG", str(malformed))
    assert one_error_line(runner.invoke(cli.app, ["get", "tj/x"])).startswith("error: cannot read the kubeconfig")
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    assert one_error_line(runner.invoke(cli.app, ["list"])) == "error: kubeconfig not found: /nonexistent ($KUBECONFIG)"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert one_error_line(runner.invoke(cli.app, ["runtimes"])) == (
        "error: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster"
    )


def held(name: str, namespace: str, type_: str, reason: str, message: str) -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:05:00Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"conditions": [{"type": type_, "status": "True", "reason": reason, "message": message}]},
    }


def test_list_shows_the_holding_condition_and_wide_adds_reason_and_message(apiserver: Apiserver) -> None:
    apiserver.routes["/apis/trainer.kubeflow.org/v1alpha1/trainjobs"] = {
        "items": [
            held("big", "team-a", "WaitingForGang", "PodGroupPending", "minMember 8 cannot fit"),
            held("lost", "team-b", "RuntimeNotFound", "ClusterTrainingRuntimeNotFound", "no runtime nope"),
        ]
    }
    plain = apiserver("list", "-A").output.splitlines()
    assert plain[0].split() == ["NAMESPACE", *tables.JOB_COLUMNS]
    assert [line.split()[:3] for line in plain[1:]] == [
        ["team-a", "big", "WaitingForGang"],
        ["team-b", "lost", "RuntimeNotFound"],
    ]
    wide = apiserver("list", "-A", "-o", "wide").output.splitlines()
    assert wide[0].split()[-2:] == ["REASON", "MESSAGE"]
    assert wide[1].split()[-5:] == ["PodGroupPending", "minMember", "8", "cannot", "fit"]
    names = apiserver("list", "-A", "-o", "name")
    assert names.output == "trainjob.trainer.kubeflow.org/big\ntrainjob.trainer.kubeflow.org/lost\n"


def mpijob(state: str = "Running") -> JSON:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "team-a", "uid": "u1", "creationTimestamp": "2026-01-01T00:05:00Z"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "mpi", "image": "i"}]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "mpi", "image": "i"}]}}},
            }
        },
        "status": {
            "conditions": [{"type": state, "status": "True", "reason": f"MPIJob{state}", "message": "m"}],
            "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}},
        },
    }


def pod(name: str, role: str, index: str | None, **status: Any) -> JSON:
    labels = {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/replica-type": role}
    if index is not None:
        labels["batch.kubernetes.io/job-completion-index"] = index
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:06:00Z",
        },
        "spec": {"containers": [{"name": "mpi"}], "nodeName": "n1"},
        "status": {"phase": "Running", **status},
    }


def test_mpijobs_are_got_listed_described_and_logged_from_the_launcher(apiserver: Apiserver) -> None:
    base = "/apis/kubeflow.org/v2beta1/namespaces/team-a/mpijobs"
    apiserver.routes[base] = {"items": [mpijob()]}
    apiserver.routes[f"{base}/pi"] = mpijob()
    apiserver.routes["/api/v1/namespaces/team-a/pods"] = {
        "items": [pod("pi-launcher-x", "launcher", None), pod("pi-worker-0", "worker", "0")]
    }
    apiserver.routes["/api/v1/namespaces/team-a/events"] = {"items": []}
    apiserver.routes["/apis/batch/v1/namespaces/team-a/jobs"] = {"items": []}
    apiserver.routes["/api/v1/namespaces/team-a/pods/pi-launcher-x/log"] = "pi is 3.14\n"
    listed = apiserver("list", "mpijobs").output.splitlines()
    assert listed[0].split() == list(tables.MPIJOB_COLUMNS)
    assert listed[1].split()[:3] == ["pi", "Running", "2"]
    assert apiserver("get", "mpijob", "pi", "-o", "name").output == "mpijob.kubeflow.org/pi\n"
    described = apiserver("describe", "mpijobs.kubeflow.org/pi")
    assert described.exit_code == 0, described.output
    for text in ("Kind:", "MPIJob", "Replica statuses:", "Worker", "Pods:", "pi-launcher-x", "pi-worker-0"):
        assert text in described.output
    logs = apiserver("logs", "mpijob/pi", "--prefix", "--tail", "5", "--since", "1h30m", "-p")
    assert (logs.exit_code, logs.output) == (0, "[pod/pi-launcher-x/mpi] pi is 3.14\n"), logs.output
    query = next(r.query for r in apiserver.double.received if r.path.endswith("/log"))
    assert (query["tailLines"], query["sinceSeconds"], query["previous"]) == ("5", "5400", "true")


def test_suspend_and_resume_patch_the_job(apiserver: Apiserver) -> None:
    apiserver.routes[f"{TRAINJOBS_PATH}/j"] = held("j", "team-a", "Suspended", "Suspended", "")
    assert apiserver("suspend", "j").output == "trainjobs.trainer.kubeflow.org/j suspended\n"
    assert apiserver("resume", "trainjob/j").output == "trainjobs.trainer.kubeflow.org/j resumed\n"
    patches = [json.loads(r.body) for r in apiserver.double.received if r.method == "PATCH"]
    assert patches == [{"spec": {"suspend": True}}, {"spec": {"suspend": False}}]


# --------------------------------------------------------------------------- pure pieces


def test_the_state_is_the_condition_that_holds_the_job() -> None:
    j = TrainJob.model_validate(held("j", "ns", "Misconfigured", "QueueNotFound", "queue q\nis missing"))
    assert holding_condition(j) == Holding("Misconfigured", "QueueNotFound", "queue q is missing")
    assert tables.job_row(j, NOW)[1] == "Misconfigured"
    assert wait.holding_text("j", holding_condition(j)) == "j: Misconfigured (QueueNotFound: queue q is missing)"
    refused = TrainJob.model_validate(held("j", "ns", "ReplicaFailure", "FailedCreate", "Job j-node-0: no"))
    assert wait.holding_text("j", holding_condition(refused)) == "j: ReplicaFailure (FailedCreate: Job j-node-0: no)"
    j.status = None
    assert holding_condition(j) == Holding("Created")
    assert describe.unattended(j, NOW) == "no controller has acted on this TrainJob yet: is the operator running?"
    assert describe.unattended(j, datetime(2026, 1, 1, 0, 5, 2, tzinfo=UTC)) is None  # 2s old
    assert "no controller has acted" in render(describe.describe_tables(j, None, [], NOW)[0])


def test_the_pods_table_says_why_a_pod_waits() -> None:
    pulling = pod("a", "worker", "0", containerStatuses=[{"ready": False, "restartCount": 2,
                  "state": {"waiting": {"reason": "ImagePullBackOff"}}}])  # fmt: skip
    pending = pod("b", "worker", "1", phase="Pending")
    pending["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
    ]
    assert tables.pod_row(pulling, NOW) == ["a", "Running", "n1", "0/1", "2", "ImagePullBackOff", "4m"]
    assert tables.pod_waiting(pending) == "Unschedulable: 0/3 nodes are available"
    lines = render(tables.pods_table([pending, pulling], NOW)).splitlines()
    assert lines[0].strip() == "Pods:" and lines[1].split() == list(tables.POD_COLUMNS)
    assert "<none>" in render(tables.pods_table([], NOW))


def test_kubectl_flags_parse() -> None:
    assert [parse_duration(t) for t in ("30s", "5m", "1h30m")] == [30, 300, 5400]
    assert targets.target(["x"]) == (TRAINJOB, "x")
    assert targets.target(["mpijob/x"]) == (MPIJOB, "x") == targets.target(["mpijobs.kubeflow.org", "x"])
    assert invoke("get", "pods/x").exit_code == errors.EXIT_USAGE
    assert invoke("logs", "x", "--since", "soon").exit_code == errors.EXIT_USAGE
    version = runner.invoke(cli.app, ["--version"])
    assert (version.exit_code, version.output) == (0, f"trainer {importlib.metadata.version('trainjob-operator')}\n")
    assert "--install-completion" in runner.invoke(cli.app, ["--help"]).output


def test_apply_reads_a_directory_and_with_r_its_subdirectories(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text((SAMPLES / "trainjob.yaml").read_text())
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub" / "b.yml").write_text((SAMPLES / "trainjob.yaml").read_text().replace("pytorch-simple", "b"))
    assert [o.metadata.name for o in submit.read_manifests([str(tmp_path)])] == ["pytorch-simple"]
    assert [o.metadata.name for o in submit.read_manifests([str(tmp_path)], recursive=True)] == ["pytorch-simple", "b"]
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke("apply", "-f", str(empty))
    assert one_error_line(result) == f"error: {empty}: no .yaml, .yml, .json file in this directory"


# --------------------------------------------------------------------------- kubectl's forms


def test_types_take_kubectls_names_and_the_crds_short_names() -> None:
    declared = {}
    for path in sorted((SAMPLES.parent / "crd" / "bases").glob("*.yaml")):
        names = yaml.safe_load(path.read_text())["spec"]["names"]
        declared[names["plural"]] = names.get("shortNames", [])
    assert declared == {
        "clustertrainingruntimes": ["ctr"],
        "mpijobs": ["mpij"],
        "optimizationjobs": ["optj"],
        "trainingruntimes": ["tr"],
        "trainjobs": ["tj"],
    }
    for plural, shorts in declared.items():
        for name in (
            plural,
            plural[:-1],
            *shorts,
            f"{plural}.{targets.TYPES[plural].resources[0].group}",
            plural.upper(),
        ):
            assert targets.object_type(name).name == plural, name
    assert targets.object_type("runtime") is targets.object_type("runtimes") is targets.RUNTIMES
    assert targets.object_type("tj").job is TRAINJOB and targets.object_type("mpij").job is MPIJOB
    assert targets.object_type("ctr").job is None

    assert targets.parse_target(["trainjobs"]) == (targets.TYPES["trainjobs"], None)
    assert (
        targets.parse_target(["tj", "x"]) == targets.parse_target(["trainjob/x"]) == (targets.TYPES["trainjobs"], "x")
    )
    assert targets.parse_target(["x"]) == (targets.TYPES["trainjobs"], "x")  # a NAME alone: a TrainJob, as before TYPE
    assert targets.parse_target(["ctr/torch"]) == (targets.TYPES["clustertrainingruntimes"], "torch")
    assert targets.target(["mpij", "pi"]) == (MPIJOB, "pi")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["get", "pods", "x"], "unknown resource type 'pods'; the types are trainjobs (trainjob, tj),"),
        (["get", "deployments/x"], "unknown resource type 'deployments'"),
        (["list", "pods"], "mpijobs (mpijob, mpij), optimizationjobs (optimizationjob, optj), runtimes (runtime)"),
        (["delete", "pods", "x"], "clustertrainingruntimes (clustertrainingruntime, ctr)"),
        (["describe", "tj"], "expected tj NAME: 'tj' is a type, not a job's name"),
        (["logs", "ctr", "x"], "clustertrainingruntimes are not jobs"),
        (["get", "tj", "x", "y"], "expected TYPE, TYPE NAME or TYPE/NAME"),
        (["get", "tj/"], "no NAME after 'tj'"),
        (["get", "tj", "x", "-l", "a=b"], "not with a NAME"),
        (["get", "runtimes", "-w"], "--watch, --runtime and --queue are for jobs, not runtimes"),
        (["delete"], "expected TYPE NAME..., NAME, TYPE -l SELECTOR, TYPE --all or -f FILE"),
        (["delete", "x", "-f", "x.yaml"], "expected TYPE NAME..., NAME, TYPE -l SELECTOR, TYPE --all or -f FILE"),
        (["delete", "runtimes", "x"], "delete trainingruntime NAME or clustertrainingruntime NAME"),
    ],
)
def test_an_unknown_type_or_a_wrong_form_is_a_usage_error_naming_the_types(args: list[str], expected: str) -> None:
    result = invoke(*args)
    assert result.exit_code == errors.EXIT_USAGE, result.output
    assert expected in " ".join(result.output.split())


TRAINING_RUNTIMES_PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainingruntimes"
CLUSTER_RUNTIMES_PATH = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"


def runtime(kind: str, name: str) -> JSON:
    obj: JSON = yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text())
    obj["kind"] = kind
    obj["metadata"] |= {"name": name, **({"namespace": "team-a"} if kind == "TrainingRuntime" else {})}
    return obj


def test_get_type_lists_and_get_type_name_shows_one(apiserver: Apiserver) -> None:
    apiserver.routes[TRAINJOBS_PATH] = {
        "items": [held("a", "team-a", "Running", "", ""), held("b", "team-a", "Running", "", "")]
    }
    apiserver.routes[f"{TRAINJOBS_PATH}/a"] = held("a", "team-a", "Running", "", "")
    apiserver.routes[TRAINING_RUNTIMES_PATH] = {"items": [runtime("TrainingRuntime", "mine")]}
    apiserver.routes[f"{TRAINING_RUNTIMES_PATH}/mine"] = runtime("TrainingRuntime", "mine")
    apiserver.routes[CLUSTER_RUNTIMES_PATH] = {"items": [runtime("ClusterTrainingRuntime", "torch-distributed")]}

    for form in (["get", "trainjobs"], ["get", "tj"], ["list", "trainjob"], ["list"]):
        lines = apiserver(*form).output.splitlines()
        assert lines[0].split() == list(tables.JOB_COLUMNS) and [line.split()[0] for line in lines[1:]] == ["a", "b"]
    for form in (["get", "tj", "a"], ["get", "trainjobs.trainer.kubeflow.org/a"], ["get", "trainjob/a"]):
        assert apiserver(*form, "-o", "name").output == "trainjob.trainer.kubeflow.org/a\n", form

    runtimes = apiserver("get", "runtimes").output.splitlines()
    assert [line.split()[:3] for line in runtimes] == [
        ["NAME", "KIND", "FRAMEWORK"],
        ["mine", "TrainingRuntime", "torch"],
        ["torch-distributed", "ClusterTrainingRuntime", "torch"],
    ]
    assert apiserver("runtimes").output.splitlines() == runtimes  # the command before `get runtimes`
    assert (
        apiserver("get", "ctr", "-o", "name").output
        == "clustertrainingruntime.trainer.kubeflow.org/torch-distributed\n"
    )
    assert apiserver("get", "tr", "mine", "-o", "name").output == "trainingruntime.trainer.kubeflow.org/mine\n"
    assert apiserver("get", "runtime", "mine", "-o", "json").output.count('"kind": "TrainingRuntime"') == 1
    apiserver.routes.update(DISCOVERY)
    assert one_error_line(apiserver("get", "tr", "nope")) == "error: TrainingRuntime team-a/nope not found"


def generated(method: str, body: bytes) -> JSON:
    """The apiserver's answer to a create: the object with the name made of its generateName."""
    assert method == "POST"
    obj: JSON = json.loads(body)
    obj["metadata"]["name"] = obj["metadata"].pop("generateName") + "x7k2p"
    return obj


GENERATED = """apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  generateName: pytorch-
spec:
  runtimeRef: {name: torch-distributed}
"""


def test_create_names_an_object_by_its_generate_name_as_the_apiserver_completes_it(
    apiserver: Apiserver, tmp_path: Path
) -> None:
    apiserver.routes[TRAINJOBS_PATH] = generated
    path = tmp_path / "job.yaml"
    path.write_text(GENERATED)
    created = apiserver("create", "-f", str(path))
    assert (created.exit_code, created.output) == (0, "trainjob.trainer.kubeflow.org/pytorch-x7k2p created\n")
    (post,) = [r for r in apiserver.double.received if r.method == "POST"]
    assert post.path == TRAINJOBS_PATH
    assert json.loads(post.body)["metadata"] == {"generateName": "pytorch-", "namespace": "team-a"}

    piped = runner.invoke(
        cli.app,
        ["--kubeconfig", apiserver.kubeconfig, "-n", "team-a", "create", "-f", "-", "-o", "name"],
        input=GENERATED,
    )
    assert (piped.exit_code, piped.output) == (0, "trainjob.trainer.kubeflow.org/pytorch-x7k2p\n")

    exists = {"kind": "Status", "code": 409, "reason": "AlreadyExists", "message": "exists"}
    apiserver.routes[TRAINJOBS_PATH] = lambda method, body: web.json_response(exists, status=409)
    refused = one_error_line(apiserver("create", "-f", str(SAMPLES / "trainjob.yaml")))
    assert refused == "error: TrainJob team-a/pytorch-simple already exists"


def test_apply_and_delete_refuse_a_generate_name_before_contacting_a_cluster(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(GENERATED)
    line = one_error_line(invoke("apply", "-f", str(path)))
    assert line == (
        "error: TrainJob with metadata.generateName 'pytorch-' has no metadata.name: apply needs one "
        "(create completes a generateName)"
    )
    line = one_error_line(invoke("delete", "-f", str(path)))
    assert line == (  # kubectl's words, and where the name is
        "error: TrainJob with metadata.generateName 'pytorch-': resource name may not be empty (as kubectl "
        "delete -f); its name is the one create printed: delete it by that name (trainer delete trainjobs NAME) "
        "or by a label (-l)"
    )


def test_delete_f_deletes_every_object_the_file_names(apiserver: Apiserver, tmp_path: Path) -> None:
    apiserver.routes.update(DISCOVERY)
    apiserver.routes[f"{TRAINJOBS_PATH}/a"] = held("a", "team-a", "Running", "", "")
    apiserver.routes[f"{CLUSTER_RUNTIMES_PATH}/rt"] = runtime("ClusterTrainingRuntime", "rt")
    docs = [
        runtime("ClusterTrainingRuntime", "rt"),
        held("gone", "elsewhere", "Running", "", ""),
        held("a", "x", "Running", "", ""),
    ]
    for doc in docs:
        doc.pop("status", None)
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(docs))

    result = apiserver("delete", "-f", str(path))
    assert result.exit_code == errors.EXIT_ERROR
    assert (
        result.stdout
        == "clustertrainingruntimes.trainer.kubeflow.org/rt deleted\ntrainjobs.trainer.kubeflow.org/a deleted\n"
    )
    assert result.stderr == "error: TrainJob team-a/gone not found\n"  # after the others, in -n's namespace
    deletes = [r.path for r in apiserver.double.received if r.method == "DELETE"]
    assert deletes == [f"{CLUSTER_RUNTIMES_PATH}/rt", f"{TRAINJOBS_PATH}/gone", f"{TRAINJOBS_PATH}/a"]

    quiet = apiserver("delete", "-f", str(path), "--ignore-not-found")
    assert (quiet.exit_code, quiet.stderr) == (0, "")
    by_name = apiserver("delete", "tj", "a")
    assert (by_name.exit_code, by_name.output) == (0, "trainjobs.trainer.kubeflow.org/a deleted\n")
    assert apiserver("delete", "ctr/rt").output == "clustertrainingruntimes.trainer.kubeflow.org/rt deleted\n"


def test_nodes_follow_the_sdks_rule_numnodes_else_the_runtimes(apiserver: Apiserver) -> None:
    """NODES of a TrainJob that sets no numNodes is its runtime's mlPolicy.numNodes, as the SDK's
    ``TrainJob.num_nodes`` (it showed ``-`` where the SDK said 2); ``-`` only when the runtime is not found."""
    two = runtime("ClusterTrainingRuntime", "torch-distributed")
    two["spec"]["mlPolicy"]["numNodes"] = 2
    four = runtime("TrainingRuntime", "mine")
    four["spec"]["mlPolicy"]["numNodes"] = 4
    jobs = [held("a", "team-a", "Complete", "", ""), held("b", "team-a", "Complete", "", "")]
    jobs[1]["spec"]["runtimeRef"] = {"name": "mine", "kind": "TrainingRuntime"}
    lost = held("c", "team-a", "Complete", "", "")
    lost["spec"]["runtimeRef"] = {"name": "gone"}
    apiserver.routes[TRAINJOBS_PATH] = {"items": [*jobs, lost]}
    apiserver.routes[f"{TRAINJOBS_PATH}/a"] = jobs[0]
    apiserver.routes[TRAINING_RUNTIMES_PATH] = {"items": [four]}
    apiserver.routes[CLUSTER_RUNTIMES_PATH] = {"items": [two]}

    def nodes(output: str) -> dict[str, str]:
        lines = output.splitlines()
        at = lines[0].split().index("NODES")
        return {line.split()[0]: line.split()[at] for line in lines[1:]}

    assert nodes(apiserver("get", "trainjobs").output) == {"a": "2", "b": "4", "c": "-"}
    assert nodes(apiserver("get", "trainjob", "a").output) == {"a": "2"}
    sdk = shapes.trainjob_of(TrainJob.model_validate(jobs[0]), shapes.runtime_of(runtime_from_dict(two)), [])
    assert sdk.num_nodes == 2
    rows = tables.job_rows([TrainJob.model_validate(j) for j in jobs])[1]  # no runtimes read: what the job says
    assert [r[tables.JOB_COLUMNS.index("NODES")] for r in rows] == ["-", "-"]


def test_tables_end_each_line_at_its_last_character(capsys: pytest.CaptureFixture[str]) -> None:
    """``describe``'s Events off a terminal: one long message does not pad every other line with
    spaces out to its length (it padded each to ~500 columns); nothing is cut either."""
    long = "0/3 nodes are available: " + "x" * 480
    events = [
        Event(type="Normal", reason="Created", message="ok", involved_object_kind="Job", involved_object_name="j"),
        Event(type="Warning", reason="Failed", message=long, involved_object_kind="Pod", involved_object_name="p"),
    ]
    tables.show({}, root.Output.table, lambda: [tables.events_table(events), tables.table("A", "B")])
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    assert lines[0] == "Events:" and lines[2].endswith("Job/j   ok") and lines[3].endswith(long)

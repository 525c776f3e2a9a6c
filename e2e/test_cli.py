"""The ``trainer`` command line end to end on the real local cluster, run as a user runs it (a
separate process): apply the sample, wait, get, list, describe, logs of a named step, delete, and
the exit codes a script relies on; kubectl's forms: ``get TYPE [NAME]``, ``create -f`` of a
``generateName``, ``delete -f``, ``delete`` of several names, ``-l`` and ``--all``, ``--dry-run=server``
(the apiserver's ``dryRun=All``), ``describe`` of a runtime. Logs come from the log nodes of :mod:`e2e.test_sdk`."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helpers import ROOT
from e2e.test_sdk import RUN_FOR, SAMPLE, LogsNodes, logs_nodes_fixture, sample  # noqa: F401 (logs_nodes fixture)

pytestmark = pytest.mark.e2e


class Trainer:
    """Runs ``python -m trainer.cli --kubeconfig K -n NS ...``."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig, self.namespace = kubeconfig, namespace

    def __call__(self, *args: str, timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, input=stdin)

    def start(self, *args: str) -> Streamed:
        """Start ``trainer ... ARGS`` without waiting for it (a watch): its stdout lines as they come."""
        cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args]
        # SIGINT as at a terminal: a test run started in the background (nohup, `&`) ignores it, and an
        # ignored signal is inherited, so Ctrl-C (Streamed.stop) would never reach the command.
        process = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        return Streamed(process)


class Streamed:
    """A running command whose stdout lines a thread collects, for :meth:`next_line` to take one by one."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float = 60) -> str:
        """The next line printed; fails when the command ended or printed nothing for ``timeout`` seconds."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout}s") from None
        assert line is not None, f"ended: {self.stop()}"
        return line

    def stop(self) -> tuple[int, str]:
        """End the command as Ctrl-C does (SIGINT); returns its exit code and what it printed on stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=30)
        return self.process.returncode, err


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The error a failed command printed, checked to be one ``error:`` line and no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def trainer(cluster: Any, ns: str) -> Trainer:
    return Trainer(cluster.kubeconfig, ns)


def test_apply_wait_get_list_describe_delete_the_sample(trainer: Trainer, samples: None) -> None:
    applied = trainer("apply", "-f", str(SAMPLE))
    assert (applied.returncode, applied.stdout) == (0, "trainjobs.trainer.kubeflow.org/pytorch-simple applied\n")

    waited = trainer("wait", "pytorch-simple", "--status", "Complete", "--timeout", "90")
    assert (waited.returncode, waited.stdout) == (0, "pytorch-simple Complete\n"), waited.stderr
    assert "pytorch-simple: Complete" in waited.stderr  # the progress display

    got = json.loads(trainer("get", "tj", "pytorch-simple", "-o", "json").stdout)
    assert (got["metadata"]["namespace"], got["status"]["conditions"][-1]["type"]) == (trainer.namespace, "Complete")
    table = trainer("get", "tj", "pytorch-simple").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "RUNTIME", "NODES", "JOBS", "QUEUE", "AGE"]
    assert table[1].split()[:4] == ["pytorch-simple", "Complete", "torch-distributed", "2"]

    listed = yaml.safe_load(trainer("list", "-o", "yaml").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["pytorch-simple"]
    assert "pytorch-simple" in trainer("list", "--runtime", "torch-distributed").stdout
    nothing = trainer("list", "--queue", "production")
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "", "No TrainJobs found.\n")

    described = trainer("describe", "pytorch-simple")
    assert described.returncode == 0
    for text in ("State:", "Complete", "Conditions:", "AllJobsCompleted", "Jobs status:", "PodGroup:", "Events:"):
        assert text in described.stdout
    data = json.loads(trainer("describe", "pytorch-simple", "-o", "json").stdout)
    assert (data["state"], data["queue"], data["podGroup"]) == ("Complete", None, None)
    assert {"SuccessfulCreate", "AllJobsCompleted"} <= {e["reason"] for e in data["events"]}

    runtimes = trainer("get", "runtimes").stdout
    assert any(
        line.split()[:3] == ["torch-distributed", "ClusterTrainingRuntime", "torch"] for line in runtimes.splitlines()
    )
    assert trainer("runtimes").stdout == runtimes  # the command before `get runtimes`

    # A Complete job will not become Failed: exit 1 at once, not a timeout.
    never = trainer("wait", "pytorch-simple", "--status", "Failed", "--timeout", "30")
    assert never.returncode == 1 and "is Complete; it will not become Failed" in one_line_error(never)

    deleted = trainer("delete", "pytorch-simple", "--wait")
    assert (deleted.returncode, deleted.stdout) == (0, "trainjobs.trainer.kubeflow.org/pytorch-simple deleted\n")
    gone = trainer("get", "tj", "pytorch-simple")
    assert gone.returncode == 1
    assert one_line_error(gone) == f"error: TrainJob {trainer.namespace}/pytorch-simple not found"


def test_logs_of_a_named_step_and_the_error_from_a_node_without_kubelet(
    trainer: Trainer, samples: None, logs_nodes: LogsNodes, tmp_path: Path
) -> None:
    served = tmp_path / "served.yaml"
    served.write_text(yaml.safe_dump(logs_nodes.pin(sample("served"), logs_nodes.served)))
    unserved = tmp_path / "unserved.yaml"
    unserved.write_text(yaml.safe_dump(logs_nodes.pin(sample("unserved"), logs_nodes.unserved)))
    assert trainer("apply", "-f", str(served), "-f", str(unserved)).returncode == 0

    logs = trainer("logs", "served", "--step", "node", "--node", "1", "--pod-timeout", "60")
    assert (logs.returncode, logs.stdout.splitlines()) == (0, logs_nodes.lines), logs.stderr

    assert trainer("wait", "unserved", "--timeout", "90").returncode == 0
    refused = trainer("logs", "unserved", "--step", "node", "--node", "0")
    assert refused.returncode == 1 and refused.stdout == ""
    message = one_line_error(refused)
    assert f"logs of container 'node' of pod {trainer.namespace}/unserved-node-0-0-" in message
    assert f"on node {logs_nodes.unserved} are unavailable (apiserver answered 500)" in message
    assert "/containerLogs/" in message and "connect: connection refused" in message

    wrong = trainer("logs", "served", "--step", "launcher")
    assert wrong.returncode == 1 and "has no step 'launcher'; its steps are: node" in one_line_error(wrong)


def test_exit_codes_for_a_timeout_a_bad_manifest_and_bad_usage(trainer: Trainer, samples: None, tmp_path: Path) -> None:
    held = sample("held")
    held["spec"]["suspend"] = True
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump(held))
    assert trainer("apply", "-f", str(path)).returncode == 0
    suspended = trainer("wait", "held", "--status", "Suspended", "--timeout", "30")
    assert (suspended.returncode, suspended.stdout) == (0, "held Suspended\n")
    timed_out = trainer("wait", "held", "--timeout", "1")
    assert timed_out.returncode == 3
    assert "timed out after 1s waiting for TrainJob" in one_line_error(timed_out)
    assert "last seen: Suspended" in timed_out.stderr

    missing = trainer("apply", "-f", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 1 and one_line_error(missing).endswith("missing.yaml: no such file")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {}\n")
    bad = trainer("apply", "-f", str(invalid))
    assert bad.returncode == 1 and "spec.runtimeRef: Field required" in one_line_error(bad)
    listed = json.loads(trainer("list", "-o", "json").stdout)["items"]
    assert [i["metadata"]["name"] for i in listed] == ["held"]  # nothing of the invalid file was applied

    usage = trainer("wait", "held", "--status", "Finished")
    assert usage.returncode == 2


def test_get_watch_prints_a_line_per_change(trainer: Trainer, samples: None, tmp_path: Path) -> None:
    watched = sample("watched")
    watched["spec"]["suspend"] = True
    watched["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": RUN_FOR}}]
    path = tmp_path / "watched.yaml"
    path.write_text(yaml.safe_dump(watched))
    assert trainer("apply", "-f", str(path)).returncode == 0
    assert trainer("wait", "watched", "--status", "Suspended", "--timeout", "60").returncode == 0

    watch = trainer.start("get", "tj", "watched", "-w")
    try:
        header = watch.next_line().split()
        assert header[:2] == ["NAME", "STATE"], header
        states = [watch.next_line().split()[1]]
        assert states == ["Suspended"]

        def until(state: str) -> None:
            while states[-1] != state:
                line = watch.next_line().split()
                assert line[0] == "watched", line
                states.append(line[1])

        assert trainer("resume", "watched").returncode == 0
        until("Running")
        assert trainer("suspend", "watched").returncode == 0
        until("Suspended")
        changes = [s for i, s in enumerate(states) if not i or states[i - 1] != s]
        assert changes == ["Suspended", "Created", "Running", "Suspended"] or changes == [
            "Suspended",
            "Running",
            "Suspended",
        ], states
    finally:
        code, err = watch.stop()
    assert (code, err) == (130, "")

    missing = trainer("get", "tj", "no-such-job", "-w", timeout=30)
    assert missing.returncode == 1
    assert one_line_error(missing) == f"error: TrainJob {trainer.namespace}/no-such-job not found"


def test_kubectl_forms_get_type_create_with_generate_name_and_delete_f(
    trainer: Trainer, samples: None, tmp_path: Path
) -> None:
    generated = sample()
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "gen-"
    generated["spec"]["suspend"] = True
    named = sample("named")
    named["spec"]["suspend"] = True
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump_all([named, generated]))

    created = trainer("create", "-f", str(both))
    assert created.returncode == 0, created.stderr
    first, second = created.stdout.splitlines()
    assert first == "trainjob.trainer.kubeflow.org/named created"
    made = re.fullmatch(r"trainjob\.trainer\.kubeflow\.org/(gen-[a-z0-9]{5}) created", second)
    assert made, second
    name = made.group(1)
    again = trainer("create", "-f", "-", stdin=yaml.safe_dump(generated))  # stdin; another name each time
    other = again.stdout.removesuffix(" created\n").rsplit("/", 1)[-1]
    assert again.returncode == 0 and other.startswith("gen-") and other != name, again.stdout
    taken = trainer("create", "-f", str(both))
    assert taken.returncode == 1
    assert one_line_error(taken) == f"error: TrainJob {trainer.namespace}/named already exists"

    listed = trainer("get", "trainjobs").stdout.splitlines()
    assert listed[0].split()[:2] == ["NAME", "STATE"]
    assert sorted(line.split()[0] for line in listed[1:]) == sorted(["named", name, other])
    assert trainer("get", "tj", "-o", "name").stdout == trainer("list", "-o", "name").stdout
    got = json.loads(trainer("get", "trainjobs", name, "-o", "json").stdout)
    assert (got["metadata"]["name"], got["metadata"]["generateName"]) == (name, "gen-")
    assert trainer("get", f"tj/{name}", "-o", "name").stdout == f"trainjob.trainer.kubeflow.org/{name}\n"
    ctr = trainer("get", "ctr", "torch-distributed", "-o", "name")
    assert ctr.stdout == "clustertrainingruntime.trainer.kubeflow.org/torch-distributed\n", ctr.stderr
    unknown = trainer("get", "pods", "x")
    assert unknown.returncode == 2 and "unknown resource type 'pods'; the types are trainjobs" in unknown.stderr

    refused = trainer("delete", "-f", str(both))  # the generated one has no name to delete by
    assert refused.returncode == 1 and "resource name may not be empty" in one_line_error(refused)
    named_file = tmp_path / "named.yaml"
    named_file.write_text(yaml.safe_dump(named))
    deleted = trainer("delete", "-f", str(named_file), "--wait")
    assert (deleted.returncode, deleted.stdout) == (0, "trainjobs.trainer.kubeflow.org/named deleted\n"), deleted.stderr
    gone = trainer("delete", "-f", str(named_file))
    assert one_line_error(gone) == f"error: TrainJob {trainer.namespace}/named not found"
    assert trainer("delete", "-f", str(named_file), "--ignore-not-found").returncode == 0
    for job in (name, other):
        assert trainer("delete", "tj", job).stdout == f"trainjobs.trainer.kubeflow.org/{job} deleted\n"
    assert trainer("get", "trainjobs").stderr == "No TrainJobs found.\n"


def test_dry_run_server_delete_several_by_label_and_all_and_describe_a_runtime(
    trainer: Trainer, samples: None, tmp_path: Path
) -> None:
    jobs = []
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        job = sample(name)
        job["spec"]["suspend"] = True
        job["metadata"]["labels"] = {"team": team}
        jobs.append(job)
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(jobs))

    checked = trainer("create", "-f", str(path), "--dry-run=server", "-o", "yaml")
    assert checked.returncode == 0, checked.stderr
    assert [o["metadata"]["name"] for o in yaml.safe_load(checked.stdout)["items"]] == ["a", "b", "c"]
    assert trainer("get", "tj").stderr == "No TrainJobs found.\n"  # the apiserver stored nothing
    bad = sample("bad")
    bad["spec"]["managedBy"] = "example.com/other"  # read as valid here; the CRD's CEL rule refuses it
    refused = trainer("apply", "-f", "-", "--dry-run=server", stdin=yaml.safe_dump(bad))
    line = one_line_error(refused)
    assert refused.returncode == 1 and line.startswith("error: the apiserver refused") and "managedBy must be" in line

    created = trainer("create", "-f", str(path))
    assert created.returncode == 0, created.stderr
    assert "managedFields" not in trainer("get", "tj", "a", "-o", "yaml").stdout
    dry = trainer("delete", "tj", "a", "b", "--dry-run=server")
    assert dry.stdout.splitlines() == [
        "trainjobs.trainer.kubeflow.org/a deleted (server dry run)",
        "trainjobs.trainer.kubeflow.org/b deleted (server dry run)",
    ]
    assert trainer("get", "tj", "-o", "name").stdout.count("\n") == 3  # all still there

    by_label = trainer("delete", "tj", "-l", "team=x", "--wait")
    assert by_label.stdout.splitlines() == [
        "trainjobs.trainer.kubeflow.org/a deleted",
        "trainjobs.trainer.kubeflow.org/b deleted",
    ], by_label.stderr
    assert trainer("get", "tj", "-o", "name").stdout == "trainjob.trainer.kubeflow.org/c\n"
    assert trainer("delete", "tj", "--all").stdout == "trainjobs.trainer.kubeflow.org/c deleted\n"
    none = trainer("delete", "tj", "--all")
    assert (none.returncode, none.stdout, none.stderr) == (0, "", "No resources found\n")

    described = trainer("describe", "ctr", "torch-distributed")
    assert described.returncode == 0, described.stderr
    for text in ("Kind:", "ClusterTrainingRuntime", "Framework:", "torch", "Steps:", "node=", "Events:"):
        assert text in described.stdout

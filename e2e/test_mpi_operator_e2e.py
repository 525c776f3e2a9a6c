"""kubeflow/mpi-operator's own end-to-end suite (``test/e2e`` of ``github.com/kubeflow/mpi-operator`` at
``MPI_OPERATOR_VERSION`` in ``localcluster/versions.env``, ginkgo v1), compiled from the Go module proxy by
``localcluster/build.sh mpi_operator_e2e`` and run unchanged against this operator's MPIJob.

The suite reads ``USE_EXISTING_CLUSTER`` and ``USE_EXISTING_OPERATOR`` (both ``true`` here: it neither
creates a kind cluster nor applies mpi-operator's manifests, and reaches the cluster through
``KUBECONFIG``), ``USE_EXISTING_SCHEDULER_PLUGINS`` and ``USE_EXISTING_VOLCANO_SCHEDULER`` (``true``: it
installs neither), and its images from ``TEST_OPENMPI_IMAGE``, ``TEST_INTELMPI_IMAGE`` and
``TEST_MPICH_IMAGE`` (left at its defaults: KWOK nodes pull nothing). The operator serves its admission
webhooks, as mpi-operator's manifests install none but this operator's chart does.

Three of its Its reconfigure the operator through mpi-operator's Deployment ``mpi-operator/mpi-operator``
(the volcano one runs here):
they scale it to 0, add a flag to its container's args, scale it to 1 and wait for it to be available.
The cluster has such a Deployment (its pod on a KWOK node runs nothing), and :class:`OperatorDeployment`
makes it drive this operator's process (its ``minReadySeconds`` gives a restarted operator time to serve
its webhooks before the suite creates an MPIJob): replicas 0 stops the operator; replicas 1 runs it with the
gang scheduler the Deployment's ``--gang-scheduling=<name>`` flag names (:data:`GANG_FLAGS`: the
volcano It's ``--gang-scheduling=volcano`` restarts the operator with ``--gang-scheduler-name
volcano``), none without the flag.

The suite runs on a cluster of its own with Volcano (queue ``default``) and KWOK pods that take 1 s to be
Ready and 5 s to succeed: the volcano It waits for its MPIJob's ``Running`` condition, which a pod that
succeeds within a second would pass before the It reads it.

Each It runs as a run of its own (``-ginkgo.focus`` on its full text), so its state is the binary's
exit code: ginkgo v1 writes no machine-readable report without code in the suite.

Skipped Its, by their container text (:data:`SKIPPED`), with why."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e.helpers import ROOT
from e2e.test_upstream_e2e import webhooks_patched
from localcluster.binaries import component_dir, ensure
from localcluster.cluster import LocalCluster, reserved_ports
from localcluster.operator_process import Operator
from localcluster.operator_sa import operator_kubeconfig

pytestmark = pytest.mark.e2e

(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
BINARY = "mpi-operator-e2e.test"
SKIPPED = {
    "MPIJob with OpenMPI implementation when has malformed command": (
        "its launcher runs mpirun as root without --allow-run-as-root and must fail; KWOK runs no containers,"
        " its pods succeed"
    ),
    "MPIJob with scheduler-plugins": (
        "reconfigures mpi-operator's Deployment (mpi-operator/mpi-operator: scaled to 0, --gang-scheduling="
        "scheduler-plugins-scheduler added, scaled to 1), and its pods run only under scheduler-plugins'"
        " scheduler, which the local cluster does not build"
    ),
    "MPIJob with custom cluster-domain": (
        "adds mpi-operator's --cluster-domain flag to its Deployment (mpi-operator/mpi-operator); this operator"
        " has no such flag: its hostfile names <job>-worker-<i>.<job>.<namespace>.svc"
    ),
}
"""The Its skipped, by the start of their full text, with why."""
GANG_FLAGS = {"volcano": "volcano"}
"""mpi-operator's ``--gang-scheduling`` values -> this operator's ``--gang-scheduler-name``."""
DEPLOYMENT = ("mpi-operator", "mpi-operator")
"""The namespace and name of mpi-operator's Deployment, which the suite reconfigures."""
POD_READY_DELAY, POD_COMPLETE_DELAY = 1.0, 5.0
"""Seconds a pod of the suite's cluster is Pending, then Running (see the module docstring)."""
MIN_READY_SECONDS = 20
"""Seconds the Deployment's pod is Ready before the Deployment counts it available: the suite creates its
MPIJob once it is, and the operator (re)started when the pod was created serves its webhooks by then."""
RUN_TIMEOUT = 300.0
"""Seconds one It may take (its waits are up to 200 s)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The suite's own cluster (2 KWOK nodes, Volcano, the pod timings of :data:`POD_READY_DELAY` and
    :data:`POD_COMPLETE_DELAY`); replaces the session's cluster for this module."""
    if os.environ.get("TRAINER_E2E_KUBECONFIG"):
        pytest.skip("mpi-operator's suite runs on a local cluster of its own (KWOK pod timings, Volcano)")
    local = LocalCluster(
        Path(tmp_path_factory.mktemp("mpi-operator-cluster")),
        nodes=2,
        node_cpu="16",
        volcano=True,
        pod_ready_delay=POD_READY_DELAY,
        pod_complete_delay=POD_COMPLETE_DELAY,
        extra_crds=[ROOT / "config" / "crd" / "bases"],
    )
    local.start()
    try:
        yield local
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            local.stop()


def deployment_manifest() -> dict[str, object]:
    """mpi-operator's Deployment, one replica whose container (on a KWOK node) runs nothing."""
    namespace, name = DEPLOYMENT
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "minReadySeconds": MIN_READY_SECONDS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": name, "image": "mpioperator/mpi-operator:local", "args": []}]},
            },
        },
    }


class OperatorDeployment(threading.Thread):
    """Drives the operator process from mpi-operator's Deployment (see the module docstring), read
    every 0.2 s: replicas 0 stops it, replicas 1 (re)starts it when the gang scheduler its args name
    changed. ``default`` is the process the ``operator`` fixture started (gang scheduler none); others
    are started with the same flags and ``--gang-scheduler-name`` changed. A failure is kept in
    ``error`` and the thread ends."""

    def __init__(self, cluster: LocalCluster, default: Operator, workdir: Path) -> None:
        super().__init__(daemon=True)
        self.cluster, self.default, self.workdir = cluster, default, workdir
        self.current: Operator | None = default
        self.gang: str | None = "none"
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def wanted(self) -> str | None:
        """The gang scheduler the Deployment asks for; None while it has 0 replicas."""
        namespace, name = DEPLOYMENT
        got = self.cluster.run_kubectl("get", "deployment", "-n", namespace, name, "-o", "json")
        spec = json.loads(got.stdout)["spec"]
        if spec.get("replicas") == 0:
            return None
        args = spec["template"]["spec"]["containers"][0].get("args") or []
        flags = [a.split("=", 1)[1] for a in args if a.startswith("--gang-scheduling=")]
        if flags and flags[-1] not in GANG_FLAGS:
            raise AssertionError(f"no equivalent of mpi-operator's --gang-scheduling={flags[-1]}")
        return GANG_FLAGS[flags[-1]] if flags else "none"

    def operator(self, gang: str) -> Operator:
        """A process of this operator with gang scheduler ``gang``."""
        if gang == "none":
            return self.default
        kubeconfig = self.cluster.kubeconfig
        if os.environ.get("TRAINER_E2E_OPERATOR_SA"):
            kubeconfig = operator_kubeconfig(self.cluster, gang, self.workdir / f"operator-sa-{gang}")
        args = ["--gang-scheduler-name", gang, *self.default.args[2:]]
        return Operator(kubeconfig, self.default.log_path.with_suffix(f".{gang}.log"), args, self.default.env)

    def run(self) -> None:
        try:
            while not self.stopping.wait(0.2):
                gang = self.wanted()
                if gang == self.gang:
                    continue
                if self.current is not None:
                    self.current.stop()
                    self.current = None
                if gang is not None:
                    self.current = self.operator(gang)
                    self.current.start()
                    serving(self.current)
                self.gang = gang
        except BaseException as e:  # reported by the test (finish, then the assertion on error)
            self.error = e

    def settled(self) -> bool:
        """Whether the default operator runs again (the Deployment back to no flag, one replica)."""
        return self.error is None and self.gang == "none" and self.current is self.default

    def finish(self) -> None:
        """Stop reading; leave the default operator running (the fixture stops it)."""
        self.stopping.set()
        self.join(timeout=30)
        if self.current is not self.default:
            if self.current is not None:
                self.current.stop()
            self.default.start()


def serving(op: Operator, seconds: float = 60) -> None:
    """Wait until ``op`` takes connections on its webhook port; ``AssertionError`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"the operator serves no webhook after {seconds} s; see {op.log_path}"
            time.sleep(0.2)


def suite_env(cluster: LocalCluster) -> dict[str, str]:
    """The environment the suite reads (see the module docstring)."""
    return {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "USE_EXISTING_CLUSTER": "true",
        "USE_EXISTING_OPERATOR": "true",
        "USE_EXISTING_SCHEDULER_PLUGINS": "true",
        "USE_EXISTING_VOLCANO_SCHEDULER": "true",
        "ACK_GINKGO_DEPRECATIONS": "1.16.5",
    }


def its(binary: Path, env: dict[str, str], workdir: Path) -> list[str]:
    """The full texts (container texts and leaf text, space-separated) of the suite's Its, from a dry
    run: ginkgo v1 prints each spec as its container texts, its leaf text (indented) and its location
    (``<file>.go:<line>``), one line each."""
    out = subprocess.run(
        [str(binary), "-ginkgo.dryRun", "-ginkgo.v", "-ginkgo.noColor"],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line.strip() for line in out.splitlines()]
    located = [i for i, line in enumerate(lines) if i >= 2 and re.search(r"\.go:\d+$", line)]
    return [f"{lines[i - 2]} {lines[i - 1]}" for i in located]


def run_it(binary: Path, env: dict[str, str], workdir: Path, name: str) -> tuple[bool, str]:
    """Run the one It called ``name``; whether it ran and passed, and the run's output."""
    run = subprocess.run(
        [str(binary), f"-ginkgo.focus={re.escape(name)}$", "-ginkgo.noColor", "-ginkgo.v"],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        timeout=RUN_TIMEOUT,
    )
    return run.returncode == 0 and "Ran 1 of " in run.stdout and "1 Passed" in run.stdout, run.stdout


def wait(what: str, done: Callable[[], bool], seconds: float = 60) -> None:
    """Wait until ``done()``, read every 0.5 s; ``AssertionError`` naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"{what} after {seconds} s"
        time.sleep(0.5)


def test_mpi_operator_e2e_suite_passes(cluster: LocalCluster, operator: Operator, tmp_path: Path) -> None:
    binary = ensure(BINARY)[BINARY]
    assert binary.parent == component_dir("mpi_operator_e2e")
    wait("the operator did not patch the webhook configurations", lambda: webhooks_patched(cluster), 30)
    manifest = tmp_path / "mpi-operator.yaml"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEPLOYMENT[0]}}))
    cluster.run_kubectl("apply", "--server-side", "-f", str(manifest))
    manifest.write_text(json.dumps(deployment_manifest()))
    cluster.run_kubectl("apply", "--server-side", "-f", str(manifest))
    cluster.run_kubectl("rollout", "status", "-n", DEPLOYMENT[0], f"deployment/{DEPLOYMENT[1]}", "--timeout=60s")
    driver = OperatorDeployment(cluster, operator, tmp_path)
    driver.start()
    try:
        run_suite(cluster, binary, tmp_path, driver)
    finally:
        driver.finish()
    assert driver.error is None, driver.error


def run_suite(cluster: LocalCluster, binary: Path, tmp_path: Path, driver: OperatorDeployment) -> None:
    """Run every It of the suite but :data:`SKIPPED`, one run each, the operator back to its default
    before each; print each It's state and time, and the totals; fail unless every one passed."""
    env = suite_env(cluster)
    names = its(binary, env, tmp_path)
    for prefix in SKIPPED:
        assert any(n.startswith(prefix) for n in names), f"no It of the suite starts with {prefix!r}: {names}"
    began = time.monotonic()
    failed, passed = [], 0
    for name in names:
        if any(name.startswith(prefix) for prefix in SKIPPED):
            print(f" skipped  {name}")
            continue
        wait("the default operator is not running again", driver.settled)
        started = time.monotonic()
        ok, output = run_it(binary, env, tmp_path, name)
        print(f"{'passed' if ok else 'FAILED':>8}  {name} ({time.monotonic() - started:.1f}s)")
        passed += ok
        if not ok:
            failed.append(f"{name}\n{output[-4000:]}")
    print(f"mpi-operator e2e suite {binary.parent.name}: {passed} passed, {len(names) - passed - len(failed)} skipped")
    print(f"mpi-operator e2e suite {binary.parent.name}: {time.monotonic() - began:.1f}s")
    assert not failed, "\n\n".join(failed)
    assert passed > 0

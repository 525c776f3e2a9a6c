"""kubeflow/mpi-operator's own end-to-end suite (``test/e2e`` of ``github.com/kubeflow/mpi-operator`` at
``MPI_OPERATOR_VERSION`` in ``localcluster/versions.env``, ginkgo v1), compiled from the Go module proxy by
``localcluster/build.sh mpi_operator_e2e`` and run unchanged against this operator's MPIJob.

The suite reads ``USE_EXISTING_CLUSTER`` and ``USE_EXISTING_OPERATOR`` (both ``true`` here: it neither
creates a kind cluster nor applies mpi-operator's manifests, and reaches the cluster through
``KUBECONFIG``), ``USE_EXISTING_SCHEDULER_PLUGINS`` and ``USE_EXISTING_VOLCANO_SCHEDULER`` (``true``: it
installs neither), and its images from ``TEST_OPENMPI_IMAGE``, ``TEST_INTELMPI_IMAGE`` and
``TEST_MPICH_IMAGE`` (left at its defaults: KWOK nodes pull nothing).

What is deployed: the operator itself, in the cluster, under the name the suite waits for. Its
Deployment ``mpi-operator/mpi-operator`` is this project's chart installed with ``helm upgrade --install``
(:class:`localcluster.incluster.Release`) as release ``mpi-operator`` in namespace ``mpi-operator`` with
``fullnameOverride=mpi`` (the chart names its Deployment and ServiceAccount ``<prefix>-operator``), one
replica, the operator image built from the Dockerfile (:mod:`localcluster.operator_image`) imported into
one real node (kubelet + containerd), where its pod runs; the apiserver calls its admission webhooks
through the chart's Service. The real node is tainted and only the operator tolerates it: the suite's
pods go to the KWOK nodes. No operator process runs on the host.

Three of its Its reconfigure the operator through that Deployment (the volcano one runs here): they scale
it to 0, add mpi-operator's flag to its container's args, scale it to 1 and wait for it to be available.
The operator reads mpi-operator's ``--gang-scheduling=volcano`` as ``--gang-scheduler-name=volcano``
(:data:`trainer.wiring.settings.MPI_GANG_SCHEDULING`). The chart rendered for ``gangScheduler: none`` grants no
Volcano rules, so the module also binds the operator's ServiceAccount to the rules ``gangScheduler:
volcano`` adds (``config/overlays/volcano/role_patch.yaml``), as mpi-operator's own manifests grant its
operator Volcano's PodGroups whatever its flags.

The suite runs on a cluster of its own with Volcano (queue ``default``), ServiceAccount admission (the
operator pod's token) and KWOK pods that take 1 s to be Ready and 5 s to succeed: the volcano It waits for
its MPIJob's ``Running`` condition, which a pod that succeeds within a second would pass before the It
reads it.

Each It runs as a run of its own (``-ginkgo.focus`` on its full text), so its state is the binary's
exit code: ginkgo v1 writes no machine-readable report without code in the suite. Before each, the
Deployment is back to one available, updated replica without mpi-operator's flag.

An It that fails only because the suite's own update of the MPIJob it just created lost the race with
the operator's first status write (:func:`raced`: a 409 on the ``resourceVersion`` its create returned) is
run once more, and the output says so; any other failure fails at once.

Skipped Its, by their container text (:data:`SKIPPED`), with why. Runs where real nodes can
(:func:`localcluster.realnode.node.unavailable`); ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helpers import ROOT
from localcluster.binaries import component_dir, ensure
from localcluster.cluster import LocalCluster
from localcluster.incluster import Release
from localcluster.realnode.node import RealNodes, unavailable

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"in-cluster operator: {WHY_NOT}"),
    pytest.mark.builds("mpi_operator_e2e"),
]

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
DEPLOYMENT = ("mpi-operator", "mpi-operator")
"""The namespace and name of mpi-operator's Deployment, which the suite waits for and reconfigures."""
PREFIX = "mpi"
"""The chart's ``fullnameOverride``: its Deployment is ``<prefix>-operator``, :data:`DEPLOYMENT`'s name."""
MPI_FLAG = "--gang-scheduling="
"""mpi-operator's flag the suite adds to the Deployment's container args."""
TAINT = ("trainer.kubeflow.org/operator-only", "NoSchedule")
"""The real node's taint (key, effect), tolerated by the operator's pod only."""
POD_READY_DELAY, POD_COMPLETE_DELAY = 1.0, 5.0
"""Seconds a pod of the suite's cluster is Pending, then Running (see the module docstring)."""
RUN_TIMEOUT = 300.0
"""Seconds one It may take (its waits are up to 200 s)."""
FIGURES: dict[str, object] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The suite's own cluster (2 KWOK nodes, Volcano, ServiceAccount admission, the pod timings of
    :data:`POD_READY_DELAY` and :data:`POD_COMPLETE_DELAY`); replaces the session's cluster for this module."""
    if os.environ.get("TRAINER_E2E_KUBECONFIG"):
        pytest.skip("mpi-operator's suite runs on a local cluster of its own (KWOK pod timings, Volcano)")
    local = LocalCluster(
        Path(tmp_path_factory.mktemp("mpi-operator-cluster")),
        nodes=2,
        node_cpu="16",
        volcano=True,
        service_account_admission=True,
        pod_ready_delay=POD_READY_DELAY,
        pod_complete_delay=POD_COMPLETE_DELAY,
        extra_crds=[ROOT / "config" / "crd" / "bases"],
    )
    t = time.monotonic()
    local.start()
    FIGURES["cluster"] = round(time.monotonic() - t, 1)
    try:
        yield local
    finally:
        print(f"\nmpi-operator e2e figures (s): {json.dumps(FIGURES)}")
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            local.stop()


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator process on the host: the chart's pod is the operator here."""
    yield None


@pytest.fixture(scope="module")
def release(cluster: LocalCluster, real_node_store: Path) -> Iterator[Release]:
    """One real node, tainted (:data:`TAINT`), and the chart installed on it as mpi-operator's Deployment
    (see the module docstring), with the Volcano rules bound to its ServiceAccount."""
    work = Path(tempfile.mkdtemp(prefix="mpinodes-"))  # short: containerd's socket paths must fit
    nodes = RealNodes(cluster, 1, work, store=real_node_store)
    t = time.monotonic()
    nodes.start()
    FIGURES["real node"] = round(time.monotonic() - t, 1)
    try:
        key, effect = TAINT
        for name in nodes.names:
            cluster.run_kubectl("taint", "node", name, f"{key}=:{effect}", "--overwrite")
        namespace, name = DEPLOYMENT
        values = {
            "fullnameOverride": PREFIX,
            "replicas": "1",
            "tolerations[0].key": key,
            "tolerations[0].operator": "Exists",
            "tolerations[0].effect": effect,
        }
        rel = Release(cluster, nodes, release=name, namespace=namespace, values=values)
        try:
            t = time.monotonic()
            rel.install()
            FIGURES["install"] = {**rel.timings, "total": round(time.monotonic() - t, 1)}
            bind_volcano_rules(cluster, work)
            yield rel
        finally:
            rel.uninstall()
    finally:
        nodes.stop()
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            shutil.rmtree(work, ignore_errors=True)


def bind_volcano_rules(cluster: LocalCluster, work: Path) -> None:
    """A ClusterRole with the rules ``gangScheduler: volcano`` adds to the chart's ClusterRole
    (``config/overlays/volcano/role_patch.yaml``), bound to the operator's ServiceAccount."""
    namespace, name = DEPLOYMENT
    patch = yaml.safe_load((ROOT / "config" / "overlays" / "volcano" / "role_patch.yaml").read_text())
    rules = [op["value"] for op in patch if op["op"] == "add" and op["path"] == "/rules/-"]
    assert rules, "config/overlays/volcano/role_patch.yaml adds no rules"
    role = f"{name}-volcano"
    objects = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": f"{PREFIX}-operator", "namespace": namespace}],
        },
    ]
    manifest = work / "volcano-rules.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    cluster.run_kubectl("apply", "--server-side", "-f", str(manifest))


def deployment(cluster: LocalCluster) -> Any:
    """mpi-operator's Deployment (:data:`DEPLOYMENT`), as JSON."""
    namespace, name = DEPLOYMENT
    return json.loads(cluster.run_kubectl("get", "deployment", "-n", namespace, name, "-o", "json").stdout)


def operator_pods(cluster: LocalCluster) -> list[Any]:
    """The pods of mpi-operator's Deployment (by its selector), as JSON."""
    namespace, _ = DEPLOYMENT
    labels = ",".join(f"{k}={v}" for k, v in deployment(cluster)["spec"]["selector"]["matchLabels"].items())
    out = cluster.run_kubectl("get", "pods", "-n", namespace, "-l", labels, "-o", "json").stdout
    return list(json.loads(out)["items"])


def settled(cluster: LocalCluster) -> bool:
    """Whether mpi-operator's Deployment is back to its install: one replica asked, updated and available,
    no other pod, and no mpi-operator flag in its args."""
    got = deployment(cluster)
    spec, status = got["spec"], got.get("status") or {}
    args = spec["template"]["spec"]["containers"][0].get("args") or []
    return bool(
        spec.get("replicas") == 1
        and not any(a.startswith(MPI_FLAG) for a in args)
        and status.get("observedGeneration") == got["metadata"]["generation"]
        and status.get("replicas") == status.get("updatedReplicas") == status.get("availableReplicas") == 1
    )


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


RACED = re.compile(r'Operation cannot be fulfilled on mpijobs\.kubeflow\.org "[^"]+": the object has been modified')
"""The suite's own update of an MPIJob refused for a stale ``resourceVersion`` (see :func:`raced`)."""


def raced(output: str) -> bool:
    """Whether an It failed only because the suite updated an MPIJob with the ``resourceVersion`` its
    create returned (``resumeJob`` in ``test/e2e/mpi_job_test.go``) after the operator had written the
    MPIJob's first status: a race of the suite's with any controller (mpi-operator's own writes the same
    ``Created`` and ``Suspended`` conditions at once), which such an It loses when the operator is quicker
    than the suite's next call. The It's other failures are not this."""
    return bool(RACED.search(output)) and "Summarizing 1 Failure" in output


def wait(what: str, done: Callable[[], bool], seconds: float = 60) -> None:
    """Wait until ``done()``, read every 0.5 s; ``AssertionError`` naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"{what} after {seconds} s"
        time.sleep(0.5)


def test_mpi_operator_e2e_suite_passes(cluster: LocalCluster, release: Release, tmp_path: Path) -> None:
    binary = ensure(BINARY)[BINARY]
    assert binary.parent == component_dir("mpi_operator_e2e")
    got = deployment(cluster)
    containers = got["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"].startswith("trainer-operator:"), containers  # the operator's own image
    pods = operator_pods(cluster)
    assert pods and all(p["spec"]["nodeName"] in release.nodes.names for p in pods), pods
    wait("mpi-operator's Deployment is not available", lambda: settled(cluster), 120)
    began = time.monotonic()
    try:
        run_suite(cluster, binary, tmp_path)
    finally:
        FIGURES["suite"] = round(time.monotonic() - began, 1)
        for pod in operator_pods(cluster):
            restarts = [c.get("restartCount", 0) for c in pod["status"].get("containerStatuses", [])]
            print(f"operator pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')}: restarts {restarts}")


def run_suite(cluster: LocalCluster, binary: Path, tmp_path: Path) -> None:
    """Run every It of the suite but :data:`SKIPPED`, one run each, mpi-operator's Deployment back to its
    install before each; print each It's state and time, and the totals; fail unless every one passed."""
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
        wait("mpi-operator's Deployment is not back to its install", lambda: settled(cluster), 120)
        started = time.monotonic()
        ok, output = run_it(binary, env, tmp_path, name)
        if not ok and raced(output):
            print(f"   rerun  {name}: the suite's own update lost the race with the first status write")
            wait("mpi-operator's Deployment is not back to its install", lambda: settled(cluster), 120)
            ok, output = run_it(binary, env, tmp_path, name)
        print(f"{'passed' if ok else 'FAILED':>8}  {name} ({time.monotonic() - started:.1f}s)")
        passed += ok
        if not ok:
            failed.append(f"{name}\n{output[-4000:]}")
    print(f"mpi-operator e2e suite {binary.parent.name}: {passed} passed, {len(names) - passed - len(failed)} skipped")
    print(f"mpi-operator e2e suite {binary.parent.name}: {time.monotonic() - began:.1f}s")
    assert not failed, "\n\n".join(failed)
    assert passed > 0

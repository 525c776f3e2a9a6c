"""Kubeflow Trainer's own end-to-end suite (``test/e2e`` of ``github.com/kubeflow/trainer/v2`` at
``UPSTREAM_TRAINER_VERSION`` in ``localcluster/versions.env``, ginkgo), compiled from the Go module proxy by
``localcluster/build.sh trainer_e2e`` and run unchanged against this operator, set up as upstream's
``hack/e2e-setup-cluster.sh`` sets up its own: the CRDs, the admission webhooks, the runtimes of
``manifests/base/runtimes`` (applied with ``kubectl apply -k``) and ``examples/flux/flux-runtime.yaml``.

The suite runs on a cluster of its own: KWOK pods there take 3 s from creation to Running and Ready
(a kubelet pulling an image and starting it) and 15 s from Ready to Succeeded (the run time of a
container), where the shared cluster's take 0 s and 1 s. Upstream's Its rely on both: they look for a
Job that is active but not ready yet, time a 10 s ``activeDeadlineSeconds`` out, and suspend a
running TrainJob. The JobSet CRD is installed (no JobSet controller): the suite reads JobSets and
expects NotFound, and this operator creates none.

Skipped It, by name (:data:`SKIPPED`): the runtime status one runs a python script in the pod that
calls the operator's status server (KWOK nodes run no containers; ``e2e/test_upstream_e2e_real.py`` runs
it on a real node). The Flux one (:data:`FLUX_IT`) runs and must pass: the ``flux-distributed`` runtime is
admitted and its TrainJob's ``node`` Job runs its pods to completion (the suite reads only the Jobs' status;
``e2e/test_upstream_runtimes.py`` checks the Flux pods and children)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.helpers import ROOT
from localcluster.binaries import component_dir, ensure
from localcluster.cluster import LocalCluster, reserved_ports

pytestmark = [pytest.mark.e2e, pytest.mark.builds("trainer_e2e")]

(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
POD_READY_DELAY, POD_COMPLETE_DELAY = 3.0, 15.0
"""Seconds a pod of the suite's cluster is Pending, then Running (see the module docstring)."""
SKIPPED = {
    "should inject runtime configuration which allows the runtime status endpoint to be called": (
        "runs python3 in the trainer container to POST progress to the status server; KWOK runs no containers"
        " (test_upstream_e2e_real.py runs it on a real node)"
    ),
}
"""The Its (leaf texts) skipped, with why."""
FLUX_IT = "should create TrainJob with Flux runtime reference"
"""The It of ``mlPolicy.flux``, which runs here."""
SUITE_TIMEOUT = "170s"


def upstream_cluster(state: Path, nodes: int = 4, service_accounts: bool = False) -> LocalCluster:
    """A local cluster for upstream's suite (``nodes`` KWOK nodes, pod timings of
    :data:`POD_READY_DELAY` and :data:`POD_COMPLETE_DELAY`, the ServiceAccount admission plugin
    with ``service_accounts``) with this operator's CRDs and the JobSet CRD, started."""
    ensure("e2e.test")
    local = LocalCluster(
        state,
        nodes=nodes,
        node_cpu="16",
        pod_ready_delay=POD_READY_DELAY,
        pod_complete_delay=POD_COMPLETE_DELAY,
        service_account_admission=service_accounts,
        extra_crds=[ROOT / "config" / "crd" / "bases", component_dir("trainer_e2e") / "crds"],
    )
    local.start()
    return local


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The suite's own cluster (:func:`upstream_cluster`); replaces the session's cluster for this
    module (so the ``operator`` fixture runs against it)."""
    if os.environ.get("TRAINER_E2E_KUBECONFIG"):
        pytest.skip("upstream's suite runs on a local cluster of its own (KWOK pod timings)")
    local = upstream_cluster(Path(tmp_path_factory.mktemp("upstream-cluster")))
    try:
        yield local
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            local.stop()


def webhooks_patched(cluster: LocalCluster) -> bool:
    """Both webhook configurations carry the operator's caBundle on every webhook."""
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        got = cluster.run_kubectl("get", kind, "trainer-webhook", "-o", "json", check=False)
        if got.returncode != 0:
            return False
        hooks = json.loads(got.stdout).get("webhooks") or []
        if not hooks or not all(h.get("clientConfig", {}).get("caBundle") for h in hooks):
            return False
    return True


def specs(report_path: Path) -> list[dict[str, str]]:
    """The Its of a ginkgo JSON report: ``name`` (container texts and leaf text), ``leaf``, ``state``
    (``passed``, ``skipped``, ``failed``, ``timedout``...) and ``failure`` (its message, if any)."""
    found = []
    for suite in json.loads(report_path.read_text()):
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It":
                continue
            leaf = spec.get("LeafNodeText", "")
            found.append(
                {
                    "name": " ".join([*(spec.get("ContainerHierarchyTexts") or []), leaf]),
                    "leaf": leaf,
                    "state": spec.get("State", ""),
                    "failure": (spec.get("Failure") or {}).get("Message", ""),
                }
            )
    return found


def install_runtimes(cluster: LocalCluster) -> None:
    """Once the operator serves its webhooks: upstream's runtimes as its e2e setup applies them, the
    Flux one included."""
    upstream = component_dir("trainer_e2e")
    deadline = time.monotonic() + 30
    while not webhooks_patched(cluster):
        assert time.monotonic() < deadline, "the operator did not patch the webhook configurations"
        time.sleep(0.5)
    cluster.run_kubectl("apply", "--server-side", "-k", str(upstream / "runtimes"))
    cluster.run_kubectl("apply", "--server-side", "-f", str(upstream / "flux" / "flux-runtime.yaml"))


def run_suite(cluster: LocalCluster, workdir: Path, ginkgo_args: list[str]) -> list[dict[str, str]]:
    """Run the compiled suite against ``cluster`` with ``ginkgo_args`` (focus, skip); print each It's
    state and the time taken; fail unless every It that ran passed. Returns :func:`specs`."""
    began = time.monotonic()
    binary = component_dir("trainer_e2e") / "e2e.test"
    report = workdir / "report.json"
    run = subprocess.run(
        [
            str(binary),
            *ginkgo_args,
            f"--ginkgo.timeout={SUITE_TIMEOUT}",
            f"--ginkgo.json-report={report}",
            "--ginkgo.no-color",
        ],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    got = specs(report)
    for spec in got:
        print(f"{spec['state']:>8}  {spec['name']}")
    print(f"upstream e2e suite {binary.parent.name}: {time.monotonic() - began:.1f}s")
    failed = [f"{s['name']}: {s['state']}\n{s['failure']}" for s in got if s["state"] not in ("passed", "skipped")]
    assert not failed, "\n\n".join(failed) + "\n" + run.stdout[-4000:]
    assert any(s["state"] == "passed" for s in got) and run.returncode == 0, run.stdout[-4000:]
    return got


def test_upstream_e2e_suite_passes(cluster: LocalCluster, tmp_path: Path) -> None:
    install_runtimes(cluster)
    skip = "|".join(re.escape(name) for name in SKIPPED)
    got = run_suite(cluster, tmp_path, [f"--ginkgo.skip={skip}"])
    assert {s["leaf"] for s in got if s["state"] == "skipped"} == set(SKIPPED)
    assert [s["state"] for s in got if s["leaf"] == FLUX_IT] == ["passed"]
    assert len(got) > len(SKIPPED)

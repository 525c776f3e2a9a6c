"""The It of Kubeflow Trainer's own e2e suite that needs a container to run (``should inject runtime
configuration which allows the runtime status endpoint to be called``), unchanged, on a real node.

Its TrainJob runs upstream's ``test/e2e/testdata/status_update.py`` with ``python3 -c`` in the trainer
container of the ``torch-distributed`` runtime: the script reads ``KUBEFLOW_TRAINER_SERVER_URL``, the
CA and the token the operator injects, posts progress 42 %, 120 s remaining and two metrics to the
operator's status server, and exits; the It waits for ``trainerStatus`` to show them and for
``Complete``. The cluster has one real node (kubelet + containerd, :mod:`localcluster.realnode.node`) and no
KWOK node; the runtime's image (``pytorch/pytorch``) is the training image (Debian with python3) under
that name, imported into the node as upstream's setup loads its images into kind. The operator's
status server is called at the pod network's gateway (``--status-server-host`` 10.88.0.1). The
apiserver runs its ServiceAccount admission plugin, as every real cluster does (the local cluster turns
it off for KWOK): the injected projected token needs the pod's ``serviceAccountName``, which it sets.

The chart's NOTES.txt sample runs there too, each ``trainer`` command of the NOTES as written, and so
does the README's SDK block (``<!-- sdk -->``), as a script: both on config/samples/trainjob.yaml,
whose image is the training image ``make demo`` builds (:data:`localcluster.realnode.images.TRAINING_IMAGE`),
so nothing is renamed for them. The SDK block must print no warning (its client is never closed: the
SDK closes its connection itself, with no aiohttp ``Unclosed client session``), and neither must a
``with TrainerClient() as client:`` script whose calls fail, each with a class of
:mod:`trainer.client.errors`.

Needs what ``e2e/test_real_pods.py`` needs (root, cgroups, Debian's packages), and is skipped as it is
where the machine cannot run real nodes or with ``TRAINER_E2E_REAL=0``. Only one real-node cluster
runs on a machine at a time: run it under ``flock /tmp/realnode.lock``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import doc_blocks
from e2e.helpers import ROOT, shell_env, torch_runtime_image
from e2e.test_upstream_e2e import SKIPPED, install_runtimes, run_suite, upstream_cluster, webhooks_patched
from localcluster.cluster import LocalCluster, reserved_ports
from localcluster.realnode import images
from localcluster.realnode.node import RealNodes, status_server_args, unavailable

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}"),
    pytest.mark.builds("helm", "trainer_e2e"),
]

WEBHOOK_PORT, STATUS_PORT = reserved_ports(2)
OPERATOR_ARGS = ["--webhook-port", str(WEBHOOK_PORT), "--webhook-host", "127.0.0.1", *status_server_args(STATUS_PORT)]
IT = "should inject runtime configuration which allows the runtime status endpoint to be called"
assert IT in SKIPPED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, real_node_store: Path) -> Iterator[LocalCluster]:
    """The suite's cluster with no KWOK node and one real node that has the runtime's image."""
    local = upstream_cluster(Path(tmp_path_factory.mktemp("upstream-real")), nodes=0, service_accounts=True)
    work = Path(tempfile.mkdtemp(prefix="realnodes-"))  # short: containerd's socket paths must fit
    nodes = RealNodes(local, 1, work, ("training",), store=real_node_store)
    try:
        nodes.start()
        for node in nodes.nodes:
            node.ctr("images", "tag", "--force", images.TRAINING_IMAGE, torch_runtime_image())
        yield local
    finally:
        nodes.stop()
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            local.stop()
            shutil.rmtree(work, ignore_errors=True)


def test_upstream_status_server_it_passes_on_a_real_node(cluster: LocalCluster, tmp_path: Path) -> None:
    install_runtimes(cluster)
    got = run_suite(cluster, tmp_path, [f"--ginkgo.focus={re.escape(IT)}"])
    assert [s["leaf"] for s in got if s["state"] == "passed"] == [IT]


def without_upstream_runtime(cluster: LocalCluster) -> None:
    """Once the operator serves its webhooks (each test may run first, alone), with no ClusterTrainingRuntime
    ``torch-distributed``: upstream's, which the first It installs under the sample runtime's name (its
    own field manager), is deleted, so a sample applies its own."""
    deadline = time.monotonic() + 30
    while not webhooks_patched(cluster):
        assert time.monotonic() < deadline, "the operator did not patch the webhook configurations"
        time.sleep(0.5)
    cluster.run_kubectl("delete", "clustertrainingruntime", "torch-distributed", "--ignore-not-found")


def notes_commands() -> list[str]:
    """The ``trainer ...`` lines the chart's NOTES.txt tells a user to run, as written."""
    notes = (ROOT / "charts" / "trainer" / "templates" / "NOTES.txt").read_text()
    return [line.strip() for line in notes.splitlines() if line.startswith("  trainer ")]


def test_the_charts_notes_sample_runs_as_written_on_a_real_node(cluster: LocalCluster, tmp_path: Path) -> None:
    """The sample TrainJob the chart's NOTES.txt runs (config/samples/trainjob.yaml on
    config/samples/torch-distributed.yaml), each NOTES command as written: it completes on the real node
    and each rank prints its all-reduced sum. Upstream's own ``torch-distributed`` runtime, which the
    previous It installed under the sample runtime's name, is deleted first."""
    without_upstream_runtime(cluster)
    written = notes_commands()
    assert written and written[0].startswith("trainer apply -f config/samples/"), written
    ran = doc_blocks.run(written, lambda c: c, shell_env(cluster, tmp_path), ROOT, timeout=1300)
    for r in ran:
        print(f"$ {r.written}\n{r.output}")
    if ran[-1].rc != 0:
        print(
            cluster.run_kubectl(
                "logs",
                "-n",
                "default",
                "-l",
                "jobset.sigs.k8s.io/jobset-name=pytorch-simple",
                "--prefix",
                "--tail=50",
                check=False,
            ).stdout
        )
    assert [r.rc for r in ran] == [0] * len(written), ran[-1].output
    logs = next(r.output for r in ran if " logs " in r.written)
    for rank in range(2):
        assert f"rank {rank} of 2: sum 3.0" in logs, logs


ERRORS = """\
from pathlib import Path

from trainer.client import TrainerClient, TrainerClientError

SAMPLE = Path("config/samples/trainjob.yaml").read_text()
SUSPENDED = SAMPLE.replace("name: pytorch-simple", "name: sdk-errors", 1)
SUSPENDED = SUSPENDED.replace("spec:\\n", "spec:\\n  suspend: true\\n", 1)

with TrainerClient() as client:
    client.create_job(SUSPENDED)
    calls = {
        "get_job": lambda: client.get_job("no-such-trainjob"),
        "delete_job": lambda: client.delete_job("no-such-trainjob"),
        "get_job_logs": lambda: list(client.get_job_logs("no-such-trainjob")),
        "wait_for_job_status": lambda: client.wait_for_job_status("no-such-trainjob", {"Complete"}, timeout=5),
        "create_job again": lambda: client.create_job(SUSPENDED),
        "create_job in no namespace": lambda: client.create_job(SUSPENDED, namespace="no-such-namespace"),
        "create_job of no TrainJob": lambda: client.create_job("kind: ConfigMap\\n"),
        "create_job of numNodes -1": lambda: client.create_job(SAMPLE.replace("numNodes: 2", "numNodes: -1")),
    }
    for what, call in calls.items():
        try:
            call()
        except Exception as e:
            print(f"{what}: {type(e).__module__}.{type(e).__name__} {isinstance(e, TrainerClientError)}")
        else:
            print(f"{what}: raised nothing")
    client.delete_job("sdk-errors")
"""
"""Calls of the SDK that fail, in a ``with`` block; a line each: the call, the class it raised and whether
that is a :class:`~trainer.client.errors.TrainerClientError`."""


def run_script(code: str, cluster: LocalCluster, tmp_path: Path, name: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a script from the repository's root against ``cluster`` (``$KUBECONFIG``), with
    Python's ``ResourceWarning`` (hidden by default) shown as well."""
    script = tmp_path / name
    script.write_text(code)
    return subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", str(script)],
        cwd=ROOT,
        env=shell_env(cluster, tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )


def warnings_in(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are a warning (``...Warning:``) or aiohttp's unclosed-session report."""
    return [line for line in stderr.splitlines() if re.search(r"Warning\b|Unclosed|unclosed", line)]


def test_the_readme_sdk_block_runs_as_written_on_a_real_node(cluster: LocalCluster, tmp_path: Path) -> None:
    """The README's SDK block, as written, as a script: it applies the torch-distributed runtime,
    creates config/samples/trainjob.yaml, waits for Complete on the real node, prints node 0's log
    (rank 0's all-reduced sum) and deletes the job, printing no warning. Upstream's own
    ``torch-distributed`` runtime (a field manager of its own) is deleted first."""
    without_upstream_runtime(cluster)
    cluster.run_kubectl("delete", "trainjob", "pytorch-simple", "-n", "default", "--ignore-not-found", "--wait")
    code = doc_blocks.python((ROOT / "README.md").read_text(), "sdk")
    assert "TrainerClient()" in code and "with " not in code, code
    ran = run_script(code, cluster, tmp_path, "readme_sdk.py")
    print(ran.stdout + ran.stderr)
    assert ran.returncode == 0, ran.stderr
    assert "rank 0 of 2: sum 3.0" in ran.stdout, ran.stdout
    assert warnings_in(ran.stderr) == [], ran.stderr


def test_the_sdk_raises_its_own_errors_and_closes_in_a_with_block(cluster: LocalCluster, tmp_path: Path) -> None:
    """:data:`ERRORS`: each failing call raises a class of :mod:`trainer.client.errors` (the apiserver's
    404 and 409 included), and the script, its client closed by ``with``, prints no warning. Its job
    runs on the sample runtime."""
    without_upstream_runtime(cluster)
    cluster.run_kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "samples" / "torch-distributed.yaml"))
    ran = run_script(ERRORS, cluster, tmp_path, "sdk_errors.py")
    print(ran.stdout + ran.stderr)
    assert ran.returncode == 0, ran.stderr
    got = dict(line.split(": ", 1) for line in ran.stdout.splitlines())
    errors = "trainer.client.errors"
    assert got == {
        "get_job": f"{errors}.NotFoundError True",
        "delete_job": f"{errors}.NotFoundError True",
        "get_job_logs": f"{errors}.NotFoundError True",
        "wait_for_job_status": f"{errors}.NotFoundError True",
        "create_job again": f"{errors}.AlreadyExistsError True",
        "create_job in no namespace": f"{errors}.NotFoundError True",
        "create_job of no TrainJob": f"{errors}.ManifestError True",
        "create_job of numNodes -1": f"{errors}.ManifestError True",
    }, got
    assert warnings_in(ran.stderr) == [], ran.stderr

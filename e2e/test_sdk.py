"""The Python SDK (:mod:`trainer.client`) end to end on the real local cluster: the sample TrainJob
submitted, watched to Complete, listed, its events read, deleted; logs of a named step; waits that
end in Failed or a timeout.

About logs: KWOK nodes have no kubelet, and the apiserver reads a container's log by dialling
the kubelet at the node's address. The cluster's KWOK nodes report the fake address 10.1.0.1,
so the tests never ask for logs of pods there (that would send traffic to an address outside this
machine). Instead :func:`logs_nodes` adds two nodes whose kubelet address is 127.0.0.1:

* ``served``: run by a second KWOK process that also serves the kubelet API on that address
  (``kwok --server-address``) with the lines of a file for container ``node`` (a KWOK
  ``ClusterLogs``), so real logs flow through the real apiserver;
* ``unserved``: run by the cluster's KWOK, whose kubelet port nobody listens on, which is what a
  node without a kubelet is: the apiserver answers ``500`` with ``Get
  "https://127.0.0.1:<port>/containerLogs/<ns>/<pod>/node": dial tcp 127.0.0.1:<port>: connect:
  connection refused``.

Both are tainted, so only pods pinned to them (:meth:`LogsNodes.pin`) land there.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from e2e.helpers import ROOT
from localcluster import LocalCluster
from localcluster.binaries import binary_paths
from localcluster.client import Client, wait_for
from localcluster.cluster import STAGES_FILE
from trainer.api.base import ObjectMeta
from trainer.api.kinds import JOBS
from trainer.api.trainer_v1alpha1 import RuntimeRef, TrainJob, TrainJobSpec
from trainer.client import (
    AlreadyExistsError,
    AsyncTrainerClient,
    JobFailedError,
    LogsUnavailableError,
    NotFoundError,
    TrainerClient,
    UnknownStepError,
    WaitTimeoutError,
    runtime_framework,
    trainjob_status,
)
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
SAMPLE = ROOT / "config" / "samples" / "trainjob.yaml"
RUN_FOR = {  # KWOK completes pods carrying these after ~delay (jitter must exceed delay)
    "pod-complete.stage.kwok.x-k8s.io/delay": "600s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "601s",
}
LOG_LINES = ["Torch Distributed Runtime", "PET_NNODES=2", "epoch 1 loss 0.25"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cri_line(text: str, second: int) -> str:
    """One line of a container log file in the CRI format the kubelet (and KWOK) reads."""
    return f"2026-01-01T00:00:{second:02d}.000000000Z stdout F {text}\n"


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A serving certificate for 127.0.0.1 (the apiserver does not verify kubelets without
    ``--kubelet-certificate-authority``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kwok-logs")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "kubelet.crt", directory / "kubelet.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@dataclass
class LogsNodes:
    """Two tainted nodes whose kubelet address is 127.0.0.1 (see the module docstring)."""

    served: str
    unserved: str
    taint: str
    log_file: Path
    lines: list[str] = field(default_factory=lambda: list(LOG_LINES))

    def append(self, text: str) -> None:
        """Add a line to the log every container ``node`` on ``served`` shows."""
        with self.log_file.open("a") as f:
            f.write(cri_line(text, len(self.lines)))
        self.lines.append(text)

    def pin(self, manifest: JSON, node: str, step: str = "node", annotations: dict[str, str] | None = None) -> JSON:
        """``manifest`` (a TrainJob) with its ``step`` pods on ``node``, tolerating its taint, and
        carrying ``annotations`` (a ``podTemplateOverrides`` entry)."""
        override: JSON = {
            "targetJobs": [{"name": step}],
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [{"key": self.taint, "operator": "Exists", "effect": "NoSchedule"}],
            },
        }
        if annotations:
            override["metadata"] = {"annotations": annotations}
        spec = {**manifest["spec"], "podTemplateOverrides": [override]}
        return {**manifest, "spec": spec}


def node_manifest(name: str, manager: str, taint: str, kubelet_port: int | None) -> JSON:
    """A fake Node managed by the KWOK whose annotation selector is ``kwok.x-k8s.io/node=<manager>``;
    with ``kubelet_port`` its status already says where its kubelet is (127.0.0.1:port)."""
    resources = {"cpu": "8", "memory": "16Gi", "pods": "50"}
    status: JSON = {"allocatable": resources, "capacity": resources}
    if kubelet_port is not None:
        status["addresses"] = [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": "127.0.0.1"},
        ]
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": manager, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok-logs", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "spec": {"taints": [{"key": taint, "effect": "NoSchedule"}]},
        "status": status,
    }


@pytest.fixture(scope="module", name="logs_nodes")
def logs_nodes_fixture(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogsNodes]:
    """The two log nodes, and the KWOK process serving the ``served`` one, for one test module."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip("the log nodes need the local cluster (their kubelet address is this machine)")
    work = tmp_path_factory.mktemp("kwok-logs")
    tag = uuid.uuid4().hex[:6]
    taint = f"trainer.e2e/logs-{tag}"
    nodes = LogsNodes(
        served=f"logs-served-{tag}", unserved=f"logs-unserved-{tag}", taint=taint, log_file=work / "node.log"
    )
    nodes.log_file.write_text("".join(cri_line(t, i) for i, t in enumerate(nodes.lines)))
    cluster_logs = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "node-log"},
        "spec": {"selector": {}, "logs": [{"containers": ["node"], "logsFile": str(nodes.log_file), "follow": True}]},
    }
    (work / "logs.yaml").write_text(yaml.safe_dump(cluster_logs))
    cert, key = self_signed(work)
    port = free_port()
    with (work / "kwok.log").open("ab") as log:
        kwok = subprocess.Popen(
            [
                str(binary_paths()["kwok"]),
                f"--kubeconfig={cluster.kubeconfig}",
                f"--config={STAGES_FILE}",
                f"--config={work / 'logs.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=logs-{tag}",
                "--manage-nodes-with-label-selector=",
                "--node-ip=127.0.0.1",
                f"--node-port={port}",
                f"--server-address=127.0.0.1:{port}",
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                "--cidr=10.2.0.1/16",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"KWOK_WORKDIR": str(work)},
        )
    try:
        manifests = [
            node_manifest(nodes.served, f"logs-{tag}", taint, None),
            node_manifest(nodes.unserved, "fake", taint, free_port()),
        ]
        (work / "nodes.yaml").write_text(yaml.safe_dump_all(manifests))
        cluster.run_kubectl("create", "-f", str(work / "nodes.yaml"))
        cluster.run_kubectl(
            "wait", "--for=condition=Ready", "--timeout=60s", f"node/{nodes.served}", f"node/{nodes.unserved}"
        )
        yield nodes
    finally:
        cluster.run_kubectl("delete", "node", nodes.served, nodes.unserved, "--wait=false", check=False)
        kwok.terminate()
        try:
            kwok.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kwok.kill()
            kwok.wait()


def sample(name: str | None = None) -> JSON:
    """The sample TrainJob (``config/samples/trainjob.yaml``), optionally renamed."""
    doc: JSON = yaml.safe_load(SAMPLE.read_text())
    if name:
        doc["metadata"]["name"] = name
    return doc


@pytest.fixture
def sdk(cluster: Any, ns: str) -> Iterator[TrainerClient]:
    """The blocking SDK client in the test's namespace."""
    with TrainerClient(str(cluster.kubeconfig), namespace=ns) as c:
        yield c


async def connect(cluster: Any, ns: str) -> AsyncTrainerClient:
    return await AsyncTrainerClient.connect(str(cluster.kubeconfig), ns)


def test_the_sample_runs_to_complete_is_listed_described_and_deleted(sdk: TrainerClient, samples: None) -> None:
    job = sdk.create_job(SAMPLE)  # the sample says namespace "default": the client's (given) wins
    name = job.name
    assert (name, job.namespace, job.num_nodes, job.status, job.runtime and job.runtime.name) == (
        "pytorch-simple",
        sdk.namespace,
        2,
        "Created",
        "torch-distributed",
    )
    assert job.trainjob is not None and job.metadata.namespace == sdk.namespace
    with pytest.raises(AlreadyExistsError):
        sdk.create_job(SAMPLE, namespace=sdk.namespace)

    seen: list[str] = []
    done = sdk.wait_for_job_status(name, "Complete", timeout=90, callbacks=[lambda j: seen.append(j.status)])
    assert done.status == "Complete" and seen[-1] == "Complete" and trainjob_status(done) == "Complete"
    assert [(s.name, s.status) for s in done.steps] == [("node-0", "Succeeded"), ("node-1", "Succeeded")]
    assert done.trainjob is not None and done.trainjob.status is not None
    jobs_status = done.trainjob.status.jobs_status
    assert jobs_status is not None and [(s.name, s.succeeded) for s in jobs_status] == [("node", 1)]
    again = sdk.get_job(name)  # its status may still be rewritten after Complete; the outcome may not
    assert again.status == "Complete"
    assert again.trainjob is not None and again.trainjob.status is not None
    assert again.trainjob.status.jobs_status == jobs_status

    assert [j.name for j in sdk.list_jobs()] == [name]
    assert [j.name for j in sdk.list_jobs("torch-distributed")] == [name]
    assert sdk.list_jobs("another-runtime") == []
    assert sdk.list_jobs(queue="production") == []
    runtime = next(r for r in sdk.list_runtimes() if r.name == "torch-distributed")
    assert (runtime.kind, runtime.trainer.framework) == ("ClusterTrainingRuntime", "torch")
    assert runtime.object is not None and runtime_framework(runtime.object) == "torch"
    assert [j.name for j in sdk.list_jobs(runtime)] == [name]

    events = sdk.get_job_events(name)
    assert {"SuccessfulCreate", "AllJobsCompleted"} <= {e.reason for e in events}
    assert {"TrainJob", "Job", "Pod"} <= {e.involved_object_kind for e in events}
    times = [parse_time(e.time) or EARLIEST for e in events]
    assert times == sorted(times)

    sdk.delete_job(name, wait=True)
    with pytest.raises(NotFoundError):
        sdk.get_job(name)
    with pytest.raises(NotFoundError):
        sdk.delete_job(name)


async def test_logs_wait_for_the_pod_then_stream_its_lines(
    cluster: Any, samples: None, ns: str, logs_nodes: LogsNodes
) -> None:
    manifest = logs_nodes.pin(sample("streamed"), logs_nodes.served, annotations=RUN_FOR)
    async with await connect(cluster, ns) as c:
        await c.create_job(manifest, namespace=ns)
        # Asked before any pod exists: waits for node 1's pod to start, then streams (kubeflow/sdk#182).
        lines = c.get_job_logs("streamed", step="node", node=1, follow=True, pod_timeout=60)
        first = [await asyncio.wait_for(anext(lines), 30) for _ in logs_nodes.lines]
        assert first == logs_nodes.lines
        logs_nodes.append("epoch 2 loss 0.125")
        assert await asyncio.wait_for(anext(lines), 30) == "epoch 2 loss 0.125"
        await lines.aclose()

        pod = await c.wait_for_pod("streamed", "node", 1)
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1"
        assert pod["spec"]["nodeName"] == logs_nodes.served
        # Without follow: what is there now, and the SDK's way of naming the step ("node-0").
        assert [line async for line in c.get_job_logs("streamed")] == logs_nodes.lines
        assert [line async for line in c.get_job_logs("streamed", step="node-0")] == logs_nodes.lines
        with pytest.raises(UnknownStepError, match="has no step 'launcher'; its steps are: node"):
            [line async for line in c.get_job_logs("streamed", step="launcher")]
        with pytest.raises(NotFoundError):
            [line async for line in c.get_job_logs("no-such-job")]


async def test_logs_from_a_node_without_a_kubelet_raise_the_apiservers_answer(
    cluster: Any, samples: None, ns: str, logs_nodes: LogsNodes
) -> None:
    async with await connect(cluster, ns) as c:
        await c.create_job(logs_nodes.pin(sample("no-kubelet"), logs_nodes.unserved), namespace=ns)
        await c.wait_for_job_status("no-kubelet", "Complete", timeout=90)
        with pytest.raises(LogsUnavailableError) as caught:
            [line async for line in c.get_job_logs("no-kubelet", step="node", node=0)]
    err = caught.value
    assert (err.status, err.container, err.node, err.namespace) == (500, "node", logs_nodes.unserved, ns)
    assert err.pod.startswith("no-kubelet-node-0-0-")
    assert '"https://127.0.0.1:' in err.detail and f"/containerLogs/{ns}/{err.pod}/node" in err.detail
    assert "connect: connection refused" in err.detail
    assert f"pod {ns}/{err.pod} on node {logs_nodes.unserved}" in str(err)


async def test_waits_end_in_a_timeout_naming_the_last_status_or_a_failure(
    cluster: Any, client: Client, samples: None, ns: str
) -> None:
    manifest = sample("fails")
    manifest["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}], "metadata": {"annotations": RUN_FOR}}
    ]
    async with await connect(cluster, ns) as c:
        await c.create_job(manifest, namespace=ns)
        running = await c.wait_for_job_status("fails", {"Running"}, timeout=60)
        assert running.status == "Running" and running.steps[0].name == "node-0"  # the kubeflow SDK's shape
        with pytest.raises(WaitTimeoutError) as timed_out:  # polling_interval < timeout, as the SDK requires
            await c.wait_for_job_status("fails", "Complete", timeout=2, polling_interval=1)
        assert timed_out.value.last == "Running" and isinstance(timed_out.value, TimeoutError)
        assert "TrainJob " + ns + "/fails to be Complete" in str(timed_out.value)

        (job,) = await wait_for(lambda: client.jobs(ns, "fails"), "the Job")
        await client.kube.merge_patch(JOBS, ns, job["metadata"]["name"], {"spec": {"activeDeadlineSeconds": 1}})
        with pytest.raises(JobFailedError, match="DeadlineExceeded") as failed:
            await c.wait_for_job_status("fails", "Complete", timeout=60)
        assert isinstance(failed.value, RuntimeError)
        assert (await c.wait_for_job_status("fails", {"Failed"}, timeout=5)).status == "Failed"
        with pytest.raises(ValueError, match="subset"):
            await c.wait_for_job_status("fails", {"Finished"})


async def test_create_from_a_dict_a_yaml_string_or_a_typed_object_and_filter_by_queue_and_labels(
    cluster: Any, samples: None, ns: str
) -> None:
    kueue = sample("in-kueue")
    kueue["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a", "team": "a"}
    kueue["spec"]["suspend"] = True
    volcano = sample("in-volcano")
    volcano["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "team-b"}
    volcano["spec"]["suspend"] = True
    typed = TrainJob(
        metadata=ObjectMeta(name="typed", labels={"team": "a"}),
        spec=TrainJobSpec(runtime_ref=RuntimeRef(name="torch-distributed"), suspend=True),
    )
    async with await connect(cluster, ns) as c:
        # The sample says namespace "default": the namespace argument wins over it.
        assert (await c.create_job(kueue, namespace=ns)).namespace == ns
        await c.create_job(yaml.safe_dump(volcano), namespace=ns)
        created = await c.create_job(typed)  # no namespace of its own: the client's
        assert created.namespace == ns
        assert created.spec is not None
        assert created.spec.managed_by == "trainer.kubeflow.org/trainjob-controller"  # the CRD's default
        for name in ("in-kueue", "in-volcano", "typed"):
            assert (await c.wait_for_job_status(name, "Suspended", timeout=30)).status == "Suspended"

        async def names(**filters: Any) -> list[str]:
            return sorted(j.name for j in await c.list_jobs(**filters))

        assert await names(queue="team-a") == ["in-kueue"]
        assert await names(queue="team-b") == ["in-volcano"]
        assert await names(label_selector="team=a") == ["in-kueue", "typed"]
        assert await names(label_selector="team=a", queue="team-a") == ["in-kueue"]

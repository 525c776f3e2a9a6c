"""Real pods: training that actually runs, on real kubelets, not KWOK.

Two real nodes (``realnode-0``, ``realnode-1``: kubelet + containerd + runc, see
:mod:`localcluster.realnode.node`) join the session's local cluster next to its KWOK nodes, with CoreDNS
for ``cluster.local``, and the training image (:func:`localcluster.realnode.images.training_image`: Debian
with python3, PyTorch CPU with gloo, OpenMPI, mpi4py, sshd) imported into both. Then:

- a torch TrainJob, 2 nodes x 2 processes: torchrun joins the process group from the operator's
  ``PET_*`` variables (the master is found by DNS as ``<pod>.<subdomain>``), all-reduces each
  rank's ``rank + 1`` with gloo and checks the sum; the TrainJob ends Complete, and every rank's
  line is in the logs the project's CLI (``trainer logs``) and the official kubeflow SDK
  (``TrainerClient.get_job_logs``) show;
- a TrainJob on an ``mpi`` runtime (DeepSpeed-style: sshd in ``node``, mpirun in the ``launcher``,
  which dependsOn ``node`` Ready) runs the mpi4py allreduce; it ends Complete;
- a failurePolicy ``maxRestarts: 1``: node rank 1 exits 1 on restart attempt 0 (read from the pod's
  ``jobset.sigs.k8s.io/restart-attempt`` label by the downward API), the group restarts once and the
  all-reduce of attempt 1 completes;
- an MPIJob, a launcher and 2 workers: mpirun over SSH (the operator's key Secret and hostfile)
  runs an mpi4py allreduce on both workers; the MPIJob ends Succeeded;
- the digits sample (``config/samples/digits``, what ``make demo`` runs): torchrun DDP over gloo, 2
  nodes x 2 processes, trains a small network on scikit-learn's bundled digits; rank 0 posts progress
  to the operator's status server (on the pods' gateway, with the pod's projected token and the CA
  it mounts), so ``status.trainerStatus`` moves to 100% and ends with the held-out accuracy.

Both MPI tests run on Open MPI 4 (the training image, Debian bookworm: ORTE's mpirun) and on Open MPI 5
(:func:`localcluster.realnode.images.torchtune_image`, Debian trixie: PRRTE's mpirun, which reads only the
``PRTE_MCA_*`` variables the operator sets beside ``OMPI_MCA_orte_*``). Every rank prints its host
name; the tests assert the ranks ran on two distinct real nodes and not on the launcher: without the
``PRTE_MCA_*`` variables Open MPI 5 ignores the hostfile, runs every rank on the launcher and still
exits 0 (kubeflow/trainer #4028, kubeflow/mpi-operator #842).

Needs root, Debian's packages (installed when missing) and the Go module proxy (kubelet and CoreDNS
are built once into ``$TRAINER_CACHE/bin``). Runs wherever :func:`localcluster.realnode.node.unavailable` finds
nothing missing (``make test`` included), else is skipped with its reason; ``TRAINER_E2E_REAL=0`` skips it.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

import pytest
import yaml
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient

from e2e.helpers import ROOT
from e2e.test_trainjob import trainjob
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.realnode import images
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, status_server_args, unavailable
from trainer.api.kinds import MPIJOBS, TRAINJOBS
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
IMAGE = images.TRAINING_IMAGE
# The status server, where the real nodes' pods reach the host: the pod network's gateway address.
(STATUS_PORT,) = reserved_ports(1)  # bound minutes after import, in the whole suite
OPERATOR_ARGS = status_server_args(STATUS_PORT)
REAL_NODE_IMAGES = ("busybox", "training")
DIGITS = ROOT / "config" / "samples" / "digits"

# Every rank adds rank + 1: the sum over WORLD ranks is WORLD * (WORLD + 1) / 2.
TORCH_SCRIPT = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
want = world * (world + 1) / 2
print(f"rank {rank}/{world} node {os.environ['GROUP_RANK']} on {os.uname().nodename}: sum {t.item()} want {want}",
      flush=True)
assert t.item() == want, (t.item(), want)
dist.destroy_process_group()
"""
# Wait until the master's name resolves (its DNS record appears once its pod has an IP), then torchrun.
TORCH_COMMAND = f"""
set -eu
for i in $(seq 120); do getent hosts "$PET_MASTER_ADDR" >/dev/null && break; sleep 0.5; done
getent hosts "$PET_MASTER_ADDR"
echo "PET: nnodes=$PET_NNODES nproc=$PET_NPROC_PER_NODE rank=$PET_NODE_RANK master=$PET_MASTER_ADDR:$PET_MASTER_PORT"
cat > /tmp/allreduce.py <<'EOF'
{TORCH_SCRIPT}
EOF
exec torchrun /tmp/allreduce.py
"""
MPI_SCRIPT = (
    "from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
    "s = c.allreduce(c.Get_rank() + 1, op=MPI.SUM); n = c.Get_size(); "
    "print(f'mpi rank {c.Get_rank()}/{n} on {socket.gethostname()}: sum {s}', flush=True); "
    "assert s == n * (n + 1) // 2"
)
MPI_LAUNCH = """
set -eu
for h in $(cut -d' ' -f1 /etc/mpi/hostfile); do
  for i in $(seq 120); do getent hosts "$h" >/dev/null && break; sleep 0.5; done
done
cat /etc/mpi/hostfile
mpirun --version | head -n 1
exec mpirun --allow-run-as-root -n 2 --mca btl tcp,self --mca btl_tcp_if_include eth0 \
  --mca oob_tcp_if_include eth0 python3 -c "$SCRIPT"
"""


@pytest.fixture(scope="module")
def ompi5_image(real_nodes: RealNodes) -> str:
    """The Open MPI 5 image (Debian trixie: torchtune's), built when missing and imported into both real
    nodes once, only for the modules' tests that ask for it."""
    (name,) = real_nodes.add_images("torchtune")
    return name


@pytest.fixture(params=["openmpi4", "openmpi5"])
def mpi_image(request: pytest.FixtureRequest) -> str:
    """The MPI tests' image: Open MPI 4 (bookworm, ORTE) or Open MPI 5 (trixie, PRRTE)."""
    return IMAGE if request.param == "openmpi4" else str(request.getfixturevalue("ompi5_image"))


def assert_open_mpi(text: str, image: str) -> None:
    """The launcher's ``mpirun --version`` line in ``text`` names the Open MPI release of ``image``."""
    release = "5." if image == images.TORCHTUNE_IMAGE else "4."
    assert f"(Open MPI) {release}" in text, text


def spread(label: str, value: str) -> JSON:
    """Real nodes only, one pod of ``label=value`` per node, under the ``default`` ServiceAccount: the
    local cluster's apiserver runs without the ServiceAccount admission plugin that names it on other
    clusters, and the status server's projected token (a volume of every trainer pod) needs one."""
    return {
        "nodeSelector": NODE_SELECTOR,
        "serviceAccountName": "default",
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {label: value}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
        "terminationGracePeriodSeconds": 1,
    }


def logs(cluster: LocalCluster, ns: str, pod: str) -> str:
    return cluster.run_kubectl("logs", "-n", ns, pod, check=False).stdout


async def test_torch_trainjob_all_reduces_over_two_real_nodes(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes
) -> None:
    name = "ar"
    pod_spec = {
        **spread("jobset.sigs.k8s.io/jobset-name", name),
        "containers": [
            {
                "name": "node",
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/bash", "-c", TORCH_COMMAND],
                "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
            }
        ],
    }
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "torch-real", "labels": {"trainer.kubeflow.org/framework": "torch"}},  # for the SDK
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"template": {"spec": pod_spec}},
                            },
                        }
                    ]
                }
            },
        },
    }
    await client.apply(runtime, ns)
    await client.apply(trainjob(name, "torch-real", trainer={"numNodes": 2, "numProcPerNode": 2}), ns)
    try:
        await client.wait_condition(ns, name, "Complete", timeout=240)
    finally:
        pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        out = {
            p["metadata"]["name"]: (p["spec"].get("nodeName"), logs(cluster, ns, p["metadata"]["name"])) for p in pods
        }
        print(out)
    assert {node for node, _ in out.values()} == set(real_nodes.names)
    text = "\n".join(log for _, log in out.values())
    assert_ranks(text)

    # The same logs through the project's CLI (``trainer logs``, module trainer.cli), one node at a time ...
    def cli_logs(node: int) -> str:
        cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(cluster.kubeconfig), "-n", ns, "logs", name]
        done = subprocess.run([*cmd, "--node", str(node)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return done.stdout

    cli = [await asyncio.to_thread(cli_logs, node) for node in range(2)]
    assert_ranks("\n".join(cli))
    assert all("want 10.0" in log for log in cli), cli  # each node's pod logs its own two ranks

    # ... and through the official kubeflow SDK (PyPI ``kubeflow``), steps node-0 and node-1.
    kf = TrainerClient(KubernetesBackendConfig(namespace=ns, config_file=str(cluster.kubeconfig)))

    def sdk_logs(step: str) -> str:
        return "\n".join(kf.get_job_logs(name, step=step))

    sdk = [await asyncio.to_thread(sdk_logs, step) for step in ("node-0", "node-1")]
    assert_ranks("\n".join(sdk))
    assert all("want 10.0" in log for log in sdk), sdk


def assert_ranks(text: str, world: int = 4) -> None:
    """Every rank's ``rank R/W ... sum S want S`` line is in ``text``."""
    want = world * (world + 1) / 2
    for rank in range(world):
        line = next((x for x in text.splitlines() if f"rank {rank}/{world} " in x), None)
        assert line is not None and f"sum {want} want {want}" in line, text


RANK_LINE = re.compile(r"^mpi rank (\d+)/(\d+) on (\S+):", re.MULTILINE)


def assert_ranks_on_distinct_nodes(text: str, pods: list[JSON], launcher: str, world: int = 2) -> None:
    """Ranks ``0..world-1`` each printed ``mpi rank R/W on HOST`` in ``text``, on ``world`` distinct
    hosts, none of them the ``launcher`` pod's (the runtime runs no ranks there), and those hosts are
    ``world`` distinct pods of ``pods`` on ``world`` distinct nodes. A pod's host name is its
    ``spec.hostname`` (set for MPIJob workers and JobSet pods), else its name."""
    hosts = {int(rank): host for rank, size, host in RANK_LINE.findall(text) if int(size) == world}
    print(f"ranks' hosts: {hosts}")
    assert sorted(hosts) == list(range(world)), text
    by_host = {p["spec"].get("hostname") or p["metadata"]["name"]: p for p in pods}
    launcher_host = next(h for h, p in by_host.items() if p["metadata"]["name"] == launcher)
    assert launcher_host not in hosts.values(), f"ranks ran on the launcher {launcher_host}: {hosts}"
    assert len(set(hosts.values())) == world, f"ranks share a host: {hosts}"
    assert set(hosts.values()) <= set(by_host), f"ranks on hosts that are no pod of the job: {hosts}, {sorted(by_host)}"
    nodes = {by_host[host]["spec"]["nodeName"] for host in hosts.values()}
    print(f"ranks' nodes: {sorted(nodes)}")
    assert len(nodes) == world, f"ranks share a node: {hosts} on {nodes}"


async def test_mpijob_runs_mpirun_over_ssh_on_real_nodes(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, mpi_image: str
) -> None:
    name = "mpi"
    role = "training.kubeflow.org/job-role"

    def container(cname: str, command: list[str]) -> JSON:
        env = [{"name": "SCRIPT", "value": MPI_SCRIPT}, {"name": "OMP_NUM_THREADS", "value": "1"}]
        return {"name": cname, "image": mpi_image, "imagePullPolicy": "Never", "command": command, "env": env}

    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "sshAuthMountPath": "/root/.ssh",
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "nodeSelector": NODE_SELECTOR,
                            "terminationGracePeriodSeconds": 1,
                            "containers": [container("launcher", ["/bin/bash", "-c", MPI_LAUNCH])],
                        }
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "spec": {
                            **spread(role, "worker"),
                            "containers": [container("worker", ["/usr/sbin/sshd", "-De"])],
                        }
                    },
                },
            },
        },
    }
    await client.apply(mpijob, ns)

    async def finished() -> JSON | None:
        obj = await client.kube.get_or_none(MPIJOBS, ns, name)
        done = condition(obj, "Succeeded") or condition(obj, "Failed")
        return obj if done and done["status"] == "True" else None

    try:
        obj = await wait_for(finished, f"MPIJob {ns}/{name} finished", timeout=240)
    finally:
        pods = await client.pods(ns, f"training.kubeflow.org/job-name={name}")
        launchers = [p for p in pods if p["metadata"]["labels"].get(role) == "launcher"]
        text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in launchers)
        print(text)
    assert condition(obj, "Succeeded"), obj.get("status")
    assert len(launchers) == 1, launchers
    assert_open_mpi(text, mpi_image)
    assert_ranks_on_distinct_nodes(text, pods, launchers[0]["metadata"]["name"])
    for rank in range(2):
        assert f"mpi rank {rank}/2 on {name}-worker-" in text, text
    assert "sum 3" in text, text


# The launcher of a TrainJob on an mpi runtime: wait until every host's sshd answers, then MPI_LAUNCH.
MPI_WAIT_SSH = """
for h in $(cut -d' ' -f1 /etc/mpi/hostfile); do
  for i in $(seq 120); do timeout 2 bash -c "</dev/tcp/$h/22" 2>/dev/null && break; sleep 0.5; done
done
"""


async def test_trainjob_on_an_mpi_runtime_runs_mpirun_over_ssh_on_real_nodes(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, mpi_image: str
) -> None:
    """DeepSpeed-style (config/samples/deepspeed-distributed.yaml): replicated job ``node`` runs sshd on
    both real nodes; the ``launcher`` (the trainer step) starts once they are Ready and runs mpirun
    with the operator's hostfile (/etc/mpi/hostfile) and SSH keys; success of the launcher completes it."""
    name = "mpi-tj"
    rjob = "jobset.sigs.k8s.io/replicatedjob-name"

    def container(command: list[str]) -> JSON:
        env = [{"name": "SCRIPT", "value": MPI_SCRIPT}, {"name": "OMP_NUM_THREADS", "value": "1"}]
        return {"name": "node", "image": mpi_image, "imagePullPolicy": "Never", "command": command, "env": env}

    launcher_pod = {
        "nodeSelector": NODE_SELECTOR,
        "serviceAccountName": "default",  # see spread()
        "terminationGracePeriodSeconds": 1,
        "containers": [container(["/bin/bash", "-c", MPI_WAIT_SSH + MPI_LAUNCH])],
    }
    node_pod = {**spread(rjob, "node"), "containers": [container(["/usr/sbin/sshd", "-De"])]}
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "mpi-real", "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": False,
                },
            },
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": node_pod}}}},
                        {
                            "name": "launcher",
                            "dependsOn": [{"name": "node", "status": "Ready"}],
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"template": {"spec": launcher_pod}},
                            },
                        },
                    ],
                }
            },
        },
    }
    await client.apply(runtime, ns)
    await client.apply(trainjob(name, "mpi-real", trainer={"numNodes": 2}), ns)
    try:
        await client.wait_condition(ns, name, "Complete", timeout=240)
    finally:
        pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        out = {
            p["metadata"]["name"]: (p["spec"].get("nodeName"), logs(cluster, ns, p["metadata"]["name"])) for p in pods
        }
        print(out)
    launcher = "\n".join(log for pod, (_, log) in out.items() if pod.startswith(f"{name}-launcher-"))
    (launcher_pod_name,) = [pod for pod in out if pod.startswith(f"{name}-launcher-")]
    assert_open_mpi(launcher, mpi_image)
    assert_ranks_on_distinct_nodes(launcher, pods, launcher_pod_name)
    for rank in range(2):
        assert f"mpi rank {rank}/2 on {name}-node-0-" in launcher, launcher
    assert "sum 3" in launcher, launcher
    hosts = [line.split()[0] for line in launcher.splitlines() if line.startswith(f"{name}-node-0-")]
    assert len(hosts) == 2, launcher  # the hostfile the launcher printed: both node pods


async def test_failure_policy_restarts_the_group_on_real_pods_and_the_retry_completes(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes
) -> None:
    """failurePolicy {maxRestarts: 1}: on attempt 0 node rank 1 exits 1 (its Job has backoffLimit 0),
    which fails its Job; the operator deletes every Job of the group and recreates them as attempt 1
    (pods labelled ``jobset.sigs.k8s.io/restart-attempt=1``, read through the downward API), where the
    gloo all-reduce runs on both real nodes and the TrainJob ends Complete with status.restarts 1."""
    name = "retry"
    attempt = "jobset.sigs.k8s.io/restart-attempt"
    command = (
        'echo "attempt $RESTART_ATTEMPT node $PET_NODE_RANK"\n'
        'if [ "$RESTART_ATTEMPT" = 0 ] && [ "$PET_NODE_RANK" = 1 ]; then echo "failing on purpose"; exit 1; fi\n'
        + TORCH_COMMAND
    )
    env = [
        {"name": "OMP_NUM_THREADS", "value": "1"},
        {"name": "RESTART_ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{attempt}']"}}},
    ]
    pod_spec = {
        **spread("jobset.sigs.k8s.io/jobset-name", name),
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "node",
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/bash", "-c", command],
                "env": env,
            }
        ],
    }
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "torch-retry"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": 1}},
            "template": {
                "spec": {
                    "failurePolicy": {"maxRestarts": 1},
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}},
                            },
                        }
                    ],
                }
            },
        },
    }
    await client.apply(runtime, ns)
    await client.apply(trainjob(name, "torch-retry", trainer={"numNodes": 2, "numProcPerNode": 1}), ns)
    try:
        tj = await client.wait_condition(ns, name, "Complete", timeout=300)
    finally:
        pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        out = {
            p["metadata"]["name"]: (p["metadata"]["labels"].get(attempt), logs(cluster, ns, p["metadata"]["name"]))
            for p in pods
        }
        print(out)
    assert tj["status"].get("restarts") == 1, tj["status"]
    assert {a for a, _ in out.values()} == {"1"}, out  # attempt 0's pods are gone
    text = "\n".join(log for _, log in out.values())
    assert "attempt 1 node 0" in text and "attempt 1 node 1" in text, text
    assert_ranks(text, world=2)
    await client.wait_events(
        ns, name, lambda es: any(e["reason"] == "RestartJobSetFailurePolicyAction" for e in es), "the restart's event"
    )


async def test_the_digits_sample_trains_on_two_real_nodes_and_reports_its_progress(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes
) -> None:
    """``make demo``'s job: real training, progress from inside the pods, a final held-out accuracy."""
    cluster.run_kubectl("apply", "-n", ns, "-k", str(DIGITS))
    job = yaml.safe_load((DIGITS / "trainjob.yaml").read_text())
    # This cluster has KWOK nodes too: the real ones only.
    job["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": NODE_SELECTOR}}]
    name = (await client.kube.create(TRAINJOBS, ns, job))["metadata"]["name"]
    progress: list[int] = []
    # ``trainer logs -f`` streams rank 0 while it trains, and ends when the container ends.
    follow = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "trainer.cli", "--kubeconfig", str(cluster.kubeconfig), "-n", ns),
        *("logs", name, "-f", "--pod-timeout", "300"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )

    async def ended() -> JSON | None:
        tj = await client.trainjob(ns, name) or {}
        reported = ((tj.get("status") or {}).get("trainerStatus") or {}).get("progressPercentage")
        if reported is not None and (not progress or progress[-1] != reported):
            progress.append(reported)
        done = condition(tj, "Complete") or condition(tj, "Failed")
        return tj if done and done.get("status") == "True" else None

    try:
        tj = await wait_for(ended, f"TrainJob {ns}/{name} to end", timeout=400, interval=0.5)
    finally:
        pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        out = {
            p["metadata"]["name"]: (p["spec"].get("nodeName"), logs(cluster, ns, p["metadata"]["name"])) for p in pods
        }
        print(out, progress)
    streamed = (await asyncio.wait_for(follow.communicate(), 60))[0].decode()
    assert follow.returncode == 0 and "epoch 1/20" in streamed and "held-out accuracy" in streamed, streamed
    assert condition(tj, "Complete"), tj.get("status")
    assert {node for node, _ in out.values()} == set(real_nodes.names)
    text = "\n".join(log for _, log in out.values())
    assert all(f"rank {r}/4" in text for r in range(4)), text
    assert "held-out accuracy" in text, text
    # Progress came from the pods, several times, up to 100; the final metrics are the last epoch's.
    assert len(progress) >= 2 and progress[-1] == 100 and progress == sorted(progress), progress
    metrics = {m["name"]: m["value"] for m in tj["status"]["trainerStatus"]["metrics"]}
    assert float(metrics["accuracy"]) > 0.85 and float(metrics["loss"]) < 1.0, metrics

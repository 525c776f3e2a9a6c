"""``make demo``: train a real model on the local cluster, through the operator as users install it.

``python -m localcluster.demo`` builds what the demo needs and nothing else, each step on its own line
with its time, in two lanes at once (Go: the cluster's binaries, the node's binaries, helm; images: the
training image, then the operator image that buildah builds from the Dockerfile). Where the machine
allows it (root, Debian's packages: see :func:`localcluster.realnode.node.unavailable`) it starts the
local cluster with two real nodes (kubelet + containerd, kube-proxy, CoreDNS), installs the chart
(``charts/trainer``, 2 replicas, :class:`localcluster.incluster.Release`) with that image, and creates a
TrainJob from ``config/samples/digits``: torchrun DDP over gloo, 2 nodes x 2 processes, a small
convolutional network on scikit-learn's bundled digits. It prints:

- the TrainJob's state and where its pods run, as they change;
- a progress bar moved by the pods' own reports to the in-cluster status server
  (``status.trainerStatus``: percent, ETA, loss, accuracy), as ``kubectl get trainjobs`` shows them;
- the final metrics, the last lines of rank 0's log, and the commands to look further.

Before anything else it prints what it does to the host outside the project's directories (Debian
packages, ``containerd.service``, the bridge, route, iptables chains and sysctls of the real nodes, the
caches) and how to undo each (:mod:`localcluster.host_changes`). Each step's line gives its own time
(the job's ``Complete after`` counts from the TrainJob's creation), and a table of every step's time
ends the run (:class:`Timings`).

Where real nodes cannot run, one line says why and the same sample runs on KWOK nodes with the operator
as a host process (pods that run nothing: the job completes, nothing trains). ``TRAINER_DEMO_KWOK=1``
chooses KWOK.

Every run creates a new TrainJob (``generateName``); earlier demo TrainJobs are deleted without
waiting for their children to go. The cluster, the real nodes and the release keep running for
``kubectl``, so a second run starts at once; ``python -m localcluster.demo --down`` stops them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

from localcluster import ROOT, LocalCluster, host_changes
from localcluster.binaries import ensure, ensure_binaries
from localcluster.client import Client, condition
from localcluster.cluster import free_ports
from localcluster.incluster import WEBHOOK_UNREACHABLE, Release
from localcluster.operator_image import operator_image
from localcluster.operator_process import Operator
from localcluster.realnode import images as realimages
from localcluster.realnode import node as realnode
from trainer.api.kinds import TRAINJOBS
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client.types import Holding, holding_condition
from trainer.framework.json_codec import JSON

CACHE = Path(os.environ.get("TRAINER_CACHE", Path.home() / ".cache" / "trainer"))
DEFAULT_DIR = CACHE / "clusters" / "demo"
REAL_DIR = CACHE / "clusters" / "demo-real"  # no KWOK nodes: every pod lands on a real node
SAMPLE = ROOT / "config" / "samples" / "digits"
NAMESPACE = "default"
DEMO_LABEL = "trainer.kubeflow.org/demo"
FINAL_REPORT_SECONDS = 7.0
"""How long after Complete the bar waits for the trainer's last report (``--status-write-interval`` 5 s)."""
console = Console(highlight=False, soft_wrap=True)  # a line per message, however wide


def say(message: str) -> None:
    console.print(f"[dim]\\[demo {time.strftime('%H:%M:%S')}][/dim] {message}")


class Timings:
    """Each step's own time in seconds, in the order the steps end (the build's two lanes run at once, so
    their steps overlap); thread-safe. :meth:`table` is the run's last word."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def add(self, what: str, seconds: float) -> float:
        """Record step ``what`` took ``seconds``; returns ``seconds``."""
        with self._lock:
            self.steps.append((what, seconds))
        return seconds

    def table(self, total: float) -> Table:
        """The steps and their seconds, then ``total`` (the run's wall time)."""
        table = Table(title="time per step (the build's two lanes run at once)", title_justify="left")
        table.add_column("step")
        table.add_column("seconds", justify="right")
        for what, seconds in self.steps:
            table.add_row(what, f"{seconds:.1f}")
        table.add_row("[bold]make demo, wall time[/bold]", f"[bold]{total:.1f}[/bold]")
        return table


TIMINGS = Timings()


def holding(tj: JSON) -> Holding:
    """The condition that holds the job, as ``trainer get`` shows it in STATE."""
    return holding_condition(TrainJob.model_validate(tj))


def metrics_of(tj: JSON) -> dict[str, str]:
    ts = (tj.get("status") or {}).get("trainerStatus") or {}
    return {m["name"]: m["value"] for m in ts.get("metrics") or []}


async def apply_sample(cluster: LocalCluster, patience: float = 60) -> None:
    """``kubectl apply -k`` of the sample. An admission webhook the apiserver cannot call yet (the chart was
    just installed: the Service's rules may be on their way) is tried again each second for up to
    ``patience`` seconds, its error said once; any other error, or one that lasts, ends the demo with
    kubectl's own words."""
    deadline = time.monotonic() + patience
    said = False
    while True:
        done = cluster.run_kubectl("apply", "-n", NAMESPACE, "-k", str(SAMPLE), check=False)
        if done.returncode == 0:
            return
        error = done.stderr.strip()
        if WEBHOOK_UNREACHABLE not in error or time.monotonic() > deadline:
            raise SystemExit(f"kubectl apply -n {NAMESPACE} -k {SAMPLE.relative_to(ROOT)} failed: {error}")
        if not said:
            say(f"admission is not reachable yet; trying again for up to {patience:.0f} s: {error}")
            said = True
        await asyncio.sleep(1)


async def run_sample(cluster: LocalCluster, real: bool, timeout: float) -> tuple[str, bool, dict[str, str]]:
    """Install the digits runtime, create one TrainJob of it and follow it, printing how long it took from
    its creation to its end (:data:`TIMINGS`); (its name, Complete, its last reported metrics)."""
    client = await Client.connect(cluster)
    try:
        await apply_sample(cluster)
        items, _ = await client.kube.list(TRAINJOBS, NAMESPACE, f"{DEMO_LABEL}=true")
        previous = [str(tj["metadata"]["name"]) for tj in items]
        for old in previous:  # children go by garbage collection, in the background
            await client.kube.delete(TRAINJOBS, NAMESPACE, old)
        if previous:
            say(f"deleted the previous demo TrainJob(s) {', '.join(previous)} (not waiting for their pods)")
        job = yaml.safe_load((SAMPLE / "trainjob.yaml").read_text())
        job["metadata"].setdefault("labels", {})[DEMO_LABEL] = "true"
        created = await client.kube.create(TRAINJOBS, NAMESPACE, job)
        began = time.monotonic()
        name = created["metadata"]["name"]
        say(f"created TrainJob [bold]{NAMESPACE}/{name}[/bold] from {(SAMPLE / 'trainjob.yaml').relative_to(ROOT)}")
        ok, metrics = await follow(client, name, real, timeout)
        seconds = TIMINGS.add(
            f"TrainJob {name}, created to {'Complete' if ok else 'not Complete'}", time.monotonic() - began
        )
        say(
            f"{'[green]Complete[/green]' if ok else '[red]NOT complete[/red]'} after {seconds:.1f}s (from its creation)"
        )
        return name, ok, metrics
    finally:
        await client.close()


async def follow(client: Client, name: str, real: bool, timeout: float) -> tuple[bool, dict[str, str]]:
    """Print state and pod changes as lines and the trainer's progress as a bar until the TrainJob ends;
    (Complete, the last reported metrics)."""
    deadline, last_state, last_pods = time.monotonic() + timeout, "", ""
    settle_until = float("inf")
    columns: list[Any] = [
        TextColumn("[bold]training[/bold]"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("ETA {task.fields[eta]}"),
        TextColumn("{task.fields[metrics]}"),
    ]
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("train", total=100, eta="-", metrics="waiting for the first report", visible=real)
        while time.monotonic() < deadline:
            tj = await client.trainjob(NAMESPACE, name) or {}
            held = holding(tj) if tj else None
            state = held.state if held else ""
            if held and state != last_state:
                say(f"state {state}" + (f": {held.message}" if held.message else ""))
                last_state = state
            pods = await client.pods(NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={name}")
            where = ", ".join(
                f"{p['metadata']['name']} {p['status'].get('phase')} on {p['spec'].get('nodeName') or '-'}"
                for p in sorted(pods, key=lambda p: str(p["metadata"]["name"]))
            )
            if where and where != last_pods:
                say(f"pods: {where}")
                last_pods = where
            ts = (tj.get("status") or {}).get("trainerStatus") or {}
            if ts:
                eta = ts.get("estimatedRemainingSeconds")
                shown = ", ".join(f"{k} {v}" for k, v in metrics_of(tj).items())
                bar.update(
                    task,
                    completed=ts.get("progressPercentage") or 0,
                    eta=f"{eta}s" if eta is not None else "-",
                    metrics=shown,
                )
            final = (ts.get("progressPercentage") == 100) or not real or time.monotonic() > settle_until
            for kind in ("Complete", "Failed"):
                c = condition(tj, kind)
                if c and c.get("status") == "True":
                    if kind == "Failed":
                        say(f"[red]TrainJob failed[/red]: {c.get('message')}")
                        return False, metrics_of(tj)
                    if final:
                        return True, metrics_of(tj)
                    # The last report lands with the status server's next write (one per 5 s at most).
                    settle_until = min(settle_until, time.monotonic() + FINAL_REPORT_SECONDS)
            await asyncio.sleep(0.5)
    say(f"TrainJob did not end within {timeout:.0f}s")
    return False, {}


def cli(cluster: LocalCluster, *args: str) -> str:
    """``trainer <args>`` (the project's CLI) against the demo cluster; its stdout."""
    cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(cluster.kubeconfig), "-n", NAMESPACE, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT).stdout


def report(cluster: LocalCluster, name: str, real: bool, metrics: dict[str, str]) -> None:
    """The final ``metrics``, the end of rank 0's log and where to look further."""
    if metrics:
        say("final metrics: " + ", ".join(f"{k} {v}" for k, v in metrics.items()))
    if real:
        for node in (0, 1):
            head = [ln for ln in cli(cluster, "logs", name, "--node", str(node)).splitlines() if ln.startswith("rank")]
            for line in head:
                say(f"node {node} log: {line}")
        tail = cli(cluster, "logs", name, "--tail", "4").rstrip()
        console.print(f"[dim]rank 0, last lines:[/dim]\n{tail}")
    kubectl = f"{cluster.kubectl} --kubeconfig {cluster.kubeconfig}"
    console.print(
        f"\n  export KUBECONFIG={cluster.kubeconfig}   # for kubectl, trainer and the SDK (the README's)\n"
        f"  {kubectl} get trainjobs,jobs,pods -o wide\n"
        f"  {sys.executable} -m trainer.cli --kubeconfig {cluster.kubeconfig} describe {name}\n"
        f"  {sys.executable} -m trainer.cli --kubeconfig {cluster.kubeconfig} logs {name} --all-pods --prefix\n"
        f"  stop it all: {sys.executable} -m localcluster.demo --down"
    )


def down(state_dirs: list[Path]) -> int:
    """Stop the real nodes (putting back what they changed on the host) and the clusters."""
    for state_dir in state_dirs:
        cluster = LocalCluster(state_dir, nodes=0)
        if state_dir == REAL_DIR and host_changes.NODES_DIR.exists():
            realnode.RealNodes(cluster, 2, host_changes.NODES_DIR).stop()
        if cluster.is_running():
            cluster.stop()
            say(f"stopped the cluster in {state_dir}")
    return 0


def step(what: str, build: Callable[[], object]) -> float:
    """Run one build step, print a line with its time and record it in :data:`TIMINGS`; the seconds it took."""
    t = time.monotonic()
    build()
    seconds = time.monotonic() - t
    say(f"{what}: {'built' if seconds > 5 else 'ready'} in {seconds:.1f}s")
    return TIMINGS.add(what, seconds)


def build(real: bool) -> None:
    """Build (or find) what the demo needs, in two lanes at once: Go (cluster binaries, then with real
    nodes the node binaries and helm) and images (the training image, then the operator image)."""

    def go() -> None:
        step(
            "cluster binaries (etcd, kube-apiserver, controller-manager, scheduler, kubectl)",
            lambda: ensure_binaries(kwok=not real),
        )
        if real:
            step(
                "node binaries (kubelet, kube-proxy, CoreDNS, pause)",
                lambda: realimages.ensure_built("kubelet", "kube_proxy", "coredns", "pause"),
            )
            step("helm", lambda: ensure("helm"))

    def images() -> None:
        step("training image (Debian bookworm: python3-torch, scikit-learn)", realimages.training_image)
        step("operator image (buildah build of the Dockerfile)", operator_image)

    lanes = [go, images] if real else [go]
    with ThreadPoolExecutor(len(lanes)) as pool:
        for done in [pool.submit(lane) for lane in lanes]:
            done.result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--dir", type=Path, help=f"cluster state (default {REAL_DIR} with real nodes, else {DEFAULT_DIR})"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the TrainJob to end")
    parser.add_argument("--down", action="store_true", help="stop the demo's real nodes and cluster, and exit")
    args = parser.parse_args(argv)
    if args.down:
        return down([args.dir] if args.dir else [REAL_DIR, DEFAULT_DIR])
    started = time.monotonic()
    why_not = "TRAINER_DEMO_KWOK=1" if os.environ.get("TRAINER_DEMO_KWOK") == "1" else realnode.unavailable()
    real = why_not is None
    if not real:
        say(f"[yellow]KWOK nodes only[/yellow] ({why_not}): the pods run nothing, so nothing trains")
    say("what this does to the host, and how to undo each (docs/development.md, 'What the demo changes on the host'):")
    for line in host_changes.lines(real):
        console.print(f"  - {line}", markup=False)
    t = time.monotonic()
    build(real)
    say(f"everything built in {TIMINGS.add('everything built (both lanes)', time.monotonic() - t):.1f}s")
    # Real mode: no KWOK nodes, so every pod lands on a real node; the operator's pods need their tokens.
    t = time.monotonic()
    cluster = LocalCluster(
        args.dir or (REAL_DIR if real else DEFAULT_DIR),
        nodes=0 if real else 4,
        service_account_admission=real,
        extra_crds=[ROOT / "config" / "crd" / "bases"],
    )
    cluster.start()
    say(f"cluster up, CRDs Established, in {TIMINGS.add('cluster up', time.monotonic() - t):.1f}s")
    if real:
        t = time.monotonic()
        nodes = realnode.RealNodes(cluster, 2, host_changes.NODES_DIR, ("training",))
        nodes.start()
        say(f"real nodes realnode-0, realnode-1 Ready in {TIMINGS.add('real nodes Ready', time.monotonic() - t):.1f}s")
        t = time.monotonic()
        release = Release(cluster, nodes)
        release.install()
        installed = TIMINGS.add("operator installed by helm", time.monotonic() - t)
        say(
            f"operator installed by helm in {installed:.1f}s: release {release.release} in "
            f"{release.namespace}, 2 replicas, leader {release.leader()}; status server behind its Service"
        )
        name, ok, metrics = asyncio.run(run_sample(cluster, real, args.timeout))
    else:
        t = time.monotonic()
        (port,) = free_ports(1)
        status = ["--status-server-port", str(port), "--status-server-host", "127.0.0.1"]
        operator = Operator(cluster.kubeconfig, cluster.state_dir / "logs" / "operator.log", status)
        operator.start()
        TIMINGS.add("operator started", time.monotonic() - t)
        say(f"operator running (log {operator.log_path}), status server on 127.0.0.1:{port}")
        try:
            name, ok, metrics = asyncio.run(run_sample(cluster, real, args.timeout))
        finally:
            operator.stop()
    report(cluster, name, real, metrics)
    console.print(TIMINGS.table(time.monotonic() - started))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

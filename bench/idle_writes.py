"""Idle writes: what the operator writes to the apiserver while nothing changes.

``python -m bench.idle_writes [--jobs 50] [--seconds 60]`` starts the local cluster (KWOK nodes; the
binaries of ``localcluster/build.sh``) in a temporary directory, runs the operator as its own process, creates
``--jobs`` objects of each sample (the torch TrainJob, the TrainJob on the mpi runtime, the MPIJob)
whose pods keep running, waits until every one is Running (the operator runs with
``--trainjob-running-condition``, so a TrainJob says so too) and the operator has gone quiet, then reads
the operator's own metrics (``rest_client_requests_total``, ``controller_runtime_reconcile_total``)
before and after ``--seconds`` and prints the writes (every request but GET) and reconciles made in
between. Exits 1 when any write was made.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import time

import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.cluster import Operator, local_cluster, machine
from localcluster import ROOT, LocalCluster
from localcluster.client import Client
from trainer.api.kinds import MPIJOBS, TRAINJOBS
from trainer.framework.json_codec import JSON

SAMPLES = ROOT / "config" / "samples"
RUN_FOR = {  # KWOK completes pods carrying these after ~delay
    "pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3601s",
}


def load(name: str) -> JSON:
    data: JSON = yaml.safe_load((SAMPLES / name).read_text())
    return data


def objects(n: int, namespace: str) -> list[JSON]:
    """``n`` of each sample, in ``namespace``, whose pods keep running."""
    out = []
    torch, deepspeed, mpijob = load("trainjob.yaml"), load("trainjob-deepspeed.yaml"), load("mpijob.yaml")
    for i in range(n):
        for base, prefix in ((torch, "torch"), (deepspeed, "ds")):
            tj = copy.deepcopy(base)
            tj["metadata"] = {"name": f"{prefix}-{i}", "namespace": namespace}
            tj["spec"]["annotations"] = RUN_FOR
            out.append(tj)
        mj = copy.deepcopy(mpijob)
        mj["metadata"] = {"name": f"mpi-{i}", "namespace": namespace}
        for spec in mj["spec"]["mpiReplicaSpecs"].values():
            spec["template"].setdefault("metadata", {}).setdefault("annotations", {}).update(RUN_FOR)
        out.append(mj)
    return out


async def scrape(op: Operator) -> dict[str, float]:
    """Writes (requests by method, GET excluded) and reconciles so far, from the operator's ``/metrics``."""
    text = await op.metrics()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "rest_client_requests_total" and s.labels.get("method") != "GET":
                out[f"write {s.labels['method']} {s.labels['code']}"] = out.get(
                    f"write {s.labels['method']} {s.labels['code']}", 0
                ) + float(s.value)
            elif s.name == "controller_runtime_reconcile_total":
                key = f"reconcile {s.labels['controller']} {s.labels['result']}"
                out[key] = out.get(key, 0) + float(s.value)
    return out


def writes(m: dict[str, float]) -> float:
    return sum(v for k, v in m.items() if k.startswith("write "))


async def running(client: Client, namespace: str) -> tuple[int, int]:
    """(objects whose Running condition is True, all objects)."""
    done = total = 0
    for res in (TRAINJOBS, MPIJOBS):
        items, _ = await client.kube.list(res, namespace)
        total += len(items)
        for o in items:
            conds = (o.get("status") or {}).get("conditions") or []
            done += any(c.get("type") == "Running" and c.get("status") == "True" for c in conds)
    return done, total


async def measure(cluster: LocalCluster, n: int, seconds: float, op: Operator) -> dict[str, float]:
    client = await Client.connect(cluster)
    try:
        ns = "bench"
        await client.create_namespace(ns)
        for f in ("torch-distributed.yaml", "deepspeed-distributed.yaml"):
            await client.apply_file(SAMPLES / f)
        started = time.monotonic()
        for obj in objects(n, ns):
            await client.apply(obj)
        while True:
            done, total = await running(client, ns)
            if done == total == 3 * n:
                break
            if time.monotonic() - started > 600:
                raise SystemExit(f"only {done}/{total} Running after 600 s")
            await asyncio.sleep(2)
        print(f"{3 * n} objects Running after {time.monotonic() - started:.1f} s", flush=True)
        before = await scrape(op)
        while True:  # quiet: no write for 5 s
            await asyncio.sleep(5)
            now = await scrape(op)
            if writes(now) == writes(before):
                break
            before = now
        await asyncio.sleep(seconds)
        after = await scrape(op)
        return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after))}
    finally:
        await client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--jobs", type=int, default=50, help="objects of each sample (default 50)")
    p.add_argument("--seconds", type=float, default=60, help="idle window (default 60)")
    args = p.parse_args()
    with local_cluster("bench-idle-", pods_per_node=250) as cluster:
        log = cluster.state_dir / "operator.log"
        op = Operator(cluster.kubeconfig, None, log, args=["--trainjob-running-condition"])
        op.start()
        try:
            delta = asyncio.run(measure(cluster, args.jobs, args.seconds, op))
        finally:
            op.stop()
    print(
        f"machine: {machine()['cores']} cores; "
        f"{3 * args.jobs} settled objects ({args.jobs} of each sample); idle window {args.seconds:.0f} s"
    )
    for k, v in delta.items():
        if v:
            print(f"  {k}: {v:.0f}")
    total = writes(delta)
    print(f"writes in the idle window: {total:.0f}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())

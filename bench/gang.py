"""Gang: one very large TrainJob on Volcano, from its create to every pod.

``python -m bench.gang --nodes 1000`` starts the local cluster with Volcano (scheduler, controller
manager, webhook manager; KWOK nodes with room for every pod), installs this project's webhook
configurations calling ``https://127.0.0.1:<port>`` (``python -m trainer.webhook.server --url``),
applies the torch ClusterTrainingRuntime sample and starts the operator with
``--gang-scheduler-name volcano``, its webhook on that port and ``--max-nodes-per-job`` at least
``--nodes``. Then, in namespace ``bench``:

1. **operator**: one TrainJob of the torch sample with ``numNodes: --nodes`` is created. Printed: the
   create's round trip (through the TrainJob webhook); the seconds until its Volcano PodGroup exists and
   whether the first PodGroup seen already had ``minMember`` = ``--nodes`` (right first time), until
   every Job exists, until every pod exists and until every pod is bound to a node; the operator's writes
   by verb and resource until it is quiet and its CPU seconds; the apiserver's admission time per webhook
   of this project (``apiserver_admission_webhook_admission_duration_seconds``: calls and mean ms).
2. **Job controller alone**: the operator's Jobs, read back and stripped (:func:`bench.raw_client.raw_copy`),
   are POSTed in namespace ``raw`` (not watched by the operator; its pods still go through the pod
   webhook and Volcano) without the gang: the seconds until every pod exists there are what the Job
   controller allows; printed with the ratio operator / Job controller.

The machine comes first; ``--json PATH`` writes the figures. Exits 1 when a phase times out.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.burst import (
    BENCH_NS,
    RAW_NS,
    CountedOperator,
    Tracker,
    jobs_per_trainjob,
    load,
    per_trainjob,
    wait_quiet,
    webhook_args,
    write_delta,
)
from bench.cluster import NODES, PhaseTimeout, machine, pods_per_node
from bench.raw_client import raw_copy, trainjob_owner
from localcluster import ROOT, LocalCluster
from localcluster.api import ApiClient
from trainer.api.kinds import JOBS, NAMESPACES, PODS, TRAINJOBS, VOLCANO_PODGROUPS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

ADMISSION_METRIC = "apiserver_admission_webhook_admission_duration_seconds"
"""The apiserver's histogram of admission webhook calls, by webhook ``name``, ``type``, ``operation``."""
OURS = ("trainer.kubeflow.org", "kubeflow.org", "pods.core")
"""Suffixes of this project's webhook names (:mod:`trainer.webhook.server`)."""


def admission(text: str, suffixes: tuple[str, ...] = OURS) -> dict[str, tuple[float, float]]:
    """Per webhook whose name ends with one of ``suffixes``: ``(calls, seconds)`` summed over every
    label set, from the apiserver's Prometheus text (:data:`ADMISSION_METRIC` ``_count`` and ``_sum``).
    Raises ``ValueError`` on text the Prometheus parser refuses."""
    out: dict[str, tuple[float, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.labels.get("name", "")
            if not name.endswith(suffixes) or s.name not in (f"{ADMISSION_METRIC}_count", f"{ADMISSION_METRIC}_sum"):
                continue
            calls, seconds = out.get(name, (0.0, 0.0))
            if s.name.endswith("_count"):
                calls += float(s.value)
            else:
                seconds += float(s.value)
            out[name] = (calls, seconds)
    return out


def admission_delta(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, JSON]:
    """Per webhook called between two readings of :func:`admission`: ``{"calls", "mean_ms"}``."""
    out: dict[str, JSON] = {}
    for name, (calls, seconds) in sorted(after.items()):
        c0, s0 = before.get(name, (0.0, 0.0))
        if calls - c0 > 0:
            out[name] = {"calls": calls - c0, "mean_ms": round((seconds - s0) * 1000 / (calls - c0), 2)}
    return out


def apiserver_metrics(api: ApiClient) -> str:
    """The apiserver's ``/metrics`` text. Raises ``RuntimeError`` when it does not answer 200."""
    status, text = api.get("/metrics")
    if status != 200 or not isinstance(text, str):
        raise RuntimeError(f"GET /metrics: {status}")
    return text


def bound(pod: JSON) -> bool:
    """Whether ``pod`` was bound to a node."""
    return bool((pod.get("spec") or {}).get("nodeName"))


def big_trainjob(nodes: int) -> JSON:
    """The torch sample TrainJob ``gang-<nodes>`` in ``bench`` with ``numNodes: nodes`` and 10 mCPU and
    16 MiB per node (so that the KWOK nodes hold every pod)."""
    tj = copy.deepcopy(load("trainjob.yaml"))
    tj["metadata"] = {"name": f"gang-{nodes}", "namespace": BENCH_NS}
    tj["spec"]["trainer"]["numNodes"] = nodes
    small = {"cpu": "10m", "memory": "16Mi"}
    tj["spec"]["trainer"]["resourcesPerNode"] = {"requests": small, "limits": small}
    return tj


async def measure(
    args: argparse.Namespace, cluster: LocalCluster, op: CountedOperator, figures: JSON, webhooks: Path
) -> None:
    """Both phases on the running cluster; ``webhooks``: the webhook configurations to apply once the
    runtime is in (they refuse every runtime while nothing serves them); figures go to ``figures``."""
    kube = await Kube.connect(str(cluster.kubeconfig))
    api = cluster.api()
    nodes = int(args.nodes)
    timeout = float(args.timeout)
    trackers: list[Tracker] = []
    try:
        for ns in (BENCH_NS, RAW_NS):
            await kube.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        runtime = load("torch-distributed.yaml")
        await kube.apply(runtime, "bench")
        cluster.run_kubectl("apply", "--server-side", "--force-conflicts", "-f", str(webhooks))
        jobs_per = jobs_per_trainjob(runtime)
        op.start()
        await op.wait_ready(timeout)
        await wait_quiet(op, args.quiet_seconds, timeout)
        print(f"operator pid {op.pid} ready (webhook on, --gang-scheduler-name volcano)", flush=True)
        first_pg: list[JSON] = []

        def owned_podgroup(obj: JSON) -> bool:  # called once per new name: the first version seen
            if trainjob_owner(obj) is None:
                return False
            first_pg.append(obj)
            return True

        podgroups = Tracker(kube, VOLCANO_PODGROUPS, BENCH_NS, owned_podgroup)
        jobs = Tracker(kube, JOBS, BENCH_NS, lambda o: trainjob_owner(o) is not None)
        pods = Tracker(kube, PODS, BENCH_NS, lambda o: True)
        placed = Tracker(kube, PODS, BENCH_NS, bound)
        raw_pods = Tracker(kube, PODS, RAW_NS, lambda o: True)
        trackers = [podgroups, jobs, pods, placed, raw_pods]
        for t in trackers:
            await t.start()
        before_adm = admission(apiserver_metrics(api))
        before, start = await op.scrape(), op.usage()
        t0 = time.monotonic()
        await kube.create(TRAINJOBS, BENCH_NS, big_trainjob(nodes))
        created = time.monotonic() - t0
        deadline = t0 + timeout
        pg_at = await podgroups.wait(1, deadline, "gang, PodGroup") - t0
        jobs_at = await jobs.wait(jobs_per, deadline, "gang, Jobs") - t0
        pods_at = await pods.wait(nodes, deadline, "gang, pods") - t0
        bound_at = await placed.wait(nodes, deadline, "gang, pods bound") - t0
        after = await wait_quiet(op, args.quiet_seconds, timeout)
        end = op.usage()
        adm = admission_delta(before_adm, admission(apiserver_metrics(api)))
        delta = write_delta(before, after)
        min_member = ((first_pg[0].get("spec") or {}).get("minMember")) if first_pg else None
        out: JSON = {
            "nodes": nodes,
            "create_seconds": round(created, 3),
            "podgroup_seconds": round(pg_at, 2),
            "podgroup_first_min_member": min_member,
            "podgroup_right_first_time": min_member == nodes,
            "jobs_seconds": round(jobs_at, 2),
            "pods_seconds": round(pods_at, 2),
            "pods_bound_seconds": round(bound_at, 2),
            "writes": sum(delta.values()),
            "writes_by_kind": per_trainjob(delta, 1),
            "cpu_seconds": round(end.cpu - start.cpu, 2),
            "rss_peak_mib": round(end.peak, 1),
            "admission": adm,
        }
        figures["operator"] = out
        print(f"operator: one TrainJob of {nodes} nodes on Volcano")
        print(f"  create (TrainJob webhook): {created * 1000:.0f} ms")
        print(
            f"  PodGroup:                  {pg_at:.2f} s (first seen with minMember {min_member}: "
            f"{'right first time' if min_member == nodes else 'WRONG'})"
        )
        print(f"  every Job ({jobs_per}):            {jobs_at:.2f} s")
        print(f"  every pod ({nodes}):          {pods_at:.2f} s; every pod bound {bound_at:.2f} s")
        shown = ", ".join(f"{k} {v:.0f}" for k, v in out["writes_by_kind"].items())
        print(f"  operator writes:           {out['writes']:.0f} ({shown})")
        print(f"  operator CPU:              {out['cpu_seconds']:.2f} s; peak RSS {out['rss_peak_mib']:.1f} MiB")
        for name, a in adm.items():
            print(f"  admission {name}: {a['calls']:.0f} calls, mean {a['mean_ms']:.2f} ms")
        sys.stdout.flush()

        # The Job controller alone: the same Jobs, unsuspended, in `raw`.
        items, _ = await kube.list(JOBS, BENCH_NS)
        t1 = time.monotonic()
        for job in items:
            if trainjob_owner(job) is None:
                continue
            copy_ = raw_copy(job, RAW_NS, "00000000-0000-0000-0000-000000000000")
            copy_["metadata"].pop("ownerReferences", None)
            copy_["spec"]["suspend"] = False
            await kube.create(JOBS, RAW_NS, copy_)
        raw_at = await raw_pods.wait(nodes, t1 + timeout, "Job controller alone, pods") - t1
        ratio = round(pods_at / raw_at, 3) if raw_at else None
        figures["job_controller"] = {"pods_seconds": round(raw_at, 2), "ratio": ratio}
        print(f"Job controller alone (the same Jobs in {RAW_NS}, no gang)")
        print(f"  every pod ({nodes}):          {raw_at:.2f} s")
        print(f"  ratio operator / Job controller, every pod: {ratio}")
        sys.stdout.flush()
    finally:
        for t in trackers:
            await t.stop()
        await kube.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags (``--help`` shows them)."""
    p = argparse.ArgumentParser(prog="python -m bench.gang", description=__doc__)
    p.add_argument("--nodes", type=int, default=1000, help="numNodes of the TrainJob")
    p.add_argument("--quiet-seconds", type=float, default=5, help="no operator write for this long = settled")
    p.add_argument("--timeout", type=float, default=900, help="seconds a phase may take before the run fails")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write every figure as JSON to PATH")
    args = p.parse_args(argv)
    if args.nodes < 1:
        p.error("--nodes must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the bench; 0 on success, 1 when a phase timed out."""
    args = parse_args(argv)
    figures: JSON = {"machine": machine(), "nodes": args.nodes}
    m = figures["machine"]
    print(
        f"machine: {m['cores']} cores, {m['memory_gib']:.1f} GiB memory; one TrainJob of {args.nodes} nodes", flush=True
    )
    # Room for every pod twice (the operator's and the Job controller's), 10 mCPU each.
    per_node = pods_per_node(2 * args.nodes)
    code = 0
    with tempfile.TemporaryDirectory(prefix="bench-gang-") as tmp:
        cluster = LocalCluster(
            Path(tmp),
            nodes=NODES,
            node_cpu="64",
            node_memory="256Gi",
            pods_per_node=per_node,
            volcano=True,
            extra_crds=[Path(__file__).resolve().parent.parent / "config" / "crd" / "bases"],
        )
        try:
            cluster.start()
            webhook, configs = webhook_args(ROOT, Path(tmp))
            extra = ["--gang-scheduler-name", "volcano", *webhook, "--max-nodes-per-job", str(max(1000, args.nodes))]
            op = CountedOperator(cluster.kubeconfig, BENCH_NS, Path(tmp) / "operator.log", args=extra)
            try:
                asyncio.run(measure(args, cluster, op, figures, configs))
            except PhaseTimeout as e:
                print(f"TIMEOUT: {e}", flush=True)
                figures["timeout"] = str(e)
                code = 1
            finally:
                op.stop()
        finally:
            cluster.stop()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

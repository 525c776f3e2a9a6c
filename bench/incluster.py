"""In-cluster memory: the operator as users install it, holding N kept TrainJobs under its memory limit.

``python -m bench.incluster --n 20000 --batch 2000`` starts the local cluster (no KWOK nodes, ServiceAccount
admission on: the operator's pods need their tokens) in a temporary directory, applies the CRDs of
``config/crd/bases``, starts two real nodes on this machine (kubelet + containerd,
:class:`localcluster.realnode.node.RealNodes`) and installs ``charts/trainer`` on them with the image built by
buildah (:class:`localcluster.incluster.Release`: 2 replicas, leader election). Only the image and the
nodeSelector are set: the resources are the chart's defaults (``values.yaml``), read back from the Deployment,
but for the memory limit ``--memory-limit`` gives (a curve past the default's reach). Then, as ``bench.burst
--keep --suspend`` does (its functions), the torch ClusterTrainingRuntime sample is applied and ``--n``
suspended TrainJobs (``numNodes: 2``) are created in namespace ``bench``, ``--batch`` at a time
(``--concurrency`` creates in flight, through the in-cluster admission webhook), and never deleted. A batch is
settled when every TrainJob has its Jobs and Service (as watches see them) and then the leader made no write
for ``--quiet-seconds`` (its ``trainer_apiserver_requests_total``, scraped from the leader pod's IP; its Lease
renewals, a PUT every 2 s, are not counted).

One row per settled batch (the first, ``kept`` 0, once the operator is quiet before any TrainJob):

- ``kept``: TrainJobs kept so far; ``children s``: seconds from the batch's first create to its last
  child seen; ``settled s``: to the end of the quiet window (the batch's time).
- ``leader RSS``: the leader's resident memory, MiB: ``process_resident_memory_bytes`` of its
  ``/metrics`` (pod IP, port 8080); from an image that does not export it, VmRSS of
  ``/proc/<pid>/status`` of the container's process on the host (the figure that metric reads). The line
  before the table says which it is.
- ``cgroup``: the leader container's memory cgroup (cgroup v1; found from the process's
  ``/proc/<pid>/cgroup``, memory controller): ``usage`` is ``memory.usage_in_bytes``, what the limit is
  enforced against; ``rss`` and ``cache`` are ``total_rss`` and ``total_cache`` of ``memory.stat``.
- ``standby``: the other replica's RSS and cgroup usage (a warm standby keeps the same caches).
- ``restarts``: restartCount of the leader's and the standby's container.

At the end: the least-squares slopes of the leader's RSS and cgroup usage in MiB per 1,000 TrainJobs
(over the rows after each batch); the peaks (highest row, the process's ``VmHWM`` and the cgroup's
``memory.max_usage_in_bytes``, which catch what rows miss); the limit, from the Deployment and from
``memory.limit_in_bytes``; ``memory.failcnt`` (times usage hit the limit); each pod's restartCount and
``lastState``. ``--json PATH`` writes every figure. The release is uninstalled, the nodes and the cluster
stopped in every case; the cluster's directory (logs) is kept when the run fails.

Exits 1 when a container restarted (restartCount > 0, a ``lastState`` such as OOMKilled, or a pod
replaced), when the limit was reached (a cgroup's ``max_usage_in_bytes`` at the limit, ``failcnt`` > 0,
or an RSS above it) or when a batch did not settle within ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bench.burst import (
    BENCH_NS,
    QUEUE_METRIC,
    WORKERS_METRIC,
    Counts,
    Run,
    Tracker,
    create_all,
    gauge_sum,
    jobs_per_trainjob,
    load,
    ours,
    parse_reconciles,
    parse_requests,
    requests_metric,
    slope_per_1000,
    trainjobs,
    wait_quiet,
)
from bench.cluster import CRDS, HelpFormatter, PhaseTimeout, Usage, machine, read_usage
from localcluster import LocalCluster
from localcluster.incluster import DEPLOYMENT, NAMESPACE, Release, installed
from trainer.api.kinds import NAMESPACES, PODS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube
from trainer.framework.resources import parse_quantity
from trainer.wiring.settings import DEFAULT_EVENT_LOOP, EVENT_LOOPS

MIB = 1 << 20
METRICS_PORT = 8080
"""The chart's ``metrics.port`` (default), served on the pod IP."""
RSS_METRIC = "process_resident_memory_bytes"
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
"""The cgroup v1 memory hierarchy (the real nodes' kubelets use the cgroupfs driver)."""
CONTAINER = "manager"
"""The operator's container in the chart's pod."""
LEASE_RESOURCE = "leases"
"""Requests on this resource are the leader's Lease renewals: not counted as writes when deciding quiet."""


# --- pure parts: metrics, /proc and cgroup text, pod status ------------------------------------------


def process_rss(text: str) -> float | None:
    """``process_resident_memory_bytes`` in a Prometheus text exposition, in MiB; None when absent."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == RSS_METRIC:
                return float(s.value) / MIB
    return None


def memory_cgroup_path(cgroup: str) -> str | None:
    """The memory controller's path in the text of ``/proc/<pid>/cgroup`` (cgroup v1 lines
    ``N:controllers:/path``); None when it has no memory line."""
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            return parts[2]
    return None


def memory_stat(text: str) -> dict[str, int]:
    """The ``name value`` lines of ``memory.stat`` (or ``memory.oom_control``)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out


@dataclass(frozen=True)
class OperatorPod:
    """One pod of the Deployment as its status says: name, IP, node, Ready, the ``manager``
    container's id (without ``containerd://``), restartCount and lastState."""

    name: str
    ip: str
    node: str
    ready: bool
    container_id: str | None
    restarts: int
    last_state: JSON

    @classmethod
    def of(cls, pod: JSON) -> OperatorPod:
        status = pod.get("status") or {}
        container: JSON = next((c for c in status.get("containerStatuses") or [] if c.get("name") == CONTAINER), {})
        cid = str(container.get("containerID") or "").partition("://")[2] or None
        return cls(
            name=str(pod["metadata"]["name"]),
            ip=str(status.get("podIP") or ""),
            node=str((pod.get("spec") or {}).get("nodeName") or ""),
            ready=bool(container.get("ready")),
            container_id=cid,
            restarts=int(container.get("restartCount") or 0),
            last_state=dict(container.get("lastState") or {}),
        )


# --- the container as the host sees it ---------------------------------------------------------------


@dataclass(frozen=True)
class CgroupMemory:
    """One reading of a container's memory cgroup (v1), in bytes; ``oom_kills`` from
    ``memory.oom_control`` (None where the kernel does not count them)."""

    path: Path
    usage: int
    max_usage: int
    limit: int
    failcnt: int
    rss: int
    cache: int
    oom_kills: int | None

    def figures(self) -> JSON:
        return {
            "cgroup": str(self.path),
            "usage_mib": round(self.usage / MIB, 1),
            "max_usage_mib": round(self.max_usage / MIB, 1),
            "limit_mib": round(self.limit / MIB, 1),
            "failcnt": self.failcnt,
            "total_rss_mib": round(self.rss / MIB, 1),
            "total_cache_mib": round(self.cache / MIB, 1),
            "oom_kills": self.oom_kills,
        }


def read_cgroup(path: Path) -> CgroupMemory:
    """The memory cgroup at ``path`` now. Raises ``OSError`` when it is gone."""
    stat = memory_stat((path / "memory.stat").read_text())
    oom = memory_stat((path / "memory.oom_control").read_text())

    def number(name: str) -> int:
        return int((path / name).read_text())

    return CgroupMemory(
        path=path,
        usage=number("memory.usage_in_bytes"),
        max_usage=number("memory.max_usage_in_bytes"),
        limit=number("memory.limit_in_bytes"),
        failcnt=number("memory.failcnt"),
        rss=stat.get("total_rss", 0),
        cache=stat.get("total_cache", 0),
        oom_kills=oom.get("oom_kill"),
    )


def find_container(container_id: str) -> tuple[int, Path] | None:
    """The lowest host pid in the container ``container_id`` (its entrypoint, the operator) and the
    container's memory cgroup directory: the processes whose ``/proc/<pid>/cgroup`` memory path ends
    with the id (the kubelet names the container's cgroup after it). None when no process is in it."""
    found: list[tuple[int, str]] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            path = memory_cgroup_path((proc / "cgroup").read_text())
        except OSError:
            continue
        if path is not None and path.rstrip("/").endswith("/" + container_id):
            found.append((int(proc.name), path))
    if not found:
        return None
    pid, path = min(found)
    return pid, CGROUP_MEMORY / path.lstrip("/")


@dataclass(frozen=True)
class Sample:
    """One pod's memory now: RSS (MiB, from ``rss_source``: ``metrics`` or ``proc``), the process's
    usage (CPU, RSS, VmHWM; None when the process was not found) and its container's cgroup."""

    pod: OperatorPod
    rss: float | None
    rss_source: str
    usage: Usage | None
    cgroup: CgroupMemory | None

    def figures(self) -> JSON:
        return {
            "pod": self.pod.name,
            "node": self.pod.node,
            "restarts": self.pod.restarts,
            "rss_mib": None if self.rss is None else round(self.rss, 1),
            "rss_source": self.rss_source,
            "vmhwm_mib": None if self.usage is None else round(self.usage.peak, 1),
            "cpu_seconds": None if self.usage is None else round(self.usage.cpu, 1),
            **(self.cgroup.figures() if self.cgroup else {}),
        }


# --- the operator's pods, read like bench.burst's operator process ----------------------------------


class OperatorPods:
    """The chart's pods: the leader (the Lease holder) is what :func:`bench.burst.wait_quiet` reads
    (:class:`bench.burst.Measured`): its requests from ``/metrics`` at its pod IP, its process's usage
    from the host's ``/proc``. :meth:`refresh` reads the pods and the Lease again."""

    metric: str | None = None

    def __init__(self, kube: Kube, release: Release, http: aiohttp.ClientSession) -> None:
        self.kube, self.release, self.http = kube, release, http
        self.pods: dict[str, OperatorPod] = {}
        self.leader_name: str | None = None
        self.seen: set[str] = set()
        """Every pod name seen: more than the replicas means a pod was replaced."""

    async def refresh(self) -> None:
        items, _ = await self.kube.list(PODS, NAMESPACE)
        pods = [OperatorPod.of(p) for p in items if str(p["metadata"]["name"]).startswith(DEPLOYMENT + "-")]
        self.pods = {p.name: p for p in pods}
        self.seen.update(self.pods)
        self.leader_name = await asyncio.to_thread(self.release.leader)

    @property
    def leader(self) -> OperatorPod:
        """The leader pod (as of the last :meth:`refresh`). Raises ``RuntimeError`` when there is none."""
        if self.leader_name is None or self.leader_name not in self.pods:
            raise RuntimeError("no operator pod holds the Lease")
        return self.pods[self.leader_name]

    @property
    def standby(self) -> OperatorPod | None:
        return next((p for n, p in sorted(self.pods.items()) if n != self.leader_name), None)

    @property
    def pid(self) -> int:
        """The host pid of the leader's operator process. Raises ``RuntimeError`` when not found."""
        cid = self.leader.container_id
        found = find_container(cid) if cid else None
        if found is None:
            raise RuntimeError(f"no process of {self.leader.name}'s container {cid} on this machine")
        return found[0]

    async def text(self, pod: OperatorPod) -> str:
        """``pod``'s ``/metrics`` text. Raises ``aiohttp.ClientError`` or ``TimeoutError``."""
        async with self.http.get(f"http://{pod.ip}:{METRICS_PORT}/metrics") as r:
            r.raise_for_status()
            return await r.text()

    async def metrics(self) -> str:
        """The leader's ``/metrics`` text; while it does not answer (it restarts, the Lease moves) the
        pods are read again every second, for at most 60 s."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return await self.text(self.leader)
            except (aiohttp.ClientError, TimeoutError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(1)
                await self.refresh()

    async def scrape(self) -> Counts:
        """The leader's requests but those on :data:`LEASE_RESOURCE` (its renewals, every 2 s, would
        never let it be quiet)."""
        text = await self.metrics()
        if self.metric is None:
            self.metric = requests_metric(text)
        return {k: v for k, v in parse_requests(text, self.metric).items() if k[1] != LEASE_RESOURCE}

    async def reconciles(self) -> float:
        return parse_reconciles(await self.metrics())

    async def queue(self) -> tuple[float, float]:
        text = await self.metrics()
        return gauge_sum(text, QUEUE_METRIC, "name", ["trainjob"]), gauge_sum(
            text, WORKERS_METRIC, "controller", ["trainjob"]
        )

    def usage(self) -> Usage:
        return read_usage(self.pid)

    async def wait_ready(self, timeout: float) -> None:
        """Until every pod is Ready, one holds the Lease and its ``/metrics`` answers. Raises
        :class:`bench.cluster.PhaseTimeout` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            await self.refresh()
            try:
                if self.pods and all(p.ready for p in self.pods.values()):
                    await self.text(self.leader)
                    return
            except (aiohttp.ClientError, TimeoutError, RuntimeError):
                pass
            if time.monotonic() > deadline:
                raise PhaseTimeout(f"operator pods not Ready with a leader after {timeout:.0f} s")
            await asyncio.sleep(1)

    async def sample(self, pod: OperatorPod) -> Sample:
        """``pod``'s memory now: RSS from its metrics, else from the host's ``/proc``; its cgroup."""
        rss: float | None = None
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            rss = process_rss(await self.text(pod))
        source = "metrics"
        found = find_container(pod.container_id) if pod.container_id else None
        usage = cgroup = None
        if found is not None:
            pid, path = found
            with contextlib.suppress(OSError):
                usage, cgroup = read_usage(pid), read_cgroup(path)
        if rss is None:
            source, rss = "proc", None if usage is None else usage.rss
        return Sample(pod, rss, source, usage, cgroup)


# --- the Deployment ----------------------------------------------------------------------------------


def deployment_resources(release: Release) -> JSON:
    """The ``manager`` container's ``resources`` in the Deployment (as installed)."""
    deployment = json.loads(release.kubectl("get", "deployment", DEPLOYMENT, "-o", "json").stdout)
    containers = deployment["spec"]["template"]["spec"]["containers"]
    container = next(c for c in containers if c["name"] == CONTAINER)
    return dict(container.get("resources") or {})


# --- the run -----------------------------------------------------------------------------------------


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def row_of(kept: int, children: float | None, settled: float | None, op: OperatorPods, samples: list[Sample]) -> JSON:
    """The figures of one row: the leader's sample first, then the standby's."""
    leader = samples[0]
    return {
        "kept": kept,
        "children_seconds": None if children is None else round(children, 2),
        "settled_seconds": None if settled is None else round(settled, 2),
        "leader": leader.figures(),
        "standby": samples[1].figures() if len(samples) > 1 else None,
        "leader_pod": op.leader_name,
    }


def print_row(row: JSON) -> None:
    lead, standby = row["leader"], row["standby"] or {}
    seconds = "".join(f"{mib(row[k]):>11}" for k in ("children_seconds", "settled_seconds"))
    restarts = f"{lead['restarts']}/{standby.get('restarts', '-')}"
    print(
        f"{row['kept']:>7}{seconds} |"
        + "".join(f"{mib(lead.get(k)):>9}" for k in ("rss_mib", "usage_mib", "total_rss_mib", "total_cache_mib"))
        + " |"
        + "".join(f"{mib(standby.get(k)):>9}" for k in ("rss_mib", "usage_mib"))
        + f" | {restarts:>9}",
        flush=True,
    )


async def take_row(op: OperatorPods, kept: int, children: float | None, settled: float | None) -> JSON:
    await op.refresh()
    pods = [op.leader] + ([op.standby] if op.standby else [])
    samples = [await op.sample(p) for p in pods]
    return row_of(kept, children, settled, op, samples)


async def measure(args: argparse.Namespace, cluster: LocalCluster, release: Release, figures: JSON) -> int:
    """The batches and the summary; figures go to ``figures``. Returns 0, or 1 on a restart, the limit
    reached or a batch that did not settle in time."""
    timeout = float(args.timeout)
    kube = await Kube.connect(str(cluster.kubeconfig))
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    op = OperatorPods(kube, release, http)
    runtime = load("torch-distributed.yaml")
    jobs_per = jobs_per_trainjob(runtime)
    run = Run(args, cluster.kubeconfig, kube, op, jobs_per, ours(jobs_per), figures=figures)
    rows: list[JSON] = []
    figures["rows"] = rows
    failures: list[str] = []
    try:
        await op.wait_ready(timeout)
        await kube.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BENCH_NS}})
        await kube.apply(runtime, "bench")
        resources = deployment_resources(release)
        limit = float(parse_quantity(resources["limits"]["memory"])) / MIB
        figures["resources"] = resources
        figures["limit_mib"] = limit
        owned = run.side.owner
        run.children = [Tracker(kube, res, BENCH_NS, lambda o: owned(o) is not None, owned) for res in run.side.kinds]
        for t in run.children:
            await t.start()
        await wait_quiet(op, args.quiet_seconds, timeout)
        first_leader = op.leader_name
        figures["pods_at_start"] = sorted(op.pods)
        rows.append(await take_row(op, 0, None, None))
        source = rows[0]["leader"]["rss_source"]
        figures["rss_source"] = source
        print(
            f"operator: {', '.join(sorted(op.pods))} (leader {first_leader}); resources {json.dumps(resources)}",
        )
        print(
            "RSS: "
            + (
                f"{RSS_METRIC} of the pod's /metrics"
                if source == "metrics"
                else f"VmRSS of the container's process (host /proc/<pid>/status): the operator exports no {RSS_METRIC}"
            )
        )
        print(f"cgroup of the leader's container: {rows[0]['leader'].get('cgroup')}")
        print(
            "cgroup usage = memory.usage_in_bytes (what the limit applies to); rss, cache = total_rss, total_cache "
            "of memory.stat. All memory in MiB."
        )
        print(
            f"{'kept':>7}{'children s':>11}{'settled s':>11} |{'leader':>9}{'cgroup':>9}{'cg rss':>9}{'cg cache':>9} |"
            f"{'standby':>9}{'cgroup':>9} |  restarts"
        )
        print(f"{'':>7}{'':>11}{'':>11} |{'RSS':>9}{'usage':>9}{'':>9}{'':>9} |{'RSS':>9}{'usage':>9} | lead/stby")
        print_row(rows[0])
        try:
            for first in range(0, args.n, args.batch):
                batch = trainjobs(range(first, min(args.n, first + args.batch)), BENCH_NS, True)
                kept = first + len(batch)
                t0, _ = await create_all(kube, batch, args.concurrency)
                await run.wait_children(kept, t0, f"children of {kept}")
                await wait_quiet(op, args.quiet_seconds, timeout)
                settled = time.monotonic() - t0
                rows.append(await take_row(op, kept, run.children_seconds(t0), settled))
                print_row(rows[-1])
                if rows[-1]["leader"]["restarts"] or (rows[-1]["standby"] or {}).get("restarts"):
                    failures.append(f"a container restarted by {kept} TrainJobs kept")
                    break
        except PhaseTimeout as e:
            print(f"TIMEOUT: {e}", flush=True)
            figures["timeout"] = str(e)
            failures.append(f"timeout: {e}")
        except (aiohttp.ClientError, TimeoutError, RuntimeError) as e:  # the leader's metrics, gone for 60 s
            print(f"ERROR: {type(e).__name__}: {e}", flush=True)
            failures.append(f"{type(e).__name__}: {e}")
        await op.refresh()
        failures += summarize(op, rows, limit, first_leader, figures)
    finally:
        for t in run.children:
            await t.stop()
        await http.close()
        await kube.close()
    figures["failures"] = failures
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


def summarize(op: OperatorPods, rows: list[JSON], limit: float, first_leader: str | None, figures: JSON) -> list[str]:
    """Slopes, peaks, the limit, every pod's restarts and lastState (printed and in ``figures``); the
    failures found."""
    failures: list[str] = []
    after = rows[1:]
    slopes: JSON = {}
    for key in ("rss_mib", "usage_mib"):
        points = [(float(r["kept"]), float(r["leader"][key])) for r in after if r["leader"].get(key) is not None]
        try:
            slopes[key] = round(slope_per_1000(points), 2)
        except statistics.StatisticsError:
            slopes[key] = None
    figures["slope_mib_per_1000"] = slopes
    pods = [r[side] for r in rows for side in ("leader", "standby") if r[side]]
    peaks: JSON = {
        "rss_mib": max((p["rss_mib"] for p in pods if p.get("rss_mib") is not None), default=None),
        "cgroup_usage_mib": max((p["usage_mib"] for p in pods if p.get("usage_mib") is not None), default=None),
    }
    final: JSON = {}
    for name, pod in sorted(op.pods.items()):
        sample = rows[-1]["leader"] if rows and rows[-1]["leader"]["pod"] == name else (rows[-1]["standby"] or {})
        final[name] = {
            "leader": name == op.leader_name,
            "restarts": pod.restarts,
            "last_state": pod.last_state,
            "vmhwm_mib": sample.get("vmhwm_mib"),
            "max_usage_mib": sample.get("max_usage_mib"),
            "failcnt": sample.get("failcnt"),
            "oom_kills": sample.get("oom_kills"),
            "cgroup_limit_mib": sample.get("limit_mib"),
        }
    peaks["vmhwm_mib"] = max((f["vmhwm_mib"] for f in final.values() if f["vmhwm_mib"] is not None), default=None)
    peaks["cgroup_max_usage_mib"] = max(
        (f["max_usage_mib"] for f in final.values() if f["max_usage_mib"] is not None), default=None
    )
    figures["peak"] = peaks
    figures["pods"] = final
    figures["leader_changed"] = op.leader_name != first_leader

    def shown(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    print(
        f"slope (least squares over the rows after each batch), MiB per 1,000 TrainJobs kept: leader RSS "
        f"{shown(slopes['rss_mib'])}, leader cgroup usage {shown(slopes['usage_mib'])}"
    )
    print(
        f"peak of either pod: RSS {mib(peaks['rss_mib'])} MiB in the rows, {mib(peaks['vmhwm_mib'])} MiB VmHWM; "
        f"cgroup usage {mib(peaks['cgroup_usage_mib'])} MiB in the rows, {mib(peaks['cgroup_max_usage_mib'])} "
        "MiB memory.max_usage_in_bytes"
    )
    cgroup_limits = sorted({f["cgroup_limit_mib"] for f in final.values() if f["cgroup_limit_mib"] is not None})
    highest = max((v for v in (peaks["cgroup_max_usage_mib"], peaks["rss_mib"]) if v is not None), default=0.0)
    print(
        f"limit: {limit:.0f} MiB (Deployment resources.limits.memory); memory.limit_in_bytes "
        f"{', '.join(f'{v:.0f}' for v in cgroup_limits) or '-'} MiB; headroom at the peak "
        f"{limit - highest:.0f} MiB (limit minus the higher of the two peaks)"
    )
    for name, f in final.items():
        print(
            f"pod {name}{' (leader)' if f['leader'] else ''}: restartCount {f['restarts']}, lastState "
            f"{json.dumps(f['last_state'])}, failcnt {f['failcnt']}, oom_kill {f['oom_kills']}"
        )
    if op.leader_name != first_leader:
        print(f"note: the Lease moved from {first_leader} to {op.leader_name}")
    replaced = sorted(op.seen - set(figures.get("pods_at_start") or []))
    if replaced:
        failures.append(f"pods replaced: {replaced}")
    for name, f in final.items():
        if f["restarts"] or f["last_state"]:
            failures.append(f"{name}: restartCount {f['restarts']}, lastState {json.dumps(f['last_state'])}")
        if f["failcnt"] or f["oom_kills"]:
            failures.append(f"{name}: memory.failcnt {f['failcnt']}, oom_kill {f['oom_kills']}")
        if f["max_usage_mib"] is not None and f["max_usage_mib"] >= limit:
            failures.append(f"{name}: memory.max_usage_in_bytes {f['max_usage_mib']} MiB reached the limit")
    if peaks["rss_mib"] is not None and peaks["rss_mib"] > limit:
        failures.append(f"RSS {peaks['rss_mib']} MiB above the limit {limit:.0f} MiB")
    return failures


# --- main --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags (``--help`` shows them)."""
    p = argparse.ArgumentParser(prog="python -m bench.incluster", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--n", type=int, default=20000, help="TrainJobs to create and keep")
    p.add_argument("--batch", type=int, default=2000, help="TrainJobs per batch (one row each)")
    p.add_argument("--concurrency", type=int, default=32, help="create requests in flight")
    p.add_argument("--quiet-seconds", type=float, default=5, help="no leader write for this long = settled")
    p.add_argument("--timeout", type=float, default=900, help="seconds a batch may take to settle")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write every figure as JSON to PATH")
    p.add_argument(
        "--memory-limit",
        metavar="QUANTITY",
        help="the chart's resources.limits.memory (e.g. 768Mi) instead of its default, for a curve past it",
    )
    args = p.parse_args(argv)
    if args.n < 1 or args.batch < 1 or args.concurrency < 1:
        p.error("--n, --batch and --concurrency must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the bench; 0 on success, 1 on a restart, the limit reached or a timeout."""
    args = parse_args(argv)
    figures: JSON = {"machine": machine(), "n": args.n, "batch": args.batch, "concurrency": args.concurrency}
    m = figures["machine"]
    limit = "default resources" if args.memory_limit is None else f"memory limit {args.memory_limit}"
    print(
        f"machine: {m['cores']} cores, {m['memory_gib']:.1f} GiB memory; N = {args.n} suspended TrainJobs "
        f"(numNodes 2) kept, batches of {args.batch}, {args.concurrency} creates in flight; the operator in-cluster "
        f"(charts/trainer, {limit}, 2 replicas on 2 real nodes)",
        flush=True,
    )
    state = Path(tempfile.mkdtemp(prefix="icbench-cluster-"))
    work = Path(tempfile.mkdtemp(prefix="icbench-"))  # short: containerd's socket paths must fit
    cluster = LocalCluster(state, nodes=0, service_account_admission=True, extra_crds=[CRDS])
    code = 1
    try:
        cluster.start()
        values = {} if args.memory_limit is None else {"resources.limits.memory": args.memory_limit}
        with installed(cluster, work, values=values) as release:
            figures["install"] = dict(release.timings)
            figures["image"] = None if release.image is None else release.image.name
            with asyncio.Runner(loop_factory=EVENT_LOOPS[DEFAULT_EVENT_LOOP]) as runner:
                code = runner.run(measure(args, cluster, release, figures))
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
        if code == 0:
            shutil.rmtree(state, ignore_errors=True)
        else:
            print(f"cluster state and logs kept in {state}", file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

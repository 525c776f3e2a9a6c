"""Burst: how fast, how cheaply and how leanly the operator turns N new TrainJobs into their children.

``python -m bench.burst --n 500`` starts the local cluster (KWOK nodes, the binaries of
``localcluster/build.sh``) in a temporary directory with room for every pod, applies the torch
ClusterTrainingRuntime sample, starts the operator as its own process with its defaults, watching only
namespace ``bench``, and then runs two phases, in this order:

1. **operator**: N TrainJobs (``numNodes: 2``) are created in ``bench`` as fast as the apiserver
   takes them (``--concurrency`` requests in flight). Printed: the time from the first create until
   every child exists (Jobs, Services and the other objects a TrainJob owns, as watches see them) and
   until every TrainJob is ``Complete``; the operator's writes per TrainJob by verb and resource (delta
   of its ``trainer_apiserver_requests_total``; every verb but GET, LIST and WATCH is a write); its
   reconciles per TrainJob (delta of ``controller_runtime_reconcile_total{controller="trainjob"}``); its CPU
   seconds (``/proc/<pid>/stat``; of them, its garbage collector's: ``trainer_gc_seconds_total``) and RSS
   (``/proc/<pid>/status``: at start, after, peak ``VmHWM``);
   then its writes per minute over ``--idle-seconds`` once everything settled.
2. **raw-client baseline**: the same N TrainJobs and, for each, the children the operator made, read
   back and stripped of server-set fields (:mod:`bench.raw_client`), are POSTed in namespace ``raw``
   (not watched by the operator) with the same concurrency; the time until the last child POST
   returned, over the operator's time-to-children, is the printed ratio (1.0: as fast as the raw
   client). The raw Jobs then run to Complete, so the cluster is quiet when the run ends.

``--keep`` replaces both phases by a memory curve: ``--n`` TrainJobs are created ``--batch`` at a
time and never deleted; after each batch is Complete (with ``--suspend``: suspended, so only its
children must exist) and the operator has gone quiet, its RSS is recorded. Printed: the curve
(TrainJobs kept, RSS MiB) and its least-squares slope in MiB per 1,000 TrainJobs.

``--compare REF`` (a git ref of this repository: ``HEAD~5``, a commit hash) measures twice, one run
after the other, each on its own fresh cluster: first the operator of REF, from a temporary
``git worktree add --detach`` of it (cwd and ``PYTHONPATH`` the worktree, the same interpreter, the
CRDs of its ``config/crd/bases``; removed with ``git worktree remove --force`` after its run), then the
operator of this checkout (the raw-client baseline runs for this one only). Both blocks are printed,
labelled with their short commit hashes (``-dirty``: this checkout has uncommitted changes), then one
line per figure with both values and their ratio this/REF: CPU ms and writes per TrainJob, the RSS slope
per 1,000 TrainJobs (``--keep``), peak RSS, the seconds to every child and to every ``Complete`` (with
``--keep``: summed over the batches). Only the flags every version of the operator has are passed
(``--namespace``, ``--kubeconfig``, ``--log-format``, ``--metrics-bind-address``,
``--health-probe-bind-address``). An operator without ``trainer_apiserver_requests_total`` is read
from ``rest_client_requests_total`` instead, by method only (every method but GET writes; the
resource shows as ``*``), and its block says so.

The machine (cores, memory) and N come first; ``--json PATH`` writes every figure as JSON too (with
``--compare``: both runs, under ``ref`` and ``this``, and the ``ratios``). Exits 1 when a phase times
out (``--timeout``), naming the phase and how many objects it saw, and when this checkout's operator
wrote more than ``--max-writes W`` times per TrainJob (``FAIL:`` and both figures printed last), so a
regression of writes fails the run that causes it.

``--webhook`` runs ours with its admission webhook on, as the chart installs it: served on a loopback port
(``--webhook-host 127.0.0.1 --webhook-port``), with the webhook configurations of its checkout
(``python -m trainer.webhook.server --url``) applied before it starts, so that the apiserver calls it for
every TrainJob created; upstream's side is unchanged. ``--status-server`` runs ours with its status server
on (``--status-server-port``, a free port), as the chart installs it: each TrainJob then gets the ConfigMap
``<trainjob>-tls-config`` with the server's CA, one more write per TrainJob (not cached by the operator).
The chart's defaults are both flags (but for leader election, whose Lease renewals would never let the
operator go quiet, and the namespaces watched).

``--profile PATH`` runs this checkout's operator under cProfile timed by its CPU time
(:mod:`bench.cpu_profile`); ``--tracemalloc PATH`` with tracemalloc on (:mod:`bench.mem_profile`), and
prints where its memory is once the burst is quiet (with ``--keep``: after the last batch).
``--apiserver-profile DIR`` (the burst of this checkout's operator; refused with ``--keep`` and ``--restart``)
starts the cluster's apiserver with its Go profiles on, profiles its CPU from the first create to every
status (or ``Complete``) into DIR, and prints, per window, where it went (:mod:`bench.apiserver_profile`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.apiserver_profile import Profiler, print_places
from bench.cluster import (
    HelpFormatter,
    Operator,
    PhaseTimeout,
    Usage,
    local_cluster,
    machine,
    pods_per_node,
    read_usage,
)
from bench.cluster_load import Snapshot, print_windows, snapshot, window
from bench.mem_profile import top
from bench.raw_client import CHILD_KINDS, RawController, owned_children, trainjob_owner
from bench.upstream import (
    TORCH_RUNTIME,
    TRAINER_CONTROLLER,
    Upstream,
    ensure_upstream,
    jobset_version,
    upstream_owner,
)
from localcluster import ROOT, LocalCluster
from localcluster.client import condition
from localcluster.cluster import free_ports
from localcluster.pki import Pki
from trainer.api.kinds import JOBS, JOBSETS, NAMESPACES, SERVICES, TRAINJOBS, Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.wiring.settings import DEFAULT_EVENT_LOOP, EVENT_LOOPS

SAMPLES = ROOT / "config" / "samples"
BENCH_NS, RAW_NS = "bench", "raw"
READ_VERBS = frozenset({"GET", "LIST", "WATCH"})
"""Verbs of ``trainer_apiserver_requests_total`` that read; every other one writes. GET is also the
only reading method of ``rest_client_requests_total`` (lists and watches are GETs)."""
Counts = dict[tuple[str, str, str], float]
"""``trainer_apiserver_requests_total`` samples: ``(verb, resource, code) -> requests``."""
REQUESTS_METRIC = "trainer_apiserver_requests_total"
"""Requests of the operator by verb and resource (the apiserver's ``apiserver_request_total`` labels)."""
RECONCILES_METRIC = "controller_runtime_reconcile_total"
GC_METRIC = "trainer_gc_seconds_total"
"""The operator's garbage collection seconds by generation (:mod:`trainer.framework.gc_time`)."""
"""Reconciles by ``controller`` and ``result`` (controller-runtime's name)."""
REST_METRIC = "rest_client_requests_total"
"""Requests by ``method``, ``code`` and ``host`` (client-go's series), which every version of the operator
exports: the fallback when :data:`REQUESTS_METRIC` is missing."""
QUEUE_METRIC, WORKERS_METRIC = "workqueue_depth", "controller_runtime_active_workers"
"""Items waiting in a controller's queue (by ``name``) and its reconciles running (by ``controller``)."""
ANY_RESOURCE = "*"
"""The resource of the rows read from :data:`REST_METRIC`, which has none."""


# --- pure parts: metrics text, writes per TrainJob, the slope ----------------------------------------


def requests_metric(text: str) -> str:
    """The metric to count an operator's requests by, from its Prometheus text exposition:
    :data:`REQUESTS_METRIC` when the text has that family (samples or only its ``# TYPE`` line), else
    :data:`REST_METRIC`. Raises ``ValueError`` when it has neither, or on text the Prometheus parser
    (prometheus_client ``parser.text_string_to_metric_families``) refuses."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)  # a counter's family drops "_total"; its samples keep it
        names.update(s.name for s in family.samples)
    for metric in (REQUESTS_METRIC, REST_METRIC):
        if metric in names or metric.removesuffix("_total") in names:
            return metric
    raise ValueError(f"neither {REQUESTS_METRIC} nor {REST_METRIC} in the metrics")


def parse_requests(text: str, metric: str = REQUESTS_METRIC) -> Counts:
    """The samples of ``metric`` in a Prometheus text exposition, by ``(verb, resource, code)``; other
    metrics are ignored. With :data:`REST_METRIC` the verb is the HTTP ``method`` and the resource
    :data:`ANY_RESOURCE` (every ``host`` summed). Raises ``ValueError`` on another ``metric`` and on
    text the Prometheus parser (prometheus_client ``parser.text_string_to_metric_families``) refuses."""
    if metric not in (REQUESTS_METRIC, REST_METRIC):
        raise ValueError(f"no requests metric {metric!r}")
    out: Counts = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name != metric:
                continue
            if metric == REQUESTS_METRIC:
                key = (s.labels.get("verb", ""), s.labels.get("resource", ""), s.labels.get("code", ""))
            else:
                key = (s.labels.get("method", ""), ANY_RESOURCE, s.labels.get("code", ""))
            out[key] = out.get(key, 0.0) + float(s.value)
    return out


def parse_reconciles(text: str, controller: str = "trainjob") -> float:
    """The reconciles of ``controller`` so far (every result summed) in a Prometheus text exposition:
    the samples of :data:`RECONCILES_METRIC`; 0 when it has none. Raises ``ValueError`` on text the
    Prometheus parser refuses."""
    return sum(
        float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == RECONCILES_METRIC and s.labels.get("controller") == controller
    )


def write_delta(before: Counts, after: Counts) -> dict[tuple[str, str], float]:
    """Writes made between two scrapes, by ``(verb, resource)`` (every code summed; reads, see
    :data:`READ_VERBS`, and rows that did not move left out)."""
    out: dict[tuple[str, str], float] = {}
    for key in set(before) | set(after):
        verb, resource, _code = key
        diff = after.get(key, 0.0) - before.get(key, 0.0)
        if verb not in READ_VERBS and diff:
            out[(verb, resource)] = out.get((verb, resource), 0.0) + diff
    return {k: v for k, v in out.items() if v}


def read_delta(before: Counts, after: Counts) -> dict[str, float]:
    """Reads (:data:`READ_VERBS`) made between two scrapes, keyed ``"VERB resource"`` (every code summed,
    rows that did not move left out), largest first."""
    out: dict[str, float] = {}
    for key in set(before) | set(after):
        verb, resource, _code = key
        diff = after.get(key, 0.0) - before.get(key, 0.0)
        if verb in READ_VERBS and diff:
            out[f"{verb} {resource}"] = out.get(f"{verb} {resource}", 0.0) + diff
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def writes_total(counts: Counts) -> float:
    """Every write in ``counts`` (a scrape), all codes."""
    return sum(v for (verb, _r, _c), v in counts.items() if verb not in READ_VERBS)


def per_trainjob(delta: dict[tuple[str, str], float], n: int) -> dict[str, float]:
    """``delta`` (from :func:`write_delta`) divided by ``n`` TrainJobs, keyed ``"VERB resource"``,
    largest first. Raises ``ValueError`` when ``n`` < 1."""
    if n < 1:
        raise ValueError(f"per TrainJob needs n >= 1, got {n}")
    rows = sorted(delta.items(), key=lambda kv: (-kv[1], kv[0]))
    return {f"{verb} {resource}": total / n for (verb, resource), total in rows}


def slope_per_1000(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(TrainJobs, MiB)`` points, in MiB per 1,000 TrainJobs
    (``statistics.linear_regression``). Raises ``statistics.StatisticsError`` with fewer than two
    points or when every x is the same."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return statistics.linear_regression(xs, ys).slope * 1000


def create_to_children(created: dict[str, float], children: Iterable[dict[str, float]]) -> list[float]:
    """Per TrainJob of ``created`` (name -> monotonic time its create was answered) that has a child in
    ``children`` (name -> when its last child of one kind was seen, one mapping per kind): seconds from
    its create to its last child, in ``created`` order. A child seen before its create was answered
    counts as 0 s."""
    last: dict[str, float] = {}
    for kind in children:
        for name, t in kind.items():
            last[name] = max(t, last.get(name, t))
    return [max(0.0, last[name] - t) for name, t in created.items() if name in last]


def tail(seconds: list[float]) -> dict[str, float] | None:
    """``{"median", "p99", "max"}`` of ``seconds`` (p99: ``statistics.quantiles(n=100,
    method="inclusive")``, the 99th cut point), rounded to 3 decimals; ``None`` when empty."""
    if not seconds:
        return None
    p99 = statistics.quantiles(seconds, n=100, method="inclusive")[98] if len(seconds) > 1 else seconds[0]
    return {"median": round(statistics.median(seconds), 3), "p99": round(p99, 3), "max": round(max(seconds), 3)}


def gauge_sum(text: str, metric: str, label: str, values: Iterable[str] | None = None) -> float:
    """The sum of the samples of ``metric`` in a Prometheus text exposition whose ``label`` is one of
    ``values`` (every sample with ``values`` ``None``); 0 when there is none. Raises ``ValueError`` on
    text the Prometheus parser refuses."""
    wanted = None if values is None else set(values)
    return sum(
        float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == metric and (wanted is None or s.labels.get(label) in wanted)
    )


COMPARED = (
    ("cpu_ms_per_trainjob", "CPU ms per TrainJob"),
    ("writes_per_trainjob", "writes per TrainJob"),
    ("reconciles_per_trainjob", "reconciles per TrainJob"),
    ("rss_slope_mib_per_1000", "RSS slope, MiB per 1,000 TrainJobs"),
    ("rss_peak_mib", "peak RSS, MiB"),
    ("children_seconds", "seconds to every child"),
    ("complete_seconds", "seconds to every Complete"),
)
"""The figures ``--compare`` sets side by side: ``(key of`` :func:`summary` ``, label)``."""


def ratio(this: float | None, ref: float | None) -> float | None:
    """``this / ref`` rounded to 3 decimals; 1.0 when both are 0; ``None`` when either is missing
    (``None``) or only ``ref`` is 0."""
    if this is None or ref is None:
        return None
    if ref == 0:
        return 1.0 if this == 0 else None
    return round(this / ref, 3)


def summary(run: JSON) -> dict[str, float | None]:
    """The :data:`COMPARED` figures of one run's figures (the ``operator`` phase's, or the ``keep``
    curve's when there is one: CPU and writes over every batch, seconds summed over the batches); a
    figure the run did not reach or does not measure (the slope without ``--keep``) is ``None``."""
    keep = run.get("keep")
    if keep:
        return {
            "cpu_ms_per_trainjob": keep.get("cpu_ms_per_trainjob"),
            "writes_per_trainjob": keep.get("writes_per_trainjob"),
            "reconciles_per_trainjob": None,
            "rss_slope_mib_per_1000": keep.get("slope_mib_per_1000"),
            "rss_peak_mib": keep.get("rss_peak_mib"),
            "children_seconds": keep.get("children_seconds"),
            "complete_seconds": keep.get("complete_seconds"),
        }
    op = run.get("operator") or {}
    return {
        "cpu_ms_per_trainjob": op.get("cpu_ms_per_trainjob"),
        "writes_per_trainjob": op.get("writes_per_trainjob_total"),
        "reconciles_per_trainjob": op.get("reconciles_per_trainjob"),
        "rss_slope_mib_per_1000": None,
        "rss_peak_mib": (op.get("rss_mib") or {}).get("peak"),
        "children_seconds": op.get("children_seconds"),
        "complete_seconds": op.get("complete_seconds"),
    }


def compare(this: JSON, ref: JSON) -> dict[str, JSON]:
    """Per :data:`COMPARED` key, ``{"this": value, "ref": value, "ratio": this/REF}`` of two runs'
    figures (see :func:`summary` and :func:`ratio`)."""
    a, b = summary(this), summary(ref)
    return {key: {"this": a[key], "ref": b[key], "ratio": ratio(a[key], b[key])} for key, _ in COMPARED}


SIDE_FIGURES = (
    ("children_seconds", "seconds to every child"),
    ("status_seconds", "seconds to every status"),
    ("complete_seconds", "seconds to every Complete"),
    ("cpu_ms_per_trainjob", "controller CPU ms per TrainJob"),
    ("writes_per_trainjob", "writes per TrainJob"),
    ("rss_peak_mib", "peak RSS, MiB"),
    ("apiserver_cpu_seconds", "apiserver CPU s (burst)"),
    ("median_seconds", "create to children, median s"),
    ("p99_seconds", "create to children, p99 s"),
    ("p99_over_median", "p99 / median"),
    ("rss_slope_mib_per_1000", "RSS slope, MiB per 1,000 kept"),
    ("ready_seconds", "restart: s to ready"),
    ("queue_empty_seconds", "restart: s to empty queue"),
    ("restart_writes", "restart: writes until quiet"),
    ("restart_cpu_seconds", "restart: CPU s to empty queue"),
)
"""The figures ``--upstream`` prints side by side: ``(key of`` :func:`side_values` ``, label)``."""


def side_values(run: JSON) -> dict[str, float | None]:
    """The :data:`SIDE_FIGURES` of one side's figures (``operator``, ``keep`` or ``restart`` phase);
    what it did not measure is ``None``."""
    out: dict[str, float | None] = dict.fromkeys(key for key, _ in SIDE_FIGURES)
    base = summary(run)
    for key in ("children_seconds", "complete_seconds", "cpu_ms_per_trainjob", "writes_per_trainjob"):
        out[key] = base[key]
    out["rss_peak_mib"], out["rss_slope_mib_per_1000"] = base["rss_peak_mib"], base["rss_slope_mib_per_1000"]
    op = run.get("operator") or {}
    out["apiserver_cpu_seconds"] = op.get("apiserver_cpu_seconds")
    out["status_seconds"] = op.get("status_seconds")
    t = op.get("create_to_children") or {}
    out["median_seconds"], out["p99_seconds"] = t.get("median"), t.get("p99")
    out["p99_over_median"] = ratio(t.get("p99"), t.get("median")) if t else None
    restart = run.get("restart") or {}
    if restart:
        out["ready_seconds"] = restart.get("ready_seconds")
        out["queue_empty_seconds"] = restart.get("queue_empty_seconds")
        out["restart_writes"] = restart.get("writes")
        out["restart_cpu_seconds"] = restart.get("cpu_seconds_to_empty")
        out["rss_peak_mib"] = restart.get("rss_peak_mib")
        out["apiserver_cpu_seconds"] = restart.get("apiserver_cpu_seconds")
    return out


def raw_values(baseline: JSON | None) -> dict[str, float | None]:
    """The :data:`SIDE_FIGURES` the raw-client baseline has (time, writes, apiserver CPU, tail)."""
    out: dict[str, float | None] = dict.fromkeys(key for key, _ in SIDE_FIGURES)
    if not baseline:
        return out
    t = baseline.get("create_to_children") or {}
    out.update(
        children_seconds=baseline.get("seconds"),
        writes_per_trainjob=baseline.get("writes_per_trainjob"),
        apiserver_cpu_seconds=baseline.get("apiserver_cpu_seconds"),
        median_seconds=t.get("median"),
        p99_seconds=t.get("p99"),
        p99_over_median=ratio(t.get("p99"), t.get("median")) if t else None,
    )
    return out


def side_by_side(ours_run: JSON, upstream_run: JSON | None) -> dict[str, JSON]:
    """Per :data:`SIDE_FIGURES` key: ``{"ours", "upstream", "raw", "ours/upstream", "ours/raw"}`` of this
    project's run (with its ``baseline``) and upstream's (:func:`side_values`, :func:`raw_values`,
    :func:`ratio`); rows no side measured are left out."""
    a = side_values(ours_run)
    b = side_values(upstream_run) if upstream_run else dict.fromkeys(a)
    r = raw_values(ours_run.get("baseline"))
    rows: dict[str, JSON] = {}
    for key, _ in SIDE_FIGURES:
        if a[key] is None and b[key] is None and r[key] is None:
            continue
        rows[key] = {
            "ours": a[key],
            "upstream": b[key],
            "raw": r[key],
            "ours/upstream": ratio(a[key], b[key]),
            "ours/raw": ratio(a[key], r[key]),
        }
    return rows


# --- the operator process and its requests -----------------------------------------------------------


class CountedOperator(Operator):
    """The operator process (:class:`bench.cluster.Operator`) whose requests are counted from its
    ``/metrics`` (:meth:`scrape`)."""

    metric: str | None = None
    """The metric its requests are counted by (:func:`requests_metric`), known after a scrape."""

    async def scrape(self) -> Counts:
        """Its requests now, by :attr:`metric` (chosen by the first scrape; see :func:`requests_metric`
        and :func:`parse_requests`). Raises ``ValueError`` when it exports neither metric."""
        text = await self.metrics()
        if self.metric is None:
            self.metric = requests_metric(text)
        return parse_requests(text, self.metric)

    async def reconciles(self) -> float:
        """Its TrainJob reconciles so far (:func:`parse_reconciles`)."""
        return parse_reconciles(await self.metrics())

    async def gc_seconds(self) -> float:
        """Seconds its garbage collector took so far, every generation (:data:`GC_METRIC`; 0 for an
        operator that does not export it)."""
        return gauge_sum(await self.metrics(), GC_METRIC, "generation")

    async def queue(self) -> tuple[float, float]:
        """``(items queued, workers busy)`` of its TrainJob controller (``workqueue_depth``,
        ``controller_runtime_active_workers``)."""
        text = await self.metrics()
        return gauge_sum(text, QUEUE_METRIC, "name", ["trainjob"]), gauge_sum(
            text, WORKERS_METRIC, "controller", ["trainjob"]
        )


class CountedUpstream(Upstream):
    """Upstream Trainer + JobSet (:class:`bench.upstream.Upstream`) read like :class:`CountedOperator`:
    requests of both processes from :data:`REST_METRIC`, TrainJob reconciles and queue of Trainer's
    ``trainjob_controller``."""

    metric: str | None = REST_METRIC

    async def scrape(self) -> Counts:
        """Both processes' requests now, summed (:func:`parse_requests` with :data:`REST_METRIC`)."""
        out: Counts = {}
        for text in (await self.metrics_texts()).values():
            for key, value in parse_requests(text, REST_METRIC).items():
                out[key] = out.get(key, 0.0) + value
        return out

    async def reconciles(self) -> float:
        """Trainer's TrainJob reconciles so far."""
        return parse_reconciles((await self.metrics_texts())["trainer"], TRAINER_CONTROLLER)

    async def queue(self) -> tuple[float, float]:
        """``(items queued, workers busy)`` of Trainer's TrainJob controller and JobSet's controllers."""
        texts = await self.metrics_texts()
        depth = sum(gauge_sum(t, QUEUE_METRIC, "name") for t in texts.values())
        busy = sum(gauge_sum(t, WORKERS_METRIC, "controller") for t in texts.values())
        return depth, busy


async def wait_quiet(op: Measured, quiet: float, timeout: float) -> Counts:
    """Wait until the operator made no write for ``quiet`` seconds (its metrics read every ``quiet`` / 5
    seconds: a scrape costs the operator CPU that grows with the jobs it keeps, 19 ms at 20,000, which the
    run would count as its own); returns the last scrape. Raises :class:`PhaseTimeout` when it still writes
    ``timeout`` seconds on."""
    first = last = await op.scrape()
    began = since = time.monotonic()
    while time.monotonic() - since < quiet:
        await asyncio.sleep(quiet / 5)
        now = await op.scrape()
        if writes_total(now) != writes_total(last):
            since = time.monotonic()
            if since - began > timeout:
                made = writes_total(now) - writes_total(first)
                raise PhaseTimeout(f"quiet: the operator still writes after {timeout:.0f} s ({made:.0f} writes)")
        last = now
    return last


# --- watching the cluster ----------------------------------------------------------------------------


class Tracker:
    """Distinct objects of one resource in one namespace that satisfy ``accept``, as a list+watch sees
    them, each with the monotonic time it was first seen (``times[i]``: when the ``i+1``-th one was).

    The watch is of every namespace (objects of the others are read and dropped), so that the
    operator's phase and the raw-client baseline, in another namespace, bear the same cost of being
    watched, in the apiserver and in this process."""

    def __init__(
        self,
        kube: Kube,
        res: Resource,
        namespace: str,
        accept: Callable[[JSON], bool],
        owner: Callable[[JSON], str | None] = lambda _obj: None,
    ) -> None:
        """Describe the watch; :meth:`start` runs it. ``owner`` names the TrainJob an object belongs to
        (``by_owner[name]``: when the last new object of that TrainJob was seen)."""
        self.kube, self.res, self.namespace, self.accept, self.owner = kube, res, namespace, accept, owner
        self.seen: set[str] = set()
        self.times: list[float] = []
        self.by_owner: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._synced = asyncio.Event()

    async def start(self) -> None:
        """Start watching; returns once the first list is read. Raises what the first list raised."""
        self._task = asyncio.create_task(self._run())
        synced = asyncio.ensure_future(self._synced.wait())
        await asyncio.wait({self._task, synced}, return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        if self._task.done():
            self._task.result()

    async def stop(self) -> None:
        """Stop watching."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _see(self, obj: JSON) -> None:
        name = str(obj["metadata"]["name"])
        if obj["metadata"].get("namespace") != self.namespace:
            return
        if name not in self.seen and self.accept(obj):
            now = time.monotonic()
            self.seen.add(name)
            self.times.append(now)
            owner = self.owner(obj)
            if owner is not None:
                self.by_owner[owner] = now
            self._changed.set()

    async def _run(self) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    items, rv = await self.kube.list(self.res, None)
                    for obj in items:
                        self._see(obj)
                    self._synced.set()
                async for kind, obj in self.kube.watch(self.res, None, rv, timeout_seconds=300):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind in ("ADDED", "MODIFIED"):
                        self._see(obj)
            except ApiError as e:
                if not e.gone:
                    raise
                rv = ""  # too old: relist
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.2)

    async def wait(self, count: int, deadline: float, what: str) -> float:
        """The time the ``count``-th object was seen, once it is. Raises :class:`PhaseTimeout` naming
        ``what`` with the count reached at ``deadline`` (monotonic)."""
        while True:
            self._changed.clear()
            if len(self.times) >= count:
                return self.times[count - 1]
            if self._task is not None and self._task.done():
                self._task.result()  # the watch failed: raise its error
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, min(1.0, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise PhaseTimeout(f"{what}: {len(self.times)}/{count} {self.res.plural}") from None


def owned_by_trainjob(obj: JSON) -> bool:
    """Whether a TrainJob owns ``obj``."""
    return trainjob_owner(obj) is not None


def has_condition(obj: JSON) -> bool:
    """Whether ``obj`` has any condition in its status (its first status was written)."""
    return bool((obj.get("status") or {}).get("conditions"))


def complete(obj: JSON) -> bool:
    """Whether ``obj`` (a TrainJob or a Job) has condition ``Complete=True``."""
    c = condition(obj, "Complete")
    return c is not None and c.get("status") == "True"


# --- the objects -------------------------------------------------------------------------------------


def load(name: str) -> JSON:
    """A sample of ``config/samples``."""
    data: JSON = yaml.safe_load((SAMPLES / name).read_text())
    return data


def jobs_per_trainjob(runtime: JSON) -> int:
    """Jobs a TrainJob of ``runtime`` (a ClusterTrainingRuntime) gets: the replicas of its replicated
    jobs (each 1 unless set), as JobSet makes them."""
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return sum(int(rj.get("replicas", 1)) for rj in rjobs)


def trainjobs(indexes: Iterable[int], namespace: str, suspend: bool) -> list[JSON]:
    """TrainJobs ``burst-<i>`` of the torch sample with ``numNodes: 2``, suspended or not; their pods
    complete at once on KWOK (no timing annotations)."""
    base = load("trainjob.yaml")
    out = []
    for i in indexes:
        tj = copy.deepcopy(base)
        tj["metadata"] = {"name": f"burst-{i}", "namespace": namespace}
        tj["spec"]["trainer"]["numNodes"] = 2
        if suspend:
            tj["spec"]["suspend"] = True
        out.append(tj)
    return out


async def create_all(
    kube: Kube, objs: list[JSON], concurrency: int, created: dict[str, float] | None = None
) -> tuple[float, float]:
    """POST every TrainJob of ``objs`` with at most ``concurrency`` in flight; returns the monotonic
    times just before the first was sent and when the last was answered; ``created`` (when given) gets
    each TrainJob's name -> when its POST was answered. Raises :class:`trainer.framework.kube.client.ApiError`
    on a refused one."""
    gate = asyncio.Semaphore(concurrency)
    answered = {} if created is None else created

    async def one(obj: JSON) -> None:
        async with gate:
            await kube.create(TRAINJOBS, obj["metadata"]["namespace"], obj)
        answered[str(obj["metadata"]["name"])] = time.monotonic()

    started = time.monotonic()
    await asyncio.gather(*(one(o) for o in objs))
    return started, time.monotonic()


# --- the phases --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """What one side of the bench makes of a TrainJob: ``name`` (``ours``, ``upstream``), the ``kinds``
    of its children watched in ``bench``, how many of some of them each TrainJob gets (``expected``,
    waited for) and the TrainJob a child belongs to (``owner``; ``None``: not a child)."""

    name: str
    kinds: tuple[Resource, ...]
    expected: tuple[tuple[Resource, int], ...]
    owner: Callable[[JSON], str | None]


def ours(jobs_per: int) -> Side:
    """This project's operator: Jobs, Services, ConfigMaps and Secrets owned by the TrainJob; ``jobs_per``
    Jobs and one Service each waited for (the ConfigMaps, whose number depends on the runtime, are read
    once it is quiet)."""
    return Side("ours", CHILD_KINDS, ((JOBS, jobs_per), (SERVICES, 1)), trainjob_owner)


def upstream(jobs_per: int) -> Side:
    """Upstream Trainer + JobSet: the JobSet the TrainJob owns, and the Jobs and Service the JobSet owns
    (:func:`bench.upstream.upstream_owner`); one JobSet, ``jobs_per`` Jobs and one Service each."""
    return Side("upstream", (JOBSETS, JOBS, SERVICES), ((JOBSETS, 1), (JOBS, jobs_per), (SERVICES, 1)), upstream_owner)


class Measured(Protocol):
    """What the phases read of the controllers measured: :class:`CountedOperator` or :class:`CountedUpstream`."""

    metric: str | None

    @property
    def pid(self) -> int:
        """The main process id."""
        ...

    async def scrape(self) -> Counts:
        """Requests so far, by ``(verb, resource, code)``."""
        ...

    async def reconciles(self) -> float:
        """TrainJob reconciles so far."""
        ...

    async def queue(self) -> tuple[float, float]:
        """``(items queued, workers busy)`` of the TrainJob controller now."""
        ...

    def usage(self) -> Usage:
        """CPU and memory now."""
        ...

    async def wait_ready(self, timeout: float) -> None:
        """Until ready."""
        ...


@dataclass
class Run:
    """What every phase shares: the flags, the admin client, the controllers measured, the side they are
    and the watches of ``bench``; ``processes``: the local cluster's pids by name, the kube-apiserver's
    among them."""

    args: argparse.Namespace
    kubeconfig: Path
    kube: Kube
    op: Measured
    jobs_per: int
    side: Side
    processes: dict[str, int | None] = field(default_factory=dict)
    """The local cluster's processes by name (their CPU is read from ``/proc``, :mod:`bench.cluster_load`)."""
    children: list[Tracker] = field(default_factory=list)
    completed: Tracker | None = None
    statused: Tracker | None = None
    """TrainJobs with a condition (their first status written)."""
    figures: JSON = field(default_factory=dict)
    profiler: Profiler | None = None
    """The apiserver's CPU profiles by window (``--apiserver-profile``), or None."""

    def child(self, res: Resource) -> Tracker:
        """The watch of the children of kind ``res``."""
        return next(t for t in self.children if t.res == res)

    def last_child(self, since: float) -> dict[str, JSON]:
        """Per child kind seen: how many, and seconds from ``since`` to the last one seen."""
        return {
            t.res.plural: {"count": len(t.times), "seconds": round(t.times[-1] - since, 2)}
            for t in self.children
            if t.times
        }

    async def wait_children(self, total: int, since: float, what: str) -> None:
        """Wait until ``total`` TrainJobs have the children the side expects (:attr:`Side.expected`;
        ``since``: the phase's start). Raises :class:`PhaseTimeout` naming ``what`` after ``--timeout``
        seconds from ``since``."""
        deadline = since + float(self.args.timeout)
        for res, each in self.side.expected:
            await self.child(res).wait(total * each, deadline, what)

    def apiserver_cpu(self) -> float:
        """The kube-apiserver's CPU seconds so far (0 when its pid is unknown)."""
        pid = self.processes.get("kube-apiserver")
        return 0.0 if pid is None else read_usage(pid).cpu

    async def load(self) -> Snapshot:
        """The cluster's processes, the controllers measured and the apiserver's writes now
        (:func:`bench.cluster_load.snapshot`)."""
        return await snapshot(self.kube, self.processes, self.op.usage().cpu)

    def children_seconds(self, since: float) -> float:
        """Seconds from ``since`` to the last child of any kind seen (read once the operator is quiet,
        so the ConfigMaps and Secrets, whose number is not known beforehand, are all in)."""
        return max(t.times[-1] for t in self.children if t.times) - since


async def gc_seconds(op: Measured) -> float:
    """Seconds the operator's garbage collector took so far (:meth:`CountedOperator.gc_seconds`); 0 for
    upstream's."""
    return await op.gc_seconds() if isinstance(op, CountedOperator) else 0.0


async def operator_phase(run: Run) -> JSON:
    """N TrainJobs created at once in ``bench``; the operator's times, writes, CPU, memory, idle writes."""
    n, args, op = run.args.n, run.args, run.op
    assert run.completed is not None
    before, start, reconciled = await op.scrape(), op.usage(), await op.reconciles()
    collected = await gc_seconds(op)
    api_cpu, at = run.apiserver_cpu(), dict[str, float]()
    loads = [await run.load()]
    waited_for = "status" if args.suspend else "Complete"  # what the second window waits for
    if run.profiler is not None:
        run.profiler.window("child")
    t0, created = await create_all(run.kube, trainjobs(range(n), BENCH_NS, args.suspend), args.concurrency, at)
    await run.wait_children(n, t0, f"{run.side.name} phase, children")
    api_cpu = run.apiserver_cpu() - api_cpu
    loads.append(await run.load())
    if run.profiler is not None:
        run.profiler.window(waited_for.lower())
    done = None
    if not args.suspend:
        done = await run.completed.wait(n, t0 + float(args.timeout), f"{run.side.name} phase, Complete") - t0
    elif run.statused is not None:
        await run.statused.wait(n, t0 + float(args.timeout), f"{run.side.name} phase, statuses")
    loads.append(await run.load())
    if run.profiler is not None:
        await run.profiler.stop()
    after = await wait_quiet(op, args.quiet_seconds, float(args.timeout))
    end = op.usage()
    reconciles = await op.reconciles() - reconciled
    collected = await gc_seconds(op) - collected
    children = run.children_seconds(t0)
    statused = run.statused.times if run.statused is not None else []
    status = round(statused[-1] - t0, 2) if len(statused) >= n else None
    early = sum(1 for t in statused if t - t0 < children)
    delta = write_delta(before, after)
    total = sum(delta.values())
    out: JSON = {
        "side": run.side.name,
        "trainjobs": n,
        "apiserver_cpu_seconds": round(api_cpu, 2),
        "create_to_children": tail(create_to_children(at, [t.by_owner for t in run.children])),
        "pid": op.pid,
        "create_seconds": round(created - t0, 2),
        "children_seconds": round(children, 2),
        "children": run.last_child(t0),
        "status_seconds": status,
        "statuses_before_children": early,
        "complete_seconds": None if done is None else round(done, 2),
        "writes_per_trainjob": {k: round(v, 3) for k, v in per_trainjob(delta, n).items()},
        "writes_total": total,
        "writes_per_trainjob_total": round(total / n, 3),
        "reads": read_delta(before, after),
        "reconciles_per_trainjob": round(reconciles / n, 2),
        "cpu_seconds": round(end.cpu - start.cpu, 2),
        "cpu_ms_per_trainjob": round((end.cpu - start.cpu) * 1000 / n, 2),
        "gc_ms_per_trainjob": round(collected * 1000 / n, 2),
        "rss_mib": {"start": round(start.rss, 1), "after": round(end.rss, 1), "peak": round(end.peak, 1)},
        "cluster": {
            "to every child": window(loads[0], loads[1]),
            "then to every " + waited_for: window(loads[1], loads[2]),
        },
    }
    run.figures["operator"] = out
    print_operator(out, run.side.name)
    print_windows(out["cluster"])
    if run.profiler is not None:
        out["apiserver_profile"] = print_places(run.profiler.directory)
    idle = float(args.idle_seconds)
    quiet = await op.scrape()
    await asyncio.sleep(idle)
    idle_writes = writes_total(await op.scrape()) - writes_total(quiet)
    out["idle"] = {"seconds": idle, "writes": idle_writes, "writes_per_minute": round(idle_writes * 60 / idle, 2)}
    print(f"  idle writes: {out['idle']['writes_per_minute']:.1f} per minute ({idle_writes:.0f} in {idle:.0f} s)")
    return out


async def baseline_phase(run: Run, operator_seconds: float) -> JSON:
    """The same TrainJobs created in ``raw`` and their children POSTed, on each TrainJob's watch event,
    by a plain controller (:class:`bench.raw_client.RawController`); the ratio to the operator."""
    n, args = run.args.n, run.args
    children = await owned_children(run.kube, BENCH_NS)
    if len(children) != n:
        raise PhaseTimeout(f"baseline: children of {len(children)}/{n} TrainJobs found in {BENCH_NS}")
    raw_jobs = Tracker(run.kube, JOBS, RAW_NS, complete)
    await raw_jobs.start()
    kube = await Kube.connect(str(run.kubeconfig))
    controller = RawController(kube, RAW_NS, children, args.concurrency)
    try:
        await controller.start()
        api_cpu, at = run.apiserver_cpu(), dict[str, float]()
        t0, created = await create_all(run.kube, trainjobs(range(n), RAW_NS, args.suspend), args.concurrency, at)
        try:
            await controller.wait(n, t0 + float(args.timeout))
        except TimeoutError:
            raise PhaseTimeout(f"baseline: children of {len(controller.result.done)}/{n} TrainJobs") from None
        api_cpu = run.apiserver_cpu() - api_cpu
        result = controller.result
        last = max(result.done.values())
        jobs = sum(1 for kids in children.values() for c in kids if c.get("kind") == JOBS.kind)
        raw_done = None
        if not args.suspend:  # the raw Jobs' pods run to the end: the cluster is quiet when the run ends
            deadline = time.monotonic() + float(args.timeout)
            raw_done = await raw_jobs.wait(jobs, deadline, "baseline, raw Jobs Complete") - t0
    finally:
        await controller.stop()
        await kube.close()
        await raw_jobs.stop()
    out: JSON = {
        "trainjobs": n,
        "children_posted": result.children,
        "writes_per_trainjob": round(result.children / n, 3),
        "trainjobs_seconds": round(created - t0, 2),
        "seconds": round(last - t0, 2),
        "apiserver_cpu_seconds": round(api_cpu, 2),
        "create_to_children": tail(create_to_children(at, [result.done])),
        "raw_jobs_complete_seconds": None if raw_done is None else round(raw_done, 2),
        "ratio": round((last - t0) / operator_seconds, 3),
    }
    run.figures["baseline"] = out
    print_baseline(out)
    return out


async def keep_phase(run: Run) -> JSON:
    """``--n`` TrainJobs in ``--batch`` batches, none deleted; the operator's RSS after each."""
    args, op = run.args, run.op
    assert run.completed is not None
    points: list[JSON] = [{"kept": 0, "rss_mib": round(op.usage().rss, 1)}]
    out: JSON = {"batch": args.batch, "suspend": args.suspend, "curve": points}
    run.figures["keep"] = out
    print(
        f"{'kept':>7} {'children s':>10} {'Complete s':>10} {'writes/TJ':>9} {'CPU ms/TJ':>9} {'GC ms/TJ':>8} "
        f"{'RSS MiB':>8}"
    )
    print(f"{0:>7} {'':>10} {'':>10} {'':>9} {'':>9} {'':>8} {points[0]['rss_mib']:>8.1f}", flush=True)
    cpu = writes_all = children_all = 0.0
    complete_all: float | None = None if args.suspend else 0.0
    for first in range(0, args.n, args.batch):
        batch = trainjobs(range(first, min(args.n, first + args.batch)), BENCH_NS, args.suspend)
        kept = first + len(batch)
        before, start, collected = await op.scrape(), op.usage(), await gc_seconds(op)
        t0, _ = await create_all(run.kube, batch, args.concurrency)
        await run.wait_children(kept, t0, f"keep, children of {kept}")
        done = None
        if not args.suspend:
            done = await run.completed.wait(kept, t0 + float(args.timeout), f"keep, Complete of {kept}") - t0
        after = await wait_quiet(op, args.quiet_seconds, float(args.timeout))
        end, collected = op.usage(), await gc_seconds(op) - collected
        children = run.children_seconds(t0)
        delta = write_delta(before, after)
        writes = sum(delta.values()) / len(batch)
        point = {
            "kept": kept,
            "children_seconds": round(children, 2),
            "complete_seconds": None if done is None else round(done, 2),
            "writes_per_trainjob": round(writes, 3),
            "writes_per_trainjob_by_kind": {k: round(v, 3) for k, v in per_trainjob(delta, len(batch)).items()},
            "cpu_ms_per_trainjob": round((end.cpu - start.cpu) * 1000 / len(batch), 2),
            "gc_ms_per_trainjob": round(collected * 1000 / len(batch), 2),
            "rss_mib": round(end.rss, 1),
        }
        points.append(point)
        cpu, writes_all, children_all = (
            cpu + end.cpu - start.cpu,
            writes_all + sum(delta.values()),
            children_all + children,
        )
        if complete_all is not None and done is not None:
            complete_all += done
        out.update(
            cpu_ms_per_trainjob=round(cpu * 1000 / kept, 2),
            writes_per_trainjob=round(writes_all / kept, 3),
            children_seconds=round(children_all, 2),
            complete_seconds=None if complete_all is None else round(complete_all, 2),
        )
        shown = "-" if done is None else f"{done:.1f}"
        print(
            f"{kept:>7} {children:>10.1f} {shown:>10} {writes:>9.2f} {point['cpu_ms_per_trainjob']:>9.1f} "
            f"{point['gc_ms_per_trainjob']:>8.2f} {end.rss:>8.1f}",
            flush=True,
        )
    fitted = [(float(p["kept"]), float(p["rss_mib"])) for p in points[1:]]
    out["rss_peak_mib"] = round(op.usage().peak, 1)
    out["slope_mib_per_1000"] = round(slope_per_1000(fitted), 2) if len(fitted) >= 2 else None
    slope = out["slope_mib_per_1000"]
    print(
        f"RSS peak {out['rss_peak_mib']:.1f} MiB; slope "
        + ("n/a (one batch)" if slope is None else f"{slope:.2f}")
        + " MiB per 1,000 TrainJobs (least squares over the points after each batch)"
    )
    print(
        f"over every batch: {out['cpu_ms_per_trainjob']:.1f} CPU ms and {out['writes_per_trainjob']:.2f} writes per "
        f"TrainJob, {out['children_seconds']:.1f} s to children"
        + ("" if out["complete_seconds"] is None else f", {out['complete_seconds']:.1f} s to Complete")
        + " (seconds summed over the batches)",
        flush=True,
    )
    return out


async def wait_drained(op: Measured, reconciles: float, deadline: float, what: str) -> None:
    """Until the controllers reconciled ``reconciles`` TrainJobs and their queues are empty with no
    reconcile running (metrics read every 0.25 s). Raises :class:`PhaseTimeout` naming ``what`` at
    ``deadline`` (monotonic)."""
    while True:
        done = await op.reconciles()
        depth, busy = await op.queue()
        if done >= reconciles and depth == 0 and busy == 0:
            return
        if time.monotonic() >= deadline:
            raise PhaseTimeout(
                f"{what}: {done:.0f}/{reconciles:.0f} reconciles, {depth:.0f} queued, {busy:.0f} running"
            )
        await asyncio.sleep(0.25)


async def restart_phase(run: Run) -> JSON:
    """``--n`` suspended TrainJobs settled (every child, the controllers quiet), then the controllers
    killed (SIGKILL) and started again: seconds until ready and until every TrainJob was reconciled
    with the queue empty, the writes of the new process(es) until quiet, their CPU."""
    args, op = run.args, run.op
    timeout = float(args.timeout)
    for first in range(0, args.n, args.batch):
        batch = trainjobs(range(first, min(args.n, first + args.batch)), BENCH_NS, True)
        t0, _ = await create_all(run.kube, batch, args.concurrency)
        await run.wait_children(first + len(batch), t0, f"restart, children of {first + len(batch)}")
        print(f"  {first + len(batch)} TrainJobs settling ({time.monotonic() - t0:.1f} s)", flush=True)
    await wait_quiet(op, args.quiet_seconds, timeout)
    before = op.usage()
    assert isinstance(op, (CountedOperator, CountedUpstream))
    op.kill()
    api_cpu = run.apiserver_cpu()
    began = time.monotonic()
    op.start()
    await op.wait_ready(timeout)
    ready = time.monotonic() - began
    await wait_drained(op, float(args.n), began + timeout, "restart, re-sync")
    drained = time.monotonic() - began
    at_drain = op.usage()
    api_cpu = run.apiserver_cpu() - api_cpu
    after = await wait_quiet(op, args.quiet_seconds, timeout)
    end = op.usage()
    delta = write_delta({}, after)
    out: JSON = {
        "side": run.side.name,
        "trainjobs": args.n,
        "rss_before_kill_mib": round(before.rss, 1),
        "ready_seconds": round(ready, 2),
        "queue_empty_seconds": round(drained, 2),
        "cpu_seconds_to_empty": round(at_drain.cpu, 2),
        "cpu_seconds": round(end.cpu, 2),
        "apiserver_cpu_seconds": round(api_cpu, 2),
        "writes": sum(delta.values()),
        "writes_by_kind": {f"{v} {r}": c for (v, r), c in sorted(delta.items())},
        "rss_mib": round(end.rss, 1),
        "rss_peak_mib": round(end.peak, 1),
    }
    run.figures["restart"] = out
    print(f"restart of {run.side.name} with {args.n} settled TrainJobs (SIGKILL, then started again)")
    print(f"  ready (/readyz 200):      {ready:.1f} s")
    print(f"  queue empty:              {drained:.1f} s (every TrainJob reconciled, nothing queued or running)")
    shown = ", ".join(f"{k} {c:.0f}" for k, c in out["writes_by_kind"].items()) or "none"
    print(f"  writes until quiet:       {out['writes']:.0f} ({shown})")
    print(f"  CPU:                      {at_drain.cpu:.1f} s to empty queue, {end.cpu:.1f} s until quiet")
    print(f"  apiserver CPU:            {api_cpu:.1f} s (start to empty queue)")
    print(
        f"  RSS:                      {end.rss:.1f} MiB after, {end.peak:.1f} MiB peak;"
        f" {before.rss:.1f} before the kill"
    )
    sys.stdout.flush()
    return out


# --- printing ----------------------------------------------------------------------------------------


def shown_tail(t: JSON | None) -> str:
    """A :func:`tail` as text."""
    if not t:
        return "-"
    return f"median {t['median']:.2f} s, p99 {t['p99']:.2f} s, max {t['max']:.2f} s"


def print_operator(out: JSON, side: str = "ours") -> None:
    """The operator phase's figures (``side``: whose controllers)."""
    n = out["trainjobs"]
    who = "operator" if side == "ours" else "upstream Trainer + JobSet"
    print(f"{who} ({n} TrainJobs in namespace {BENCH_NS})")
    print(f"  TrainJobs created:        {out['create_seconds']:.1f} s")
    kinds = ", ".join(f"{v['count']} {k} {v['seconds']:.1f} s" for k, v in out["children"].items())
    print(f"  every child exists:       {out['children_seconds']:.1f} s  ({kinds})")
    if out.get("status_seconds") is not None:
        print(
            f"  every status written:     {out['status_seconds']:.1f} s (each TrainJob has a condition;"
            f" {out.get('statuses_before_children', 0)} before every child existed)"
        )
    if out["complete_seconds"] is not None:
        print(f"  every TrainJob Complete:  {out['complete_seconds']:.1f} s")
    print(f"  writes per TrainJob:      {out['writes_per_trainjob_total']:.2f} (total {out['writes_total']:.0f})")
    for k, v in out["writes_per_trainjob"].items():
        print(f"    {k:<32} {v:>7.3f}  ({v * n:.0f})")
    reads = ", ".join(f"{k} {v:.0f}" for k, v in (out.get("reads") or {}).items()) or "none"
    print(f"  reads:                    {reads}")
    print(f"  reconciles per TrainJob:  {out['reconciles_per_trainjob']:.2f}")
    print(f"  create to children:       {shown_tail(out.get('create_to_children'))}")
    print(
        f"  apiserver CPU:            {out.get('apiserver_cpu_seconds', 0):.1f} s"
        " (from the first create to every child)"
    )
    print(
        f"  CPU: {out['cpu_seconds']:.1f} s over the burst, {out['cpu_ms_per_trainjob']:.1f} ms per TrainJob"
        f" (pid {out.get('pid', '?')})"
    )
    if out.get("gc_ms_per_trainjob"):
        print(f"  garbage collection:       {out['gc_ms_per_trainjob']:.2f} ms per TrainJob ({GC_METRIC})")
    r = out["rss_mib"]
    print(f"  RSS: {r['start']:.1f} MiB at start, {r['after']:.1f} MiB after, {r['peak']:.1f} MiB peak (VmHWM)")
    sys.stdout.flush()


def print_baseline(out: JSON) -> None:
    """The baseline phase's figures and the ratio."""
    print(f"raw-client baseline ({out['trainjobs']} TrainJobs in namespace {RAW_NS})")
    print(f"  TrainJobs POSTed:         {out['trainjobs_seconds']:.1f} s")
    print(f"  every child POSTed:       {out['seconds']:.1f} s  ({out['children_posted']} children)")
    print(f"  create to children:       {shown_tail(out.get('create_to_children'))}")
    print(f"  apiserver CPU:            {out.get('apiserver_cpu_seconds', 0):.1f} s")
    if out["raw_jobs_complete_seconds"] is not None:
        print(f"  raw Jobs Complete:        {out['raw_jobs_complete_seconds']:.1f} s")
    print(f"  ratio baseline/operator time-to-children: {out['ratio']:.2f} (1.0 = as fast as the raw client)")
    sys.stdout.flush()


# --- main --------------------------------------------------------------------------------------------


async def measure(
    run_args: argparse.Namespace,
    cluster: LocalCluster,
    op: CountedOperator | CountedUpstream,
    figures: JSON,
    baseline: bool = True,
    runtime: JSON | None = None,
    webhooks: Path | None = None,
) -> None:
    """Every phase the flags ask for, on the running cluster and controllers (the raw-client baseline
    only with ``baseline``; ``runtime``: the torch ClusterTrainingRuntime, this project's sample by
    default; ``webhooks``: a file of webhook configurations, applied before the controllers start); figures
    go to ``figures``."""
    kube = await Kube.connect(str(cluster.kubeconfig))
    runtime = load("torch-distributed.yaml") if runtime is None else runtime
    jobs_per = jobs_per_trainjob(runtime)
    side = upstream(jobs_per) if isinstance(op, CountedUpstream) else ours(jobs_per)
    run = Run(run_args, cluster.kubeconfig, kube, op, jobs_per, side, cluster.status(), figures=figures)
    if cluster.apiserver_profiling:
        run.profiler = Profiler(kube, Path(run_args.apiserver_profile))
    try:
        for ns in (BENCH_NS, RAW_NS):
            await kube.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await kube.apply(runtime, "bench")
        if webhooks is not None:
            cluster.run_kubectl("apply", "--server-side", "--force-conflicts", "-f", str(webhooks))
        if isinstance(op, CountedUpstream):
            op.start(cluster.api())
        else:
            op.start()
        figures["operator_pid"] = op.pid
        await op.wait_ready(float(run_args.timeout))
        await wait_quiet(op, run_args.quiet_seconds, float(run_args.timeout))
        figures["writes_metric"] = op.metric
        print(f"{side.name}: pid {op.pid} ready", flush=True)
        if op.metric == REST_METRIC:
            print(
                f"  no {REQUESTS_METRIC}: writes are read from {REST_METRIC}, by method only "
                f"(every method but GET is a write; resource {ANY_RESOURCE})",
                flush=True,
            )
        owned = side.owner
        run.children = [Tracker(kube, res, BENCH_NS, lambda o: owned(o) is not None, owned) for res in side.kinds]
        run.completed = Tracker(kube, TRAINJOBS, BENCH_NS, complete)
        run.statused = Tracker(kube, TRAINJOBS, BENCH_NS, has_condition)
        for t in (*run.children, run.completed, run.statused):
            await t.start()
        if run_args.keep:
            await keep_phase(run)
            await where_memory_is(op, figures)
            return
        if run_args.restart:
            await restart_phase(run)
            return
        result = await operator_phase(run)
        await where_memory_is(op, figures)
        if baseline:
            await baseline_phase(run, float(result["children_seconds"]))
    finally:
        for t in (*run.children, *(t for t in (run.completed, run.statused) if t is not None)):
            await t.stop()
        await kube.close()


async def where_memory_is(op: CountedOperator | CountedUpstream, figures: JSON) -> None:
    """With ``--tracemalloc``: the operator's memory snapshot written, and its top places printed
    (:func:`bench.mem_profile.top`) and kept in ``figures`` (``memory_top``)."""
    if not isinstance(op, CountedOperator) or op.memory is None:
        return
    path = await op.memory_snapshot()
    places = top(path)
    figures["memory_top"] = [{"place": place, "mib": mib, "objects": count} for place, mib, count in places]
    print(f"where the operator's memory is (tracemalloc, {path}):")
    for place, mib, count in places:
        print(f"  {mib:>8.2f} MiB {count:>9} objects  {place}")


# --- the checkouts measured --------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkout:
    """A checkout whose operator is measured: its directory, commit and label (the short hash)."""

    root: Path
    commit: str
    label: str

    def describe(self) -> JSON:
        """Its commit and label, for the JSON."""
        return {"commit": self.commit, "label": self.label}


def git(*args: str, cwd: Path = ROOT) -> str:
    """The stripped output of ``git args`` run in ``cwd``. Raises ``subprocess.CalledProcessError``
    when git fails."""
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def this_checkout() -> Checkout:
    """This checkout: HEAD's short hash, with ``-dirty`` when files differ from it or are untracked
    (as ``git describe --dirty``, untracked files counted: the operator imports them too)."""
    dirty = "-dirty" if git("status", "--porcelain") else ""
    return Checkout(ROOT, git("rev-parse", "HEAD"), git("rev-parse", "--short", "HEAD") + dirty)


def resolve(ref: str) -> str:
    """The full hash of the commit ``ref`` names in this repository. Raises ``ValueError`` when it
    names none."""
    try:
        return git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    except subprocess.CalledProcessError:
        raise ValueError(f"--compare {ref}: no such commit in this repository") from None


@contextlib.contextmanager
def worktree(commit: str) -> Iterator[Checkout]:
    """A temporary ``git worktree add --detach`` of ``commit``, removed on exit with
    ``git worktree remove --force``."""
    path = Path(tempfile.mkdtemp(prefix="bench-burst-ref-"))
    git("worktree", "add", "--detach", str(path), commit)
    try:
        yield Checkout(path, commit, git("rev-parse", "--short", commit))
    finally:
        git("worktree", "remove", "--force", str(path))


# --- main --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags (``--help`` shows them)."""
    p = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--n", type=int, default=500, help="TrainJobs to create")
    p.add_argument("--concurrency", type=int, default=32, help="create requests in flight, in both phases")
    p.add_argument("--idle-seconds", type=float, default=30, help="idle window once everything settled")
    p.add_argument("--quiet-seconds", type=float, default=5, help="no operator write for this long = settled")
    p.add_argument("--timeout", type=float, default=900, help="seconds a phase may take before the run fails")
    p.add_argument("--keep", action="store_true", help="memory curve instead: create --n in --batch batches, keep all")
    p.add_argument("--batch", type=int, default=1000, help="TrainJobs per batch with --keep")
    p.add_argument(
        "--suspend", action="store_true", help="suspended TrainJobs: wait for their children, not Complete (no pods)"
    )
    p.add_argument(
        "--restart",
        action="store_true",
        help="restart instead: settle --n suspended TrainJobs (--batch at a time), SIGKILL the operator, start it",
    )
    p.add_argument(
        "--upstream",
        action="store_true",
        help="also measure upstream Kubeflow Trainer + JobSet (localcluster/build.sh upstream) and print ours/upstream",
    )
    p.add_argument(
        "--compare",
        metavar="REF",
        help="also measure the operator of git ref REF (first, on its own cluster) and print the ratios this/REF",
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="also write every figure as JSON to PATH")
    p.add_argument(
        "--max-writes",
        type=float,
        metavar="W",
        help="exit 1 when this checkout's operator writes more than W times per TrainJob (e.g. 5.0 suspended)",
    )
    p.add_argument(
        "--webhook",
        action="store_true",
        help="run ours with its admission webhook on (loopback), called for every TrainJob created, as installed",
    )
    p.add_argument(
        "--status-server",
        action="store_true",
        help="run ours with its status server on, as installed (a CA ConfigMap per TrainJob)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        metavar="PATH",
        help="run this checkout's operator under cProfile, timed by its CPU time, and write its statistics to PATH"
        " (read with pstats)",
    )
    p.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="PATH",
        help="run this checkout's operator with tracemalloc on; at the end, write where its memory is to PATH"
        " and print the top places (not with --profile: each skews the other)",
    )
    p.add_argument(
        "--apiserver-profile",
        type=Path,
        metavar="DIR",
        help="with this checkout's operator, profile the local apiserver's CPU in each window of the burst into"
        " DIR and print where it went (read with go tool pprof)",
    )
    args = p.parse_args(argv)
    if args.profile and args.tracemalloc:
        p.error("--profile and --tracemalloc: pick one")
    if args.keep and args.restart:
        p.error("--keep and --restart are two modes: pick one")
    if args.apiserver_profile is not None and (args.keep or args.restart):
        p.error("--apiserver-profile profiles a burst's windows: not with --keep or --restart")
    if args.upstream and args.compare:
        p.error("--upstream and --compare: pick one")
    if args.n < 1 or args.batch < 1 or args.concurrency < 1 or args.idle_seconds <= 0:
        p.error("--n, --batch, --concurrency must be >= 1 and --idle-seconds > 0")
    return args


def run_once(args: argparse.Namespace, checkout: Checkout, figures: JSON, baseline: bool) -> int:
    """Start a fresh cluster (the CRDs of ``checkout``), measure the operator of ``checkout`` on it and
    stop both; figures go to ``figures``. Returns 0, or 1 when a phase timed out."""
    per_node = pods_per_node(pods_needed(args))
    with local_cluster(
        "bench-burst-",
        per_node,
        node_cpu=str(per_node),
        node_memory=f"{2 * per_node}Gi",
        crds=checkout.root / "config" / "crd" / "bases",
        apiserver_profiling=args.apiserver_profile is not None and checkout.root == ROOT,
    ) as cluster:
        log = cluster.state_dir / "operator.log"
        profile = args.profile if checkout.root == ROOT else None
        memory = args.tracemalloc if checkout.root == ROOT else None
        extra, webhooks = webhook_args(checkout.root, cluster.state_dir) if args.webhook else ([], None)
        if args.status_server:
            extra += ["--status-server-port", str(free_ports(1)[0])]
        op = CountedOperator(
            cluster.kubeconfig, BENCH_NS, log, root=checkout.root, args=extra, profile=profile, memory=memory
        )
        return timed(measure(args, cluster, op, figures, baseline, webhooks=webhooks), op, figures)


def webhook_args(root: Path, directory: Path) -> tuple[list[str], Path]:
    """The flags that serve the admission webhook of the operator of the checkout at ``root`` on a free
    loopback port, and the file (``webhooks.yaml`` in ``directory``) of its webhook configurations calling
    that port (from its own ``python -m trainer.webhook.server --url``), to apply before it starts. Raises
    ``subprocess.CalledProcessError`` when that command fails."""
    (port,) = free_ports(1)
    url = f"https://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "trainer.webhook.server", "--url", url],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    path = directory / "webhooks.yaml"
    path.write_text(done.stdout)
    return ["--webhook-port", str(port), "--webhook-host", "127.0.0.1"], path


def run_upstream(args: argparse.Namespace, figures: JSON) -> int:
    """Start a fresh cluster with upstream's CRDs, measure upstream Trainer + JobSet
    (:class:`CountedUpstream`, built by :func:`bench.upstream.ensure_upstream`) with upstream's torch
    runtime, and stop both; figures go to ``figures``. Returns 0, or 1 when a phase timed out."""
    directory = ensure_upstream()
    figures["upstream"] = {"directory": directory.name, "jobset": jobset_version(directory)}
    runtime: JSON = yaml.safe_load((directory / TORCH_RUNTIME).read_text())
    per_node = pods_per_node(pods_needed(args))
    with local_cluster(
        "bench-upstream-", per_node, node_cpu=str(per_node), node_memory=f"{2 * per_node}Gi", crds=directory / "crds"
    ) as cluster:
        op = CountedUpstream(directory, cluster.kubeconfig, cluster.state_dir, Pki(cluster.state_dir / "pki"))
        return timed(measure(args, cluster, op, figures, baseline=False, runtime=runtime), op, figures)


def timed(phases: Coroutine[Any, Any, None], op: CountedOperator | CountedUpstream, figures: JSON) -> int:
    """Run ``phases``, then stop ``op``; 0, or 1 when a phase timed out (printed, and in ``figures``)."""
    try:
        # the raw client (and the creates and watches of both phases) on the operator's default loop
        with asyncio.Runner(loop_factory=EVENT_LOOPS[DEFAULT_EVENT_LOOP]) as runner:
            runner.run(phases)
    except PhaseTimeout as e:
        print(f"TIMEOUT: {e}", flush=True)
        figures["timeout"] = str(e)
        return 1
    finally:
        op.stop()
    return 0


def pods_needed(args: argparse.Namespace) -> int:
    """Pods that may exist at once: 2 per TrainJob of a burst or of a ``--keep`` batch; none when
    suspended or with ``--restart`` (whose TrainJobs are suspended)."""
    if args.suspend or args.restart:
        return 0
    return 2 * int(min(args.batch, args.n) if args.keep else args.n)


def print_sides(rows: dict[str, JSON]) -> None:
    """One line per figure of :func:`side_by_side`: ours, upstream, raw and the two ratios."""
    print("=== ours / upstream and ours / raw (one run: ours then raw on one cluster, upstream on its own) ===")
    head = ("ours", "upstream", "raw", "ours/upstream", "ours/raw")
    print(f"  {'':<34}" + "".join(f"{h:>14}" for h in head))

    def shown(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    labels = dict(SIDE_FIGURES)
    for key, row in rows.items():
        print(f"  {labels[key]:<34}" + "".join(f"{shown(row[h]):>14}" for h in head))
    sys.stdout.flush()


def print_ratios(rows: dict[str, JSON], this: str, ref: str, ref_metric: str | None = REQUESTS_METRIC) -> None:
    """One line per :data:`COMPARED` figure: both values and the ratio this/REF (rows of :func:`compare`);
    ``ref_metric``: what REF's writes were read from (:attr:`CountedOperator.metric`)."""
    print(f"=== this/REF: {this} / {ref} (one run each, REF first, each on its own cluster) ===")
    print(f"  {'':<38} {this:>14} {ref:>14} {'this/REF':>9}")

    def shown(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    for key, label in COMPARED:
        row = rows[key]
        r = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"  {label:<38} {shown(row['this']):>14} {shown(row['ref']):>14} {r:>9}")
    if ref_metric == REST_METRIC:
        print(f"  ({ref}'s writes: {REST_METRIC}, every method but GET; the same requests, not by resource)")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the bench; 0 on success, 1 when a phase timed out, 2 on a ``--compare`` naming no commit."""
    args = parse_args(argv)
    this = this_checkout()
    ref_commit = None
    if args.compare:
        try:
            ref_commit = resolve(args.compare)
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
    figures: JSON = {"machine": machine(), "n": args.n, "concurrency": args.concurrency, "keep": None}
    m = figures["machine"]
    mode = (
        f"--keep, batches of {args.batch}{', suspended' if args.suspend else ''}"
        if args.keep
        else f"--restart, {args.n} suspended TrainJobs settled, then SIGKILL and start"
        if args.restart
        else "phases: operator (namespace bench) first, then the raw-client baseline (namespace raw)"
        + (", then upstream on its own cluster" if args.upstream else "")
    )
    print(
        f"machine: {m['cores']} cores, {m['memory_gib']:.1f} GiB memory; N = {args.n} TrainJobs (numNodes 2), "
        f"{args.concurrency} creates in flight; {mode}",
        flush=True,
    )
    figures["phase_order"] = ["keep"] if args.keep else ["restart"] if args.restart else ["operator", "baseline"]
    if ref_commit is None:
        figures["checkout"] = this.describe()
        code = run_once(args, this, figures, baseline=not args.restart)
        if args.upstream:
            side: JSON = {"keep": None}
            print("=== upstream Kubeflow Trainer + JobSet, on a fresh cluster of its own ===", flush=True)
            code = max(code, run_upstream(args, side))
            figures["upstream_run"] = side
            figures["sides"] = side_by_side(figures, side)
            print_sides(figures["sides"])
    else:
        del figures["keep"]
        with worktree(ref_commit) as ref:
            figures["compare"] = {"ref": {**ref.describe(), "ref": args.compare}, "this": this.describe()}
            figures["ref"], figures["this"], figures["run_order"] = {"keep": None}, {"keep": None}, ["ref", "this"]
            named = "" if ref.commit.startswith(args.compare) else f" ({args.compare})"
            print(f"=== REF {ref.label}{named}: its operator and CRDs, from a worktree ===", flush=True)
            code = run_once(args, ref, figures["ref"], baseline=False)
        print(f"=== this checkout {this.label}: its operator and CRDs ===", flush=True)
        code = max(code, run_once(args, this, figures["this"], baseline=True))
        figures["ratios"] = compare(figures["this"], figures["ref"])
        print_ratios(figures["ratios"], this.label, ref.label, figures["ref"].get("writes_metric"))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    over = over_budget(figures.get("this") or figures, args.max_writes)
    if over:
        print(f"FAIL: {over}", flush=True)
        return max(code, 1)
    return code


def over_budget(run: JSON, max_writes: float | None) -> str | None:
    """What exceeds ``--max-writes`` in one run's figures (:func:`summary`'s writes per TrainJob), or
    None: within it, not asked, or the run measured no writes (a ``--restart``)."""
    writes = summary(run)["writes_per_trainjob"]
    if max_writes is None or writes is None or writes <= max_writes:
        return None
    return f"{writes:.2f} writes per TrainJob, more than --max-writes {max_writes:g}"


if __name__ == "__main__":
    sys.exit(main())

"""What the whole cluster did in a window of a burst: CPU seconds per process and writes by resource.

A burst's time to every status is the operator's and the cluster's: the kube-apiserver serves the status
writes and the Events, and the kube-controller-manager is still writing the children's aftermath (a
suspended Job's ``Suspended`` condition, a headless Service's Endpoints and EndpointSlice; each of its
controllers at its own client's 20 requests a second, the default ``--kube-api-qps``, kubernetes
``pkg/controller/apis/config/v1alpha1/defaults.go``).
:func:`snapshot` reads, at one moment, the CPU seconds of each process of the local cluster and of the
operator (Linux ``/proc``) and the apiserver's ``apiserver_request_total`` (every client's requests, by
verb, resource and subresource); :func:`window` is what happened between two snapshots, and
:func:`print_windows` prints windows side by side.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from bench.cluster import read_usage
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

APISERVER_REQUESTS = "apiserver_request_total"
"""The kube-apiserver's requests served, by ``verb``, ``resource``, ``subresource`` and ``code``."""
READS = frozenset({"GET", "LIST", "WATCH", "CONNECT"})
"""Verbs of :data:`APISERVER_REQUESTS` that write nothing."""


def cluster_writes(text: str) -> dict[str, float]:
    """The writes in a kube-apiserver's Prometheus text exposition: the samples of
    :data:`APISERVER_REQUESTS` whose verb is not in :data:`READS`, summed over codes and keyed
    ``"VERB resource"`` or ``"VERB resource/subresource"``. Raises ``ValueError`` on text the Prometheus
    parser (prometheus_client ``parser.text_string_to_metric_families``) refuses."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            verb = s.labels.get("verb", "")
            if s.name != APISERVER_REQUESTS or verb in READS:
                continue
            sub = s.labels.get("subresource", "")
            key = f"{verb} {s.labels.get('resource', '')}{'/' + sub if sub else ''}"
            out[key] = out.get(key, 0.0) + float(s.value)
    return out


@dataclass(frozen=True)
class Snapshot:
    """One moment: ``at`` (monotonic seconds), CPU seconds so far per process name, and the apiserver's
    writes so far (:func:`cluster_writes`)."""

    at: float
    cpu: dict[str, float]
    writes: dict[str, float]


async def snapshot(kube: Kube, pids: dict[str, int | None], operator_cpu: float) -> Snapshot:
    """Now: the CPU seconds of each process of ``pids`` that runs (one that is gone or None is left out),
    ``operator_cpu`` as ``operator``, and the apiserver's ``/metrics`` read through ``kube`` (whose user
    may read it: the bench's admin). Raises :class:`~trainer.framework.kube.client.ApiError` or aiohttp's
    errors when the metrics cannot be read."""
    at = time.monotonic()
    cpu = {"operator": operator_cpu}
    for name, pid in pids.items():
        if pid is None:
            continue
        try:
            cpu[name] = read_usage(pid).cpu
        except OSError:
            continue
    resp = await kube.open("GET", "/metrics", accept="text/plain")
    try:
        text = (await resp.read()).decode()
    finally:
        resp.release()
    return Snapshot(at, cpu, cluster_writes(text))


def window(before: Snapshot, after: Snapshot) -> JSON:
    """What happened from ``before`` to ``after``: ``seconds``; ``cpu_seconds`` per process (both
    snapshots have it), the most first, and their sum (``cpu_total``); ``writes``, every row that moved,
    the most first, and their sum (``writes_total``)."""
    cpu = {k: round(after.cpu[k] - before.cpu[k], 2) for k in after.cpu if k in before.cpu}
    moved = {k: v - before.writes.get(k, 0.0) for k, v in after.writes.items()}
    moved = {k: v for k, v in moved.items() if v > 0}
    rows = sorted(moved.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "seconds": round(after.at - before.at, 2),
        "cpu_seconds": dict(sorted(cpu.items(), key=lambda kv: (-kv[1], kv[0]))),
        "cpu_total": round(sum(cpu.values()), 2),
        "writes": {k: round(v) for k, v in rows},
        "writes_total": round(sum(moved.values())),
    }


def print_windows(windows: dict[str, JSON]) -> None:
    """Windows (label -> :func:`window`) side by side: their seconds, the CPU seconds of each process and
    the cores they kept busy, and the writes of each row."""
    spans = list(windows.values())
    width = max([12, *(len(label) + 2 for label in windows)])

    def row(label: str, values: list[str]) -> None:
        print(f"    {label:<30}" + "".join(f"{v:>{width}}" for v in values))

    print("  the whole cluster, by window:")
    row("", list(windows))
    row("seconds", [f"{w['seconds']:.1f}" for w in spans])
    for name in dict.fromkeys(k for w in spans for k in w["cpu_seconds"]):
        row(f"CPU s, {name}", [f"{w['cpu_seconds'].get(name, 0.0):.1f}" for w in spans])
    row("cores busy", [f"{w['cpu_total'] / w['seconds']:.2f}" if w["seconds"] else "-" for w in spans])
    for key in dict.fromkeys(k for w in spans for k in w["writes"]):
        row(key, [str(w["writes"].get(key, 0)) for w in spans])
    row("every write", [str(w["writes_total"]) for w in spans])
    sys.stdout.flush()

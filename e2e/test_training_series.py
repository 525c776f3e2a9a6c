"""The training series' cardinality bound on the real local cluster: 1,000 TrainJobs report through
their status subresource (``status.trainerStatus``: progress, remaining seconds and one metric, three
series each) to an operator started with ``--training-metrics-max-series 600``; its ``/metrics`` holds
at most 600 series of the three training gauges, ``kubeflow_trainer_training_series`` says how many,
and ``kubeflow_trainer_training_series_dropped_total`` counts the 800 jobs left out, three series
each. A finished job (``Complete`` written through the status subresource) and a deleted one lose their
series by the next scrapes, and a job left out is exported at its next report once that made room.

The TrainJobs are managed by MultiKueue (``spec.managedBy: kueue.x-k8s.io/multikueue``), as on a
MultiKueue manager cluster where Kueue copies each worker's status, ``trainerStatus`` included: the
operator reconciles none of them (no children, no status writes, no CA ConfigMap), so the 1,000 cost
their creates and status writes only, while the series are read from the same TrainJob cache as for
the jobs it runs (:mod:`trainer.statusserver.series` reads no ``managedBy``). The test starts once
the operator exports nothing, when earlier modules' namespaces, and their reporting TrainJobs, are gone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable

import pytest

from e2e.test_operate import scrape, wait_ready
from e2e.test_trainjob import trainjob
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e

JOBS = 1000
MAX_SERIES = 600
PER_JOB = 3
"""Series of each job's report: progress, remaining seconds, ``loss``."""
STATUS_PORT, METRICS, PROBES = reserved_ports(3)
OPERATOR_ARGS = [
    "--status-server-port",
    str(STATUS_PORT),
    "--status-server-host",
    "127.0.0.1",
    "--training-metrics-max-series",
    str(MAX_SERIES),
    "--metrics-bind-address",
    f"127.0.0.1:{METRICS}",
    "--health-probe-bind-address",
    f"127.0.0.1:{PROBES}",
]
GAUGES = (
    "kubeflow_trainer_trainjob_progress_ratio",
    "kubeflow_trainer_trainjob_remaining_seconds",
    "kubeflow_trainer_trainjob_metric",
)
CONCURRENCY = 32
"""Requests in flight while creating and reporting the 1,000."""
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module", autouse=True)
async def operator_ready(operator: Operator) -> None:
    """The operator's caches are synced (``/readyz``): its series start from them."""
    await wait_ready(PROBES)


def report(i: int, progress: int) -> JSON:
    """Job ``i``'s ``trainerStatus`` at ``progress`` percent."""
    return {
        "progressPercentage": progress,
        "estimatedRemainingSeconds": 1000 + i,
        "metrics": [{"name": "loss", "value": f"0.{i:03d}"}],
        "lastUpdatedTime": "2026-01-23T10:30:45Z",
    }


def exported(samples: Samples, ns: str) -> dict[str, int]:
    """Series of the three training gauges in ``ns``, per TrainJob."""
    out: dict[str, int] = {}
    for (name, labels), _ in samples.items():
        tags = dict(labels)
        if name in GAUGES and tags.get("namespace") == ns:
            out[tags["trainjob"]] = out.get(tags["trainjob"], 0) + 1
    return out


def value(samples: Samples, name: str) -> float:
    return samples[(name, frozenset())]


async def bounded(calls: Iterable[Callable[[], Awaitable[object]]]) -> None:
    """Await each call, :data:`CONCURRENCY` at once."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[object]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def test_a_thousand_reporting_jobs_stay_within_the_cap_and_finished_ones_make_room(
    client: Client, ns: str
) -> None:
    names = [f"j{i:04d}" for i in range(JOBS)]

    def create(name: str) -> Callable[[], Awaitable[JSON]]:
        body = trainjob(name, "rt", managedBy="kueue.x-k8s.io/multikueue")
        return lambda: client.kube.create(TRAINJOBS, ns, body)

    def reporting(i: int, progress: int) -> Callable[[], Awaitable[JSON]]:
        return lambda: client.kube.patch_status(
            TRAINJOBS, ns, names[i], {"trainerStatus": report(i, progress)}, manager="e2e"
        )

    async def nothing_exported() -> Samples | None:
        got = await scrape(METRICS)
        return got if value(got, "kubeflow_trainer_training_series") == 0 else None

    # Earlier modules' TrainJobs that reported stay exported until their namespaces are gone.
    idle = await wait_for(nothing_exported, "no series of earlier modules' TrainJobs", timeout=120)
    dropped_before = value(idle, "kubeflow_trainer_training_series_dropped_total")
    start = time.monotonic()
    await bounded(create(n) for n in names)
    await bounded(reporting(i, 10) for i in range(JOBS))
    written = time.monotonic() - start

    async def all_seen() -> Samples | None:
        got = await scrape(METRICS)
        dropped = value(got, "kubeflow_trainer_training_series_dropped_total") - dropped_before
        return got if dropped == (JOBS - MAX_SERIES // PER_JOB) * PER_JOB else None

    samples = await wait_for(all_seen, "every report exported or counted as dropped", timeout=60)
    per_job = exported(samples, ns)
    assert sum(per_job.values()) == value(samples, "kubeflow_trainer_training_series") == MAX_SERIES
    assert set(per_job.values()) == {PER_JOB}, "a job is exported whole or not at all"
    assert len(per_job) == MAX_SERIES // PER_JOB
    seen = time.monotonic() - start
    print(f"{JOBS} TrainJobs created and reporting in {written:.1f} s, every report seen after {seen:.1f} s")

    # A finished job and a deleted one lose their series; a left-out job's next report takes the room.
    done, deleted = sorted(per_job)[:2]
    left_out = next(n for n in names if n not in per_job)
    condition = {
        "type": "Complete",
        "status": "True",
        "reason": "JobsCompleted",
        "message": "TrainJob completed",
        "lastTransitionTime": "2026-01-23T11:00:00Z",
    }
    await client.kube.patch_status(TRAINJOBS, ns, done, {"conditions": [condition]}, manager="e2e")
    await client.kube.delete(TRAINJOBS, ns, deleted)

    async def made_room() -> Samples | None:
        got = await scrape(METRICS)
        jobs = exported(got, ns)
        return got if done not in jobs and deleted not in jobs else None

    samples = await wait_for(made_room, f"the series of finished {done} and deleted {deleted} gone", timeout=30)
    assert value(samples, "kubeflow_trainer_training_series") == MAX_SERIES - 2 * PER_JOB
    assert left_out not in exported(samples, ns), "a left-out job waits for its next report"

    await reporting(names.index(left_out), 20)()

    async def taken() -> Samples | None:
        got = await scrape(METRICS)
        return got if exported(got, ns).get(left_out) == PER_JOB else None

    samples = await wait_for(taken, f"the series of {left_out} after its next report", timeout=30)
    assert (
        samples[("kubeflow_trainer_trainjob_progress_ratio", frozenset({("namespace", ns), ("trainjob", left_out)}))]
        == 0.2
    )
    assert value(samples, "kubeflow_trainer_training_series") == MAX_SERIES - PER_JOB
    assert sum(exported(samples, ns).values()) == MAX_SERIES - PER_JOB
    print(f"whole module body: {time.monotonic() - start:.1f} s")

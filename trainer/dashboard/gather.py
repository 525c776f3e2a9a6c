"""What the dashboard reads from the cluster and from Prometheus: only GET and list requests.

:func:`list_jobs` lists the TrainJobs and MPIJobs of a namespace or of all; :func:`job_detail` reads
one job with its events, pods and the last lines of their logs; :func:`prometheus_curves` asks
Prometheus's HTTP API (``GET /api/v1/query_range``, prometheus/prometheus ``docs/querying/api.md``)
for the job's ``kubeflow_trainer_trainjob_metric`` series (docs/observability.md).
:func:`list_optimization_jobs` and :func:`optimization_detail` read OptimizationJobs and their trials;
:func:`prometheus_trial_curves` the objective metric's series of every trial.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp

from trainer.api.kinds import OPTIMIZATION_JOBS, PODS
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client import AsyncJobClient, AsyncTrainerClient, Event, JobKind, LogsUnavailableError, NotFoundError
from trainer.client.jobs import pick_container
from trainer.client.optimize import Trial, list_trials
from trainer.client.types import MPIJOB, TRAINJOB, pod_selector
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.meta import meta

Job = TrainJob | MPIJob
"""A job the dashboard shows."""
Shown = TrainJob | MPIJob | OptimizationJob
"""Anything whose page has curves."""
KINDS: tuple[JobKind[Any], ...] = (TRAINJOB, MPIJOB)
"""The kinds listed, in this order."""
LOG_LINES = 50
"""Log lines read per pod (``tailLines``)."""
LOG_PODS = 4
"""Pods of a job whose logs are read at most: the first by name."""
CURVE_POINTS = 250
"""Points per curve asked of Prometheus at most: the step is the job's time range over this."""
PROMETHEUS_TIMEOUT = 10.0
"""Seconds a Prometheus query may take."""


def kind_of(plural: str) -> JobKind[Any] | None:
    """The kind whose resource is ``plural`` (``trainjobs``, ``mpijobs``), None for another."""
    return next((k for k in KINDS if k.resource.plural == plural), None)


async def list_jobs(client: AsyncTrainerClient, all_namespaces: bool) -> list[Job]:
    """The TrainJobs, then the MPIJobs, of the client's namespace or of every namespace, each oldest
    first; a kind whose CRD is not installed (404) has none. Raises :class:`ApiError` on other
    failures."""
    jobs: list[Job] = []
    for kind in KINDS:
        try:
            jobs += await AsyncJobClient(client.kube, client.namespace, kind).list_jobs(all_namespaces=all_namespaces)
        except ApiError as e:
            if not e.not_found:
                raise
    return jobs


@dataclass(frozen=True)
class PodLog:
    """The last lines of one container of a pod, or why they cannot be read."""

    pod: str
    container: str
    lines: list[str]
    error: str = ""


@dataclass
class JobDetail:
    """One job as its page shows it."""

    job: Job
    events: list[Event] = field(default_factory=list)
    pods: list[JSON] = field(default_factory=list)
    """The job's pods, by name."""
    logs: list[PodLog] = field(default_factory=list)


async def pod_logs(jc: AsyncJobClient[Any], pods: list[JSON], lines: int = LOG_LINES) -> list[PodLog]:
    """The last ``lines`` of the step's container of each of the first :data:`LOG_PODS` pods that were
    scheduled; a pod whose log the apiserver does not give (no kubelet, the container not started)
    has its error instead."""
    out = []
    for pod in [p for p in pods if (p.get("spec") or {}).get("nodeName")][:LOG_PODS]:
        step = str(meta(pod).labels.get(jc.kind.step_label, ""))
        container = pick_container(pod, step, jc.kind.default_container)
        name = str(meta(pod).name)
        try:
            got = [line async for line in jc.read_pod_logs(pod, container, tail_lines=lines)]
        except (LogsUnavailableError, ApiError, aiohttp.ClientError) as e:
            out.append(PodLog(name, container, [], str(e) or type(e).__name__))
            continue
        out.append(PodLog(name, container, got[-lines:]))
    return out


async def job_detail(client: AsyncTrainerClient, kind: JobKind[Any], namespace: str, name: str) -> JobDetail:
    """Job ``name`` of ``kind`` in ``namespace`` with its events (:meth:`AsyncJobClient.get_job_events`),
    pods and their last log lines (:func:`pod_logs`). Raises :class:`trainer.client.NotFoundError`
    when there is no such job, :class:`ApiError` on other failures."""
    jc = AsyncJobClient(client.kube, namespace, kind)
    job = await jc.get_job(name)
    pods, _ = await client.kube.list(PODS, namespace, pod_selector(kind, name))
    pods = sorted(pods, key=lambda p: str(meta(p).name))
    return JobDetail(job, await jc.get_job_events(name), pods, await pod_logs(jc, pods))


def promql_string(value: str) -> str:
    """``value`` as a PromQL string literal (double-quoted, backslashes and quotes escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def metric_query(namespace: str, trainjob: str) -> str:
    """The PromQL of a TrainJob's reported metrics, one series per metric across replicas."""
    labels = f"namespace={promql_string(namespace)},trainjob={promql_string(trainjob)}"
    return f"max by (metric) (kubeflow_trainer_trainjob_metric{{{labels}}})"


def curve_range(job: Shown, now: datetime) -> tuple[float, float, float]:
    """``(start, end, step)`` in seconds since the epoch of the job's curves: from its creation to its
    completion (else ``now``), in at most :data:`CURVE_POINTS` steps of at least a second."""
    end = now.timestamp()
    status = job.status
    completion = getattr(status, "completion_time", None) if status else None
    done = parse_time(completion) if completion else None
    if done is not None:
        end = min(end, done.timestamp())
    created = parse_time(job.metadata.creation_timestamp or "")
    start = min(created.timestamp(), end) if created else end - 3600
    return start, end, max(1.0, math.ceil((end - start) / CURVE_POINTS))


async def prometheus_curves(
    session: aiohttp.ClientSession, url: str, job: Job, now: datetime
) -> dict[str, list[tuple[float, float]]]:
    """The job's ``kubeflow_trainer_trainjob_metric`` series from the Prometheus at ``url`` (its base,
    e.g. ``http://prometheus:9090``) over :func:`curve_range`: per ``metric`` label, ``(seconds since
    the epoch, value)`` points, oldest first. Raises ``aiohttp.ClientError`` when Prometheus cannot be
    reached or answers with an error status, ``ValueError`` when its answer is not a matrix."""
    query = metric_query(job.metadata.namespace or "", job.metadata.name or "")
    return await query_range(session, url, query, curve_range(job, now), "metric")


def trials_query(namespace: str, job: str, metric: str) -> str:
    """The PromQL of the objective ``metric`` of every trial of OptimizationJob ``job`` (TrainJobs named
    ``<job>-trial-<index>``), one series per trial across replicas."""
    trials = promql_string(re.escape(job) + "-trial-[0-9]+")
    labels = f"namespace={promql_string(namespace)},trainjob=~{trials},metric={promql_string(metric)}"
    return f"max by (trainjob) (kubeflow_trainer_trainjob_metric{{{labels}}})"


async def prometheus_trial_curves(
    session: aiohttp.ClientSession, url: str, job: OptimizationJob, now: datetime
) -> dict[str, list[tuple[float, float]]]:
    """Every trial's series of the job's objective metric (:func:`trials_query`), by trial name, over
    :func:`curve_range` of the OptimizationJob. Raises as :func:`prometheus_curves`."""
    query = trials_query(job.metadata.namespace or "", job.metadata.name or "", job.spec.objectives[0].metric)
    return await query_range(session, url, query, curve_range(job, now), "trainjob")


async def query_range(
    session: aiohttp.ClientSession, url: str, query: str, span: tuple[float, float, float], by: str
) -> dict[str, list[tuple[float, float]]]:
    """``query`` over ``span`` (``(start, end, step)``, seconds) from the Prometheus at ``url``: per value
    of label ``by``, ``(seconds since the epoch, value)`` points, oldest first, non-finite values left out.
    Raises ``aiohttp.ClientError`` when Prometheus cannot be reached or answers with an error status,
    ``ValueError`` when its answer is not a matrix."""
    start, end, step = span
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    timeout = aiohttp.ClientTimeout(total=PROMETHEUS_TIMEOUT)
    async with session.get(f"{url.rstrip('/')}/api/v1/query_range", params=params, timeout=timeout) as resp:
        resp.raise_for_status()
        body = await resp.json(content_type=None)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise ValueError(f"Prometheus answered no matrix: {str(body)[:200]}")
    curves: dict[str, list[tuple[float, float]]] = {}
    for series in data.get("result") or []:
        name = str((series.get("metric") or {}).get(by) or "")
        points = []
        for t, v in series.get("values") or []:
            value = float(v)
            if math.isfinite(value):
                points.append((float(t), value))
        if name:
            curves[name] = points
    return curves


async def list_optimization_jobs(client: AsyncTrainerClient, all_namespaces: bool) -> list[OptimizationJob]:
    """The OptimizationJobs of the client's namespace or of every one, oldest first; none when their CRD is
    not installed (404). Raises :class:`ApiError` on other failures."""
    try:
        return await client.list_optimization_jobs(all_namespaces=all_namespaces)
    except ApiError as e:
        if not e.not_found:
            raise
        return []


@dataclass
class OptimizationDetail:
    """One OptimizationJob as its page shows it."""

    job: OptimizationJob
    trials: list[Trial] = field(default_factory=list)
    """Its trials by index (:func:`trainer.client.optimize.trials_of`)."""


async def optimization_detail(client: AsyncTrainerClient, namespace: str, name: str) -> OptimizationDetail:
    """OptimizationJob ``name`` in ``namespace`` with its trials. Raises :class:`trainer.client.NotFoundError`
    when there is none, :class:`ApiError` on other failures."""
    obj = await client.kube.get_or_none(OPTIMIZATION_JOBS, namespace, name)
    if obj is None:
        raise NotFoundError(OPTIMIZATION_JOBS.kind, namespace, name)
    job = OptimizationJob.model_validate(obj)
    return OptimizationDetail(job, await list_trials(client.kube, namespace, job))

"""Expand one TrainJob on its runtime into a :class:`~trainer.trainjob.runtime.info.RuntimeInfo`.

Mirrors kubeflow/trainer ``pkg/runtime/core/trainingruntime.go`` (``NewObjects``/``buildObjects``: the
runtime's info, each plugin's ``EnforceMLPolicy``, then the TrainJob's overrides) and the status
side of ``pkg/controller/trainjob_controller.go`` (restart attempts, failure policy, deadline and TTL).
The ML policy is the one :func:`trainer.trainjob.policies.policy_of` picks; it gives the trainer's
environment, the pods per Job it sizes and its pod mutations (:mod:`trainer.trainjob.runtime.pod_template`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from api.jobset_v1alpha2 import RESTART_JOB, RESTART_JOB_IGNORE_MAX, FailurePolicy
from api.labels import JOB_INDEX, REPLICATED_JOB_NAME
from api.trainer_v1alpha1 import (
    COND_SUSPENDED,
    NODE_CONTAINER,
    TrainingRuntimeSpec,
    TrainJob,
)
from trainer.framework.clock import format_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.resources import gpus_per_node
from trainer.jobs.conditions import TRAINJOB_TERMINAL, finished_at, job_failed
from trainer.jobs.conditions import finished as is_finished
from trainer.jobs.facts import attempt_of, job_attempt_of, seconds_left, started
from trainer.jobs.features.queues import resolve_queue
from trainer.jobs.gang.base import PodSet
from trainer.trainjob.features.devices import NO_DEVICES, Devices, claimed_gpus, trainer_claims
from trainer.trainjob.features.failure_policy import decide
from trainer.trainjob.features.injection import Injection
from trainer.trainjob.features.overrides import job_metadata, template_metadata
from trainer.trainjob.policies import Expansion, policy_of
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.runtime.pod_template import pod_template
from trainer.trainjob.runtime.shape import (
    completed_first,
    node_resources,
    num_nodes,
    pods_per_job,
    replicated_jobs,
    subdomain_of,
    trainer_rjob,
)
from trainer.trainjob.status import jobs_status


def deadline_seconds(job: TrainJob, runtime: TrainingRuntimeSpec | None = None) -> int | None:
    """The ``activeDeadlineSeconds`` that holds for ``job``: its own, else its runtime's
    ``runPolicy.activeDeadlineSeconds`` (KEP-2899 value resolution, kubeflow/trainer#3824), else None."""
    if job.spec.active_deadline_seconds:
        return job.spec.active_deadline_seconds
    return runtime.run_policy.active_deadline_seconds if runtime and runtime.run_policy else None


def deadline_left(
    job: TrainJob, finished: bool, now: datetime, runtime: TrainingRuntimeSpec | None = None
) -> float | None:
    """As upstream ``reconcileDeadline`` (kubeflow/trainer ``pkg/controller/trainjob_controller.go``):
    one budget for the whole TrainJob (:func:`deadline_seconds`) from ``status.startTime`` (JobSet's
    KEP-1186: the last time it became active); before that is written, from its last resume (the
    ``Suspended`` condition turning False) or its creation, and from ``now`` when it starts in this very
    reconcile. Seconds left (<= 0: past), None when no deadline holds, or it is finished or suspended."""
    seconds = deadline_seconds(job, runtime)
    if not seconds or finished or job.spec.suspend or not job.metadata.creation_timestamp:
        return None
    start = job.status.start_time if job.status else None
    if not start:
        start = str(job.metadata.creation_timestamp)
        for c in (job.status.conditions if job.status else None) or []:
            if c.type == COND_SUSPENDED and c.last_transition_time:
                # Resumed (False), or suspended until now: it becomes active in this reconcile.
                start = c.last_transition_time if c.status == "False" else format_time(now)
    return seconds_left(seconds, start, now)


def ttl_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> tuple[int | None, bool]:
    """The ``ttlSecondsAfterFinished`` that holds for ``job`` and whether it deletes the TrainJob itself:
    its own ``spec.ttlSecondsAfterFinished``, else its runtime's ``runPolicy.ttlSecondsAfterFinished``
    (both delete the TrainJob, KEP-2899, kubeflow/trainer#3824 and #4052), else the runtime template's
    JobSet ``ttlSecondsAfterFinished`` (deletes the children, the TrainJob stays, as JobSet deletes
    its JobSet); ``(None, False)`` when none is set."""
    if job.spec.ttl_seconds_after_finished is not None:
        return job.spec.ttl_seconds_after_finished, True
    if runtime.run_policy is not None and runtime.run_policy.ttl_seconds_after_finished is not None:
        return runtime.run_policy.ttl_seconds_after_finished, True
    return (runtime.template.spec.ttl_seconds_after_finished if runtime.template.spec else None), False


def _target(job_restarts: dict[str, list[int]], job: JSON) -> int:
    """``jobRestarts`` of a Job's index: the job restart attempt it must carry to be current."""
    labels = meta(job).labels
    counts = job_restarts.get(str(labels.get(REPLICATED_JOB_NAME) or ""), [])
    index = str(labels.get(JOB_INDEX) or "")
    return counts[int(index)] if index.isdigit() and int(index) < len(counts) else 0


def _restarts_alone(policy: FailurePolicy | None) -> bool:
    """Whether a rule of ``policy`` recreates a failed Job alone (JobSet's ``RestartJob`` feature)."""
    return any(r.action in (RESTART_JOB, RESTART_JOB_IGNORE_MAX) for r in (policy.rules if policy else None) or [])


def _ttl_left(job: TrainJob, runtime: TrainingRuntimeSpec, now: datetime) -> float | None:
    ttl, _ = ttl_of(job, runtime)
    conditions = (job.status.conditions if job.status else None) or []
    return seconds_left(ttl, finished_at(conditions, TRAINJOB_TERMINAL), now)


def runtime_info(
    obj: JSON,
    job: TrainJob,
    runtime: TrainingRuntimeSpec,
    runtime_obj: JSON | None,
    observed: list[JSON],
    gang: str,
    now: datetime | None = None,
    injection: Injection | None = None,
    devices: Devices = NO_DEVICES,
) -> RuntimeInfo:
    """Derive everything about ``job`` (its JSON ``obj``) on ``runtime`` (``runtime_obj`` its JSON,
    for the queue default) with every Job it owns (``observed``), under ``--gang-scheduler-name=gang``,
    at ``now`` (default: the current time), with the status server's ``injection`` into trainer pods
    when the operator serves one, and what the cluster tells of DRA (``devices``: whether it serves
    ``resource.k8s.io/v1``, the ResourceClaimTemplates the trainer's claims count GPUs from). Pure but for
    the clock. May raise ``ValueError``, ``TypeError``,
    ``KeyError``, ``AttributeError`` or ``IndexError`` on input its schema lets through that cannot be
    expanded (admission refuses it, see :func:`trainer.webhook.rules.validate_trainjob`)."""
    now = now or datetime.now(UTC)
    rjobs = replicated_jobs(runtime)
    trainer = trainer_rjob(rjobs)
    nodes = num_nodes(job, runtime)
    subdomain = subdomain_of(job, runtime)
    name = str(job.metadata.name)
    master = f"{name}-{trainer.name if trainer else NODE_CONTAINER}-0-0.{subdomain or name}"
    res = node_resources(job, rjobs, trainer.name if trainer else None)
    policy = policy_of(runtime)
    # KEP-2782: the node's DRA GPUs count only where no extended GPU resource says them.
    claimed = claimed_gpus(trainer_claims(job, trainer), devices) if trainer and not gpus_per_node(res) else 0
    x = Expansion(job, runtime, trainer.name if trainer else None, nodes, master, res, claimed)
    env = policy.env(x)
    pod_sets, sized = [], set()
    for r in rjobs:
        pods, by_policy = pods_per_job(policy, x, r)
        if by_policy:
            sized.add(r.name)
        is_trainer = trainer is not None and trainer.name == r.name
        template = pod_template(x, policy, r, is_trainer, env, injection)
        pod_sets.append(PodSet(name=r.name, jobs=r.replicas, pods_per_job=pods, template=template))
    conditions = (job.status.conditions if job.status else None) or []
    finished = is_finished(conditions, TRAINJOB_TERMINAL) is not None
    restarts = (job.status.restarts if job.status else None) or 0
    counted = (job.status.restarts_count_towards_max if job.status else None) or 0
    per_job = (job.status.replicated_jobs_status if job.status else None) or []
    job_restarts = {e.name: list(e.job_restarts or []) for e in per_job}
    job_counted = {e.name: list(e.job_restarts_count_towards_max or []) for e in per_job}
    attempt = [j for j in observed if attempt_of(j) >= restarts]
    # As JobSet: a Job behind its index's jobRestarts was restarted alone, and is replaced.
    replaced = [j for j in attempt if job_attempt_of(j) < _target(job_restarts, j)]
    current = [j for j in attempt if job_attempt_of(j) >= _target(job_restarts, j)]
    failed = [j for j in current if job_failed(j) is not None]
    failure_policy = runtime.template.spec.failure_policy if runtime.template.spec else None
    total_counted = counted + sum(sum(c) for c in job_counted.values())
    return RuntimeInfo(
        obj=obj,
        job=job,
        runtime=runtime,
        runtime_obj=runtime_obj,
        rjobs=rjobs,
        pod_sets=pod_sets,
        template_metadata=template_metadata(job, runtime.template.metadata),
        job_metadata={r.name: job_metadata(job, r.name, r.template.get("metadata")) for r in rjobs},
        policy_sized=frozenset(sized),
        policy=policy,
        trainer=trainer.name if trainer else None,
        num_nodes=nodes,
        node_resources=res,
        node_gpus=x.gpus,
        devices=devices,
        subdomain=subdomain,
        not_in_gang=frozenset(completed_first(rjobs)),
        queue=resolve_queue(obj, gang, runtime_obj),
        observed=current,
        previous=[j for j in observed if attempt_of(j) < restarts],
        replaced=replaced,
        statuses=jobs_status(rjobs, current),
        finished=finished,
        started=started(observed),
        restarts=restarts,
        counted_restarts=counted,
        job_restarts=job_restarts,
        job_restarts_counted=job_counted,
        restarts_alone=_restarts_alone(failure_policy),
        decision=None if finished else decide(failure_policy, failed, total_counted),
        deadline_left=deadline_left(job, finished, now, runtime),
        deadline_seconds=deadline_seconds(job, runtime),
        ttl_left=_ttl_left(job, runtime, now) if finished else None,
        ttl_deletes_job=ttl_of(job, runtime)[1],
        now=format_time(now),
    )

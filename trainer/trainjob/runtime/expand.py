"""Expand one TrainJob on its runtime: :func:`runtime_info` (what the runtime says) and :func:`expand` (with
the attempt its Jobs are in, :func:`trainer.trainjob.runtime.attempt.attempt`).

Mirrors kubeflow/trainer ``pkg/runtime/core/trainingruntime.go`` (``NewObjects``/``buildObjects``: the
runtime's info, each plugin's ``EnforceMLPolicy``, then the TrainJob's overrides). The ML policy is the
one :func:`trainer.trainjob.policies.policy_of` picks; it gives the trainer's environment, the pods per
Job it sizes and its pod mutations (:mod:`trainer.trainjob.runtime.pod_template`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.queues import resolve_queue
from trainer.api.trainer_v1alpha1 import NODE_CONTAINER, TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.resources import gpus_per_node
from trainer.jobs.gang.base import PodSet
from trainer.trainjob.policies import Expansion, Policy, policy_of
from trainer.trainjob.runtime.attempt import attempt
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.runtime.pod_template import pod_template
from trainer.trainjob.runtime.view import TrainJobView
from trainer.trainjob.spec.devices import NO_DEVICES, Devices, claimed_gpus, trainer_claims
from trainer.trainjob.spec.injection import Injection
from trainer.trainjob.spec.overrides import job_metadata, template_metadata
from trainer.trainjob.spec.shape import (
    completed_first,
    node_resources,
    num_nodes,
    replicated_jobs,
    subdomain_of,
    trainer_rjob,
)


def pods_per_job(policy: Policy, x: Expansion, rjob: ReplicatedJob) -> tuple[int, bool]:
    """(pods per Job of ``rjob``, whether the ML policy sets it): the policy's
    (:meth:`~trainer.trainjob.policies.base.Policy.pods_per_job`), else the template's
    min(parallelism, completions) (parallelism defaults to 1)."""
    pods = policy.pods_per_job(x, rjob)
    if pods is not None:
        return pods, True
    spec = rjob.template.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    return (min(parallelism, int(completions)) if completions is not None else parallelism), False


def pod_sets(
    x: Expansion, policy: Policy, rjobs: list[ReplicatedJob], injection: Injection | None
) -> tuple[list[PodSet], frozenset[str]]:
    """One pod set per replicated job of ``rjobs``, in order (its pods per Job and its pod template under
    ``policy``), and the replicated jobs whose pods per Job the policy sets."""
    env = policy.env(x)
    out, sized = [], set()
    for r in rjobs:
        pods, by_policy = pods_per_job(policy, x, r)
        if by_policy:
            sized.add(r.name)
        template = pod_template(x, policy, r, x.trainer == r.name, env, injection)
        out.append(PodSet(name=r.name, jobs=r.replicas, pods_per_job=pods, template=template))
    return out, frozenset(sized)


def runtime_info(
    obj: JSON,
    job: TrainJob,
    runtime: TrainingRuntimeSpec,
    runtime_obj: JSON | None,
    *,
    gang: str,
    injection: Injection | None = None,
    devices: Devices = NO_DEVICES,
) -> RuntimeInfo:
    """What ``runtime`` (``runtime_obj`` its JSON, for the queue default) says of ``job`` (its JSON
    ``obj``) under ``--gang-scheduler-name=gang``, with the status server's ``injection`` into trainer pods
    when the operator serves one, and what the cluster tells of DRA (``devices``: whether it serves
    ``resource.k8s.io/v1``, the ResourceClaimTemplates the trainer's claims count GPUs from). Pure. May
    raise ``ValueError``, ``TypeError``, ``KeyError``, ``AttributeError`` or ``IndexError`` on input its
    schema lets through that cannot be expanded (admission refuses it, see
    :func:`trainer.webhook.rules.validate_trainjob`)."""
    rjobs = replicated_jobs(runtime)
    trainer = trainer_rjob(rjobs)
    trainer_name = trainer.name if trainer else None
    nodes = num_nodes(job, runtime)
    subdomain = subdomain_of(job, runtime)
    name = str(job.metadata.name)
    master = f"{name}-{trainer_name or NODE_CONTAINER}-0-0.{subdomain or name}"
    res = node_resources(job, rjobs, trainer_name)
    policy = policy_of(runtime)
    # KEP-2782: the node's DRA GPUs count only where no extended GPU resource says them.
    claimed = claimed_gpus(trainer_claims(job, trainer), devices) if trainer and not gpus_per_node(res) else 0
    x = Expansion(job, runtime, trainer_name, nodes, master, res, claimed)
    sets, sized = pod_sets(x, policy, rjobs, injection)
    return RuntimeInfo(
        obj=obj,
        job=job,
        runtime=runtime,
        runtime_obj=runtime_obj,
        rjobs=rjobs,
        pod_sets=sets,
        template_metadata=template_metadata(job, runtime.template.metadata),
        job_metadata={r.name: job_metadata(job, r.name, r.template.get("metadata")) for r in rjobs},
        policy_sized=sized,
        policy=policy,
        trainer=trainer_name,
        num_nodes=nodes,
        node_gpus=x.gpus,
        devices=devices,
        subdomain=subdomain,
        not_in_gang=frozenset(completed_first(rjobs)),
        queue=resolve_queue(obj, gang, runtime_obj),
    )


def expand(
    obj: JSON,
    job: TrainJob,
    runtime: TrainingRuntimeSpec,
    runtime_obj: JSON | None,
    observed: list[JSON],
    *,
    gang: str,
    now: datetime | None = None,
    injection: Injection | None = None,
    devices: Devices = NO_DEVICES,
) -> TrainJobView:
    """The TrainJob as this reconcile sees it: :func:`runtime_info` and the attempt of every Job it owns
    (``observed``) at ``now`` (default: the current time). Pure but for the clock; raises as
    :func:`runtime_info`."""
    info = runtime_info(obj, job, runtime, runtime_obj, gang=gang, injection=injection, devices=devices)
    return TrainJobView(info, attempt(info, observed, now or datetime.now(UTC)))

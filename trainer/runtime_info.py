"""Everything derived from one TrainJob and its runtime, computed once per reconcile.

Mirrors kubeflow/trainer ``pkg/runtime/runtime.go`` (``Info``: the runtime's replicated jobs as pod
sets with counts, pod templates and per-pod requests, plus scheduling facts): :func:`runtime_info`
builds a :class:`RuntimeInfo` from (TrainJob, runtime, observed Jobs, gang scheduler name); the
builders, the gang modules (through :meth:`RuntimeInfo.gang_input`), the status logic and admission
read it and derive nothing again.

A pod template here is the replicated job's template with, in this order: the trainer or
initializer settings (:mod:`trainer.builders.steps`), the ML policy (torch env, mpi mounts) and the
TrainJob's overrides in all three upstream forms (:mod:`trainer.builders.overrides`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from api.jobset_v1alpha2 import JobSetSpec, ReplicatedJob
from api.trainer_v1alpha1 import (
    ANCESTOR_LABEL,
    COND_COMPLETE,
    COND_FAILED,
    COND_SUSPENDED,
    NODE_CONTAINER,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    STEP_TRAINER,
    ClusterTrainingRuntime,
    JobStatus,
    TrainingRuntimeSpec,
    TrainJob,
)
from trainer import json_codec
from trainer.builders import labels as L
from trainer.builders import trainjob_mpi
from trainer.builders.jax import jax_env
from trainer.builders.overrides import apply_pod_patch, job_metadata, patches_for, template_metadata
from trainer.builders.steps import apply_initializer, apply_trainer
from trainer.builders.torch import add_rendezvous, inject, torch_env
from trainer.builders.volume_claims import add_claim_volumes
from trainer.builders.xgboost import xgboost_env
from trainer.failure_policy import Decision, decide, failure
from trainer.gang.base import GangInput, PodSet
from trainer.json_codec import JSON, copy_json
from trainer.kube.events import parse_time
from trainer.queue_choice import QueueChoice, resolve_queue
from trainer.statusserver import injection as trainjobstatus
from trainer.trainjob.status import jobs_status

SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"


def attempt_of(job: JSON) -> int:
    """The restart attempt a Job belongs to (label ``jobset.sigs.k8s.io/restart-attempt``; 0 when unset)."""
    value = ((job.get("metadata") or {}).get("labels") or {}).get(L.RESTART_ATTEMPT) or "0"
    return int(value) if str(value).isdigit() else 0


def snapshot_name(trainjob: str) -> str:
    """Name of the ConfigMap that freezes a TrainJob's runtime."""
    return f"{trainjob}{SNAPSHOT_SUFFIX}"


def snapshot_config_map(obj: JSON, runtime_obj: JSON) -> JSON:
    """The ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``: the runtime's kind, name and spec
    as JSON), owned by the TrainJob: its runtime as it was at the first reconcile (kubeflow/trainer
    KEP-2599). Later edits or deletion of the runtime never change the job."""
    meta = obj["metadata"]
    frozen = {
        "apiVersion": runtime_obj.get("apiVersion"),
        "kind": runtime_obj.get("kind"),
        "metadata": {"name": (runtime_obj.get("metadata") or {}).get("name")},
        "spec": runtime_obj.get("spec"),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {L.JOBSET_NAME: meta["name"]},
            "ownerReferences": [L.owner_reference(obj)],
        },
        "data": {SNAPSHOT_KEY: json.dumps(frozen, sort_keys=True)},
    }


def runtime_of_snapshot(config_map: JSON) -> JSON | None:
    """The runtime a snapshot ConfigMap froze, or None when it holds none."""
    text = (config_map.get("data") or {}).get(SNAPSHOT_KEY)
    try:
        data = json_codec.loads(text) if text else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def runtime_ref(obj: JSON) -> tuple[str, str]:
    """``(kind, name)`` of the runtime a TrainJob (as JSON) references; the kind defaults to
    ClusterTrainingRuntime, as upstream."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or ClusterTrainingRuntime.KIND), str(ref.get("name") or "")


def step_of(rjob: ReplicatedJob) -> str:
    """The ancestor step of a replicated job (its ``trainjob-ancestor-step`` label), or ""."""
    return str(((rjob.template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL, ""))


def replicated_jobs(runtime: TrainingRuntimeSpec) -> list[ReplicatedJob]:
    """The runtime's replicated jobs, in order."""
    return list((runtime.template.spec.replicated_jobs if runtime.template.spec else None) or [])


def trainer_rjob(rjobs: list[ReplicatedJob]) -> ReplicatedJob | None:
    """The replicated job the trainer settings apply to: the one labelled ``trainer``, else the one
    named ``node``, else None."""
    return next((r for r in rjobs if step_of(r) == STEP_TRAINER), None) or next(
        (r for r in rjobs if r.name == NODE_CONTAINER), None
    )


def num_nodes(job: TrainJob, runtime: TrainingRuntimeSpec) -> int | None:
    """Training nodes: ``trainer.numNodes``, else the runtime's ``mlPolicy.numNodes`` (default 1),
    else None (no ML policy: keep the template's parallelism)."""
    if job.spec.trainer and job.spec.trainer.num_nodes is not None:
        return job.spec.trainer.num_nodes
    if runtime.ml_policy is not None:
        return runtime.ml_policy.num_nodes or 1
    return None


def subdomain_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> str | None:
    """The Pods' subdomain (= headless Service name), or None when DNS hostnames are disabled."""
    network = runtime.template.spec.network if runtime.template.spec else None
    if network is not None and network.enable_dns_hostnames is False:
        return None
    return (network.subdomain if network and network.subdomain else None) or str(job.metadata.name)


def completed_first(rjobs: list[ReplicatedJob]) -> set[str]:
    """Replicated jobs some other replicated job waits to be Complete (initializers): they finish
    before the rest start, so they are not in the gang (counting them would deadlock it, as in
    mpi-operator#608)."""
    return {d.name for r in rjobs for d in r.depends_on or [] if d.status == "Complete"}


def _pods_per_job(
    job: TrainJob, runtime: TrainingRuntimeSpec, rjob: ReplicatedJob, trainer: str | None, nodes: int | None
) -> tuple[int, bool]:
    """(pods per Job, whether the ML policy sets it): torch (or no policy) gives the trainer step
    ``numNodes`` pods; mpi gives the ``node`` replicated job ``numNodes`` pods (one fewer when the
    launcher runs as a node) and leaves the launcher at the template's; else the template's
    min(parallelism, completions)."""
    mpi = runtime.ml_policy.mpi if runtime.ml_policy else None
    if nodes is not None and mpi is not None and rjob.name == trainjob_mpi.NODE_RJOB:
        return trainjob_mpi.node_pods(mpi, nodes), True
    if nodes is not None and mpi is None and rjob.name == trainer:
        return nodes, True
    spec = rjob.template.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    return (min(parallelism, int(completions)) if completions is not None else parallelism), False


def node_resources(job: TrainJob, rjobs: list[ReplicatedJob], trainer: str | None) -> JSON | None:
    """One training node's ``{requests, limits}`` as the ML policies read them (kubeflow/trainer
    ``ExtractResourcePerNodeFromRuntime``): the TrainJob's ``resourcesPerNode`` if set, else the
    runtime's ``node`` container of the trainer's (or the ``node``) replicated job."""
    if job.spec.trainer is not None and job.spec.trainer.resources_per_node is not None:
        return job.spec.trainer.resources_per_node
    for r in rjobs:
        if r.name == trainer or r.name == NODE_CONTAINER:
            pod = ((r.template.get("spec") or {}).get("template") or {}).get("spec") or {}
            node = next((c for c in pod.get("containers") or [] if c.get("name") == NODE_CONTAINER), None)
            if node is not None and node.get("resources") is not None:
                return dict(node["resources"])
    return None


def policy_env(job: TrainJob, runtime: TrainingRuntimeSpec, master: str, nodes: int, res: JSON | None) -> list[JSON]:
    """The ML policy's environment of the trainer's ``node`` container (torch ``PET_*``, JAX ``JAX_*``,
    XGBoost ``DMLC_*``); empty for mpi or no policy. ``master``: the rank-0 pod's host name."""
    policy = runtime.ml_policy
    if policy is None:
        return []
    if policy.torch is not None:
        return torch_env(job, policy.torch, master, nodes, res)
    if policy.jax is not None:
        return jax_env(master, nodes)
    if policy.xgboost is not None:
        return xgboost_env(master, nodes, res)
    return []


def _pod_template(
    job: TrainJob,
    runtime: TrainingRuntimeSpec,
    rjob: ReplicatedJob,
    is_trainer: bool,
    ml_env: list[JSON],
    res: JSON | None,
    injection: trainjobstatus.Injection | None,
) -> JSON:
    pod: JSON = copy_json((rjob.template.get("spec") or {}).get("template") or {})
    step = step_of(rjob)
    policy = runtime.ml_policy
    if is_trainer:
        apply_trainer(job, pod)
        if ml_env:
            add_rendezvous(pod, NODE_CONTAINER, ml_env)
        trainjobstatus.inject(job, pod, injection)  # the status server's env and token volume, when served
    elif step in (STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER):
        apply_initializer(job, step, pod)
    targets = policy.torch.env_injection if policy is not None and policy.torch is not None else None
    for target in (targets.targets if targets else None) or []:
        if target.job_name == rjob.name:
            inject(pod, target.container_names, ml_env)
    if policy is not None and policy.mpi is not None:
        trainjob_mpi.apply_mpi(job, policy.mpi, rjob.name, is_trainer, pod, res)
    for patch, strategic in patches_for(job, rjob.name):
        pod = apply_pod_patch(pod, patch, strategic)
    claims = runtime.template.spec.volume_claim_policies if runtime.template.spec else None
    if claims:
        add_claim_volumes(pod, claims, str(job.metadata.name))
    return pod


@dataclass(frozen=True)
class RuntimeInfo:
    """One TrainJob with its runtime, as this reconcile sees them."""

    obj: JSON
    """The TrainJob as stored (for owner references and status)."""
    job: TrainJob
    runtime: TrainingRuntimeSpec
    runtime_obj: JSON | None
    """The runtime as JSON (from the job's snapshot once it has one)."""
    rjobs: list[ReplicatedJob]
    """The runtime's replicated jobs, in order."""
    pod_sets: list[PodSet]
    """One per replicated job, in order: ``replicas`` Jobs of pods per Job, the pod template with
    settings, ML policy and overrides applied, and per-pod requests."""
    template_metadata: JSON
    """``{labels, annotations}`` of the runtime template with the ``runtimePatches`` merged in; every
    child Job carries them."""
    job_metadata: dict[str, JSON]
    """Replicated job name -> ``{labels, annotations}`` of its Job template with the
    ``runtimePatches`` merged in."""
    policy_sized: frozenset[str]
    """Replicated jobs whose pods per Job the ML policy sets (parallelism = completions)."""
    trainer: str | None
    """The trainer's replicated job, if any."""
    num_nodes: int | None
    node_resources: JSON | None
    """One training node's ``{requests, limits}`` as the ML policies read them (:func:`node_resources`)."""
    subdomain: str | None
    """The headless Service and Pod subdomain, or None when DNS hostnames are disabled."""
    not_in_gang: frozenset[str]
    """Replicated jobs completed before the rest start (see :func:`completed_first`)."""
    queue: QueueChoice
    observed: list[JSON]
    """The TrainJob's Jobs of the current restart attempt, as cached."""
    previous: list[JSON]
    """Jobs of earlier restart attempts, to be deleted before the current attempt's are created."""
    statuses: list[JobStatus]
    """``jobsStatus`` of the observed Jobs, in runtime order."""
    finished: bool
    """The TrainJob already has Complete or Failed True."""
    started: bool
    """Some Job of the TrainJob is not suspended (it was released at least once)."""
    restarts: int
    """``status.restarts``: the current restart attempt."""
    counted_restarts: int
    """``status.restartsCountTowardsMax``."""
    decision: Decision | None
    """What the current attempt's failed Jobs call for (failurePolicy), None when none failed."""
    deadline_left: float | None
    """Seconds left of ``spec.activeDeadlineSeconds`` (counted from creation or the last resume;
    <= 0: exceeded), None when it does not apply (unset, suspended or finished)."""
    ttl_left: float | None
    """Seconds until ``ttlSecondsAfterFinished`` deletes the children (<= 0: due), None when it does not apply."""

    @property
    def template(self) -> JobSetSpec:
        """The runtime's JobSet spec."""
        return self.runtime.template.spec or JobSetSpec()

    @property
    def suspended(self) -> bool:
        """``spec.suspend`` of the TrainJob."""
        return bool(self.job.spec.suspend)

    def pod_set(self, rjob: str) -> PodSet:
        """The pod set of replicated job ``rjob``. Raises ``KeyError``."""
        for ps in self.pod_sets:
            if ps.name == rjob:
                return ps
        raise KeyError(rjob)

    def gang_input(self) -> GangInput:
        """The gang a scheduler sees: every pod set but those completed first."""
        pgp = self.runtime.pod_group_policy
        volcano = pgp.volcano if pgp is not None else None
        cosched = pgp.coscheduling if pgp is not None else None
        return GangInput(
            owner=self.obj,
            pod_sets=[ps for ps in self.pod_sets if ps.name not in self.not_in_gang],
            queue=self.queue,
            schedule_timeout_seconds=cosched.schedule_timeout_seconds if cosched else None,
            network_topology=volcano.network_topology if volcano else None,
            runtime_policy="volcano" if volcano is not None else "coscheduling" if cosched is not None else None,
            finished=self.finished,
            started=self.started,
        )


def _deadline_left(job: TrainJob, finished: bool, now: datetime) -> float | None:
    """As upstream ``reconcileDeadline`` (kubeflow/trainer ``pkg/controller/trainjob_controller.go``):
    one budget for the whole TrainJob from its creation or its last resume."""
    seconds = job.spec.active_deadline_seconds
    if not seconds or finished or job.spec.suspend or not job.metadata.creation_timestamp:
        return None
    start = parse_time(str(job.metadata.creation_timestamp))
    for c in (job.status.conditions if job.status else None) or []:
        if c.type == COND_SUSPENDED and c.status == "False" and c.last_transition_time:
            start = parse_time(c.last_transition_time)
    return seconds - (now - start).total_seconds()


def _ttl_left(job: TrainJob, runtime: TrainingRuntimeSpec, now: datetime) -> float | None:
    ttl = runtime.template.spec.ttl_seconds_after_finished if runtime.template.spec else None
    done = next(
        (
            c.last_transition_time
            for c in (job.status.conditions if job.status else None) or []
            if c.type in (COND_COMPLETE, COND_FAILED) and c.status == "True" and c.last_transition_time
        ),
        None,
    )
    if ttl is None or done is None:
        return None
    return ttl - (now - parse_time(done)).total_seconds()


def runtime_info(
    obj: JSON,
    job: TrainJob,
    runtime: TrainingRuntimeSpec,
    runtime_obj: JSON | None,
    observed: list[JSON],
    gang: str,
    now: datetime | None = None,
    injection: trainjobstatus.Injection | None = None,
) -> RuntimeInfo:
    """Derive everything about ``job`` (its JSON ``obj``) on ``runtime`` (``runtime_obj`` its JSON,
    for the queue default) with every Job it owns (``observed``), under ``--gang-scheduler-name=gang``,
    at ``now`` (default: the current time), with the status server's ``injection`` into trainer pods
    when the operator serves one. Pure but for the clock."""
    now = now or datetime.now(UTC)
    rjobs = replicated_jobs(runtime)
    trainer = trainer_rjob(rjobs)
    nodes = num_nodes(job, runtime)
    subdomain = subdomain_of(job, runtime)
    name = str(job.metadata.name)
    master = f"{name}-{trainer.name if trainer else NODE_CONTAINER}-0-0.{subdomain or name}"
    res = node_resources(job, rjobs, trainer.name if trainer else None)
    ml_env = policy_env(job, runtime, master, nodes or 1, res)
    pod_sets, sized = [], set()
    for r in rjobs:
        pods, by_policy = _pods_per_job(job, runtime, r, trainer.name if trainer else None, nodes)
        if by_policy:
            sized.add(r.name)
        is_trainer = trainer is not None and trainer.name == r.name
        template = _pod_template(job, runtime, r, is_trainer, ml_env, res, injection)
        pod_sets.append(PodSet(name=r.name, jobs=r.replicas, pods_per_job=pods, template=template))
    conditions = (job.status.conditions if job.status else None) or []
    finished = any(c.type in (COND_COMPLETE, COND_FAILED) and c.status == "True" for c in conditions)
    restarts = (job.status.restarts if job.status else None) or 0
    counted = (job.status.restarts_count_towards_max if job.status else None) or 0
    current = [j for j in observed if attempt_of(j) >= restarts]
    failed = [j for j in current if failure(j) is not None]
    policy = runtime.template.spec.failure_policy if runtime.template.spec else None
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
        trainer=trainer.name if trainer else None,
        num_nodes=nodes,
        node_resources=res,
        subdomain=subdomain,
        not_in_gang=frozenset(completed_first(rjobs)),
        queue=resolve_queue(obj, gang, runtime_obj),
        observed=current,
        previous=[j for j in observed if attempt_of(j) < restarts],
        statuses=jobs_status(rjobs, current),
        finished=finished,
        started=any(not (j.get("spec") or {}).get("suspend") for j in observed),
        restarts=restarts,
        counted_restarts=counted,
        decision=None if finished else decide(policy, failed, counted),
        deadline_left=_deadline_left(job, finished, now),
        ttl_left=_ttl_left(job, runtime, now) if finished else None,
    )

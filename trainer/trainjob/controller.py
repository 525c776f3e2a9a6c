"""The TrainJob controller: its declaration (:func:`controller`) and its kind (:class:`TrainJobKind`).

Declared once: TrainJobs; the Jobs, Services, ConfigMaps, Secrets and PersistentVolumeClaims
(``volumeClaimPolicies``) it owns, each carrying ``jobset.sigs.k8s.io/jobset-name``; the gang scheduler's
owned objects (PodGroups); the (Cluster)TrainingRuntimes, mapped to the TrainJobs that reference them;
cluster objects the gang scheduler reads (Volcano Queues), mapped to every TrainJob; the JobSets a
cluster switched from Kubeflow Trainer still has, mapped to their TrainJobs, which finish under JobSet
or are handed over (:mod:`trainer.trainjob.features.upstream_jobset`). The reconcile is
:meth:`trainer.jobs.reconcile.Reconciler.reconcile`; :class:`TrainJobKind` supplies the runtime info
(:func:`trainer.trainjob.runtime.expand.runtime_info`), the children
(:func:`trainer.trainjob.children.build_children`, what the ML policy makes once, such as the MPI
SSH Secret) and the conditions (:mod:`trainer.trainjob.status`). Children carry a controller owner
reference, so deleting the TrainJob lets the garbage collector remove them. Mirrors kubeflow/trainer
``pkg/controller/trainjob_controller.go``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from pydantic import ValidationError

from api.base import Condition
from api.conditions import (
    COND_MISCONFIGURED,
    COND_REPLICA_FAILURE,
    COND_RESTARTING,
    COND_RUNTIME_NOT_FOUND,
    REASON_NODE_LIMIT,
    REASON_RESOURCE_EXISTS,
)
from api.jobkinds import TRAINJOB, KindFacts
from api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBS,
    NETWORK_POLICIES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    RESOURCE_CLAIM_TEMPLATES,
    SECRETS,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
)
from api.trainer_v1alpha1 import (
    COND_FAILED,
    COND_SUSPENDED,
    REASON_RESUMED,
    TrainingRuntime,
    TrainJob,
    TrainJobStatus,
    runtime_from_dict,
)
from trainer.framework.controller import Controller, Key, Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs import reconcile
from trainer.jobs.child_writer import FOREIGN, PREVIOUS, Desired, Once, claim, taken_message
from trainer.jobs.conditions import JOB_TERMINAL, TRAINJOB_TERMINAL, finished, kept_conditions, problem
from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.jobs.gang.base import GangPlan, GangScheduler, decorate, gang_conditions
from trainer.jobs.reconcile import Blocked, Latest, declare, first_error
from trainer.jobs.status_writer import Event, Telling
from trainer.trainjob.children import build_children
from trainer.trainjob.features import upstream_jobset, volume_claims
from trainer.trainjob.features.devices import Devices
from trainer.trainjob.features.disruption import NO_GANG, disruption_budget
from trainer.trainjob.features.elastic import scale_status
from trainer.trainjob.features.injection import Injection
from trainer.trainjob.features.network_policy import labelled, network_policy
from trainer.trainjob.features.resize import REASON_RESIZED, REASON_SCALED, resize
from trainer.trainjob.features.snapshot import (
    SNAPSHOT_SUFFIX,
    runtime_of_snapshot,
    runtime_ref,
    snapshot_config_map,
    snapshot_name,
)
from trainer.trainjob.features.validation import (
    node_limit_errors,
    running_pods,
    runtime_errors,
    trainjob_errors,
)
from trainer.trainjob.runtime.expand import runtime_info
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.status import desired_conditions, job_restarts_status, jobs_status, runtime_not_found

TTL_CHILDREN = (SERVICES, CONFIGMAPS, SECRETS, PERSISTENT_VOLUME_CLAIMS)
"""Children besides Jobs that ``ttlSecondsAfterFinished`` deletes (those the TrainJob owns: a claim its
``volumeClaimPolicies`` retain has no owner reference and stays)."""
RUNNING_ONLY = (POD_DISRUPTION_BUDGETS, NETWORK_POLICIES)
"""Children only a TrainJob that runs has (a gang's PodDisruptionBudget, the NetworkPolicy of
``--trainjob-network-policy``): deleted once it finished, or when no longer desired."""


def trainjobs_of_runtime(runtime: JSON, reader: Reader) -> Iterable[Key]:
    """The TrainJobs that reference ``runtime`` (a TrainingRuntime only from its own namespace)."""
    ns, name = key_of(runtime)
    kind = runtime.get("kind", "")
    for tj in reader.items(TRAINJOBS):
        if runtime_ref(tj) == (kind, name) and (kind != TrainingRuntime.KIND or key_of(tj)[0] == ns):
            yield key_of(tj)


def runtime_of(obj: JSON, reader: Reader) -> JSON | None:
    """The cached runtime a TrainJob references, or None."""
    kind, name = runtime_ref(obj)
    if kind == TrainingRuntime.KIND:
        return reader.get(TRAINING_RUNTIMES, key_of(obj)[0], name)
    return reader.get(CLUSTER_TRAINING_RUNTIMES, None, name)


def devices_of(reader: Reader, namespace: str) -> Devices:
    """What the cache tells of DRA for a TrainJob in ``namespace``: whether the cluster serves
    ``resource.k8s.io/v1`` and its ResourceClaimTemplates there
    (:class:`~trainer.trainjob.features.devices.Devices`)."""
    return Devices(
        served=reader.served(RESOURCE_CLAIM_TEMPLATES),
        template=lambda name: reader.get(RESOURCE_CLAIM_TEMPLATES, namespace, name),
    )


def trainjobs_of_claim_template(template: JSON, reader: Reader) -> Iterable[Key]:
    """The TrainJobs in the namespace of ``template`` (a ResourceClaimTemplate) that name it in
    ``spec.trainer.resourceClaimsPerNode``: the GPUs they count come from it (a Job already made keeps
    its pods' environment; a TrainJob whose runtime or runtime patches name it is expanded again on its
    next change)."""
    ns, name = key_of(template)
    for tj in reader.items(TRAINJOBS):
        claims = ((tj.get("spec") or {}).get("trainer") or {}).get("resourceClaimsPerNode") or []
        if key_of(tj)[0] == ns and any(c.get("resourceClaimTemplateName") == name for c in claims):
            yield key_of(tj)


@dataclass(frozen=True, kw_only=True)
class TrainJobOptions:
    """The TrainJob controller's settings (command-line flags)."""

    running_condition: bool = False
    """``--trainjob-running-condition``: TrainJobs carry the richer conditions (``Running``, ``Resumed``)."""
    injection: Injection | None = None
    """The status server trainer pods report progress to (``--status-server-port``); None: none."""
    max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB
    """``--max-nodes-per-job``: the most nodes (pods of one replicated job) a TrainJob may have; 0: no limit."""
    status_coalesce_seconds: float = 1.0
    """``--status-coalesce-seconds``: how long a change of only ``jobsStatus`` may wait to be written."""
    network_policy: bool = False
    """``--trainjob-network-policy``: each TrainJob gets a NetworkPolicy letting in only its own pods."""


def invalid(obj: JSON, message: str) -> list[Condition]:
    """``Failed`` (``ResourcesCreationFailed``): the TrainJob's spec or runtime cannot be read."""
    return reconcile.invalid(obj, TRAINJOB, message)


PERMISSIONS = (
    Permission(
        TRAINJOBS, ("delete",), "ttlSecondsAfterFinished, the TrainJob's or its runtime's runPolicy's (KEP-2899)"
    ),
)
TELLING = Telling(
    warnings=frozenset(
        {COND_FAILED, COND_RUNTIME_NOT_FOUND, COND_MISCONFIGURED, COND_RESTARTING, COND_REPLICA_FAILURE}
    ),
    progress_fields=frozenset({"jobsStatus", "startTime", "replicas"}),
)
"""How a TrainJob's changes are told: its problems as Warning events; ``jobsStatus`` and ``startTime``
coalesced (a new running TrainJob's ``startTime`` goes with its first counts)."""


class TrainJobKind:
    """The TrainJob kind as :meth:`~trainer.jobs.reconcile.Reconciler.reconcile` runs it
    (:class:`~trainer.jobs.reconcile.Kind`), under the gang scheduler named ``gang_name``."""

    facts: KindFacts = TRAINJOB

    def __init__(self, options: TrainJobOptions, gang_name: str) -> None:
        self.options, self.gang_name = options, gang_name

    def expand(self, reader: Reader, obj: JSON, job: TrainJob) -> RuntimeInfo | Blocked:
        """The TrainJob's :class:`~trainer.trainjob.runtime.info.RuntimeInfo` from its runtime snapshot (else the
        runtime it references) and its Jobs; :class:`Blocked` when the runtime is missing or invalid, or
        the TrainJob breaks a rule the webhook enforces (said here when the webhook does not run)."""
        return _expand(self.options, self.gang_name, reader, obj, job)

    def desired(self, reader: Reader, info: RuntimeInfo, plan: GangPlan) -> Desired:
        """The TrainJob's writes now (:func:`desired`)."""
        return desired(reader, info, plan, gang_name=self.gang_name, isolated=self.options.network_policy)

    def settle(self, info: RuntimeInfo, desired: Desired, latest: Latest) -> RuntimeInfo:
        """``info`` with the Jobs just written counted in jobsStatus (:func:`settled`)."""
        return settled(info, desired, latest)

    def conditions(self, info: RuntimeInfo, plan: GangPlan) -> list[Condition] | None:
        """The TrainJob's conditions (:func:`trainer.trainjob.status.desired_conditions`) and, while it runs,
        the gang's; None once a TTL deletes the TrainJob itself (no status write)."""
        if _ttl_due(info) and info.ttl_deletes_job:
            return None  # being deleted: no status write
        current = (info.job.status.conditions if info.job.status else None) or []
        out = desired_conditions(info, current, self.options.running_condition)
        return out if info.finished else out + gang_conditions(plan)

    def status(self, obj: JSON, info: RuntimeInfo | None, conditions: list[JSON] | None) -> JSON:
        """The TrainJob's status (:func:`status`)."""
        return status(obj, info, conditions)

    def events(self, info: RuntimeInfo | None) -> list[Event]:
        """A restart's Warning event; ``Resumed`` when there is no Resumed condition to tell it."""
        out = []
        if info is not None and info.decision is not None and not info.decision.fail:
            out.append(("Warning", info.decision.reason, info.decision.message))
        suspended = next((c for c in _conditions(info.job) if c.type == COND_SUSPENDED), None) if info else None
        if info is not None and not self.options.running_condition and not info.suspended and suspended is not None:
            out.append(("Normal", REASON_RESUMED, "TrainJob is resumed"))  # no Resumed condition to tell it
        return out


def _expand(
    options: TrainJobOptions, gang_name: str, reader: Reader, obj: JSON, job: TrainJob
) -> RuntimeInfo | Blocked:
    """:meth:`TrainJobKind.expand`."""
    handed = upstream_jobset.handover(reader, obj, job, datetime.now(UTC))
    if handed is not None:
        return handed  # a JobSet Kubeflow Trainer made runs it, or goes first
    ns = str(job.metadata.namespace)
    kind, name = runtime_ref(obj)
    snapshot = reader.get(CONFIGMAPS, ns, snapshot_name(str(job.metadata.name)))
    if snapshot is not None and (problem_of_snapshot := _snapshot_problem(obj, snapshot)) is not None:
        return problem_of_snapshot
    runtime_obj = runtime_of_snapshot(snapshot) if snapshot is not None else runtime_of(obj, reader)
    if runtime_obj is None:
        if _finished(job):
            return Blocked(None)  # finished without a snapshot (made before them): the outcome stays
        return Blocked([runtime_not_found(kind, name, ns if kind == TrainingRuntime.KIND else None)])
    try:
        runtime = runtime_from_dict(runtime_obj)
    except ValidationError as e:
        return Blocked(invalid(obj, f"runtime {name!r} is invalid: {first_error(e)}"))
    observed = reader.owned(JOBS, str(job.metadata.uid))
    # What the webhook refuses is said here when it does not run; a started or finished job is left be.
    settled = bool(observed) or _finished(job)
    problems = [] if settled else runtime_errors(runtime.spec)
    if problems:
        return Blocked(invalid(obj, f"runtime {name!r} is invalid: {'; '.join(problems)}"))
    devices = devices_of(reader, ns)
    out = runtime_info(
        obj, job, runtime.spec, runtime_obj, observed, gang_name, injection=options.injection, devices=devices
    )
    problems = [] if settled else trainjob_errors(out, options.max_nodes_per_job)
    if problems:
        return Blocked(invalid(obj, "; ".join(problems)))
    # The node limit holds for a started job too (the webhook may not run): what it runs stays, it
    # grows by nothing while its spec asks for more than the limit allows.
    grown = [] if _finished(job) else node_limit_errors(out, options.max_nodes_per_job, running_pods(observed))
    if grown:
        return Blocked([*kept_conditions(obj), problem(REASON_NODE_LIMIT, "; ".join(grown))])
    return out


def _snapshot_problem(obj: JSON, snapshot: JSON) -> Blocked | None:
    """None when the TrainJob ``obj`` may expand from ``snapshot`` (the ConfigMap named like its runtime
    snapshot): the TrainJob controls it and it freezes the runtime of its ``runtimeRef``. Else the job
    waits (an earlier TrainJob's snapshot, not yet collected) or is told so: someone else's ConfigMap
    (``ErrResourceExists``), or one that freezes another runtime (``Failed``), as kubeflow/trainer
    refuses a snapshot it does not own. Nothing is built from it either way."""
    taken = claim(snapshot, obj)
    if taken == PREVIOUS:
        return Blocked(None)  # its deletion brings the next reconcile
    if taken == FOREIGN:
        message = taken_message(snapshot, obj, taken)
        return Blocked([*kept_conditions(obj), problem(REASON_RESOURCE_EXISTS, message)])
    frozen = runtime_of_snapshot(snapshot) or {}
    kind, name = runtime_ref(obj)
    if (frozen.get("kind"), meta(frozen).name) != (kind, name):
        message = f"ConfigMap {snapshot['metadata']['name']} does not freeze the runtimeRef {kind} {name!r}; delete it"
        return Blocked(invalid(obj, message))
    return None


def desired(
    reader: Reader, info: RuntimeInfo, plan: GangPlan, *, gang_name: str = NO_GANG, isolated: bool = False
) -> Desired:
    """The TrainJob's writes now: its runtime snapshot and children while it runs (none of a new
    attempt until the previous one's Jobs are gone), with a gang's PodDisruptionBudget
    (:mod:`~trainer.trainjob.features.disruption`, ``gang_name``: ``--gang-scheduler-name``) and, when
    ``isolated`` (``--trainjob-network-policy``), its NetworkPolicy, its pods labelled for it
    (:mod:`~trainer.trainjob.features.network_policy`); once finished, the deletes of Jobs that still run
    and of those two, and, after ``ttlSecondsAfterFinished``, of every child but the snapshot."""
    ns, uid = str(info.job.metadata.namespace), str(info.job.metadata.uid)
    out = Desired(delete=list(plan.delete))
    out.once.append(Once(CONFIGMAPS, ns, snapshot_name(str(info.job.metadata.name)), _snapshot(info)))
    jobs = [*info.previous, *info.replaced, *info.observed]
    candidates = (disruption_budget(info, gang_name), network_policy(info.job) if isolated else None)
    running_only = [o for o in candidates if o is not None and not info.finished]
    wanted = {(o["kind"], o["metadata"]["name"]) for o in running_only}
    for res in RUNNING_ONLY:  # finished, or no longer desired (e.g. the switch turned off)
        owned = reader.owned(res, uid)
        out.delete += [
            (res, *key_of(o)) for o in owned if (res.kind, o["metadata"]["name"]) not in wanted and not _deleting(o)
        ]
    if info.finished or (info.deadline_left is not None and info.deadline_left <= 0):
        # As JobSet does: a finished TrainJob's Jobs that still run are deleted, so their pods
        # stop holding nodes (e.g. MPI workers once the launcher is done); so does a deadline.
        out.delete += [(JOBS, *key_of(j)) for j in jobs if finished(j, JOB_TERMINAL) is None and not _deleting(j)]
        if _ttl_due(info) and info.ttl_deletes_job:
            # The TrainJob's own ttlSecondsAfterFinished, or its runtime's runPolicy's (KEP-2899): the
            # TrainJob itself goes; the garbage collector takes its children (owner references).
            out.delete.append((TRAINJOBS, *key_of(info.obj)))
        elif _ttl_due(info):
            # ttlSecondsAfterFinished: the group goes (JobSet deletes the JobSet); the TrainJob and
            # its runtime snapshot stay, with their outcome.
            out.delete += [
                (JOBS, *key_of(j)) for j in jobs if finished(j, JOB_TERMINAL) is not None and not _deleting(j)
            ]
            for res in TTL_CHILDREN:
                out.delete += [
                    (res, *key_of(o))
                    for o in reader.owned(res, uid)
                    if not o["metadata"]["name"].endswith(SNAPSHOT_SUFFIX) and not _deleting(o)
                ]
        return out
    if info.previous:
        # A restart: every Job of the earlier attempt goes, with its Pods (foreground), before
        # any Job of the new attempt is created: two attempts never run at once.
        out.delete_foreground += [(JOBS, *key_of(j)) for j in info.previous if not _deleting(j)]
    # A Job restarted alone (RestartJob) goes with its Pods before it is created again; the others run on.
    out.delete_foreground += [(JOBS, *key_of(j)) for j in info.replaced if not _deleting(j)]
    restarting = info.decision is not None and info.decision.restarts_group
    held = {key_of(j) for j in info.replaced}
    if info.decision is not None and info.decision.job is not None and not info.decision.fail:
        held.add((ns, info.decision.job))  # restarted alone: replaced from the next reconcile on
    children = build_children(info, info.suspended or plan.hold)
    out.apply += plan.apply
    out.once += plan.create
    for child in info.policy.created_once(info):
        out.once.append(Once(child.resource, ns, child.name, child.make))
    for pvc in volume_claims.claims(info.obj, info.template.volume_claim_policies or []):
        meta = pvc["metadata"]
        out.once.append(Once(PERSISTENT_VOLUME_CLAIMS, meta["namespace"], meta["name"], partial(dict, pvc)))
    out.apply += children.config_maps
    if children.service is not None:
        out.apply.append(children.service)
    out.apply += running_only
    if not info.previous and not restarting:
        # Suspended Jobs whose size changed go and are created again at the new size (a resize).
        sized = resize(info.observed, children.jobs, info.elastic is not None)
        out.delete_foreground += [(JOBS, *key) for key in sized.delete]
        out.patch += [(JOBS, ns_, name, patch) for ns_, name, patch in sized.scale]
        if sized.message:
            out.told.append(("Normal", REASON_RESIZED, sized.message))
        if sized.scaled:
            out.told.append(("Normal", REASON_SCALED, sized.scaled))
        held |= sized.hold
        new_jobs = decorate([j for j in children.jobs if key_of(j) not in held], plan, info.not_in_gang)
        out.apply += labelled(new_jobs, str(info.job.metadata.name)) if isolated else new_jobs
    return out


def settled(info: RuntimeInfo, desired: Desired, latest: Latest) -> RuntimeInfo:
    """``info`` with the Jobs just created or changed counted in jobsStatus at once (a new suspended
    Job is ``suspended: 1``), not only once the watch brings them back."""
    jobs = {key_of(j): j for j in info.observed}
    changed = False
    for obj in desired.apply:
        if obj.get("kind") != JOBS.kind:
            continue
        key = key_of(obj)
        now = latest(JOBS, *key)
        if now is not None and now is not jobs.get(key):
            jobs[key], changed = now, True
    if not changed:
        return info
    observed = list(jobs.values())
    return dataclasses.replace(info, observed=observed, statuses=jobs_status(info.rjobs, observed))


def _ttl_due(info: RuntimeInfo) -> bool:
    """The TTL that holds for the finished TrainJob has passed."""
    return info.ttl_left is not None and info.ttl_left <= 0


def _snapshot(info: RuntimeInfo) -> Callable[[], JSON]:
    runtime_obj = info.runtime_obj or {}
    return lambda: snapshot_config_map(info.obj, runtime_obj)


def status(obj: JSON, info: RuntimeInfo | None, conditions: list[JSON] | None) -> JSON:
    """The TrainJob's status: conditions, jobsStatus (kept as it was once finished), restarts of the
    whole group and of single Jobs (``replicatedJobsStatus``)."""
    if info is None:
        return {"conditions": conditions}
    old = obj.get("status") or {}
    if info.finished:  # the outcome is final, jobsStatus included (the Jobs may go by TTL)
        statuses = old.get("jobsStatus")
    else:
        statuses = TrainJobStatus(jobs_status=info.statuses).to_dict().get("jobsStatus")
    restarts, counted = info.restarts, info.counted_restarts
    if info.decision is not None and info.decision.restarts_group:
        restarts, counted = restarts + 1, counted + int(info.decision.counted)
    return {
        "conditions": conditions,
        "jobsStatus": statuses,
        "restarts": restarts or None,
        "restartsCountTowardsMax": counted or None,
        "replicatedJobsStatus": job_restarts_status(info),
        **scale_status(info),
        **times(old, info, conditions),
    }


def times(old: JSON, info: RuntimeInfo, conditions: list[JSON] | None) -> JSON:
    """``startTime`` and ``completionTime`` (RFC 3339). ``startTime`` as JobSet keeps it
    (kubernetes-sigs/jobset KEP-1186, ``keps/1186-active-deadline-seconds``): set to now when the
    TrainJob is not suspended and has none, cleared while it is suspended, set to now again on a restart
    of the whole group (failurePolicy ``RestartJobSet``), unchanged by a Job restarted alone, kept once
    finished. ``completionTime``: the time of the ``Complete`` or ``Failed`` condition, once."""
    start, done = old.get("startTime"), old.get("completionTime")
    terminal = next(
        (c for c in conditions or [] if c.get("type") in TRAINJOB_TERMINAL and c.get("status") == "True"), None
    )
    if terminal is not None:
        done = done or terminal.get("lastTransitionTime") or info.now
        start = start or None
    elif info.suspended:
        start = None
    elif not start or (info.decision is not None and info.decision.restarts_group):
        start = info.now
    return {"startTime": start, "completionTime": done}


def _conditions(job: TrainJob) -> list[Condition]:
    return list((job.status.conditions if job.status else None) or [])


def _finished(job: TrainJob) -> bool:
    return finished(_conditions(job), TRAINJOB_TERMINAL) is not None


def _deleting(obj: JSON) -> bool:
    return bool(meta(obj).deletion)


def controller(gang: GangScheduler, options: TrainJobOptions | None = None) -> Controller:
    """The TrainJob controller's declaration under gang scheduler ``gang``: also owns the claims of
    ``volumeClaimPolicies`` and watches the (Cluster)TrainingRuntimes, each mapped to the TrainJobs that
    reference them, the ResourceClaimTemplates (DRA), each mapped to the TrainJobs whose
    ``resourceClaimsPerNode`` name it (a cluster without ``resource.k8s.io/v1`` leaves that cache absent:
    :func:`devices_of`), and the JobSets Kubeflow Trainer made, each mapped to its TrainJob
    (:mod:`trainer.trainjob.features.upstream_jobset`). A reconcile reads its Job writes back
    (``settles``): their echoes need no reconcile. As JobSet and Trainer, it announces no creation: the
    Job controller tells each pod it creates."""
    options = options or TrainJobOptions()
    return declare(
        "trainjob",
        TrainJobKind(options, gang.name),
        gang,
        telling=TELLING,
        settles=True,
        announce=False,
        also_owns=(PERSISTENT_VOLUME_CLAIMS, *RUNNING_ONLY),
        watches=(
            Watches(TRAINING_RUNTIMES, trainjobs_of_runtime),
            Watches(CLUSTER_TRAINING_RUNTIMES, trainjobs_of_runtime),
            Watches(RESOURCE_CLAIM_TEMPLATES, trainjobs_of_claim_template),
            upstream_jobset.WATCHES,
        ),
        status_coalesce_seconds=options.status_coalesce_seconds,
    )

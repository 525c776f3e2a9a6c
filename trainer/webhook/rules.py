"""Admission rules, as pure functions: (object, old object, facts) -> a verdict.

What the apiserver cannot check by itself (the CRD schemas already enforce types, enums, bounds
and immutability with CEL). Every refusal names the field and the fix. Follows kubeflow/trainer
``pkg/webhooks`` and ``pkg/runtime/framework/plugins/jobset`` validations (v2.0-v2.3; the ML policies'
own, e.g. their reserved environment, are theirs: :mod:`trainer.trainjob.policies`)
and mpi-operator ``pkg/apis/kubeflow/validation``; the Volcano queue rules are those Volcano's
vcjob admission applies (``pkg/webhooks/admission/jobs/validate/admit_job.go``), which its own
PodGroup webhook lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from trainer.api.jobkinds import MPIJOB, TRAINJOB, facts_of
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.labels import (
    COMPLETION_INDEX_ANNOTATION,
    JOB_NAME_LABEL,
    KUEUE_QUEUE_LABEL,
    OPERATOR_NAME,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
)
from trainer.api.queues import QueueChoice, resolve_queue
from trainer.api.snapshot import runtime_of_snapshot
from trainer.api.trainer_v1alpha1 import (
    NODE_CONTAINER,
    RUNTIME_DEPRECATION_POLICY_URL,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    SUPPORT_DEPRECATED,
    SUPPORT_LABEL,
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJob,
    runtime_from_dict,
)
from trainer.framework import json_codec
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.child_writer import OURS, claim
from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.jobs.gang import WORKLOAD, WORKLOAD_API_MISSING, queue_problems
from trainer.mpijob.children import LAUNCHER_MISSING, worker_replica_index
from trainer.mpijob.children import validate as validate_mpijob_spec
from trainer.mpijob.validation import mpijob_errors
from trainer.trainjob.features.snapshot import runtime_ref, unsupported_runtime
from trainer.trainjob.policies import active, policy_of
from trainer.trainjob.runtime.expand import runtime_info
from trainer.trainjob.spec.devices import NO_DEVICES, Devices, count_warnings
from trainer.trainjob.spec.overrides import (
    POD_SPEC_OVERRIDES,
    POD_TEMPLATE_OVERRIDES,
    RUNTIME_PATCHES,
    override_targets,
)
from trainer.trainjob.spec.shape import replicated_jobs, step_of
from trainer.trainjob.validation import (
    RFC1035,
    lifecycle_warnings,
    runtime_errors,
    suspend_warnings,
    trainjob_errors,
)

OVERRIDE_FIELDS = (POD_SPEC_OVERRIDES, POD_TEMPLATE_OVERRIDES, RUNTIME_PATCHES)


MAX_DEPTH = 64
"""Objects and arrays one admitted object may nest (a Pod spec with affinity nests about 20)."""


@dataclass
class Verdict:
    """The outcome of admission: refusals (the object is rejected) and warnings (it is admitted)."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class AdmissionFacts:
    """What the rules may look up (read-only views of the operator's caches)."""

    runtime: Callable[[str, str, str | None], JSON | None]
    """``runtime(kind, name, namespace)``: the (Cluster)TrainingRuntime, or None."""
    active_pods: Callable[[str, str, str], int]
    """``active_pods(kind, namespace, name)``: active pods of the job's child Jobs."""
    volcano_queues: Callable[[], list[JSON] | None]
    """Volcano Queues, or None when the operator does not run with Volcano."""
    local_queue_exists: Callable[[str, str], bool | None]
    """``local_queue_exists(namespace, name)``; None when unknown (Kueue not installed)."""
    gang: str = "none"
    mpijob: Callable[[str, str], JSON | None] = lambda _namespace, _name: None
    """``mpijob(namespace, name)``: the MPIJob, or None."""
    max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB
    """``--max-nodes-per-job``: the most nodes (pods of one replicated job, MPI workers) a job may have; 0: no limit."""
    snapshot: Callable[[str, str], JSON | None] = lambda _namespace, _name: None
    """``snapshot(namespace, trainjob)``: the TrainJob's runtime snapshot, ConfigMap
    ``<trainjob>-runtime-snapshot`` (:mod:`trainer.trainjob.features.snapshot`), or None."""
    workload_api: Callable[[], bool | None] = lambda: None
    """Whether the cluster serves the Workload API (``scheduling.k8s.io/v1beta1`` Workload and PodGroup);
    None when unknown (the operator does not watch it: another gang scheduler)."""
    devices: Callable[[str], Devices] = lambda _namespace: NO_DEVICES
    """``devices(namespace)``: whether the cluster serves DRA and its ResourceClaimTemplates in that
    namespace (:class:`trainer.trainjob.spec.devices.Devices`)."""
    status_server: bool | None = None
    """Whether the operator serves trainers' status posts (``--status-server-port`` not 0); None: unknown."""


def pydantic_errors(e: ValidationError, prefix: str = "") -> list[str]:
    """One ``<prefix><field path>: <message>`` per error of ``e``."""
    out = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"])
        out.append(f"{prefix}{loc}: {err['msg']}")
    return out


def nesting_errors(obj: JSON) -> list[str]:
    """Why ``obj`` nests deeper than :data:`MAX_DEPTH` objects and arrays (naming the path of its deepest
    point), or nothing. Upstream has no such bound; a preserve-unknown-fields field lets a tenant nest
    without end, which every reader of the object then pays for."""
    depth, path = json_codec.deepest(obj)
    if depth <= MAX_DEPTH:
        return []
    shown = path if len(path) <= 200 else path[:200] + "..."
    return [f"{shown or 'the object'}: nested {depth} objects and arrays deep, more than {MAX_DEPTH}: flatten it"]


def check_name(obj: JSON, max_len: int = 63) -> list[str]:
    """metadata.name must be an RFC 1035 label of at most ``max_len`` characters."""
    name = str(meta(obj).name or "")
    if not name:
        return []  # generateName: the apiserver picks one
    out = []
    if len(name) > max_len:
        out.append(f"metadata.name {name!r} has {len(name)} characters; use at most {max_len}")
    if not RFC1035.match(name):
        out.append(
            f"metadata.name {name!r} must be an RFC 1035 label: lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit"
        )
    return out


def _rjob_containers(runtime: TrainingRuntime | ClusterTrainingRuntime) -> dict[str, tuple[set[str], set[str], str]]:
    """Replicated job name -> (container names, init container names, ancestor step)."""
    out = {}
    for r in replicated_jobs(runtime.spec):
        pod = ((r.template.get("spec") or {}).get("template") or {}).get("spec") or {}
        out[r.name] = (
            {c.get("name", "") for c in pod.get("containers") or []},
            {c.get("name", "") for c in pod.get("initContainers") or []},
            step_of(r),
        )
    return out


def validate_trainjob(obj: JSON, old: JSON | None, facts: AdmissionFacts) -> Verdict:
    """Admission of a TrainJob create (``old`` None) or update."""
    v = Verdict(errors=check_name(obj) if old is None else [])
    try:
        job = TrainJob.model_validate(obj)
    except ValidationError as e:
        v.errors += pydantic_errors(e)
        return v
    unsupported = unsupported_runtime(obj)
    if unsupported is not None:  # the CRD refuses it first; said alike where it runs without the rule
        v.errors.append(unsupported)
        return v
    ref = job.spec.runtime_ref
    kind = ref.kind or ClusterTrainingRuntime.KIND
    in_place = False
    runtime_obj = _frozen_runtime(obj, facts) if old is not None else None
    if runtime_obj is None:
        runtime_obj = facts.runtime(kind, ref.name, job.metadata.namespace if kind == TrainingRuntime.KIND else None)
    if runtime_obj is None:
        if old is None:
            where = f" in namespace {job.metadata.namespace!r}" if kind == TrainingRuntime.KIND else ""
            v.errors.append(
                f"spec.runtimeRef: {kind} {ref.name!r} not found{where}; create it first or name an existing one"
            )
    else:
        try:
            runtime = runtime_from_dict(runtime_obj)
        except ValidationError:
            runtime = None
            v.errors.append(f"spec.runtimeRef: {kind} {ref.name!r} is invalid; fix the runtime first")
        if runtime is not None:
            in_place = policy_of(runtime.spec).scales_in_place(runtime.spec)
            v.errors += _check_against_runtime(job, runtime)
            errors, warnings = _check_expansion(obj, job, runtime, runtime_obj, facts)
            v.errors += errors
            v.warnings += warnings
            if old is not None and not in_place:
                v.errors += check_gang_size_change(obj, old, runtime, facts)
        warning = deprecation_warning({**runtime_obj, "kind": kind}, referenced=True)
        if warning:
            v.warnings.append(warning)
    if old is not None:
        v.errors += check_trainer_change(obj, old, facts, in_place)
        v.errors += _check_override_change(obj, old, facts, TRAINJOB.resource.kind)
        v.errors += check_queue_change(obj, old, TRAINJOB.resource.kind, facts)
    v.errors += _check_queue(obj, facts, v)
    if (dropped := kueue_drops_warning(job)) is not None:
        v.warnings.append(dropped)
    return v


def check_gang_size_change(
    obj: JSON, old: JSON, runtime: TrainingRuntime | ClusterTrainingRuntime, facts: AdmissionFacts
) -> list[str]:
    """``spec.trainer.numNodes`` is immutable while the Workload API gang-schedules the TrainJob (its runtime
    sets ``spec.scheduling`` and the operator runs with ``--gang-scheduler-name=workload``): the PodGroups'
    ``minCount`` is computed from it once and never changed (kubeflow/trainer KEP-3015). Not called for a
    TrainJob its ML policy scales in place, whose ``minCount`` is the policy's minimum at every size."""
    if facts.gang != WORKLOAD or runtime.spec.scheduling is None:
        return []
    before, after = (((o.get("spec") or {}).get("trainer") or {}).get("numNodes") for o in (old, obj))
    if before == after:
        return []
    return [
        f"spec.trainer.numNodes: cannot change from {before} to {after}: the runtime's spec.scheduling gang-schedules "
        "this TrainJob through the Workload API, whose PodGroups' minCount was computed from numNodes and does not "
        "change; delete the TrainJob and create it again with the new numNodes"
    ]


def changed_trainer_fields(obj: JSON, old: JSON) -> list[str]:
    """The fields of ``spec.trainer`` (camelCase, in their order in ``obj`` then ``old``) whose value differs
    between ``old`` and ``obj``; a field set on one side only counts as changed."""
    after, before = (((o.get("spec") or {}).get("trainer") or {}) for o in (obj, old))
    names = list(dict.fromkeys([*after, *before]))
    return [n for n in names if after.get(n) != before.get(n)]


def check_trainer_change(obj: JSON, old: JSON, facts: AdmissionFacts, in_place: bool = False) -> list[str]:
    """Every field of ``spec.trainer`` (``numNodes`` and ``resourcesPerNode`` among them: a resize) may
    change only while the TrainJob is suspended, ``spec.suspend`` true in ``old`` (so the update that
    resumes it may carry the change, as Kueue admits in one request), and its Jobs have no active pods:
    the reconcile rebuilds the suspended Jobs from the new spec (:mod:`trainer.trainjob.features.resize`),
    while a running Job is never rewritten. kubeflow/trainer keeps all of ``spec.trainer`` immutable
    (``self == oldSelf``, #3157); #3995 asks for ``numNodes`` while suspended, which this follows for
    every field. One message per changed field, naming it and the rule. A TrainJob whose ML policy scales it
    ``in_place`` (:meth:`~trainer.trainjob.policies.base.Policy.scales_in_place`) may change ``numNodes``
    while it runs, within the policy's bounds (checked with the runtime): its Jobs are scaled in place
    (:mod:`trainer.trainjob.features.resize`)."""
    changed = changed_trainer_fields(obj, old)
    if in_place:
        changed = [name for name in changed if name != "numNodes"]
    if not changed:
        return []
    kind = TRAINJOB.resource.kind
    if not _suspended(old, kind):
        return [
            f"spec.trainer.{name}: may change only while the TrainJob is suspended (spec.suspend true before the "
            f"update); set spec.suspend to true first, then change {name} (the update that resumes the job may "
            "carry it)"
            for name in changed
        ]
    return _refused_while_pods_active(obj, kind, facts, [f"spec.trainer.{name}" for name in changed])


def _refused_while_pods_active(obj: JSON, kind: str, facts: AdmissionFacts, fields: list[str]) -> list[str]:
    """One refusal for each of ``fields`` (how a refusal names what changed) while the Jobs of the job
    ``obj`` of ``kind`` still have active pods (they are not rebuilt until those are gone); none otherwise."""
    m = meta(obj)
    active = facts.active_pods(kind, str(m.namespace), str(m.name))
    if active <= 0:
        return []
    return [
        f"{f}: cannot change while the TrainJob's Jobs still have {active} active pods; keep "
        f"spec.suspend true until its pods are gone, then change {f}"
        for f in fields
    ]


def _frozen_runtime(obj: JSON, facts: AdmissionFacts) -> JSON | None:
    """The runtime an update of the TrainJob ``obj`` is checked against: the one its runtime snapshot
    froze when that snapshot is of its ``runtimeRef``, else None (then the live runtime). The reconcile
    expands from the snapshot, so an edited or deleted runtime neither refuses nor admits an update it
    would not build (kubeflow/trainer#3960, fixing #3923)."""
    m = meta(obj)
    config_map = facts.snapshot(str(m.namespace or ""), str(m.name or ""))
    if config_map is None or claim(config_map, obj) != OURS:
        return None
    frozen = runtime_of_snapshot(config_map)
    if frozen is None or (str(frozen.get("kind") or ""), str(meta(frozen).name or "")) != runtime_ref(obj):
        return None
    return frozen


def check_queue_change(obj: JSON, old: JSON, kind: str, facts: AdmissionFacts) -> list[str]:
    """The queue is immutable once the job has started: it may change only while the job is
    suspended (then nothing of it runs in the old queue)."""
    new, before = admission_queue(obj, facts), admission_queue(old, facts)
    if new.name == before.name or _suspended(old, kind):
        return []
    return [
        f"{new.source or before.source}: the queue cannot change from {before.name!r} to {new.name!r} once the "
        "job has started; suspend the job first, or create a new one"
    ]


def _check_against_runtime(job: TrainJob, runtime: TrainingRuntime | ClusterTrainingRuntime) -> list[str]:
    """Overrides of containers the runtime lacks, of the environment of the step containers, and of
    environment the runtime's ML policies reserve (:meth:`trainer.trainjob.policies.base.Policy.reserves`)."""
    errors = []
    rjobs = _rjob_containers(runtime)
    policies = active(runtime.spec)

    def reserved(name: str) -> bool:
        return any(p.reserves(name) for p in policies)

    for t in override_targets(job):
        where = f"spec.{t.field}[{t.index}]"
        if t.rjob not in rjobs:
            continue  # said by trainjob_errors (override_target_errors), with or without the webhook
        names, init_names, step = rjobs[t.rjob]
        for kind_name, have in (("containers", names), ("initContainers", init_names)):
            for c in t.containers(kind_name):
                cname = c.get("name", "")
                if cname not in have:
                    # kubeflow/trainer's words for a runtimePatches entry (jobset.go, #3948: init
                    # containers and containers are told apart, each checked against the template's own).
                    upstream = (
                        f"must not have {'initContainer' if kind_name == 'initContainers' else 'container'} "
                        f"that doesn't exist in the runtime job {t.rjob}: "
                        if t.field == RUNTIME_PATCHES
                        else ""
                    )
                    errors.append(
                        f"{where}.{kind_name}: {upstream}container {cname!r} is not in replicated job {t.rjob!r} "
                        f"(it has {', '.join(sorted(have)) or 'none'})"
                    )
                protected = cname in (NODE_CONTAINER, STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER) and (
                    step in ("trainer", STEP_DATASET_INITIALIZER, STEP_MODEL_INITIALIZER)
                )
                if c.get("env") and protected and t.field != RUNTIME_PATCHES:
                    errors.append(
                        f"{where}.{kind_name}[{cname}].env: the environment of container {cname!r} is set "
                        "through spec.trainer.env or spec.initializer, not through overrides"
                    )
                for e in c.get("env") or []:
                    if reserved(str(e.get("name", ""))):
                        errors.append(
                            f"{where}.{kind_name}[{cname}].env: {e.get('name')!r} is reserved: the operator sets it"
                        )
    for e in (job.spec.trainer.env if job.spec.trainer else None) or []:
        if reserved(e.name):
            errors.append(
                f"spec.trainer.env: {e.name!r} is set by the operator from the runtime's mlPolicy and reserved"
            )
    return errors


def _check_expansion(
    obj: JSON,
    job: TrainJob,
    runtime: TrainingRuntime | ClusterTrainingRuntime,
    runtime_obj: JSON,
    facts: AdmissionFacts,
) -> tuple[list[str], list[str]]:
    """Expand the TrainJob as the reconciler will (the pure core) and check what it produces, as the
    reconciler does when the webhook does not run (:func:`trainer.trainjob.validation.trainjob_errors`,
    ``--max-nodes-per-job`` and DRA included); input the core cannot expand is refused here rather than
    failing in the reconcile. Returns (errors, warnings); the warning is KEP-2782's for a torch trainer
    whose DRA claims give no GPU count (:func:`trainer.trainjob.spec.devices.count_warnings`)."""
    problems = runtime_errors(runtime.spec)
    if problems:
        return [f"spec.runtimeRef: runtime {runtime.metadata.name!r} is invalid: {p}" for p in problems], []
    devices = facts.devices(str(job.metadata.namespace or ""))
    try:
        info = runtime_info(obj, job, runtime.spec, runtime_obj, gang=facts.gang, devices=devices)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
        return [f"spec: the TrainJob cannot be expanded on runtime {runtime.metadata.name!r}: {e!r}"], []
    trainer_pod = info.pod_set(info.trainer).template if info.trainer else None
    torch = runtime.spec.ml_policy is not None and runtime.spec.ml_policy.torch is not None
    return trainjob_errors(info, facts.max_nodes_per_job), count_warnings(job, torch, trainer_pod, info.node_gpus)


def _changed_overrides(obj: JSON, old: JSON) -> list[str]:
    """The override fields (:data:`OVERRIDE_FIELDS`) whose value differs between ``old`` and ``obj``, as
    ``spec.<field>``, compared whole: a JSON merge patch replaces a list whole (Kueue's admission and
    stop, kubernetes-sigs/kueue#14836), so a list sent back as it was is no change."""
    spec, before = obj.get("spec") or {}, old.get("spec") or {}
    return [f"spec.{f}" for f in OVERRIDE_FIELDS if spec.get(f) != before.get(f)]


def _suspended(obj: JSON, kind: str) -> bool:
    facts = facts_of(kind)
    if facts is not None:
        return facts.run_policy.suspended(obj)
    spec = obj.get("spec") or {}
    return bool(spec.get("suspend"))


def _check_override_change(obj: JSON, old: JSON, facts: AdmissionFacts, kind: str) -> list[str]:
    """Overrides (and the scheduling gates and node selectors in them) may change only when the job is
    suspended before or after the update, so that one request may fill them and resume the job (Kueue's
    admission), and never while its Jobs have active pods, whichever way ``suspend`` goes (seed 004: a
    gate cannot be added to a Pod). Follows kubeflow/trainer ``pkg/runtime/framework/plugins/jobset/
    jobset.go`` ``checkRuntimePatchesImmutability`` (v2.3.0, kubeflow/trainer#3469), where the JobSet's
    active replicated jobs refuse the change."""
    changed = _changed_overrides(obj, old)
    if not changed:
        return []
    fields = ", ".join(changed)
    if not (_suspended(obj, kind) or _suspended(old, kind)):
        return [
            f"{fields}: may change only while the TrainJob is suspended, before or after the update: set "
            "spec.suspend to true first or in the same update (Kubernetes cannot add scheduling gates to running Pods)"
        ]
    return _refused_while_pods_active(obj, kind, facts, [fields])


def admission_queue(obj: JSON, facts: AdmissionFacts) -> QueueChoice:
    """The queue admission checks: :func:`trainer.api.queues.resolve_queue`, the reconcilers' rule, with
    the TrainJob's runtime from the caches."""
    runtime = None
    if obj.get("kind") != MPIJOB.resource.kind:
        kind, name = runtime_ref(obj)
        ns = str(meta(obj).namespace or "")
        runtime = facts.runtime(kind, name, ns if kind == TrainingRuntime.KIND else None)
    return resolve_queue(obj, facts.gang, runtime)


V21_FIELDS = ("labels", "annotations", "podSpecOverrides", "podTemplateOverrides")
"""The TrainJob fields of Trainer v2.0-v2.1 that v2.2 replaced by ``runtimePatches``."""
AFTER_V22_SPEC = ("ttlSecondsAfterFinished",)
"""TrainJob ``spec`` fields that Trainer v2.2's types lack (ahead of upstream: kubeflow/trainer#4052)."""
AFTER_V22_TRAINER = ("resourceClaimsPerNode",)
"""``spec.trainer`` fields that Trainer v2.2's types lack (ahead of upstream: KEP-2782)."""
AFTER_V22_POD_PATCH = ("terminationGracePeriodSeconds", "resourceClaims")
"""Fields of a ``runtimePatches`` Pod spec patch that v2.2's ``PodSpecPatch`` lacks (v2.3; KEP-2782)."""
AFTER_V22_CONTAINER_PATCH = ("resources",)
"""Fields of a ``runtimePatches`` container patch that v2.2's ``ContainerPatch`` lacks (KEP-2782)."""


def kueue_dropped_fields(job: TrainJob) -> tuple[list[str], list[str]]:
    """The fields of ``job`` that Kueue >= 0.17 drops when it admits the job, as paths: ``(v2.0-v2.1 fields,
    later fields)``. Kueue reads a TrainJob as Trainer v2.2's Go types (kubernetes-sigs/kueue
    ``pkg/controller/jobs/trainjob/trainjob_controller.go``, ``RunWithPodSetsInfo``: ``c.Update`` of the typed
    object; v0.19.2 requires kubeflow/trainer v2.2.1), so what those types lack is not in what it writes back.
    The ``runtimePatches`` Pod templates are read through :func:`override_targets`."""
    spec = job.spec.to_dict()
    old = [f"spec.{f}" for f in V21_FIELDS if spec.get(f)]
    later = [f"spec.{f}" for f in AFTER_V22_SPEC if spec.get(f) is not None]
    later += [f"spec.trainer.{f}" for f in AFTER_V22_TRAINER if (spec.get("trainer") or {}).get(f)]
    position: dict[int, int] = {}
    for t in override_targets(job):
        if t.field != RUNTIME_PATCHES:
            continue
        j = position[t.index] = position.get(t.index, -1) + 1
        at = f"{t.where}[{j}].template.spec.template.spec"
        pod = (t.pod_patch or {}).get("spec") or {}
        later += [f"{at}.{f}" for f in AFTER_V22_POD_PATCH if pod.get(f) is not None]
        for key in ("initContainers", "containers"):
            for k, container in enumerate(t.containers(key)):
                later += [f"{at}.{key}[{k}].{f}" for f in AFTER_V22_CONTAINER_PATCH if container.get(f) is not None]
    return old, later


def kueue_drops_warning(job: TrainJob) -> str | None:
    """The warning for a TrainJob with a Kueue queue label that carries fields Kueue >= 0.17 drops when it
    admits the job (:func:`kueue_dropped_fields`), else None: the pods would start without them.
    A v2.0-v2.1 field can be written as a ``runtimePatches`` entry instead, which Kueue keeps."""
    if KUEUE_QUEUE_LABEL not in (job.metadata.labels or {}):
        return None
    old, later = kueue_dropped_fields(job)
    if not old and not later:
        return None
    said = ", ".join([*old, *later])
    fix = []
    if old:
        fix.append(f"write {', '.join(old)} as a spec.runtimePatches entry (Pod template patches per replicated job)")
    if later:
        fix.append(f"{', '.join(later)} take effect only for a job no such Kueue admits (no queue label)")
    return (
        f"{said}: Kueue 0.17 and later read a TrainJob as Trainer v2.2's types and drop "
        f"{'this field' if len(old) + len(later) == 1 else 'these fields'} when they admit it; " + "; ".join(fix)
    )


def _check_queue(obj: JSON, facts: AdmissionFacts, v: Verdict) -> list[str]:
    queue = admission_queue(obj, facts)
    if queue.name is None:
        return []
    if facts.gang == "volcano" and queue.scheduler in ("volcano", ""):
        queues = facts.volcano_queues()
        if queues is not None:
            return [f"{queue.source}: {c.message}" for c in queue_problems(facts.gang, queue.name, queues)]
    if facts.gang == "kueue" and queue.scheduler in ("kueue", ""):
        ns = str(meta(obj).namespace)
        if facts.local_queue_exists(ns, queue.name) is False:
            v.warnings.append(
                f"{queue.source}: Kueue LocalQueue {queue.name!r} does not exist in namespace {ns!r}; "
                "the job waits until it does"
            )
    return []


def deprecation_warning(runtime: JSON, referenced: bool) -> str | None:
    """Upstream's warning for a ClusterTrainingRuntime labelled ``trainer.kubeflow.org/support:
    deprecated`` (kubeflow/trainer ``pkg/webhooks/clustertrainingruntime_webhook.go`` on its create;
    ``pkg/runtime/core/clustertrainingruntime.go`` for a TrainJob that ``referenced`` it); None for any
    other runtime (a namespaced TrainingRuntime never warns, as upstream)."""
    if runtime.get("kind") != ClusterTrainingRuntime.KIND:
        return None
    if (meta(runtime).labels or {}).get(SUPPORT_LABEL) != SUPPORT_DEPRECATED:
        return None
    prefix = "Referenced ClusterTrainingRuntime" if referenced else "ClusterTrainingRuntime"
    return (
        f'{prefix} "{meta(runtime).name}" is deprecated and will be removed in a future release of Kubeflow '
        f"Trainer. See runtime deprecation policy: {RUNTIME_DEPRECATION_POLICY_URL}"
    )


def validate_runtime(obj: JSON, old: JSON | None = None, facts: AdmissionFacts | None = None) -> Verdict:
    """Admission of a TrainingRuntime or ClusterTrainingRuntime create (``old`` None) or update; a create
    of a deprecated ClusterTrainingRuntime is admitted with upstream's warning. With ``facts``, a
    ``spec.scheduling`` the running operator or the cluster cannot serve is refused
    (:func:`scheduling_support_errors`)."""
    v = Verdict()
    warning = deprecation_warning(obj, referenced=False) if old is None else None
    if warning:
        v.warnings.append(warning)
    try:
        runtime = runtime_from_dict(obj)
    except ValidationError as e:
        v.errors += pydantic_errors(e)
        return v
    v.errors += runtime_errors(runtime.spec)
    if facts is not None and runtime.spec.scheduling is not None:
        v.errors += scheduling_support_errors(facts)
    v.warnings += lifecycle_warnings(runtime.spec) + suspend_warnings(runtime.spec)
    return v


def scheduling_support_errors(facts: AdmissionFacts) -> list[str]:
    """Why a runtime's ``spec.scheduling`` cannot be served here: the operator runs with another
    ``--gang-scheduler-name`` (no Workload would be made: its TrainJobs would run ungrouped), or the cluster
    does not serve the Workload API. The seed-000 rule: a gang is never dropped in silence. kubeflow/trainer
    KEP-3015 refuses such a runtime when its feature gate is off, the same way."""
    if facts.gang != WORKLOAD:
        return [
            f"spec.scheduling: the operator runs with --gang-scheduler-name={facts.gang}, so no Workload would be "
            "made and the TrainJobs of this runtime would not be gang scheduled; start the operator with "
            f"--gang-scheduler-name={WORKLOAD} (chart value gangScheduler: {WORKLOAD}) or "
            "remove spec.scheduling"
        ]
    if facts.workload_api() is False:
        return [f"spec.scheduling: {WORKLOAD_API_MISSING}"]
    return []


def validate_mpijob(obj: JSON, old: JSON | None, facts: AdmissionFacts) -> Verdict:
    """Admission of an MPIJob create (``old`` None) or update."""
    v = Verdict(errors=check_name(obj) if old is None else [])
    try:
        job = MPIJob.model_validate(obj)
    except ValidationError as e:
        v.errors += pydantic_errors(e)
        return v
    for problem in validate_mpijob_spec(job):
        if problem == LAUNCHER_MISSING:  # mpi-operator's API admits it
            v.warnings.append(f"{problem} (admitted as mpi-operator admits it; it will be Failed, InvalidSpec)")
        else:
            v.errors.append(problem)
    v.errors += mpijob_errors(job, facts.max_nodes_per_job)
    if old is not None:
        v.errors += check_queue_change(obj, old, MPIJOB.resource.kind, facts)
    v.errors += _check_queue(obj, facts, v)
    return v


def replica_index_patch(pod: JSON, facts: AdmissionFacts) -> list[JSON]:
    """JSON patch adding ``training.kubeflow.org/replica-index`` to an MPIJob's worker pod being created
    by its Indexed Job: the pod's ``batch.kubernetes.io/job-completion-index``, plus one when the
    MPIJob's launcher runs as a worker (it holds 0), as mpi-operator labels the worker pods it makes
    (kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go``, ``workerReplicaIndexLabel``) and
    Kueue's Topology Aware Scheduling reads them to order ranks (kubernetes-sigs/kueue
    ``pkg/controller/jobs/mpijob/mpijob_controller.go``). Nothing for any other pod, or one that has the
    label already."""
    m = meta(pod)
    labels = m.labels
    index = m.annotations.get(COMPLETION_INDEX_ANNOTATION, labels.get(COMPLETION_INDEX_ANNOTATION))
    worker = labels.get(REPLICA_TYPE_LABEL) == "worker" and labels.get(OPERATOR_NAME_LABEL) == OPERATOR_NAME
    if not worker or REPLICA_INDEX_LABEL in labels or not str(index or "").isdigit():
        return []
    owner = facts.mpijob(str(m.namespace or ""), str(labels.get(JOB_NAME_LABEL) or ""))
    as_worker = bool(((owner or {}).get("spec") or {}).get("runLauncherAsWorker"))
    value = worker_replica_index(int(str(index)), as_worker)
    key = REPLICA_INDEX_LABEL.replace("~", "~0").replace("/", "~1")
    return [{"op": "add", "path": f"/metadata/labels/{key}", "value": value}]


def default_patch(obj: JSON, kind: str, gang: str, old: JSON | None = None, now: str = "") -> list[JSON]:
    """JSON patch (RFC 6902) of defaults for a create (``old`` None) or an update of ``obj``: a job with a
    Kueue queue label, under ``--gang-scheduler-name=kueue``, starts suspended so that Kueue admits it
    (as Kueue's own webhook does; on create only); a TrainJob's ``runtimePatches`` get their ``time``
    (:func:`runtime_patch_times`, ``now`` RFC 3339). The other upstream defaults are in the CRD schemas."""
    ops = runtime_patch_times(obj, old, now) if kind == TRAINJOB.resource.kind else []
    return ops + (_suspend_for_kueue(obj, kind, gang) if old is None else [])


def runtime_patch_times(obj: JSON, old: JSON | None, now: str) -> list[JSON]:
    """JSON patch ops that stamp ``spec.runtimePatches[].time`` as kubeflow/trainer's defaulting webhook
    does (``pkg/webhooks/trainjob_webhook.go``, v2.2+): on create, an entry without a time gets ``now``;
    on update, an entry whose manager's entry of ``old`` is the same but for its time keeps that time,
    one that changed gets ``now``, a new one without a time gets ``now``."""
    patches = (obj.get("spec") or {}).get("runtimePatches")
    if not isinstance(patches, list):
        return []
    before = {
        p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or [] if isinstance(p, dict)
    }
    ops: list[JSON] = []
    for i, patch in enumerate(patches):
        if not isinstance(patch, dict):
            continue
        was = before.get(patch.get("manager")) if old is not None else None
        if was is not None:
            same = {k: v for k, v in was.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
            time = was.get("time") if same else now
        else:
            time = patch.get("time") or now
        if time is not None and time != patch.get("time"):
            ops.append(
                {"op": "replace" if "time" in patch else "add", "path": f"/spec/runtimePatches/{i}/time", "value": time}
            )
    return ops


def _suspend_for_kueue(obj: JSON, kind: str, gang: str) -> list[JSON]:
    """A job with a Kueue queue label starts suspended under ``--gang-scheduler-name=kueue``."""
    labels = meta(obj).labels
    if gang != "kueue" or KUEUE_QUEUE_LABEL not in labels:
        return []
    spec = obj.get("spec") or {}
    if kind == MPIJOB.resource.kind:
        if "runPolicy" not in spec:
            return [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
        return [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]
    return [{"op": "add", "path": "/spec/suspend", "value": True}]

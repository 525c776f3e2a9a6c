"""What a runtime, and a TrainJob on it, must satisfy beyond their schemas. Pure.

Used by admission (:mod:`trainer.webhook.rules`) and by the TrainJob reconciler, so that a cluster
without the webhook gets the same refusals as conditions. Follows kubernetes-sigs/jobset
``pkg/webhooks/jobset_webhook.go`` (v0.12: names, dependsOn, success and failure policy targets,
coordinator, volumeClaimPolicies, subdomain) and kubeflow/trainer ``pkg/webhooks/trainingruntime_webhook.go``
and ``pkg/runtime/framework/plugins`` (v2.3: replicas of the ancestor steps, their containers); the rules of
each ML policy (envInjection targets, reserved environment, ...) are its own, in
:mod:`trainer.trainjob.policies`, and run from here. Every message names the field and says what to do.

Beyond upstream, for input that would otherwise end in silence or in a retry loop: a replicated job with
``replicas: 0`` (JobSet's schema allows it, ``Minimum=0``; its Jobs would be none and the job would complete
with nothing run), a quantity the apiserver cannot read in a container's resources (a server-side apply of
it fails with a 500, not a refusal), override targets the runtime does not have (upstream ignores them),
a job larger than the operator's ``--max-nodes-per-job``, and a Job template's own ``spec.scheduling``
(Kubernetes 1.36+, :data:`JOB_SCHEDULING_REFUSED`).
"""

from __future__ import annotations

import re

from trainer.api import labels as L
from trainer.api.jobset_v1alpha2 import (
    IN_PLACE_RESTART,
    IN_PLACE_RESTART_MESSAGE,
    RESTART_JOB,
    RESTART_JOB_IGNORE_MAX,
    JobSetSpec,
    ReplicatedJob,
)
from trainer.api.trainer_v1alpha1 import (
    NODE_CONTAINER,
    STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER,
    STEP_TRAINER,
    TrainingRuntimeSpec,
)
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.features.limits import (
    DEFAULT_MAX_NODES_PER_JOB,
    MAX_NODES_FLAG,
    container_quantities,
    quantity_errors,
)
from trainer.jobs.gang import scheduling_errors
from trainer.trainjob.children import coordinator_endpoint
from trainer.trainjob.policies import active
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.spec import shape
from trainer.trainjob.spec.devices import claim_errors, unserved_errors
from trainer.trainjob.spec.failure_policy import pattern_error
from trainer.trainjob.spec.overrides import override_targets
from trainer.trainjob.spec.shape import step_of
from trainer.trainjob.spec.volume_claims import mounted

RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
RFC1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
"""The Job failure reasons a failurePolicy rule may name (JobSet's ``validOnJobFailureReasons``)."""
STEP_CONTAINERS = {
    STEP_TRAINER: NODE_CONTAINER,
    STEP_DATASET_INITIALIZER: STEP_DATASET_INITIALIZER,
    STEP_MODEL_INITIALIZER: STEP_MODEL_INITIALIZER,
}
"""Ancestor step -> the container it must have (Trainer's ``validateReplicatedJobs``)."""
POD_SUFFIX = len("-abcde")
"""The random suffix the Job controller appends to a pod name."""
RJOBS = "spec.template.spec.replicatedJobs"
MAX_REPLICAS_RESTARTED_ALONE = 1024
"""The most Jobs of a replicated job under a ``RestartJob`` rule (JobSet's ``maxReplicasPerReplicatedJob``:
``jobRestarts`` holds at most 1024 entries)."""
MAX_RJOB_NAME = 20
"""The longest replicated job name a runtime may have (kubeflow/trainer v2.4, #4394): with the TrainJob's
name and the indexes it makes Job and Pod names and the hostnames of the hostfile."""

JOB_SCHEDULING_REFUSED = (
    "a Job's own scheduling (batch/v1 JobSpec.scheduling, Kubernetes 1.36+ feature gate WorkloadWithJob) "
    "must not be set in a runtime: the apiserver drops it while the gate is off, and the Job controller "
    "makes no Workload for a Job that has a controller owner (the TrainJob) while it is on; "
    "set the runtime's spec.scheduling instead (a group of the whole TrainJob, of chosen replicated jobs, "
    "or spec.scheduling.replicatedJobs[].job for a group per Job; needs --gang-scheduler-name=workload), "
    "or spec.podGroupPolicy for Volcano or scheduler-plugins"
)
"""Refusal of ``template.spec.scheduling`` in a runtime's Job template: kubernetes v1.37.2
``pkg/api/job/util.go`` (``DropDisabledFields`` clears it with the gate off) and
``pkg/controller/job/job_scheduling_manager.go`` (``getManagementMode``: ``manageNone`` for a Job with a
controller owner and no delegation annotation, which the operator never sets)."""


def _dns1035(value: str, where: str, what: str) -> list[str]:
    if len(value) > 63:
        return [f"{where}: {what} {value!r} has {len(value)} characters; use at most 63"]
    if not RFC1035.match(value):
        return [
            f"{where}: {what} {value!r} must be an RFC 1035 label: lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit"
        ]
    return []


def _replicated_jobs(rjobs: list[ReplicatedJob]) -> list[str]:
    errors: list[str] = []
    seen: list[str] = []
    for i, r in enumerate(rjobs):
        where = f"{RJOBS}[{i}]"
        seen.append(r.name)
        errors += _dns1035(r.name, f"{where}.name", "replicated job name")
        if len(r.name) > MAX_RJOB_NAME:
            errors.append(
                f"{where}.name: must be no more than {MAX_RJOB_NAME} characters (got {len(r.name)}, {r.name!r}): "
                "it is part of every Job, Pod and hostname of the job; use a shorter name"
            )
        errors += _dns1035(r.group_name, f"{where}.groupName", "group name")
        errors += container_quantities(shape.pod_spec(r), f"{where}.template.spec.template.spec")
        errors += claim_errors(shape.pod_spec(r), f"{where}.template.spec.template.spec")
        step = step_of(r)
        if r.replicas < 1:
            errors.append(
                f"{where}.replicas: must be at least 1 (got {r.replicas}): replicated job {r.name!r} would create "
                "no Job, so the TrainJob would complete with nothing of it run; remove the replicated job instead"
            )
        elif step in STEP_CONTAINERS and r.replicas != 1:
            errors.append(
                f"{where}.replicas: always must be 1 for the {step} step (got {r.replicas}); its pods are "
                "numNodes pods of one Job: set mlPolicy.numNodes or the TrainJob's spec.trainer.numNodes instead"
            )
        if step in STEP_CONTAINERS and STEP_CONTAINERS[step] not in shape.names(shape.pod_spec(r).get("containers")):
            errors.append(
                f"{where}.template.spec.template.spec.containers: must contain the required container for the "
                f"ancestor: {step} (a container named {STEP_CONTAINERS[step]!r})"
            )
        if ((r.template or {}).get("spec") or {}).get("scheduling") is not None:
            errors.append(f"{where}.template.spec.scheduling: {JOB_SCHEDULING_REFUSED}")
        if i == 0 and r.depends_on:
            errors.append(f"{where}.dependsOn: DependsOn can't be set for the first ReplicatedJob")
        for d in r.depends_on or []:
            if d.name not in seen[:-1]:
                errors.append(
                    f"{where}.dependsOn: replicatedJob: {r.name} cannot depend on replicatedJob: {d.name} "
                    "(name a replicated job that comes before it)"
                )
    return errors


def _policies(spec: JobSetSpec, names: list[str]) -> list[str]:
    errors: list[str] = []
    success = spec.success_policy
    for target in (success.target_replicated_jobs if success else None) or []:
        if target not in names:
            errors.append(
                f"spec.template.spec.successPolicy.targetReplicatedJobs: invalid replicatedJob name {target!r} "
                f"does not appear in {RJOBS} (it has {', '.join(names) or 'none'})"
            )
    failure = spec.failure_policy
    rules = (failure.rules if failure else None) or []
    if failure is not None and failure.restart_strategy == IN_PLACE_RESTART:
        errors.append(f"spec.template.spec.failurePolicy.restartStrategy: {IN_PLACE_RESTART_MESSAGE}")
    alone = any(r.action in (RESTART_JOB, RESTART_JOB_IGNORE_MAX) for r in rules)
    if alone and any(r.replicas > MAX_REPLICAS_RESTARTED_ALONE for r in spec.replicated_jobs or []):
        errors.append(
            f"{RJOBS}: JobSet cannot have a failure policy rule with RestartJob or RestartJobAndIgnoreMaxRestarts "
            f"action and a replicated job with replicas > {MAX_REPLICAS_RESTARTED_ALONE}"
        )
    for i, rule in enumerate(rules):
        where = f"spec.template.spec.failurePolicy.rules[{i}]"
        if not 1 <= len(rule.name) <= 128 or not RULE_NAME.match(rule.name):
            errors.append(
                f"{where}.name: invalid failure policy rule name {rule.name!r}: it must start with a letter, "
                "continue with letters, digits or '_,:', end with a letter, digit or '_', and have 1-128 characters"
            )
        for target in rule.target_replicated_jobs or []:
            if target not in names:
                errors.append(f"{where}.targetReplicatedJobs: {target!r} is not a replicated job of this runtime")
        for reason in rule.on_job_failure_reasons or []:
            if reason not in JOB_FAILURE_REASONS:
                errors.append(
                    f"{where}.onJobFailureReasons: {reason!r} is not a recognized job failure reason "
                    f"(use one of {', '.join(JOB_FAILURE_REASONS)})"
                )
        for pattern in rule.on_job_failure_message_patterns or []:
            error = pattern_error(pattern)
            if error is not None:
                errors.append(
                    f"{where}.onJobFailureMessagePatterns: {pattern!r} is not a regular expression of RE2 "
                    f"(Go's regexp syntax, which JobSet uses): {error}"
                )
    rule_names = [r.name for r in rules]
    for dup in sorted({n for n in rule_names if rule_names.count(n) > 1}):
        errors.append(f"spec.template.spec.failurePolicy.rules: name {dup!r} is used twice")
    return errors


def _coordinator(spec: JobSetSpec, rjobs: list[ReplicatedJob]) -> list[str]:
    c = spec.coordinator
    if c is None:
        return []
    where = "spec.template.spec.coordinator"
    rjob = next((r for r in rjobs if r.name == c.replicated_job), None)
    if rjob is None:
        return [f"{where}.replicatedJob: coordinator replicatedJob {c.replicated_job} does not exist"]
    if (c.job_index or 0) >= rjob.replicas:
        return [f"{where}.jobIndex: coordinator job index {c.job_index} is invalid for replicatedJob {rjob.name}"]
    job_spec = rjob.template.get("spec") or {}
    completions = job_spec.get("completions")
    if job_spec.get("completionMode", "Indexed") != "Indexed" or completions is None:
        return [f"{where}: job for coordinator pod must be indexed completion mode, and completions number must be set"]
    if (c.pod_index or 0) >= int(completions):
        return [
            f"{where}.podIndex: coordinator pod index {c.pod_index} is invalid for replicatedJob {rjob.name} "
            f"job index {c.job_index or 0}"
        ]
    return []


def _volume_claims(spec: JobSetSpec, rjobs: list[ReplicatedJob]) -> list[str]:
    errors: list[str] = []
    seen: set[str] = set()
    pods = [(i, shape.pod_spec(r)) for i, r in enumerate(rjobs)]
    mounts = set().union(*(mounted({"spec": p}) for _, p in pods)) if pods else set()
    for i, policy in enumerate(spec.volume_claim_policies or []):
        for j, template in enumerate(policy.templates or []):
            where = f"spec.template.spec.volumeClaimPolicies[{i}].templates[{j}]"
            name = str(meta(template).name or "")
            if name in seen:
                errors.append(f"{where}.metadata.name: names must be unique for VolumeClaimPolicies template")
            seen.add(name)
            if len(name) > 253 or not RFC1123_SUBDOMAIN.match(name):
                errors.append(f"{where}.metadata.name: {name!r} must be a lower-case RFC 1123 subdomain")
            for k, pod in pods:
                if name in shape.names(pod.get("volumes")):
                    errors.append(
                        f"{RJOBS}[{k}].template.spec.template.spec.volumes: volume name conflicts with "
                        f"VolumeClaimPolicy template name: {name}"
                    )
            if name not in mounts:
                errors.append(
                    f"{RJOBS}: replicatedJob containers don't have a matching volumeMount: {name} from "
                    "VolumeClaimPolicies (mount it in a container, or remove the template)"
                )
    return errors


def runtime_errors(spec: TrainingRuntimeSpec) -> list[str]:
    """Everything wrong with a (Cluster)TrainingRuntime's spec that its schema lets through, one
    message per problem (empty: valid)."""
    template = spec.template.spec or JobSetSpec()
    rjobs = list(template.replicated_jobs or [])
    names = [r.name for r in rjobs]
    errors = [f"{RJOBS}: name {dup!r} is used twice" for dup in sorted({n for n in names if names.count(n) > 1})]
    ml = spec.ml_policy
    chosen = [k for k in ("torch", "mpi", "jax", "xgboost", "flux") if ml is not None and getattr(ml, k) is not None]
    if len(chosen) > 1:
        errors.append(f"spec.mlPolicy: Only one of the policy can be configured: set only one of {', '.join(chosen)}")
    pgp = spec.pod_group_policy
    if pgp is not None and pgp.coscheduling is not None and pgp.volcano is not None:
        errors.append("spec.podGroupPolicy: set only one of coscheduling and volcano")
    errors += _scheduling(spec, template, rjobs)
    errors += _replicated_jobs(rjobs)
    errors += _policies(template, names)
    errors += _coordinator(template, rjobs)
    errors += _volume_claims(template, rjobs)
    subdomain = template.network.subdomain if template.network else None
    if subdomain:
        errors += _dns1035(subdomain, "spec.template.spec.network.subdomain", "subdomain")
    for ml_policy in active(spec):
        errors += ml_policy.runtime_errors(spec)
    return errors


def _scheduling(spec: TrainingRuntimeSpec, template: JobSetSpec, rjobs: list[ReplicatedJob]) -> list[str]:
    """``spec.scheduling`` (KEP-3015): exclusive with ``podGroupPolicy``, its groups buildable for the template
    (:func:`trainer.jobs.gang.workload.scheduling_errors`), and no Pod template naming a scheduling group of
    its own (the operator sets ``spec.schedulingGroup``, as it owns the Workload)."""
    if spec.scheduling is None:
        return []
    errors = []
    if spec.pod_group_policy is not None:
        errors.append("spec.scheduling: scheduling and podGroupPolicy are mutually exclusive: remove one")
    replicas = [(r.name, r.replicas) for r in rjobs]
    errors += scheduling_errors(spec.scheduling.to_dict(), replicas, shape.sequenced(rjobs, template))
    for i, r in enumerate(rjobs):
        pod = ((r.template.get("spec") or {}).get("template") or {}).get("spec") or {}
        if pod.get("schedulingGroup") is not None:
            errors.append(
                f"{RJOBS}[{i}].template.spec.template.spec.schedulingGroup: Pod schedulingGroup must not be set, "
                "it is owned by the TrainJob controller (spec.scheduling)"
            )
    return errors


SUSPEND_WARNING = (
    "spec.template.spec.suspend: true does not suspend this runtime's TrainJobs: each TrainJob's spec.suspend "
    "decides, as in Kubeflow Trainer (its JobSet takes the TrainJob's); set spec.suspend on the TrainJob"
)


def suspend_warnings(spec: TrainingRuntimeSpec) -> list[str]:
    """:data:`SUSPEND_WARNING` for a runtime whose JobSet template says ``suspend: true``, which the
    TrainJob's ``spec.suspend`` replaces as upstream's JobSet plugin does; nothing otherwise."""
    return [SUSPEND_WARNING] if spec.template.spec is not None and spec.template.spec.suspend else []


def lifecycle_warnings(spec: TrainingRuntimeSpec) -> list[str]:
    """Admission warnings for a runtime whose templates carry a deadline or a TTL of their own: the
    JobSet template's ``ttlSecondsAfterFinished`` and each replicated Job template's
    ``activeDeadlineSeconds`` and ``ttlSecondsAfterFinished``. KEP-2899 as proposed
    (kubeflow/trainer#3824, #4052) refuses them so that the TrainJob controller alone owns cleanup;
    they stay admitted here, with a warning naming ``spec.runPolicy``, since runtimes written before
    rely on them (the JobSet TTL deletes the children and keeps the TrainJob; a Job's own deadline
    fails that Job, and the runtime's failurePolicy decides)."""
    template = spec.template.spec or JobSetSpec()
    out = []
    if template.ttl_seconds_after_finished is not None:
        out.append(
            "spec.template.spec.ttlSecondsAfterFinished deletes the TrainJob's children but keeps the TrainJob; "
            "set spec.runPolicy.ttlSecondsAfterFinished to delete the TrainJob itself (KEP-2899 refuses it here)"
        )
    for i, rjob in enumerate(template.replicated_jobs or []):
        job_spec = (rjob.template or {}).get("spec") or {}
        for name, instead in (
            ("activeDeadlineSeconds", "spec.runPolicy.activeDeadlineSeconds"),
            ("ttlSecondsAfterFinished", "spec.runPolicy.ttlSecondsAfterFinished"),
        ):
            if job_spec.get(name) is not None:
                out.append(
                    f"{RJOBS}[{i}].template.spec.{name} applies to each Job alone, not to the TrainJob; "
                    f"set {instead} instead (KEP-2899 refuses it here)"
                )
    return out


MISSING_RJOB_PATCH = "must not have replicated job that doesn't exist in the runtime job template"
"""kubeflow/trainer's refusal of a ``runtimePatches`` entry naming a replicated job the runtime's template
lacks (``pkg/runtime/framework/plugins/jobset/jobset.go``; checked against the unpatched template, #3948)."""


def override_target_errors(info: RuntimeInfo) -> list[str]:
    """Overrides that target a replicated job the runtime does not have: each entry of
    ``podSpecOverrides[].targetJobs``, ``podTemplateOverrides[].targetJobs`` and
    ``runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs`` must name one of ``info.rjobs``,
    the runtime template's own (upstream v2.0-v2.1 ignores the others, so the override would be lost
    without a word; a ``runtimePatches`` entry is refused with :data:`MISSING_RJOB_PATCH`, as
    kubeflow/trainer#3948 checks it against the template before the patches are merged)."""
    have = [r.name for r in info.rjobs]
    runtime = info.job.spec.runtime_ref.name
    out = []
    for t in override_targets(info.job):
        if t.rjob in have:
            continue
        detail = f"replicated job {t.rjob!r} is not in runtime {runtime!r} (it has {', '.join(have) or 'none'})"
        out.append(f"{t.where}: {MISSING_RJOB_PATCH}: {detail}" if t.strategic else f"{t.where}: {detail}")
    return out


def running_pods(jobs: list[JSON]) -> dict[str, int]:
    """Pods the Jobs ``jobs`` (a TrainJob's, as cached) are sized for, by replicated job (their label
    ``jobset.sigs.k8s.io/replicatedjob-name``): the sum of their ``spec.parallelism`` (default 1)."""
    out: dict[str, int] = {}
    for job in jobs:
        rjob = str(meta(job).labels.get(L.REPLICATED_JOB_NAME) or "")
        parallelism = (job.get("spec") or {}).get("parallelism")
        out[rjob] = out.get(rjob, 0) + (parallelism if isinstance(parallelism, int) else 1)
    return out


def node_limit_errors(info: RuntimeInfo, max_nodes: int, running: dict[str, int] | None = None) -> list[str]:
    """A TrainJob larger than ``--max-nodes-per-job`` (``max_nodes``; 0: no limit): its ``numNodes``
    (the TrainJob's ``spec.trainer.numNodes``, else the runtime's ``spec.mlPolicy.numNodes``), or the
    pods (replicas x pods per Job) of any other replicated job, above the limit. ``running``: the pods
    its Jobs already have, by replicated job (:func:`running_pods`; None: it has none); a replicated
    job that asks for no more than those is left be (a job started under a larger limit keeps going),
    one that asks for more is refused, whether or not the webhook saw the change."""
    if max_nodes <= 0:
        return []
    have = running or {}
    grows = [pod_set.count > have.get(rjob.name, 0) for rjob, pod_set in zip(info.rjobs, info.pod_sets, strict=True)]
    sized = [grew for rjob, grew in zip(info.rjobs, grows, strict=True) if rjob.name in info.policy_sized]
    errors = []
    fix = f"use at most {max_nodes}, or start the operator with a larger {MAX_NODES_FLAG} (0: no limit)"
    if info.num_nodes is not None and info.num_nodes > max_nodes and (any(sized) or (not sized and running is None)):
        trainer = info.job.spec.trainer
        where = (
            "spec.trainer.numNodes"
            if trainer is not None and trainer.num_nodes is not None
            else f"spec.mlPolicy.numNodes of runtime {info.job.spec.runtime_ref.name!r} (set spec.trainer.numNodes)"
        )
        errors.append(
            f"{where}: {info.num_nodes} nodes is more than this operator's limit of {max_nodes} "
            f"({MAX_NODES_FLAG}); {fix}"
        )
    for i, (rjob, pod_set) in enumerate(zip(info.rjobs, info.pod_sets, strict=True)):
        if rjob.name in info.policy_sized or pod_set.count <= max_nodes or not grows[i]:
            continue
        errors.append(
            f"{RJOBS}[{i}] of runtime {info.job.spec.runtime_ref.name!r}: replicated job {rjob.name!r} has "
            f"{pod_set.count} pods ({pod_set.jobs} replicas x {pod_set.pods_per_job} pods), more than this "
            f"operator's limit of {max_nodes} ({MAX_NODES_FLAG}); {fix}"
        )
    return errors


def trainjob_errors(info: RuntimeInfo, max_nodes: int = DEFAULT_MAX_NODES_PER_JOB) -> list[str]:
    """What is wrong with a TrainJob on its runtime once expanded (``info``): names of its children that
    do not fit 63 characters (Jobs, pods, claims, the coordinator label), as JobSet's webhook checks
    them, settings its ML policy cannot take, quantities of ``resourcesPerNode`` the apiserver cannot
    read, overrides of replicated jobs the runtime lacks (:func:`override_target_errors`), a size
    above ``max_nodes`` (``--max-nodes-per-job``, 0: no limit; :func:`node_limit_errors`), DRA claims
    where the cluster lacks DRA and container claims their pod lacks (:mod:`trainer.trainjob.spec.devices`)."""
    name = str(info.job.metadata.name)
    errors: list[str] = []
    trainer_spec = info.job.spec.trainer
    if trainer_spec is not None:
        errors += quantity_errors(trainer_spec.resources_per_node, "spec.trainer.resourcesPerNode")
    errors += override_target_errors(info)
    errors += node_limit_errors(info, max_nodes)
    for rjob, pod_set in zip(info.rjobs, info.pod_sets, strict=True):
        last_job = f"{name}-{rjob.name}-{max(rjob.replicas - 1, 0)}"
        last_pod = f"{last_job}-{max(pod_set.pods_per_job - 1, 0)}"
        if len(last_job) > 63 or not RFC1035.match(last_job):
            errors.append(
                f"metadata.name: TrainJob name is too long, job names generated for this TrainJob will exceed 63 "
                f"characters ({last_job!r}, {len(last_job)}); use a shorter name"
            )
        elif len(last_pod) + POD_SUFFIX > 63:
            errors.append(
                f"metadata.name: TrainJob name is too long, pod names generated for this TrainJob will exceed 63 "
                f"characters ({last_pod!r} plus a 6-character suffix); use a shorter name"
            )
    coordinator = coordinator_endpoint(info)
    if coordinator is not None and (len(coordinator) > 63 or not LABEL_VALUE.match(coordinator)):
        errors.append(
            f"spec.template.spec.coordinator: the TrainJob leads to invalid label value {coordinator!r} for "
            f"coordinator label {L.COORDINATOR!r} (more than 63 characters); use a shorter TrainJob name"
        )
    for policy in info.template.volume_claim_policies or []:
        for template in policy.templates or []:
            claim = f"{(template.get('metadata') or {}).get('name', '')}-{name}"
            if len(claim) > 63:
                errors.append(
                    f"metadata.name: VolumeClaimPolicies template name is too long: claim {claim!r} would exceed "
                    "63 characters; use a shorter TrainJob name"
                )
    for ml_policy in active(info.runtime):
        errors += ml_policy.trainjob_errors(info)
    pods = {ps.name: ps.template for ps in info.pod_sets}
    errors += unserved_errors(info.job, pods, info.devices)
    for name, pod in pods.items():
        # Only a runtime patch can leave one here: resourceClaimsPerNode adds both ends.
        errors += claim_errors(pod.get("spec") or {}, f"spec.runtimePatches: replicated job {name!r}, pod spec")
    return errors

"""The kube-scheduler's own gang scheduling, through the Workload API (``--gang-scheduler-name=workload``).

Kubernetes 1.37 serves ``scheduling.k8s.io/v1beta1`` ``Workload`` and ``PodGroup`` (feature gate
``GenericWorkload``, off by default) and its scheduler places the Pods of a gang ``PodGroup``
all-or-nothing: no Pod of the group is bound until ``minCount`` of them fit (kubernetes/enhancements
KEP-4671). No Volcano, Kueue or scheduler-plugins is needed. A TrainJob asks for it in its runtime's
``spec.scheduling``, as kubeflow/trainer KEP-3015 proposes (``proposals/3015-workload-aware-scheduling``,
kubeflow/trainer#3219, not in a release); this module is that KEP's ``workload`` plugin:

* **Groups** (:func:`groups`): level 1 (no ``replicatedJobs``) is one group of every Pod, named like the
  job, or, when the runtime sequences its start (``dependsOn``, ``startupPolicy: InOrder``), one group per
  replicated job with the same policy (a gang of every Pod could never fill); level 2 is a group per
  ``replicatedJobs`` entry, named by its targets joined with ``-``; level 3 (``job``) a group per Job of
  the targeted replicated job, ``<replicated job>-<index>``. A policy left unset is gang; a gang's
  ``minCount`` is always computed: the Pods of the group (parallelism x replicas).
* **Objects**: one ``Workload`` (``<job>-<hash of its uid>``, owned by the job, ``spec.controllerRef`` the
  job) with a ``PodGroupTemplate`` per group, then one ``PodGroup`` per group
  (``<workload>-<template>-<hash>``, ``<workload>-<hash>`` at level 1; ``spec.workloadRef`` to its template;
  owner references: the job as controller, and the Workload). Both are created once and never changed,
  and kept while the job is suspended and once it finished (the garbage collector takes them with the
  job), as the KEP says. Their names are computed from the job alone, so a restarted operator finds
  them again and never makes a second set.
* **Pods** join their group by ``spec.schedulingGroup.podGroupName``, set in the Job's Pod template when
  the Job is created. The Jobs are created suspended until the Workload and every PodGroup exist, so the
  scheduler never sees a Pod before its group.

What cannot work is said on the job (``Misconfigured``) and holds it: a cluster that does not serve the
API. A runtime without ``spec.scheduling`` gets no Workload; what it would silently lose is reported as
under ``none`` (:func:`~trainer.jobs.gang.base.reports_only`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from trainer.api.base import Condition
from trainer.api.conditions import COND_WAITING_FOR_GANG
from trainer.api.kinds import POD_GROUPS, WORKLOADS, Resource
from trainer.api.scheduling_v1beta1 import MAX_POD_GROUP_TEMPLATES
from trainer.framework.controller import Owns
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.owner import owner_reference
from trainer.jobs.child_writer import CREATED_ONCE, OURS, Once, claim
from trainer.jobs.conditions import problem
from trainer.jobs.gang.base import (
    Facts,
    GangInput,
    GangPlan,
    PodSet,
    reports_only,
)

FLAG = "workload"
MAX_NAME = 63
"""KEP-3015: the names of the Workload and its PodGroups stay within 63 characters."""
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""Characters of the name hashes: no vowels (no words) and none that read alike, as Kubernetes' generated
names use."""
API_MISSING = (
    "the cluster does not serve scheduling.k8s.io/v1beta1 Workload and PodGroup (Kubernetes >= 1.37 with "
    "feature gate GenericWorkload=true on kube-apiserver, kube-scheduler and kube-controller-manager, and "
    "--runtime-config=scheduling.k8s.io/v1beta1=true on kube-apiserver)"
)
"""What a cluster lacks for ``spec.scheduling``: said by admission and on the job."""


@dataclass(frozen=True)
class Group:
    """One ``PodGroupTemplate`` of the job's Workload and the Pods that join its ``PodGroup``."""

    template: str
    """The template's name."""
    members: tuple[tuple[str, int | None], ...]
    """``(replicated job, Job index)`` of the Jobs whose Pods join; index None: every Job of it."""
    policy: JSON
    """``{"gang": {"minCount": n}}`` or ``{"basic": {}}``."""
    constraints: JSON | None = None
    disruption: JSON | None = None
    claims: tuple[JSON, ...] = ()

    def settings(self) -> JSON:
        """What a ``PodGroupTemplate`` and its ``PodGroup`` both carry (kubernetes/api ``scheduling/v1beta1``):
        ``schedulingPolicy``, and ``schedulingConstraints``, ``disruptionMode`` and ``resourceClaims`` when set."""
        out: JSON = {"schedulingPolicy": self.policy}
        if self.constraints:
            out["schedulingConstraints"] = self.constraints
        if self.disruption:
            out["disruptionMode"] = self.disruption
        if self.claims:
            out["resourceClaims"] = list(self.claims)
        return out

    def template_spec(self) -> JSON:
        """The ``PodGroupTemplate``."""
        return {"name": self.template, **self.settings()}


def _policy(given: JSON | None, pods: int) -> JSON:
    """A group's policy: basic as given, else gang of ``pods`` (an unset policy is gang, KEP-3015)."""
    if given and "basic" in given:
        return {"basic": {}}
    return {"gang": {"minCount": pods}}


def _count(sets: dict[str, PodSet], names: Sequence[str]) -> int:
    return sum(sets[n].count for n in names if n in sets)


def groups(scheduling: JSON, pod_sets: Sequence[PodSet], sequenced: bool, job_name: str) -> list[Group]:
    """The groups of a job whose runtime's ``spec.scheduling`` is ``scheduling`` (JSON, KEP-3015's
    ``Scheduling``), its Pods ``pod_sets`` (every replicated job, in order), ``sequenced`` when the runtime
    orders their start. A group of no Pod is left out (a gang's ``minCount`` is at least 1). Pure; assumes
    :func:`scheduling_errors` found nothing."""
    sets = {ps.name: ps for ps in pod_sets}
    entries = scheduling.get("replicatedJobs") or []
    out: list[Group] = []
    if not entries:
        policy = scheduling.get("schedulingPolicy")
        constraints, disruption = scheduling.get("schedulingConstraints"), scheduling.get("disruptionMode")
        if sequenced:
            for ps in pod_sets:
                out.append(Group(ps.name, ((ps.name, None),), _policy(policy, ps.count), constraints, disruption))
        else:
            members = tuple((ps.name, None) for ps in pod_sets)
            out.append(Group(job_name, members, _policy(policy, _count(sets, list(sets))), constraints, disruption))
    for entry in entries:
        targets = [str(t) for t in entry.get("targetReplicatedJobs") or []]
        job = entry.get("job")
        if job is not None:
            target = sets.get(targets[0]) if targets else None
            if target is not None:
                out += [_job_group(target, index, job) for index in range(target.jobs)]
            continue
        out.append(
            Group(
                "-".join(targets),
                tuple((t, None) for t in targets),
                _policy(entry.get("schedulingPolicy"), _count(sets, targets)),
                entry.get("schedulingConstraints"),
                entry.get("disruptionMode"),
            )
        )
    return [g for g in out if "basic" in g.policy or g.policy["gang"]["minCount"] > 0]


def _job_group(ps: PodSet, index: int, job: JSON) -> Group:
    """Level 3: the group of Job ``index`` of pod set ``ps`` under ``job`` (KEP-3015's ``JobScheduling``)."""
    return Group(
        f"{ps.name}-{index}",
        ((ps.name, index),),
        _policy(job.get("schedulingPolicy"), ps.pods_per_job),
        job.get("schedulingConstraints"),
        job.get("disruptionMode"),
        tuple(job.get("resourceClaims") or ()),
    )


def scheduling_errors(scheduling: JSON, replicated_jobs: Sequence[tuple[str, int]], sequenced: bool) -> list[str]:
    """Why a runtime's ``spec.scheduling`` (JSON) cannot be built for its replicated jobs
    (``(name, replicas)``, in order), as KEP-3015's validation says: level 1 and level 2 do not mix (no
    CompositePodGroup here), every replicated job is targeted by exactly one entry, only by names the
    template has, a ``job`` entry targets one replicated job and sets nothing of its own beside ``job``, no
    ``gang.minCount`` (it is computed), and no more PodGroup templates than a Workload holds (level 3
    makes one per replica). Each message names the field."""
    field = "spec.scheduling"
    names = [n for n, _ in replicated_jobs]
    replicas = dict(replicated_jobs)
    entries = scheduling.get("replicatedJobs") or []
    errors = []
    level1 = [k for k in ("schedulingPolicy", "schedulingConstraints", "disruptionMode") if k in scheduling]
    policies = [(f"{field}.schedulingPolicy", scheduling.get("schedulingPolicy"))]
    if entries and level1:
        errors.append(
            f"{field}: {', '.join(level1)} (level 1, the whole TrainJob) and replicatedJobs (level 2) are "
            "mutually exclusive without CompositePodGroups: set the policy on each replicatedJobs entry instead"
        )
    templates = 0 if entries else (len(names) if sequenced else 1)
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        where = f"{field}.replicatedJobs[{i}]"
        targets = [str(t) for t in entry.get("targetReplicatedJobs") or []]
        errors += _target_errors(where, targets, names, seen, i)
        job = entry.get("job")
        policies.append((f"{where}.schedulingPolicy", entry.get("schedulingPolicy")))
        if job is None:
            templates += 1
            continue
        policies.append((f"{where}.job.schedulingPolicy", job.get("schedulingPolicy")))
        own = [k for k in ("schedulingPolicy", "schedulingConstraints", "disruptionMode") if k in entry]
        if own:
            errors.append(
                f"{where}: {', '.join(own)} and job are mutually exclusive without CompositePodGroups: "
                "set them under job (each Job's group)"
            )
        if len(targets) != 1:
            errors.append(f"{where}.targetReplicatedJobs: with job set, name exactly one replicated job")
        templates += sum(replicas.get(t, 0) for t in targets[:1])
    if entries:
        missing = [n for n in names if n not in seen]
        if missing:
            errors.append(
                f"{field}.replicatedJobs: every replicated job of the runtime template must be targeted by one "
                f"entry (there is no level 1 policy to fall back to): add {', '.join(repr(m) for m in missing)}"
            )
    for where, policy in policies:
        if policy and (policy.get("gang") or {}).get("minCount") is not None:
            errors.append(f"{where}.gang.minCount: gang.minCount is computed from numNodes and must not be set")
    if templates > MAX_POD_GROUP_TEMPLATES:
        errors.append(
            f"{field}: resolves to {templates} PodGroup templates, more than the {MAX_POD_GROUP_TEMPLATES} a "
            "Workload holds (level 3 makes one per replica): group more replicated jobs per entry or use fewer "
            "replicas"
        )
    return errors


def _target_errors(where: str, targets: list[str], names: list[str], seen: dict[str, int], index: int) -> list[str]:
    """Why the ``targetReplicatedJobs`` of entry ``index`` (at ``where``) are wrong: a name the runtime
    template lacks (it has ``names``), or one an earlier entry targets (``seen``: name -> entry, to which
    the entry's other targets are added)."""
    errors = []
    for t in targets:
        if t not in names:
            errors.append(
                f"{where}.targetReplicatedJobs: replicated job {t!r} is not in the runtime template "
                f"(it has {', '.join(names) or 'none'})"
            )
        elif t in seen:
            errors.append(
                f"{where}.targetReplicatedJobs: a ReplicatedJob must not be targeted by more than one "
                f"replicatedJobs entry: {t!r} is also in replicatedJobs[{seen[t]}]"
            )
        else:
            seen[t] = index
    return errors


def _hash(*parts: str) -> str:
    """Eight characters of :data:`HASH_ALPHABET` from ``parts``: stable across restarts and replicas."""
    digest = int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:8], "big")
    out = []
    for _ in range(8):
        digest, r = divmod(digest, len(HASH_ALPHABET))
        out.append(HASH_ALPHABET[r])
    return "".join(out)


def workload_name(job_name: str, uid: str) -> str:
    """``<job name>-<hash of its uid>``, the job name cut to stay within :data:`MAX_NAME`."""
    suffix = _hash(uid)
    return f"{job_name[: MAX_NAME - len(suffix) - 1].rstrip('-')}-{suffix}"


def pod_group_name(workload: str, template: str, job_name: str) -> str:
    """``<workload>-<template>-<hash>`` (``<workload>-<hash>`` when the template is named like the job, level
    1), each part cut so that the name stays within :data:`MAX_NAME`."""
    suffix = _hash(workload, template)
    if template == job_name:
        return f"{workload[: MAX_NAME - len(suffix) - 1].rstrip('-')}-{suffix}"
    room = MAX_NAME - len(suffix) - 2
    head = workload[: max(room - len(template), room // 2)].rstrip("-")
    return f"{head}-{template[: room - len(head)].strip('-')}-{suffix}"


def _once(res: Resource, obj: JSON) -> Once:
    """``obj`` created once when absent, never changed."""
    return Once(res, obj["metadata"]["namespace"], obj["metadata"]["name"], partial(dict, obj))


class Workload:
    """``--gang-scheduler-name=workload``."""

    name: ClassVar[str] = "workload"
    owns: ClassVar[list[Owns]] = [Owns(WORKLOADS, verbs=CREATED_ONCE), Owns(POD_GROUPS, verbs=CREATED_ONCE)]
    watches: ClassVar[list[Resource]] = []

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        if job.scheduling is None:
            # No spec.scheduling: no Workload (KEP-3015); Kueue's label is carried, as under none.
            return reports_only(job, {"kueue"}, FLAG)
        if job.finished:
            return GangPlan()  # kept until the job goes (owner references)
        plan = reports_only(job, {"kueue"}, FLAG, accepted=self.name)
        if not facts.served(WORKLOADS) or not facts.served(POD_GROUPS):
            plan.conditions.append(problem("WorkloadAPINotServed", f"spec.scheduling of the runtime: {API_MISSING}"))
            plan.hold = True
            return plan
        uid = str(meta(job.owner).uid or "")
        wl_name = workload_name(job.name, uid)
        found = groups(job.scheduling, job.all_pod_sets, job.sequenced, job.name)
        if job.min_available is not None and len(found) == 1 and "gang" in found[0].policy:
            found = [dataclasses.replace(found[0], policy={"gang": {"minCount": job.min_available}})]
        if not found:
            return plan  # no Pod at all (0 nodes): nothing to group
        names = {g.template: pod_group_name(wl_name, g.template, job.name) for g in found}
        for g in found:
            for member in g.members:
                plan.scheduling_groups[member] = names[g.template]
        workload = facts.get(WORKLOADS, job.namespace, wl_name)
        if workload is None:
            plan.create.append(_once(WORKLOADS, self._workload(job, wl_name, found)))
        missing = []
        for g in found:
            if facts.get(POD_GROUPS, job.namespace, names[g.template]) is not None:
                continue
            missing.append(names[g.template])
            if workload is not None and claim(workload, job.owner) == OURS:
                plan.create.append(_once(POD_GROUPS, self._pod_group(job, workload, g, names[g.template])))
        if not job.started and (workload is None or missing):
            plan.hold = True
            plan.conditions.append(
                Condition(
                    type=COND_WAITING_FOR_GANG,
                    status="True",
                    reason="WorkloadPending",
                    message=(
                        f"Jobs stay suspended until Workload {wl_name!r} and its PodGroups exist"
                        + (f" (missing: {', '.join(missing)})" if workload is not None else "")
                    ),
                )
            )
        return plan

    @staticmethod
    def _workload(job: GangInput, name: str, found: list[Group]) -> JSON:
        owner = owner_reference(job.owner)
        return {
            "apiVersion": WORKLOADS.api_version,
            "kind": WORKLOADS.kind,
            "metadata": {"name": name, "namespace": job.namespace, "ownerReferences": [owner]},
            "spec": {
                "controllerRef": {
                    "apiGroup": owner["apiVersion"].split("/")[0],
                    "kind": owner["kind"],
                    "name": owner["name"],
                },
                "podGroupTemplates": [g.template_spec() for g in found],
            },
        }

    @staticmethod
    def _pod_group(job: GangInput, workload: JSON, group: Group, name: str) -> JSON:
        wl = meta(workload)
        spec = {"workloadRef": {"workloadName": wl.name, "templateName": group.template}, **group.settings()}
        return {
            "apiVersion": POD_GROUPS.api_version,
            "kind": POD_GROUPS.kind,
            "metadata": {
                "name": name,
                "namespace": job.namespace,
                "ownerReferences": [
                    owner_reference(job.owner),
                    {
                        "apiVersion": WORKLOADS.api_version,
                        "kind": WORKLOADS.kind,
                        "name": wl.name,
                        "uid": wl.uid,
                    },
                ],
            },
            "spec": spec,
        }

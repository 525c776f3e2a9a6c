"""Volcano gang scheduling: a ``scheduling.volcano.sh/v1beta1`` PodGroup per job.

Follows kubeflow/trainer ``pkg/runtime/framework/plugins/volcano`` and training-operator's
``pkg/controller.v1/common/scheduler`` (volcano): a PodGroup named after the job, owned by it,
with minMember, minResources, queue, priorityClassName and networkTopology; pods get
``schedulerName: volcano`` (when unset) and the annotations ``scheduling.k8s.io/group-name`` and
``volcano.sh/task-spec``. Two things upstream does not do:

* **No partial gangs**: the Jobs stay suspended (no Pods) until Volcano moves the PodGroup out of
  ``Pending`` (its enqueue action found room for minResources in the queue), so pods never hold
  nodes while the gang cannot start. Once released, a job is not held again.
* **Loud queues**: a queue that does not exist, is not ``Open``, is ``root`` or is not a leaf of the
  hierarchy (Volcano's own PodGroup webhook does not check leaves, only its vcjob webhook does)
  holds the job with a ``Misconfigured`` condition naming the queue and the fix.

When the job finishes the PodGroup is deleted, so it stops holding queue quota.
"""

from __future__ import annotations

from typing import ClassVar

from trainer.api.base import Condition
from trainer.api.conditions import COND_WAITING_FOR_GANG, true_condition
from trainer.api.kinds import VOLCANO_PODGROUPS, VOLCANO_QUEUES, Resource
from trainer.api.labels import VOLCANO_QUEUE_ANNOTATION
from trainer.api.trainer_v1alpha1 import NetworkTopologySpec
from trainer.framework.controller import Owns
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.conditions import problem
from trainer.jobs.gang.base import (
    Facts,
    GangInput,
    GangPlan,
    gang_resources,
    min_member,
    pod_group_metadata,
    queue_problem,
    runtime_policy_problem,
    scheduler_name_problems,
)

SCHEDULER_NAME = "volcano"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"

DEFAULT_QUEUE = "default"
FLAG = "volcano"


def network_topology(spec: NetworkTopologySpec | None) -> JSON | None:
    """The PodGroup's ``spec.networkTopology`` for a runtime's ``podGroupPolicy.volcano.networkTopology``.

    As kubeflow/trainer ``pkg/runtime/framework/plugins/volcano`` builds it: exactly ``mode`` and
    ``highestTierAllowed`` (their API defaults ``hard`` and 1 where unset); ``None`` without one.
    """
    if spec is None:
        return None
    tier = spec.highest_tier_allowed
    return {"mode": spec.mode or "hard", "highestTierAllowed": 1 if tier is None else tier}


def queue_problems(name: str, queues: list[JSON]) -> list[Condition]:
    """Why Volcano would not run a job in queue ``name`` (empty when it would)."""
    by_name = {str(meta(q).name): q for q in queues}
    fix = "set annotation scheduling.volcano.sh/queue-name to an open leaf queue"
    if name == "root":
        return [problem("QueueNotLeaf", f"Volcano queue 'root' is the top of the hierarchy and runs no jobs; {fix}")]
    queue = by_name.get(name)
    if queue is None:
        return [
            problem(
                "QueueNotFound",
                f"Volcano queue {name!r} does not exist (Volcano would silently never schedule the gang); "
                f"create it or {fix}",
            )
        ]
    state = ((queue.get("status") or {}).get("state")) or "Unknown"
    if state != "Open":
        return [problem("QueueNotOpen", f"Volcano queue {name!r} is {state}, not Open; reopen it or {fix}")]
    children = sorted(n for n, q in by_name.items() if ((q.get("spec") or {}).get("parent")) == name)
    if children:
        return [
            problem(
                "QueueNotLeaf",
                f"Volcano queue {name!r} has child queues ({', '.join(children)}); jobs run only in leaf queues: {fix}",
            )
        ]
    return []


def priority_class(job: GangInput) -> str | None:
    """The PodGroup's ``priorityClassName``: the job's, else the first pod set's that names one."""
    return job.priority_class or next(
        (
            str(ps.template["spec"]["priorityClassName"])
            for ps in job.pod_sets
            if (ps.template.get("spec") or {}).get("priorityClassName")
        ),
        None,
    )


class Volcano:
    """``--gang-scheduler-name=volcano``."""

    name: ClassVar[str] = "volcano"
    owns: ClassVar[list[Owns]] = [Owns(VOLCANO_PODGROUPS)]
    watches: ClassVar[list[Resource]] = [VOLCANO_QUEUES]

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        existing = facts.get(VOLCANO_PODGROUPS, job.namespace, job.name)
        if job.finished:
            return GangPlan(delete=[(VOLCANO_PODGROUPS, job.namespace, job.name)] if existing else [])
        plan = GangPlan(scheduler_name=SCHEDULER_NAME)
        plan.conditions += scheduler_name_problems(job, SCHEDULER_NAME, FLAG)
        plan.conditions += runtime_policy_problem(job, "volcano", FLAG)
        plan.conditions += queue_problem(job, {"volcano"}, FLAG)
        queue = job.queue.name if job.queue.name and job.queue.scheduler in ("volcano", "") else DEFAULT_QUEUE
        plan.pod_annotations["*"] = {GROUP_NAME_ANNOTATION: job.name, VOLCANO_QUEUE_ANNOTATION: queue}
        for ps in job.pod_sets:
            plan.pod_annotations[ps.name] = {TASK_SPEC_ANNOTATION: ps.name}
        queue_issues = [] if job.started else queue_problems(queue, facts.items(VOLCANO_QUEUES))
        if queue_issues:
            plan.conditions += queue_issues
            plan.hold = True
            return plan
        priority = priority_class(job)
        spec: dict[str, object] = {"minMember": min_member(job), "queue": queue}
        resources = job.min_resources or gang_resources(job.pod_sets)
        if resources:
            # Left out when empty: applied over the minResources a job asked for before, an empty map
            # reaches the apiserver as null, which Volcano's CRD refuses ("must be of type object").
            spec["minResources"] = resources
        if priority:
            spec["priorityClassName"] = priority
        volcano = job.pod_group_policy.volcano if job.pod_group_policy is not None else None
        topology = network_topology(volcano.network_topology) if volcano is not None else None
        if topology:
            spec["networkTopology"] = topology
        plan.apply.append(
            {
                "apiVersion": VOLCANO_PODGROUPS.api_version,
                "kind": VOLCANO_PODGROUPS.kind,
                "metadata": pod_group_metadata(job),
                "spec": spec,
            }
        )
        phase = ((existing or {}).get("status") or {}).get("phase") or ""
        if not job.started and phase in ("", "Pending"):
            plan.hold = True
            why = (true_condition(existing or {}, "Unschedulable") or {}).get("message")
            plan.conditions.append(
                Condition(
                    type=COND_WAITING_FOR_GANG,
                    status="True",
                    reason="PodGroupPending",
                    message=(
                        f"Jobs stay suspended until Volcano admits PodGroup {job.name!r} in queue {queue!r} "
                        f"(minMember {spec['minMember']}, minResources {spec.get('minResources', {})})"
                        + (f": {why}" if why else "")
                    ),
                )
            )
        return plan

"""scheduler-plugins coscheduling (``--gang-scheduler-name=scheduler-plugins``).

A ``scheduling.x-k8s.io/v1alpha1`` PodGroup per job (kubernetes-sigs/scheduler-plugins
``apis/scheduling/v1alpha1``): minMember, minResources and scheduleTimeoutSeconds (from the
runtime's ``podGroupPolicy.coscheduling``, default 60); pods join it with the label
``scheduling.x-k8s.io/pod-group`` and go to the scheduler named by ``schedulerName`` (default
``scheduler-plugins-scheduler``, the name its manifests deploy). The PodGroup is deleted when the
job finishes.
"""

from __future__ import annotations

from typing import ClassVar

from trainer.api.kinds import COSCHEDULING_PODGROUPS, Resource
from trainer.framework.controller import Owns
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

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
DEFAULT_SCHEDULER = "scheduler-plugins-scheduler"
DEFAULT_TIMEOUT = 60
FLAG = "scheduler-plugins"


class Coscheduling:
    """``--gang-scheduler-name=scheduler-plugins``."""

    name: ClassVar[str] = "scheduler-plugins"
    owns: ClassVar[list[Owns]] = [Owns(COSCHEDULING_PODGROUPS)]
    watches: ClassVar[list[Resource]] = []
    scheduler: str = DEFAULT_SCHEDULER

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        existing = facts.get(COSCHEDULING_PODGROUPS, job.namespace, job.name)
        if job.finished:
            return GangPlan(delete=[(COSCHEDULING_PODGROUPS, job.namespace, job.name)] if existing else [])
        plan = GangPlan(scheduler_name=self.scheduler, pod_labels={POD_GROUP_LABEL: job.name})
        plan.conditions += scheduler_name_problems(job, self.scheduler, FLAG)
        plan.conditions += runtime_policy_problem(job, "coscheduling", FLAG)
        plan.conditions += queue_problem(job, set(), FLAG)
        timeout = job.schedule_timeout_seconds if job.schedule_timeout_seconds is not None else DEFAULT_TIMEOUT
        plan.apply.append(
            {
                "apiVersion": COSCHEDULING_PODGROUPS.api_version,
                "kind": COSCHEDULING_PODGROUPS.kind,
                "metadata": pod_group_metadata(job),
                "spec": {
                    "minMember": min_member(job),
                    "minResources": job.min_resources or gang_resources(job.pod_sets),
                    "scheduleTimeoutSeconds": timeout,
                },
            }
        )
        return plan

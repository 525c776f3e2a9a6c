"""No gang scheduling (``--gang-scheduler-name=none``, the default): pods go to their own scheduler.

Nothing is created, but what would silently be lost is reported (seed 000, kubeflow/trainer#2325):
a Volcano queue the job names, pods that ask for ``schedulerName: volcano`` (Volcano would then put
each pod in a PodGroup of its own with minMember 1 in queue ``default``), and a runtime
``podGroupPolicy``.
"""

from __future__ import annotations

from typing import ClassVar

from trainer.gang.base import (
    Facts,
    GangInput,
    GangPlan,
    queue_problem,
    runtime_policy_problem,
    scheduler_name_problems,
)
from trainer.kube.client import Resource

FLAG = "none"


class NoGang:
    """``--gang-scheduler-name=none``."""

    name: ClassVar[str] = "none"
    watches: ClassVar[list[Resource]] = []

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        if job.finished:
            return GangPlan()
        plan = GangPlan()
        # Kueue works without our flag (it flips suspend itself), so its label is carried.
        plan.conditions += queue_problem(job, {"kueue"}, FLAG)
        plan.conditions += scheduler_name_problems(job, None, FLAG)
        plan.conditions += runtime_policy_problem(job, None, FLAG)
        return plan

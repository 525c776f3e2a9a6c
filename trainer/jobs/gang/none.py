"""No gang scheduling (``--gang-scheduler-name=none``, the default): pods go to their own scheduler.

Nothing is created, but what would silently be lost is reported (seed 000, kubeflow/trainer#2325):
a Volcano queue the job names, pods that ask for ``schedulerName: volcano`` (Volcano would then put
each pod in a PodGroup of its own with minMember 1 in queue ``default``), and a runtime
``podGroupPolicy``.
"""

from __future__ import annotations

from typing import ClassVar

from trainer.api.kinds import Resource
from trainer.framework.controller import Owns
from trainer.jobs.gang.base import Facts, GangInput, GangPlan, reports_only

FLAG = "none"


class NoGang:
    """``--gang-scheduler-name=none``."""

    name: ClassVar[str] = "none"
    owns: ClassVar[list[Owns]] = []
    watches: ClassVar[list[Resource]] = []

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        # Kueue works without our flag (it flips suspend itself), so its label is carried.
        return reports_only(job, {"kueue"}, FLAG)

"""Kueue (``--gang-scheduler-name=kueue``): no PodGroup of ours; Kueue admits the whole job.

Kueue (kubernetes-sigs/kueue, integrations ``trainer.kubeflow.org/trainjob`` and
``kubeflow.org/mpijob``) reads the queue label ``kueue.x-k8s.io/queue-name``, keeps the job
suspended until its Workload is admitted, then writes node selectors, tolerations and scheduling
gates into the job (``podSpecOverrides`` for Kueue 0.14, ``runtimePatches`` for >= 0.17) and sets
``suspend: false``. The reconciler already honours suspend and applies both override forms, so this
module only reports what Kueue cannot carry: a Volcano queue, pods naming another scheduler, a
runtime ``podGroupPolicy``.
"""

from __future__ import annotations

from typing import ClassVar

from trainer.api.kinds import Resource
from trainer.framework.controller import Owns
from trainer.jobs.gang.base import Facts, GangInput, GangPlan, reports_only

FLAG = "kueue"


class Kueue:
    """``--gang-scheduler-name=kueue``."""

    name: ClassVar[str] = "kueue"
    owns: ClassVar[list[Owns]] = []
    watches: ClassVar[list[Resource]] = []

    def plan(self, job: GangInput, facts: Facts) -> GangPlan:
        return reports_only(job, {"kueue"}, FLAG)

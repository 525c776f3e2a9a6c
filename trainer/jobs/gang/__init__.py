"""Gang schedulers, one module each, selected by ``--gang-scheduler-name``.

To add one: write a module with a class satisfying :class:`trainer.jobs.gang.base.GangScheduler` and
list it in ``SCHEDULERS`` below; the reconcilers only see the interface. What admission asks of one
scheduler in particular (Volcano's queue checks, the Workload API's groups) is reached through this
module too, so no other module imports a scheduler's.
"""

from __future__ import annotations

from trainer.api.base import Condition
from trainer.framework.json_codec import JSON
from trainer.jobs.gang import volcano, workload
from trainer.jobs.gang.base import GangScheduler
from trainer.jobs.gang.coscheduling import Coscheduling
from trainer.jobs.gang.kueue import Kueue
from trainer.jobs.gang.none import NoGang
from trainer.jobs.gang.volcano import Volcano
from trainer.jobs.gang.workload import Workload

WORKLOAD = Workload.name
"""``--gang-scheduler-name`` of the Workload API, the one that serves a runtime's ``spec.scheduling``."""
WORKLOAD_API_MISSING = workload.API_MISSING
"""What a cluster lacks for ``spec.scheduling``: said by admission and on the job."""
scheduling_errors = workload.scheduling_errors
"""Why a runtime's ``spec.scheduling`` cannot be built for its replicated jobs
(:func:`trainer.jobs.gang.workload.scheduling_errors`)."""

SCHEDULERS: dict[str, type[GangScheduler]] = {cls.name: cls for cls in (NoGang, Volcano, Kueue, Coscheduling, Workload)}


def get(name: str) -> GangScheduler:
    """The gang scheduler for ``--gang-scheduler-name=name``. Raises ``ValueError`` naming the choices."""
    try:
        return SCHEDULERS[name]()
    except KeyError:
        raise ValueError(f"unknown gang scheduler {name!r}; choose one of {', '.join(SCHEDULERS)}") from None


def queue_problems(scheduler: str, queue: str, queues: list[JSON]) -> list[Condition]:
    """Why ``scheduler`` (``--gang-scheduler-name``) would not run a job in ``queue``, given the cluster's
    ``queues``: Volcano's checks (:func:`trainer.jobs.gang.volcano.queue_problems`); none for the others."""
    return volcano.queue_problems(queue, queues) if scheduler == Volcano.name else []

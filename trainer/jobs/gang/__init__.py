"""Gang schedulers, one module each, selected by ``--gang-scheduler-name``.

To add one: write a module with a class satisfying :class:`trainer.jobs.gang.base.GangScheduler` and
list it in ``SCHEDULERS`` below; the reconcilers only see the interface.
"""

from __future__ import annotations

from trainer.jobs.gang.base import GangScheduler
from trainer.jobs.gang.coscheduling import Coscheduling
from trainer.jobs.gang.kueue import Kueue
from trainer.jobs.gang.none import NoGang
from trainer.jobs.gang.volcano import Volcano
from trainer.jobs.gang.workload import Workload

SCHEDULERS: dict[str, type[GangScheduler]] = {cls.name: cls for cls in (NoGang, Volcano, Kueue, Coscheduling, Workload)}


def get(name: str) -> GangScheduler:
    """The gang scheduler for ``--gang-scheduler-name=name``. Raises ``ValueError`` naming the choices."""
    try:
        return SCHEDULERS[name]()
    except KeyError:
        raise ValueError(f"unknown gang scheduler {name!r}; choose one of {', '.join(SCHEDULERS)}") from None

"""Which watch events of a job controller's primaries and children bring a reconcile: the job layer's
event filter (controller-runtime's ``builder.WithEventFilter``), declared by
:func:`trainer.jobs.reconcile.declare`.

An echo of the controller's own settled write (a status patch that only counted progress, a child write
the reconcile already read back) is dropped: a reconcile of it would write nothing
(:meth:`~trainer.jobs.features.own_writes.OwnWrites.settled_echo`). Any other change of a child starts its
owner's progress clock at the time of the watch event (:class:`~trainer.jobs.status_writer.ProgressClock`),
so the reconcile the children batch brings later finds a progress-only change's wait already done.
"""

from __future__ import annotations

from trainer.api.kinds import Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import owner_keys
from trainer.jobs.features.own_writes import OwnWrites
from trainer.jobs.status_writer import ProgressClock


class JobEventFilter:
    """The event filter of the job controller of ``primary``, over its own writes and progress clock."""

    def __init__(self, primary: Resource, own_writes: OwnWrites, clock: ProgressClock) -> None:
        self.primary, self.own_writes, self.clock = primary, own_writes, clock

    def accepts(self, res: Resource, old: JSON | None, new: JSON | None) -> bool:
        """Whether the change ``old`` -> ``new`` (None: added or deleted) of a ``res`` object brings a
        reconcile: not when it is the echo of a settled write of the controller's own (an update of the
        primary, any change of a child); a child's change starts its owner's progress clock."""
        if res == self.primary:
            return old is None or new is None or not self.own_writes.settled_echo(res, new)
        if new is not None and self.own_writes.settled_echo(res, new):
            return False
        for key in owner_keys(self.primary, old, new):
            self.clock.start(key)
        return True

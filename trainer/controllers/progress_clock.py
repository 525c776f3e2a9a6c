"""Since when each job's progress has gone unwritten: the clock of the status coalescing.

A change of only progress counts (``jobsStatus``, ``replicaStatuses``) is written once it has waited
``--status-coalesce-seconds`` (:meth:`trainer.controllers.reconciler.Reconciler.write_status`). The
wait counts from the change itself: the manager's handler of a child's change starts the clock for the
child's owner (:meth:`ProgressClock.start`, the time of the watch event), and the reconcile the
children batch brings (``--children-batch-seconds``) later finds the wait done, so one reconcile both
sees and writes the change instead of one to defer it and one more to write it. A reconcile that finds
a progress change whose clock has not started starts it then. The clock of a job stops when its status
is written, found unchanged, or the job is gone.

The same gathering as k8s.io/kubernetes ``pkg/controller/job/job_controller.go``, whose status
updates follow pod changes batched by ``syncJobBatchPeriod`` (1 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trainer.kube.cache import Key


class ProgressClock:
    """Per job key ``(namespace, name)``: the monotonic time (seconds) its unwritten progress began."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._since: dict[Key, float] = {}
        self._clock = clock

    def __len__(self) -> int:
        return len(self._since)

    def start(self, key: Key) -> float:
        """Start ``key``'s clock now unless it runs already; returns when it started."""
        return self._since.setdefault(key, self._clock())

    def waited(self, key: Key) -> float:
        """Seconds since ``key``'s clock started, starting it now when it was not running (0.0)."""
        return self._clock() - self.start(key)

    def stop(self, key: Key) -> None:
        """Stop ``key``'s clock (its status was written or has nothing to write, or the job is gone)."""
        self._since.pop(key, None)

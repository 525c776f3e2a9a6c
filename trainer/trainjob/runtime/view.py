"""One TrainJob as a reconcile sees it: what its runtime says and what its child Jobs are doing.

The kind's derived data (:class:`~trainer.jobs.reconcile.Expanded`), computed once per reconcile by
:func:`trainer.trainjob.runtime.expand.expand`: two objects typed by their source, the runtime's
(:class:`~trainer.trainjob.runtime.info.RuntimeInfo`) and the attempt's
(:class:`~trainer.trainjob.runtime.attempt.Attempt`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.jobs.gang.base import GangInput
from trainer.trainjob.runtime.attempt import Attempt
from trainer.trainjob.runtime.info import RuntimeInfo


@dataclass(frozen=True)
class TrainJobView:
    """A TrainJob's :class:`RuntimeInfo` and :class:`Attempt`."""

    info: RuntimeInfo
    attempt: Attempt

    @property
    def gang(self) -> GangInput:
        """The job as its gang scheduler sees it (:meth:`RuntimeInfo.gang_input`)."""
        return self.info.gang_input(finished=self.attempt.finished, started=self.attempt.started)

    @property
    def requeue_after(self) -> float | None:
        """Seconds until the active deadline or the TTL passes (:attr:`Attempt.requeue_after`)."""
        return self.attempt.requeue_after

    @property
    def pod_ready(self) -> bool:
        """Whether a pod of the current attempt's Jobs runs (:attr:`Attempt.pod_ready`)."""
        return self.attempt.pod_ready

"""The TrainJob controller's settings (command-line flags), read by the kind and its features."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.trainjob.spec.injection import Injection


@dataclass(frozen=True, kw_only=True)
class TrainJobOptions:
    """The TrainJob controller's settings (command-line flags)."""

    running_condition: bool = False
    """``--trainjob-running-condition``: TrainJobs carry the richer conditions (``Running``, ``Resumed``)."""
    injection: Injection | None = None
    """The status server trainer pods report progress to (``--status-server-port``); None: none."""
    max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB
    """``--max-nodes-per-job``: the most nodes (pods of one replicated job) a TrainJob may have; 0: no limit."""
    status_coalesce_seconds: float = 1.0
    """``--status-coalesce-seconds``: how long a change of only ``jobsStatus`` may wait to be written."""
    network_policy: bool = False
    """``--trainjob-network-policy``: each TrainJob gets a NetworkPolicy letting in only its own pods."""

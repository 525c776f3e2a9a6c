"""The operator's controllers wired from its settings: the one place that names the concrete kinds.

:class:`Settings` holds the command-line flags; :func:`controllers` declares the TrainJob and MPIJob
controllers with their own options under the chosen gang scheduler; :func:`new_manager` hands them to
the generic :class:`~trainer.framework.manager.Manager`. As a controller-runtime ``main.go`` sets up each
reconciler with ``SetupWithManager``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.framework.controller import Controller
from trainer.framework.kube.client import KubeClient
from trainer.framework.kube.leader import LeaderElector
from trainer.framework.manager import Manager, ManagerOptions
from trainer.framework.metrics import Metrics
from trainer.jobs import gang
from trainer.jobs.gang.base import GangScheduler
from trainer.jobs.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.mpijob import controller as mpijob
from trainer.trainjob import controller as trainjob
from trainer.trainjob.runtime.injection import Injection


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Operator settings (command-line flags)."""

    namespace: str | None = None
    """Namespace to watch; None watches all."""
    max_concurrent_reconciles: int = 4
    """Reconciles running at once, per controller."""
    gang_scheduler_name: str = "none"
    """The gang scheduler pods are handed to (``--gang-scheduler-name``)."""
    shutdown_timeout: float = 20.0
    """Seconds :meth:`Manager.stop` lets in-flight reconciles finish before cancelling them."""
    trainjob_running_condition: bool = False
    """TrainJobs carry ``Running`` and ``Suspended=False`` conditions (``--trainjob-running-condition``)."""
    status_server_url: str | None = None
    """``https://<host>:<port>`` of the status server trainer pods report progress to; None: none."""
    max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB
    """The most nodes a job may have (``--max-nodes-per-job``): numNodes and the pods of any replicated job
    of a TrainJob, the workers of an MPIJob; 0: no limit."""
    status_coalesce_seconds: float = 1.0
    """Seconds a progress-only status change (``jobsStatus``, ``replicaStatuses``) may wait to be written
    together with later ones (``--status-coalesce-seconds``); 0 writes each at once."""
    children_batch_seconds: float = 1.0
    """Seconds the changes of a job's children are gathered before the job is reconciled for them
    (``--children-batch-seconds``); 0: at once."""

    def manager_options(self) -> ManagerOptions:
        """What the generic manager reads of these settings."""
        return ManagerOptions(
            namespace=self.namespace,
            max_concurrent_reconciles=self.max_concurrent_reconciles,
            shutdown_timeout=self.shutdown_timeout,
            children_batch_seconds=self.children_batch_seconds,
        )


def controllers(settings: Settings, scheduler: GangScheduler) -> list[Controller]:
    """The operator's controllers, TrainJob and MPIJob, each with its own options from ``settings``."""
    url = settings.status_server_url
    trainjobs = trainjob.TrainJobOptions(
        running_condition=settings.trainjob_running_condition,
        injection=Injection(url.rstrip("/")) if url else None,
        max_nodes_per_job=settings.max_nodes_per_job,
        status_coalesce_seconds=settings.status_coalesce_seconds,
    )
    mpijobs = mpijob.MPIJobOptions(
        max_nodes_per_job=settings.max_nodes_per_job, status_coalesce_seconds=settings.status_coalesce_seconds
    )
    return [trainjob.controller(scheduler, trainjobs), mpijob.controller(scheduler, mpijobs)]


def new_manager(
    kube: KubeClient,
    settings: Settings,
    metrics: Metrics | None = None,
    elector: LeaderElector | None = None,
    declared: list[Controller] | None = None,
) -> Manager:
    """A :class:`~trainer.framework.manager.Manager` of :func:`controllers` (or ``declared``) under the gang
    scheduler ``settings.gang_scheduler_name``. Raises ``ValueError`` for an unknown gang scheduler."""
    scheduler = gang.get(settings.gang_scheduler_name)
    if declared is None:
        declared = controllers(settings, scheduler)
    return Manager(kube, settings.manager_options(), declared, metrics=metrics, elector=elector)

"""The operator's controllers wired from its settings: the one place that names the concrete kinds.

:class:`~trainer.wiring.settings.Settings` holds the command-line flags (re-exported here as
:class:`Settings`); :func:`controllers` declares the TrainJob and MPIJob controllers with their own
options, built from those settings, under the chosen gang scheduler; :func:`new_manager` hands them to the generic
:class:`~trainer.framework.manager.Manager` with its own options, built from the same settings. As a
controller-runtime ``main.go`` sets up each reconciler with ``SetupWithManager``.
"""

from __future__ import annotations

from trainer.framework.controller import Controller
from trainer.framework.kube.client import KubeClient
from trainer.framework.kube.leader import LeaderElector
from trainer.framework.manager import Manager, ManagerOptions
from trainer.framework.metrics import Metrics
from trainer.jobs import gang
from trainer.jobs.gang.base import GangScheduler
from trainer.mpijob import controller as mpijob
from trainer.optimizationjob import controller as optimizationjob
from trainer.trainjob import controller as trainjob
from trainer.trainjob.spec.injection import Injection
from trainer.wiring.settings import Settings

__all__ = ["Settings", "controllers", "new_manager"]


def controllers(settings: Settings, scheduler: GangScheduler) -> list[Controller]:
    """The operator's controllers, TrainJob and MPIJob, each with its own options from ``settings``, and
    OptimizationJob (its trials are TrainJobs)."""
    url = settings.status_server_url
    trainjobs = settings.options(trainjob.TrainJobOptions, injection=Injection(url.rstrip("/")) if url else None)
    mpijobs = settings.options(mpijob.MPIJobOptions)
    return [
        trainjob.controller(scheduler, trainjobs),
        mpijob.controller(scheduler, mpijobs),
        optimizationjob.controller(),
    ]


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
    options = settings.options(ManagerOptions)
    return Manager(kube, options, declared, metrics=metrics, elector=elector)

"""The TrainJob controller's declaration (:func:`controller`).

Declared once: TrainJobs; the Jobs, Services, ConfigMaps and Secrets every job owns, each carrying
``jobset.sigs.k8s.io/jobset-name``; what each feature owns and watches
(:data:`trainer.trainjob.features.FEATURES`: the claims of ``volumeClaimPolicies``, a gang's
PodDisruptionBudget, the NetworkPolicy, the runtimes, the ResourceClaimTemplates, the JobSets a cluster
switched from Kubeflow Trainer still has); the gang scheduler's owned objects (PodGroups) and the cluster
objects it reads (Volcano Queues), mapped to every TrainJob. The reconcile is
:meth:`trainer.jobs.reconcile.Reconciler.reconcile`, running the kind's functions
(:mod:`trainer.trainjob.kind`). Mirrors kubeflow/trainer ``pkg/controller/trainjob_controller.go``
(``SetupWithManager``).
"""

from __future__ import annotations

from trainer.api.conditions import COND_MISCONFIGURED, COND_REPLICA_FAILURE, COND_RESTARTING, COND_RUNTIME_NOT_FOUND
from trainer.api.trainer_v1alpha1 import COND_FAILED
from trainer.framework.controller import Controller
from trainer.jobs.gang.base import GangScheduler
from trainer.jobs.reconcile import declare
from trainer.jobs.status_writer import Telling
from trainer.trainjob.features import FEATURES
from trainer.trainjob.kind import kind
from trainer.trainjob.options import TrainJobOptions

__all__ = ["TELLING", "TrainJobOptions", "controller"]

TELLING = Telling(
    warnings=frozenset(
        {COND_FAILED, COND_RUNTIME_NOT_FOUND, COND_MISCONFIGURED, COND_RESTARTING, COND_REPLICA_FAILURE}
    ),
    progress_fields=frozenset({"jobsStatus", "replicas"}),
    riders=frozenset({"startTime"}),
)
"""How a TrainJob's changes are told: its problems as Warning events; ``jobsStatus`` and ``replicas``
coalesced; ``startTime`` never written alone (a new running TrainJob's ``startTime`` goes with its first
counts, a resumed one's with its ``Suspended`` condition turning False)."""


def controller(gang: GangScheduler, options: TrainJobOptions | None = None) -> Controller:
    """The TrainJob controller's declaration under gang scheduler ``gang``: what every job controller owns
    and watches (:func:`trainer.jobs.reconcile.declare`) and what each TrainJob feature declares. A
    reconcile reads its Job writes back (the kind's ``settle``): their echoes need no reconcile. As JobSet
    and Trainer, it announces no creation: the Job controller tells each pod it creates."""
    options = options or TrainJobOptions()
    return declare(
        "trainjob",
        kind(options, gang.name),
        gang,
        telling=TELLING,
        announce=False,
        also_owns=tuple(resource for feature in FEATURES for resource in feature.owns),
        watches=tuple(watch for feature in FEATURES for watch in feature.watches),
        status_coalesce_seconds=options.status_coalesce_seconds,
    )

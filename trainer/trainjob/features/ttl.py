"""``ttlSecondsAfterFinished``: a finished TrainJob, or its children, deleted once its TTL passed.

The TTL that holds (:func:`trainer.trainjob.spec.run_policy.ttl_of`): the TrainJob's own, else its runtime's
``runPolicy``'s (KEP-2899, kubeflow/trainer#3824 and #4052), each deleting the TrainJob itself (the garbage
collector takes its children by their owner references; no status is written then); else the runtime
template's JobSet ``ttlSecondsAfterFinished``, which deletes the group as JobSet deletes its JobSet: the
finished Jobs and every other child the TrainJob owns but its runtime snapshot, the TrainJob staying with
its outcome.
"""

from __future__ import annotations

from trainer.api.kinds import CONFIGMAPS, JOBS, PERSISTENT_VOLUME_CLAIMS, SECRETS, SERVICES, TRAINJOBS
from trainer.api.snapshot import SNAPSHOT_SUFFIX
from trainer.framework.kube.cache import key_of
from trainer.framework.permissions import Permission
from trainer.jobs.child_writer import Desired
from trainer.jobs.conditions import JOB_TERMINAL, finished
from trainer.trainjob.features.base import Feature, Step, deleting
from trainer.trainjob.runtime.view import TrainJobView

PERMISSIONS = (
    Permission(
        TRAINJOBS, ("delete",), "ttlSecondsAfterFinished, the TrainJob's or its runtime's runPolicy's (KEP-2899)"
    ),
)
TTL_CHILDREN = (SERVICES, CONFIGMAPS, SECRETS, PERSISTENT_VOLUME_CLAIMS)
"""Children besides Jobs that ``ttlSecondsAfterFinished`` deletes (those the TrainJob owns: a claim its
``volumeClaimPolicies`` retain has no owner reference and stays)."""


def deletes_trainjob(view: TrainJobView) -> bool:
    """The TTL that deletes the TrainJob itself is due."""
    return view.attempt.ttl_due and view.info.ttl_deletes_job


def desired(step: Step, out: Desired) -> None:
    """Once due: the TrainJob's own delete, or the deletes of its finished Jobs and of its other children."""
    view = step.view
    if not view.attempt.finished or not view.attempt.ttl_due:
        return
    if view.info.ttl_deletes_job:
        out.delete.append((TRAINJOBS, *key_of(view.info.obj)))
        return
    jobs = [*view.attempt.previous, *view.attempt.replaced, *view.attempt.observed]
    out.delete += [(JOBS, *key_of(j)) for j in jobs if finished(j, JOB_TERMINAL) is not None and not deleting(j)]
    for res in TTL_CHILDREN:
        out.delete += [
            (res, *key_of(o))
            for o in step.reader.owned(res, step.uid)
            if not o["metadata"]["name"].endswith(SNAPSHOT_SUFFIX) and not deleting(o)
        ]


FEATURE = Feature(name="ttl", desired=desired, deletes_trainjob=deletes_trainjob)

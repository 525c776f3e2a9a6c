"""The PersistentVolumeClaims of a runtime's ``volumeClaimPolicies``, as a TrainJob feature: created once
while the TrainJob runs, never updated (kubernetes-sigs/jobset ``pkg/controllers/volume_claim_policy.go``,
v0.12). What they are and the pod volumes that use them: :mod:`trainer.trainjob.spec.volume_claims`.
"""

from __future__ import annotations

from functools import partial

from trainer.api.kinds import PERSISTENT_VOLUME_CLAIMS
from trainer.jobs.child_writer import Desired, Once
from trainer.trainjob.features.base import Feature, Step
from trainer.trainjob.spec.volume_claims import claims


def desired(step: Step, out: Desired) -> None:
    """Each claim created when absent while the TrainJob runs (a claim it retains has no owner reference)."""
    info = step.view.info
    if step.view.attempt.over:
        return
    for pvc in claims(info.obj, info.template.volume_claim_policies or []):
        meta = pvc["metadata"]
        out.once.append(Once(PERSISTENT_VOLUME_CLAIMS, meta["namespace"], meta["name"], partial(dict, pvc)))


FEATURE = Feature(name="volume_claims", owns=(PERSISTENT_VOLUME_CLAIMS,), desired=desired)

"""The TrainJob's features, one module each, listed once here (:data:`FEATURES`): what each owns, watches
and adds to a reconcile is declared in its module (:class:`~trainer.trainjob.features.base.Feature`). To
add one, write its module and list it below; the controller runs every listed feature and names none.
"""

from __future__ import annotations

from trainer.trainjob.features import (
    disruption,
    dra,
    network_policy,
    resize,
    snapshot,
    ttl,
    upstream_jobset,
    volume_claims,
)
from trainer.trainjob.features.base import Feature

FEATURES: tuple[Feature, ...] = (
    snapshot.FEATURE,
    volume_claims.FEATURE,
    disruption.FEATURE,
    network_policy.FEATURE,
    ttl.FEATURE,
    resize.FEATURE,
    upstream_jobset.FEATURE,
    dra.FEATURE,
)
"""Every TrainJob feature, in the order their steps run."""

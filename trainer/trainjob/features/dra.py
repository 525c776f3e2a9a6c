"""Dynamic resource allocation (KEP-2782) as a TrainJob feature: the ResourceClaimTemplates a TrainJob's
``spec.trainer.resourceClaimsPerNode`` name are watched, and what the cache tells of them (and whether the
cluster serves ``resource.k8s.io/v1``) is what the expansion counts GPUs from (:func:`devices_of`). The
claims themselves: :mod:`trainer.trainjob.spec.devices`.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainer.api.kinds import RESOURCE_CLAIM_TEMPLATES, TRAINJOBS
from trainer.framework.controller import Key, Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.trainjob.features.base import Feature
from trainer.trainjob.spec.devices import Devices


def devices_of(reader: Reader, namespace: str) -> Devices:
    """What the cache tells of DRA for a TrainJob in ``namespace``: whether the cluster serves
    ``resource.k8s.io/v1`` and its ResourceClaimTemplates there
    (:class:`~trainer.trainjob.spec.devices.Devices`)."""
    return Devices(
        served=reader.served(RESOURCE_CLAIM_TEMPLATES),
        template=lambda name: reader.get(RESOURCE_CLAIM_TEMPLATES, namespace, name),
    )


def trainjobs_of_claim_template(template: JSON, reader: Reader) -> Iterable[Key]:
    """The TrainJobs in the namespace of ``template`` (a ResourceClaimTemplate) that name it in
    ``spec.trainer.resourceClaimsPerNode``: the GPUs they count come from it (a Job already made keeps
    its pods' environment; a TrainJob whose runtime or runtime patches name it is expanded again on its
    next change)."""
    ns, name = key_of(template)
    for tj in reader.items(TRAINJOBS):
        claims = ((tj.get("spec") or {}).get("trainer") or {}).get("resourceClaimsPerNode") or []
        if key_of(tj)[0] == ns and any(c.get("resourceClaimTemplateName") == name for c in claims):
            yield key_of(tj)


FEATURE = Feature(name="dra", watches=(Watches(RESOURCE_CLAIM_TEMPLATES, trainjobs_of_claim_template),))
"""A cluster without ``resource.k8s.io/v1`` leaves its cache absent (:meth:`Reader.served` is False)."""

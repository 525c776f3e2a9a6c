"""Whether the cluster serves MPIJobs in the version this operator reads (``kubeflow.org/v2beta1``).

A cluster that ran Kubeflow training-operator v1 has the CRD ``mpijobs.kubeflow.org`` serving ``v1`` only
(kubeflow/training-operator ``manifests/base/crds/kubeflow.org_mpijobs.yaml``). Helm installs a chart's
CRDs only when absent, so installing this operator there leaves that CRD as it is: ``v2beta1`` is not
served, the MPIJob informer finds the resource absent (an empty cache, which does not hold readiness
back) and no MPIJob is run. That is said once at startup, as one error line naming the CRD, the versions
it serves and the fix (:func:`check`); the TrainJob controller runs on. The CRD cannot simply be
replaced while v1 objects are stored (``status.storedVersions`` holds ``v1``, and the apiserver refuses
a CRD that drops a stored version): the v1 MPIJobs go first (deleted, or re-created as v2beta1 ones),
then the CRD, then this operator's is applied.
"""

from __future__ import annotations

import aiohttp
import structlog

from trainer.api.kinds import CRDS, KUBEFLOW_VERSION, MPIJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, KubeClient
from trainer.framework.permissions import Permission

log = structlog.get_logger("trainer.mpijob")
CRD_NAME = f"{MPIJOBS.plural}.{MPIJOBS.group}"
PERMISSIONS = (
    Permission(
        CRDS,
        ("get",),
        "at startup, whether the MPIJob CRD serves v2beta1 (training-operator v1's serves v1 only)",
        names=(CRD_NAME,),
    ),
)
"""``mpijobs.kubeflow.org``."""
FIX = (
    f"delete (or re-create as {MPIJOBS.group}/{KUBEFLOW_VERSION}) the MPIJobs it stores, "
    f"`kubectl delete crd {CRD_NAME}`, then `kubectl apply --server-side --force-conflicts -f charts/trainer/crds/`"
)
"""How to make the cluster serve this operator's MPIJob CRD (the migration guide has the commands)."""


def served(crd: JSON) -> list[str]:
    """The versions ``crd`` serves (``spec.versions[].served``), in its order."""
    return [str(v.get("name")) for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]


def problem(crd: JSON) -> str | None:
    """Why MPIJobs are not run with the MPIJob CRD ``crd`` (it does not serve ``v2beta1``), naming the
    versions it serves and the fix; None when it serves ``v2beta1``."""
    versions = served(crd)
    if KUBEFLOW_VERSION in versions:
        return None
    return (
        f"CustomResourceDefinition {CRD_NAME} serves {', '.join(versions) or 'no version'}, not "
        f"{KUBEFLOW_VERSION} (training-operator v1's CRD?): no MPIJob is run until it does; fix: {FIX}"
    )


async def check(kube: KubeClient) -> str | None:
    """Read the MPIJob CRD and log :func:`problem` as one error line when it does not serve ``v2beta1``;
    returns that message, or None (served, no CRD at all, or the CRD cannot be read: the MPIJob
    informer says so itself). Never raises but for cancellation."""
    try:
        crd = await kube.get_or_none(CRDS, None, CRD_NAME)
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as e:
        log.info("cannot read the MPIJob CRD; its versions are not checked", crd=CRD_NAME, error=str(e))
        return None
    message = problem(crd) if crd is not None else None
    if message is not None:
        log.error(message, crd=CRD_NAME, served=served(crd or {}), fix=FIX)
    return message

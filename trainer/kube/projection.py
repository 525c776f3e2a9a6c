"""What the caches keep of each object: only the fields the reconcilers read.

Every cached object loses ``metadata.managedFields`` (nothing here reads them; they are often the
largest part of an object). A child Job loses its Pod template's ``spec``: a Job's Pod template is
immutable once created (but for a suspended Job's scheduling directives, which the operator itself
sets), what the operator wants of it is in the desired-hash annotation, and the reconcilers read only
a Job's labels, owner, ``parallelism``/``completions``/``suspend`` and ``status``. A child Secret (the
MPI SSH key, created once and never read back) loses ``data``. The same projection is applied to a
desired object before it is compared with a cached one (:func:`trainer.diff.needs_apply`), so a
projected cache never looks like drift.

As client-go's informer transforms (k8s.io/client-go ``tools/cache/shared_informer.go``
``SetTransform``) and controller-runtime's ``cache.TransformStripManagedFields``
(sigs.k8s.io/controller-runtime ``pkg/cache/cache.go``) do it; a transform returns a new object and
never changes the one it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.kinds import JOBS, SECRETS, Resource

JSON = dict[str, Any]
Projection = Callable[[JSON], JSON]


def strip_managed_fields(obj: JSON) -> JSON:
    """``obj`` without ``metadata.managedFields`` (a shallow copy when there were any)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def job(obj: JSON) -> JSON:
    """A batch/v1 Job without managedFields and without its Pod template's ``spec`` (the template's
    ``metadata`` stays)."""
    out = strip_managed_fields(obj)
    spec = out.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    if not isinstance(template, dict) or "spec" not in template:
        return out
    kept = {k: v for k, v in template.items() if k != "spec"}
    return {**out, "spec": {**spec, "template": kept}}  # type: ignore[dict-item]


def secret(obj: JSON) -> JSON:
    """A Secret without managedFields and without ``data``/``stringData``."""
    out = strip_managed_fields(obj)
    if "data" not in out and "stringData" not in out:
        return out
    return {k: v for k, v in out.items() if k not in ("data", "stringData")}


_BY_RESOURCE: dict[Resource, Projection] = {JOBS: job, SECRETS: secret}


def projection(res: Resource) -> Projection:
    """The projection of ``res``'s objects: :func:`job`, :func:`secret`, else :func:`strip_managed_fields`."""
    return _BY_RESOURCE.get(res, strip_managed_fields)

"""What the caches keep of each object: only the fields the reconcilers read.

Every cached object loses ``metadata.managedFields`` (they are often the largest part of an object),
but for a mark that the operator created it with POST (:func:`owned_by_update`). A child Job loses its
Pod template: a Job's Pod template is immutable once created (but for a suspended Job's scheduling
directives, which the operator itself sets), what the operator wants of it is in the desired-hash
annotation, and the reconcilers read only a Job's labels, owner, ``parallelism``/``completions``/
``suspend`` and ``status``. A child Secret (the MPI SSH key,
created once and never read back) loses ``data``. The same fields are kept of a desired object
(:func:`kept_fields`, not interned) before it is compared with a cached one
(:func:`trainer.diff.needs_apply`), so a projected cache never looks like drift.

Then every key and every string value is interned (``sys.intern``): a JSON decoder makes new strings
for every object it decodes, and the same label keys, label values, owner uids, kinds and runtime
snapshots recur across cached objects; interned, each is held once (and freed with its last user).
A new version of a cached object reuses what is equal in the version cached before it (its spec, its
labels when only the status changed): a watch reports whole objects, mostly unchanged, and an equality
test runs in C where interning walks every value in Python. Equal means equal as Python compares JSON
values (``1 == 1.0 == true``); a field of a typed API object does not change its JSON type.

As client-go's informer transforms (k8s.io/client-go ``tools/cache/shared_informer.go``
``SetTransform``) and controller-runtime's ``cache.TransformStripManagedFields``
(sigs.k8s.io/controller-runtime ``pkg/cache/cache.go``) do it; a transform returns a new object and
never changes the one it is given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from api.kinds import JOBS, SECRETS, Resource
from trainer.builders.labels import FIELD_MANAGER
from trainer.json_codec import JSON

Projection = Callable[[JSON], JSON]


class Transform(Protocol):
    """What an informer caches of a new object, given the version it cached before (None: none)."""

    def __call__(self, obj: JSON, cached: JSON | None = None, /) -> JSON: ...


def interned(value: Any, like: Any = None) -> Any:
    """``value`` rebuilt with every dict key and every string interned (lists and dicts are new; numbers,
    booleans and None are kept). Where ``value`` holds what ``like`` (an earlier result of this function)
    holds at the same place, equal, that part of ``like`` is taken as it is."""
    if like is not None and type(value) is type(like) and value == like:
        return like
    if isinstance(value, dict):
        if isinstance(like, dict):
            return {sys.intern(k): interned(v, like.get(k)) for k, v in value.items()}
        return {sys.intern(k): interned(v) for k, v in value.items()}
    if isinstance(value, list):
        if isinstance(like, list) and len(like) == len(value):
            return [interned(v, w) for v, w in zip(value, like, strict=True)]
        return [interned(v) for v in value]
    if isinstance(value, str):
        return sys.intern(value)
    return value


def managed_entry(entries: list[JSON], manager: str, operation: str) -> JSON | None:
    """``manager``'s ``managedFields`` entry of ``operation`` (``Apply``/``Update``) for the object itself
    (not a subresource), or None."""
    return next(
        (
            e
            for e in entries
            if e.get("manager") == manager and e.get("operation") == operation and not e.get("subresource")
        ),
        None,
    )


def strip_managed_fields(obj: JSON) -> JSON:
    """``obj`` without ``metadata.managedFields`` (a shallow copy when there were any) but for one mark:
    :data:`UPDATE_MARK` when the operator owns fields of it by an ``Update`` (it created it with POST),
    which its next apply takes over first (:mod:`trainer.controllers.take_over`)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    kept = {k: v for k, v in meta.items() if k != "managedFields"}
    if managed_entry(meta["managedFields"] or [], FIELD_MANAGER, "Update") is not None:
        kept["managedFields"] = UPDATE_MARK
    return {**obj, "metadata": kept}


def owned_by_update(obj: JSON) -> bool:
    """Whether ``obj`` (as the caches keep it) carries :data:`UPDATE_MARK`."""
    return (obj.get("metadata") or {}).get("managedFields") == UPDATE_MARK


def job(obj: JSON) -> JSON:
    """A batch/v1 Job without managedFields, its Pod template and its selector."""
    out = strip_managed_fields(obj)
    spec = out.get("spec")
    if not isinstance(spec, dict) or ("template" not in spec and "selector" not in spec):
        return out
    return {**out, "spec": {k: v for k, v in spec.items() if k not in ("template", "selector")}}


def secret(obj: JSON) -> JSON:
    """A Secret without managedFields and without ``data``/``stringData``."""
    out = strip_managed_fields(obj)
    if "data" not in out and "stringData" not in out:
        return out
    return {k: v for k, v in out.items() if k not in ("data", "stringData")}


UPDATE_MARK: list[JSON] = [{"manager": FIELD_MANAGER, "operation": "Update"}]
"""What the caches keep of ``managedFields`` when the operator's field manager has an ``Update`` entry
of the object itself (not of its status)."""

_BY_RESOURCE: dict[Resource, Projection] = {JOBS: job, SECRETS: secret}


def kept_fields(res: Resource) -> Projection:
    """The fields the caches keep of ``res``'s objects (:func:`job`, :func:`secret`, else
    :func:`strip_managed_fields`), without interning: what a desired object is compared through."""
    return _BY_RESOURCE.get(res, strip_managed_fields)


def projection(res: Resource) -> Transform:
    """What the caches keep of ``res``'s objects: :func:`kept_fields`, then :func:`interned`, reusing the
    equal parts of ``cached`` (what was kept of the object before, if any)."""
    fields = kept_fields(res)

    def project(obj: JSON, cached: JSON | None = None, /) -> JSON:
        kept: JSON = interned(fields(obj), cached)
        return kept

    return project

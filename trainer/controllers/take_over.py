"""Taking over, for server-side apply, the fields of a child the operator created with POST.

A new child is created with POST (``?fieldManager=trainer``): the apiserver spends less on a create
than on an apply that creates. Its fields are then owned by an ``Update`` entry of ``trainer`` in
``metadata.managedFields``, and a later server-side apply by ``trainer`` would not prune them: a field
the operator stops wanting (a removed scheduling gate, a dropped port) would stay. So before the
first apply to such a child its ``Update`` entry becomes ``trainer``'s ``Apply`` entry (merged into it
when there is one), in one JSON patch of ``managedFields`` that carries the resourceVersion read (a
compare-and-swap: 409 when the object changed meanwhile, and the reconcile is retried). The apply that
follows then owns, and prunes, exactly what the operator created.

Mirrors k8s.io/client-go ``util/csaupgrade/upgrade.go`` (``UpgradeManagedFields``,
``UpgradeManagedFieldsPatch``), which kubectl uses to move client-side-applied objects to
server-side apply.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from trainer.kube.cache import key_of
from trainer.kube.projection import managed_entry

if TYPE_CHECKING:
    from api.kinds import Resource
    from trainer.kube.client import Kube

JSON = dict[str, Any]


def union(a: JSON, b: JSON) -> JSON:
    """The union of two ``fieldsV1`` sets (nested objects of ``f:``/``k:``/``v:``/``i:`` keys and ``.``)."""
    out = copy.deepcopy(a)
    for key, value in b.items():
        out[key] = union(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def taken_over(entries: list[JSON], manager: str) -> list[JSON] | None:
    """``managedFields`` with ``manager``'s ``Update`` entry of the object turned into its ``Apply``
    entry (its fields added to that entry when there is one, of the same apiVersion); None when there
    is nothing to take over."""
    old = managed_entry(entries, manager, "Update")
    if old is None:
        return None
    applied = managed_entry(entries, manager, "Apply")
    if applied is not None and applied.get("apiVersion") != old.get("apiVersion"):
        return None  # two versions' field sets are not merged here (the operator writes one version)
    out: list[JSON] = []
    for entry in entries:
        if entry is old:
            if applied is None:
                out.append({**entry, "operation": "Apply"})
            continue
        if entry is applied:
            fields = union(entry.get("fieldsV1") or {}, old.get("fieldsV1") or {})
            out.append({**entry, "fieldsV1": fields})
            continue
        out.append(entry)
    return out


async def take_over(kube: Kube, res: Resource, obj: JSON, manager: str) -> bool:
    """Read the stored ``obj`` (of ``res``) and take over ``manager``'s ``Update`` entry for its
    ``Apply`` (:func:`taken_over`) with a JSON patch that also sets the resourceVersion read. Returns
    whether it patched. Raises :class:`~trainer.kube.client.ApiError` (409 when the object changed
    since it was read, 404 when it is gone)."""
    namespace, name = key_of(obj)
    stored = await kube.get(res, namespace or None, name)
    meta = stored.get("metadata") or {}
    entries = taken_over(list(meta.get("managedFields") or []), manager)
    if entries is None:
        return False
    ops: list[JSON] = [
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
    ]
    await kube.json_patch(res, namespace or None, name, ops)
    return True

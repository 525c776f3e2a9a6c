"""The owner reference of a child, and a ConfigMap owned by its job.

The label and annotation keys the children carry are in :mod:`trainer.api.labels`.
"""

from __future__ import annotations

from typing import Any

from trainer.api.kinds import Resource
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission


def owner_reference(obj: dict[str, Any] | Any) -> dict[str, Any]:
    """The controller owner reference pointing at ``obj`` (a dict or an ``api`` model).

    Shape: ``{apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true}``.
    Raises ``ValueError`` when the object has no uid yet (it was never stored).
    """
    data = obj if isinstance(obj, dict) else obj.to_dict()
    m = meta(data)
    if not m.uid:
        raise ValueError(f"{data.get('kind')} {m.name!r} has no uid; owner references need one")
    return {
        "apiVersion": data["apiVersion"],
        "kind": data["kind"],
        "name": m.data["name"],
        "uid": m.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owner_permission(owner: Resource) -> Permission:
    """``update`` on ``owner``'s ``finalizers``: what setting ``blockOwnerDeletion`` in a child's owner
    reference (:func:`owner_reference`) to an ``owner`` asks, as the OwnerReferencesPermissionEnforcement
    admission plugin allows it only to who may update the owner's finalizers."""
    return Permission(
        owner,
        ("update",),
        "children's ownerReferences set blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement "
        "admission plugin allows only to who may update the owner's finalizers",
        subresource="finalizers",
    )


def owned_config_map(
    owner: dict[str, Any], name: str, data: dict[str, str], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """The ConfigMap ``name`` in ``owner``'s namespace holding ``data``, with ``labels`` (none when
    None) and a controller owner reference to ``owner`` (JSON with metadata name, namespace and uid), so
    it goes with it. Raises ``ValueError`` (:func:`owner_reference`) when ``owner`` has no uid."""
    meta: dict[str, Any] = {"name": name, "namespace": owner["metadata"]["namespace"]}
    if labels is not None:
        meta["labels"] = labels
    meta["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
